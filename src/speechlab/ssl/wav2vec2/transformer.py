"""The wav2vec 2.0 Transformer: a convolutional relative positional embedding and N
multi-head self-attention blocks (MSAB), some of them local (LMSAB).

Base is post-norm (each block: ``x = LN(x + MSA(x)); x = LN(x + FFN(x))``, a layer norm before
the first block); ``layer_norm_first`` (Large) normalises before each sub-layer and after the
last block. Padded frames are zeroed before the positional convolution so that they do not leak
into real frames through it, and are masked as keys in every block.

:meth:`Transformer.forward` can hand each block's attention weights to ``on_attention`` as
soon as that block has run (``on_attention(block, weights)``, block 1-based, weights (B, T, T)
mean over heads or (B, H, T, T)), so an inspection holds one block's maps at a time and the
outputs are the ones the model computes without inspection.

Shapes: B batch, T frames, D model dim, H heads.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.nn import lengths_to_mask
from speechlab.nn.dropout import Dropout
from speechlab.ssl.wav2vec2.attention import SelfAttention

AttentionSink = Callable[[int, Tensor], None]


class PositionalConv(nn.Module):
    """Grouped conv over time with a weight-normalised kernel (norm over all but the kernel
    axis, one gain per tap), GELU; an even kernel drops its last output frame to stay
    aligned."""

    def __init__(self, dim: int, kernel: int, groups: int) -> None:
        super().__init__()
        self.kernel = kernel
        self.weight_v = nn.Parameter(torch.empty(dim, dim // groups, kernel))
        self.weight_g = nn.Parameter(torch.empty(1, 1, kernel))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.groups = groups
        nn.init.normal_(self.weight_v, 0.0, (4.0 / (kernel * dim)) ** 0.5)
        with torch.no_grad():
            self.weight_g.copy_(self.weight_v.norm(dim=(0, 1), keepdim=True))

    def forward(self, x: Tensor) -> Tensor:
        """x (B, T, D) -> (B, T, D)."""
        weight = self.weight_v * (self.weight_g / self.weight_v.norm(dim=(0, 1), keepdim=True))
        y = F.conv1d(x.transpose(1, 2), weight, self.bias, padding=self.kernel // 2,
                     groups=self.groups)
        if self.kernel % 2 == 0:
            y = y[:, :, :-1]
        return F.gelu(y).transpose(1, 2)


class FeedForward(nn.Module):
    def __init__(self, dim: int, ffn_dim: int, activation_dropout: float, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, dim)
        self.activation_dropout = Dropout(activation_dropout)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.fc2(self.activation_dropout(F.gelu(self.fc1(x)))))


class Block(nn.Module):
    """One MSAB (``radius`` None) or LMSAB."""

    def __init__(self, dim: int, heads: int, ffn_dim: int, *, radius: int | None, chunk: int,
                 layer_norm_first: bool, eps: float, dropout: float, attention_dropout: float,
                 activation_dropout: float) -> None:
        super().__init__()
        self.attention = SelfAttention(dim, heads, dropout=attention_dropout, radius=radius,
                                       chunk=chunk)
        self.attention_norm = nn.LayerNorm(dim, eps=eps)
        self.feed_forward = FeedForward(dim, ffn_dim, activation_dropout, dropout)
        self.final_norm = nn.LayerNorm(dim, eps=eps)
        self.dropout = Dropout(dropout)
        self.layer_norm_first = layer_norm_first

    def forward(self, x: Tensor, key_padding_mask: Tensor | None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        if self.layer_norm_first:
            a, w = self.attention(self.attention_norm(x), key_padding_mask, need_weights)
            x = x + self.dropout(a)
            return x + self.feed_forward(self.final_norm(x)), w
        a, w = self.attention(x, key_padding_mask, need_weights)
        x = self.attention_norm(x + self.dropout(a))
        return self.final_norm(x + self.feed_forward(x)), w


class Transformer(nn.Module):
    """``forward(x, x_lens, on_attention=None, per_head=False, hidden=None)``: (B, T, D), (B,)
    -> (B, T, D). ``hidden``, a list, receives the input of the first block and every block's
    output (as ``transformers``' ``hidden_states``)."""

    def __init__(self, pos_conv: PositionalConv, blocks: list[Block], *, dim: int, eps: float,
                 layer_norm_first: bool, dropout: float) -> None:
        super().__init__()
        self.pos_conv = pos_conv
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.blocks = nn.ModuleList(blocks)
        self.layer_norm_first = layer_norm_first
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, x_lens: Tensor | None = None, *,
                on_attention: AttentionSink | None = None, per_head: bool = False,
                hidden: list[Tensor] | None = None) -> Tensor:
        pad = None
        if x_lens is not None and int(x_lens.min()) < x.shape[1]:
            valid = lengths_to_mask(x_lens, x.shape[1], device=x.device)
            x = x * valid[:, :, None]
            pad = ~valid
        x = x + self.pos_conv(x)
        if not self.layer_norm_first:
            x = self.norm(x)
        x = self.dropout(x)
        for i, block in enumerate(self.blocks, 1):
            if hidden is not None:
                hidden.append(x)
            x, w = block(x, pad, need_weights=on_attention is not None)
            if on_attention is not None:
                on_attention(i, w if per_head else w.mean(1))
                del w
        if self.layer_norm_first:
            x = self.norm(x)
        if hidden is not None:
            hidden.append(x)
        return x
