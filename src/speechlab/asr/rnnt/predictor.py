"""RNN-T prediction network: label embedding + LSTM stack (Section 3 and 5 of the paper).

The multi-softmax variants keep one embedding table per language (Section 4) and, in the LSP
variant, one LSTM stack per language (Section 4.1); the caller picks them by index (``table``,
``net``), so a language-homogeneous batch only touches, and only sends gradient to, its own
language's parts. Blank (id 0) doubles as the start symbol, so its embedding row is the input
before the first label.

Shapes: B batch, U labels, D dims, C conditioning dim, N hypotheses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

PredictorState = tuple[Tensor, Tensor]  # LSTM (h, c), each (layers, N, D)


class Predictor(nn.Module):
    """``len(vocab_sizes)`` embedding tables feeding ``num_networks`` LSTM stacks.

    ``cond_dim`` > 0 appends a per-utterance vector (the onehot variant's language one-hot) to
    every embedding.
    """

    def __init__(self, vocab_sizes: Sequence[int], embed_dim: int, hidden_dim: int, num_layers: int,
                 num_networks: int = 1, cond_dim: int = 0, dropout: float = 0.0, blank: int = 0) -> None:
        super().__init__()
        self.blank = blank
        self.cond_dim = cond_dim
        self.output_dim = hidden_dim
        self.num_layers = num_layers
        self.embeddings = nn.ModuleList(nn.Embedding(v, embed_dim) for v in vocab_sizes)
        self.lstms = nn.ModuleList(
            nn.LSTM(embed_dim + cond_dim, hidden_dim, num_layers, batch_first=True,
                    dropout=dropout if num_layers > 1 else 0.0)
            for _ in range(num_networks)
        )

    def init_state(self, batch: int) -> PredictorState:
        p = next(self.parameters())
        z = torch.zeros(self.num_layers, batch, self.output_dim, device=p.device, dtype=p.dtype)
        return z, z.clone()

    def _inputs(self, tokens: Tensor, table: int, cond: Tensor | None) -> Tensor:
        e = self.embeddings[table](tokens)  # (B, U, E)
        if self.cond_dim:
            e = torch.cat([e, cond[:, None, :].expand(-1, e.shape[1], -1).to(e.dtype)], dim=-1)
        return e

    def forward(self, y: Tensor, table: int = 0, net: int = 0, cond: Tensor | None = None) -> Tensor:
        """Training: y (B,U) labels (padding is harmless: the LSTM is causal) -> (B,U+1,D).

        Output u is the network's state after the blank start symbol and the first u labels.
        """
        start = torch.full((y.shape[0], 1), self.blank, dtype=torch.long, device=y.device)
        out, _ = self.lstms[net](self._inputs(torch.cat([start, y.long()], dim=1), table, cond))
        return out

    def step(self, tokens: Tensor, state: PredictorState, table: int = 0, net: int = 0,
             cond: Tensor | None = None) -> tuple[Tensor, PredictorState]:
        """Decoding: feed one label per hypothesis. tokens (N,), state (layers,N,D) x 2,
        cond (N,C) or None -> output (N,D), new state."""
        out, state = self.lstms[net](self._inputs(tokens[:, None], table, cond), state)
        return out[:, 0], state
