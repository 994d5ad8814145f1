"""RNN-T joint network: ``out_l(tanh(W_e enc + W_p pred))`` with one output layer per softmax.

The projections ``W_e`` and ``W_p`` are shared by every language; only the output layer (and
its softmax) is per language in the multi-softmax variants (Section 4 of the paper; with the
paper's sizes this reproduces Table 6). The two projections are exposed separately because
search reuses them: ``W_e enc`` is computed once per frame for all languages' decoders, and
``W_p pred`` once per hypothesis.

Shapes: B batch, T frames, U labels, D dims, J joint dim, V vocabulary, N hypotheses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


class Joiner(nn.Module):
    def __init__(self, encoder_dim: int, predictor_dim: int, joint_dim: int,
                 vocab_sizes: Sequence[int]) -> None:
        super().__init__()
        self.enc_proj = nn.Linear(encoder_dim, joint_dim)
        self.pred_proj = nn.Linear(predictor_dim, joint_dim)
        self.outputs = nn.ModuleList(nn.Linear(joint_dim, v) for v in vocab_sizes)

    def project_encoder(self, enc: Tensor) -> Tensor:
        """enc (..., D_enc) -> (..., J)."""
        return self.enc_proj(enc)

    def project_predictor(self, pred: Tensor) -> Tensor:
        """pred (..., D_pred) -> (..., J)."""
        return self.pred_proj(pred)

    def joint(self, enc_proj: Tensor, pred_proj: Tensor, head: int = 0) -> Tensor:
        """Projected inputs (broadcastable, ..., J) -> unnormalised logits (..., V_head)."""
        return self.outputs[head](torch.tanh(enc_proj + pred_proj))

    def forward(self, enc: Tensor, pred: Tensor, head: int = 0) -> Tensor:
        """enc (B,T,D_enc), pred (B,U+1,D_pred) -> logits (B,T,U+1,V_head)."""
        return self.joint(self.enc_proj(enc)[:, :, None, :], self.pred_proj(pred)[:, None, :, :], head)
