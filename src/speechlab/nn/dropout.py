"""Dropout for training on the CPU: the mask drawn and applied in one compiled pass.

PyTorch's CPU dropout draws every element's Bernoulli variable from its Mersenne twister and
then multiplies in further passes; in the CPU training of every paper's ``small`` model that
was 11-15% of an update's operator time (``aten::bernoulli_``), most of it on the attention
weights, and dropout on those weights also keeps ``scaled_dot_product_attention`` off its fused
kernel. Here, on the CPU and in float32 or float64, one numba pass draws the mask from a
counter-based generator (SplitMix64, two 32-bit draws a step) seeded by one draw from PyTorch's
own generator, so a run seeded by the trainer is reproduced exactly and a checkpoint's RNG state
resumes it; it writes the output and the kept-mask at once, and the backward pass applies the
mask in another. An element is kept when its 32-bit draw is at least ``round(p * 2**32)``:
``P(keep) = 1 - p`` to within 2**-32, kept elements scaled by ``1 / (1 - p)`` as PyTorch does.
Elsewhere (a GPU, half precision, ``p`` of 0 or 1, evaluation) it is ``torch.nn.functional``'s.

- :func:`dropout`, :class:`Dropout` (an ``nn.Dropout``): drop-in for PyTorch's.
- :func:`attention`: ``scaled_dot_product_attention`` whose dropout on the weights, when there
  is any in CPU training, is this one (the weights computed as SDPA's own math path does).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

#: dtypes the compiled pass handles (others go to PyTorch's dropout)
_DTYPES = (torch.float32, torch.float64)

#: False: PyTorch's dropout everywhere (for comparing the two; benchmarks/train_throughput.py)
COMPILED = True


@numba.njit(cache=True, nogil=True)
def _forward(x, y, keep, seed, threshold, scale):  # pragma: no cover - compiled
    n = x.size
    s = np.uint64(seed)
    golden = np.uint64(0x9E3779B97F4A7C15)
    low = np.uint64(0xFFFFFFFF)
    i = 0
    while i < n:
        s += golden
        z = s
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        for half in range(2):
            if i >= n:
                break
            draw = (z >> np.uint64(32 * half)) & low
            k = draw >= threshold
            keep[i] = k
            y[i] = x[i] * scale if k else 0.0
            i += 1


@numba.njit(cache=True, nogil=True)
def _backward(g, keep, out, scale):  # pragma: no cover - compiled
    for i in range(g.size):
        out[i] = g[i] * scale if keep[i] else 0.0


def _compiled_applies(x: Tensor, p: float) -> bool:
    return COMPILED and x.device.type == "cpu" and x.dtype in _DTYPES and 0.0 < p < 1.0 and not x.is_sparse


class _Fused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:  # type: ignore[override]
        seed = int(torch.randint(0, 2**62, (1,)).item())
        threshold = min(round(p * 2.0**32), 2**32 - 1)
        scale = 1.0 / (1.0 - p)
        flat = x.detach().contiguous().view(-1)
        y = torch.empty_like(flat)
        keep = torch.empty(flat.shape, dtype=torch.bool)
        _forward(flat.numpy(), y.numpy(), keep.numpy(), seed, np.uint64(threshold),
                 flat.numpy().dtype.type(scale))
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (keep,) = ctx.saved_tensors
        g = grad.contiguous().view(-1)
        if g.dtype not in _DTYPES:
            return grad * keep.view(grad.shape) * ctx.scale, None
        out = torch.empty_like(g)
        _backward(g.numpy(), keep.numpy(), out.numpy(), g.numpy().dtype.type(ctx.scale))
        return out.view(grad.shape), None


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """``torch.nn.functional.dropout(x, p, training)``, one compiled pass in CPU training
    (module doc)."""
    if not training or p == 0.0:
        return x
    if _compiled_applies(x, p) and not torch.jit.is_tracing():
        return _Fused.apply(x, p)
    return F.dropout(x, p, True)


class Dropout(nn.Dropout):
    """``nn.Dropout`` (the same attributes and state) whose training pass on the CPU is
    :func:`dropout`'s."""

    def forward(self, x: Tensor) -> Tensor:
        if self.inplace:
            return super().forward(x)
        return dropout(x, self.p, self.training)


def attention(q: Tensor, k: Tensor, v: Tensor, attn_mask: Tensor | None = None, *,
              dropout_p: float = 0.0, is_causal: bool = False) -> Tensor:
    """``F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)``; with
    dropout on the weights in CPU training (``dropout_p`` > 0 is training's), the weights are
    computed as its math path does and dropped by :func:`dropout`. ``attn_mask``: boolean
    (True: may attend) or additive, broadcastable to (..., L, S)."""
    if dropout_p == 0.0 or not _compiled_applies(q, dropout_p) or torch.jit.is_tracing():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal)
    scores = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)
    if is_causal:
        L, S = scores.shape[-2:]
        scores.masked_fill_(torch.ones(L, S, dtype=torch.bool).triu(1), -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores.masked_fill_(~attn_mask, -math.inf)
        else:
            scores.add_(attn_mask)
    return dropout(scores.softmax(dim=-1), dropout_p) @ v
