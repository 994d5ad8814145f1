"""Pre-norm Transformer encoder blocks over padded batches, on ``scaled_dot_product_attention``.

Written here rather than taken from ``nn.TransformerEncoderLayer``: its inference fast path
builds the full T x T attention matrix (1.7 GB at 7000 frames), while SDPA with a key-padding
mask does not. Every block takes ``(x, x_lens)`` and keeps padding frames at zero, so an
utterance gives the same output alone as padded inside a batch.

Shapes: B batch, T frames, D model dim, H heads.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from speechlab.nn.dropout import Dropout, attention
from speechlab.nn.mask import lengths_to_mask


class SelfAttention(nn.Module):
    """Multi-head self-attention; keys beyond each row's length are masked out."""

    def __init__(self, dim: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"model dim {dim} is not divisible by {heads} heads")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x (B,T,D), mask (B,T) True on real frames -> (B,T,D)."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        attn_mask = mask[:, None, None, :]  # (B,1,1,T): which keys each query may see
        y = attention(q, k, v, attn_mask, dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class TransformerBlock(nn.Module):
    """Pre-norm block: ``x + MHSA(LN(x))``, then ``x + FFN(LN(x))``."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.GELU(), Dropout(dropout),
                                nn.Linear(ff_dim, dim))
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = x + self.drop(self.attn(self.norm1(x), mask))
        return x + self.drop(self.ff(self.norm2(x)))


def sinusoidal_positions(length: int, dim: int, device: torch.device | None = None) -> Tensor:
    """(length, dim) sinusoidal position codes (Vaswani et al.): sin on even dims, cos on odd."""
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    rate = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32)
                     * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(pos * rate)
    pe[:, 1::2] = torch.cos(pos * rate[: dim // 2])
    return pe


class TransformerEncoder(nn.Module):
    """Sinusoidal positions, N pre-norm blocks, a final LayerNorm; padding stays zero."""

    def __init__(self, dim: int, layers: int, heads: int, ff_dim: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.dim = dim
        self.blocks = nn.ModuleList(TransformerBlock(dim, heads, ff_dim, dropout) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor, x_lens: Tensor) -> Tensor:
        """x (B,T,D), x_lens (B,) -> (B,T,D)."""
        mask = lengths_to_mask(x_lens, x.shape[1], device=x.device)
        x = self.drop(x + sinusoidal_positions(x.shape[1], self.dim, x.device))
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x).masked_fill(~mask[..., None], 0.0)


class Conv2dSubsampling(nn.Module):
    """Two 3x3 convolutions over (time, frequency), both with stride 2 in frequency and with
    stride 2 then ``second_stride`` (2 or 1) in time: 4x (or 2x) fewer frames, then a linear map
    to ``dim``. With 4x, output frame ``t`` sees input frames ``4t .. 4t + 6``."""

    def __init__(self, feature_dim: int, channels: int, dim: int, second_stride: int = 2) -> None:
        super().__init__()
        if second_stride not in (1, 2):
            raise ValueError(f"second_stride must be 1 or 2, got {second_stride}")
        self.second_stride = second_stride
        self.conv = nn.Sequential(nn.Conv2d(1, channels, 3, stride=2), nn.ReLU(),
                                  nn.Conv2d(channels, channels, 3, stride=(second_stride, 2)),
                                  nn.ReLU())
        freq = ((feature_dim - 1) // 2 - 1) // 2
        self.proj = nn.Linear(channels * freq, dim)

    def output_lengths(self, x_lens: Tensor) -> Tensor:
        first = (x_lens - 1) // 2  # a 3-wide window with stride 2
        return (first - 3) // self.second_stride + 1

    def forward(self, x: Tensor, x_lens: Tensor) -> tuple[Tensor, Tensor]:
        """x (B,T,F), x_lens (B,) -> (B,T',D), (B,): T' = ((T-1)//2 - 3)//s2 + 1."""
        y = self.conv(x[:, None])  # (B,C,T',F')
        B, C, T, Fr = y.shape
        return self.proj(y.transpose(1, 2).reshape(B, T, C * Fr)), self.output_lengths(x_lens)
