"""Product quantization with Gumbel-softmax (the ``Q`` box of Fig. 1; wav2vec 2.0 Sec. 2).

The latent features choose one entry in each of G codebooks of V entries; the chosen entries
are concatenated into one code vector. Training picks entries with the straight-through
Gumbel-softmax at temperature ``tau`` (annealed by the pre-training task); evaluation takes
the argmax. The codebook diversity loss needs the perplexity of the batch's mean softmax per
group, which :class:`Quantized` carries.

Shapes: B batch, T frames, C feature channels, G groups, V entries per group.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class Quantized:
    """vectors (B, T, codevector_dim); perplexity of the mean softmax over valid frames,
    summed over groups (in [G, G*V]); the number of code vectors, G*V."""

    vectors: Tensor
    perplexity: Tensor
    num_vars: int


class GumbelQuantizer(nn.Module):
    def __init__(self, in_dim: int, groups: int, entries: int, codevector_dim: int) -> None:
        super().__init__()
        self.groups, self.entries = groups, entries
        self.weight_proj = nn.Linear(in_dim, groups * entries)
        self.codevectors = nn.Parameter(torch.empty(1, groups * entries, codevector_dim // groups))
        nn.init.uniform_(self.codevectors)
        nn.init.normal_(self.weight_proj.weight, 0.0, 1.0)
        nn.init.zeros_(self.weight_proj.bias)

    def forward(self, x: Tensor, valid: Tensor | None = None, tau: float = 2.0) -> Quantized:
        """x (B, T, C), valid (B, T) True on real frames."""
        B, T, _ = x.shape
        G, V = self.groups, self.entries
        logits = self.weight_proj(x).view(B * T * G, V)
        keep = torch.ones(B * T, dtype=torch.bool, device=x.device) if valid is None else \
            valid.reshape(B * T)
        soft = logits.float().softmax(-1).view(B * T, G, V)[keep].mean(0)
        perplexity = torch.exp(-(soft * torch.log(soft + 1e-7)).sum(-1)).sum()
        if self.training:
            onehot = F.gumbel_softmax(logits.float(), tau=tau, hard=True).type_as(x)
        else:
            onehot = torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        # (BTG, V) one-hot -> per group the chosen entry of that group's codebook
        chosen = onehot.view(B * T, G * V, 1) * self.codevectors
        vectors = chosen.view(B * T, G, V, -1).sum(2).reshape(B, T, -1)
        return Quantized(vectors, perplexity, G * V)
