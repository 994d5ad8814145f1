"""Multi-head self-attention of the wav2vec 2.0 Transformer, full or local (LMSAB).

A local multi-head self-attention block (LMSAB, Sec. 3 of the local-attention paper) lets query
``i`` attend only to keys ``j`` with ``|i - j| <= radius``. :func:`local_attention` computes only
that band, in blocks: the queries are cut into blocks of ``chunk`` frames and each block attends
to the key slice ``[start - radius, end + radius)``, masked exactly to the band. Scores and
weights take ``T x (chunk + 2 radius)`` memory per head instead of ``T x T``, and the work falls
by the same factor. (A boolean band mask given to ``scaled_dot_product_attention`` still computes
every pair: on CPU it was no faster than no mask.) Training goes through a hand-written backward
(:class:`_BandAttention`) that keeps only q, k, v and recomputes each group of heads' weights, so
its peak memory stays near that of PyTorch's fused full attention; inference walks one head at a
time.

Padding: ``key_padding_mask`` (B, T) is True on padded keys. A padded key gets the most
negative finite score rather than ``-inf``, as in the usual additive attention mask, so a
query whose every key in reach is padding (itself a padded frame) gets finite, meaningless
weights instead of NaN; keys outside the band (or outside the sequence) get ``-inf`` and exactly
zero weight.

Shapes: B batch, H heads, T frames, D dims per head (the module's ``dim`` is H x D).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.errors import ConfigError
from speechlab.nn.dropout import attention

#: Query block length of the blocked band computation (benchmarks/local_attention.py chose it:
#: shorter blocks waste fewer out-of-band scores, longer ones make fewer, larger matmuls).
DEFAULT_CHUNK = 32


def _padding_bias(key_padding_mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """(B, T) True on padding -> (B, 1, 1, T) additive bias (0 or the dtype's minimum)."""
    if key_padding_mask is None:
        return None
    bias = torch.zeros(key_padding_mask.shape, dtype=dtype, device=key_padding_mask.device)
    return bias.masked_fill(key_padding_mask, torch.finfo(dtype).min)[:, None, None, :]


def full_attention(q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Tensor | None = None,
                   *, dropout: float = 0.0) -> Tensor:
    """Softmax attention over every key: q, k, v (B, H, T, D) -> (B, H, T, D); ``dropout``
    on the weights (training only)."""
    return attention(q, k, v, _padding_bias(key_padding_mask, q.dtype), dropout_p=dropout)


def attention_weights(q: Tensor, k: Tensor, key_padding_mask: Tensor | None = None,
                      radius: int | None = None) -> Tensor:
    """The (B, H, T, T) softmax weights (rows are queries) of full attention, or of local
    attention with ``radius``; for inspection (the diagnosis), not for training."""
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    bias = _padding_bias(key_padding_mask, scores.dtype)
    if bias is not None:
        scores = scores + bias
    if radius is not None:
        i = torch.arange(q.shape[-2], device=q.device)
        outside = (i[:, None] - i[None, :]).abs() > radius
        scores = scores.masked_fill(outside, -math.inf)
    return scores.softmax(-1)


def local_attention(q: Tensor, k: Tensor, v: Tensor, radius: int,
                    key_padding_mask: Tensor | None = None, *,
                    chunk: int = DEFAULT_CHUNK, dropout: float = 0.0) -> Tensor:
    """Softmax attention of each query ``i`` over the keys ``j`` with ``|i - j| <= radius``.

    q, k, v (B, H, T, D); key_padding_mask (B, T) True on padded keys -> (B, H, T, D). Exact:
    equal to full attention with the band mask (and to full attention when
    ``radius >= T - 1``), computed in query blocks of ``chunk`` frames (module doc).
    ``dropout`` drops weights (training only).
    """
    if isinstance(radius, bool) or not isinstance(radius, int) or radius < 1:
        raise ConfigError(f"local attention radius must be an integer >= 1, got {radius!r}")
    if chunk < 1:
        raise ConfigError(f"local attention chunk must be >= 1, got {chunk}")
    if torch.jit.is_tracing():
        # An ONNX graph is traced once and then run at any length; the blocks' geometry below
        # is Python arithmetic on T, which a trace keeps as the example's constants. The graph
        # computes the same band as a mask over every pair instead (exact, as above).
        return attention_weights(q, k, key_padding_mask, radius) @ v
    B, H, T, D = q.shape
    if radius >= T - 1:
        return full_attention(q, k, v, key_padding_mask, dropout=dropout)
    w = min(chunk, T)
    nb = -(-T // w)
    span = w + 2 * radius
    # Keys and values padded by `radius` before and enough after that block b's slice is
    # rows [b * w, b * w + span) of the padded tensor; unfold makes those slices views.
    after = nb * w - T + radius
    # Query a of a block sees key c of its slice iff |a + radius - c| <= radius; keys before 0
    # or after T - 1 do not exist. Both get -inf: exactly zero weight.
    a = torch.arange(w, device=q.device)[:, None]
    c = torch.arange(span, device=q.device)[None, :]
    band = (c >= a) & (c <= a + 2 * radius)  # (w, span)
    pos = torch.arange(nb, device=q.device)[:, None] * w - radius + torch.arange(span, device=q.device)
    exists = (pos >= 0) & (pos < T)  # (nb, span)
    allowed = band[None] & exists[:, None]  # (nb, w, span)
    # The query rows padded onto the last block (dropped from the output) may have no key in
    # reach; give each its own (zero) slot so that its softmax is finite and its zero gradient
    # stays zero instead of NaN.
    beyond = (torch.arange(nb, device=q.device)[:, None] * w + a[:, 0][None, :]) >= T  # (nb, w)
    allowed = allowed | (beyond[:, :, None] & (c == a + radius)[None])
    bias = torch.zeros(nb, w, span, dtype=q.dtype, device=q.device)
    bias = bias.masked_fill(~allowed, -math.inf)
    pad_bias = None
    if key_padding_mask is not None:
        padded = F.pad(key_padding_mask, (radius, after), value=True).unfold(1, span, w)
        pad_bias = torch.zeros(padded.shape, dtype=q.dtype, device=q.device)
        pad_bias = pad_bias.masked_fill(padded, torch.finfo(q.dtype).min)  # (B, nb, span)
    geometry = _Band(radius, w, nb, span, after, bias, pad_bias)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        # Training: a hand-written backward that recomputes the band's weights instead of
        # keeping them, the key / value slices and the scores for every head (autograd through
        # the batched matmuls kept about 2.2x the memory of PyTorch's fused full attention).
        return _BandAttention.apply(q, k, v, geometry, dropout)
    # Inference: one head at a time, so besides the output only one head's padded keys,
    # values and scores exist at once.
    return _band_forward(q, k, v, geometry, 1, dropout)[0]


#: Heads computed together by the training path (forward and recomputing backward): larger
#: groups make fewer, larger matmuls; smaller ones hold less at once (benchmarks/local_attention.py).
TRAIN_HEAD_GROUP = 6


class _Band:
    """Geometry of the blocked band: ``nb`` query blocks of ``w`` frames, each seeing the key
    slice of ``span`` frames of the keys padded by ``radius`` before and ``after`` after;
    ``bias`` (nb, w, span) is 0 in the band and -inf outside, ``pad_bias`` (B, nb, span) the
    key-padding bias per batch row or None."""

    def __init__(self, radius: int, w: int, nb: int, span: int, after: int, bias: Tensor,
                 pad_bias: Tensor | None) -> None:
        self.radius, self.w, self.nb, self.span, self.after = radius, w, nb, span, after
        self.bias, self.pad_bias = bias, pad_bias

    def bias_of(self, b: int) -> Tensor:
        return self.bias if self.pad_bias is None else self.bias + self.pad_bias[b, :, None, :]

    def slices(self, x: Tensor) -> Tensor:
        """x (G, T, D) -> the key slices of every block, a view (G, nb, span, D)."""
        return F.pad(x, (0, 0, self.radius, self.after)).unfold(1, self.span, self.w).transpose(-1, -2)

    def blocks(self, x: Tensor) -> Tensor:
        """x (G, T, D) -> query blocks (G, nb, w, D), the last padded."""
        G, T, D = x.shape
        return F.pad(x, (0, 0, 0, self.nb * self.w - T)).view(G, self.nb, self.w, D)

    def scatter(self, grads: Tensor, T: int) -> Tensor:
        """Sum per-slice gradients (G, nb, span, D) back onto the T frames: (G, T, D)."""
        G, _, _, D = grads.shape
        index = (torch.arange(self.nb, device=grads.device)[:, None] * self.w
                 + torch.arange(self.span, device=grads.device)).reshape(-1)
        total = grads.new_zeros(G, T + self.radius + self.after, D)
        total.index_add_(1, index, grads.reshape(G, -1, D))
        return total[:, self.radius : self.radius + T]


def _band_forward(q: Tensor, k: Tensor, v: Tensor, band: _Band, group: int,
                  dropout: float) -> tuple[Tensor, Tensor | None]:
    """The band's attention output (B, H, T, D), ``group`` heads at a time, and the dropout
    keep-mask (B, H, nb, w, span) when ``dropout`` > 0."""
    B, H, T, D = q.shape
    out = q.new_empty(B, H, band.nb, band.w, D)
    keep = (torch.empty(B, H, band.nb, band.w, band.span, dtype=torch.bool, device=q.device)
            if dropout > 0 else None)
    scale = 1.0 / math.sqrt(D)
    with torch.no_grad():
        for b in range(B):
            bias_b = band.bias_of(b)
            for h in range(0, H, group):
                g = slice(h, min(h + group, H))
                weights = (band.blocks(q[b, g]) @ band.slices(k[b, g]).transpose(-1, -2) * scale
                           + bias_b).softmax(-1)  # (G, nb, w, span)
                if keep is not None:
                    keep[b, g] = torch.rand_like(weights) >= dropout
                    weights = weights * keep[b, g] / (1.0 - dropout)
                torch.matmul(weights, band.slices(v[b, g]), out=out[b, g])
    return out.reshape(B, H, band.nb * band.w, D)[:, :, :T], keep


class _BandAttention(torch.autograd.Function):
    """Local attention whose backward recomputes the weights of ``TRAIN_HEAD_GROUP`` heads at a
    time; it saves only q, k, v (held by the caller anyway), and the dropout keep-mask."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, band: _Band, dropout: float) -> Tensor:
        out, keep = _band_forward(q, k, v, band, TRAIN_HEAD_GROUP, dropout)
        ctx.band, ctx.dropout = band, dropout
        ctx.save_for_backward(q, k, v, keep)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, keep = ctx.saved_tensors
        band, dropout = ctx.band, ctx.dropout
        B, H, T, D = q.shape
        scale = 1.0 / math.sqrt(D)
        dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
        for b in range(B):
            bias_b = band.bias_of(b)
            for h in range(0, H, TRAIN_HEAD_GROUP):
                g = slice(h, min(h + TRAIN_HEAD_GROUP, H))
                qb, kw, vw = band.blocks(q[b, g]), band.slices(k[b, g]), band.slices(v[b, g])
                go = band.blocks(grad_out[b, g])
                weights = (qb @ kw.transpose(-1, -2) * scale + bias_b).softmax(-1)
                dweights = go @ vw.transpose(-1, -2)  # d loss / d (dropped) weights
                if keep is not None:
                    kept = keep[b, g] / (1.0 - dropout)
                    dv[b, g] = band.scatter((weights * kept).transpose(-1, -2) @ go, T)
                    dweights = dweights * kept
                else:
                    dv[b, g] = band.scatter(weights.transpose(-1, -2) @ go, T)
                # softmax backward: dS = P * (dP - sum_j P dP)
                dscores = weights * (dweights - (weights * dweights).sum(-1, keepdim=True))
                dscores = dscores * scale
                G = dscores.shape[0]
                dq[b, g] = (dscores @ kw).reshape(G, band.nb * band.w, D)[:, :T]
                dk[b, g] = band.scatter(dscores.transpose(-1, -2) @ qb, T)
        return dq, dk, dv, None, None


class SelfAttention(nn.Module):
    """Multi-head self-attention with q/k/v/out projections (the Transformer's MSA layer, eq.
    in Sec. 2.2 of the local-attention paper); local (LMSAB) when ``radius`` is set.

    ``forward(x, key_padding_mask, need_weights)``: x (B, T, D) -> (B, T, D) and, if asked,
    the (B, H, T, T) weights. The output is computed the same way whether or not weights are
    asked for, so inspecting a model never changes what it outputs.
    """

    def __init__(self, dim: int, heads: int, *, dropout: float = 0.0, radius: int | None = None,
                 chunk: int = DEFAULT_CHUNK) -> None:
        super().__init__()
        if dim % heads:
            raise ConfigError(f"attention dim {dim} is not a multiple of {heads} heads")
        if radius is not None and radius < 1:
            raise ConfigError(f"local attention radius must be >= 1, got {radius}")
        self.heads = heads
        self.radius = radius
        self.chunk = chunk
        self.dropout = dropout
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.q_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def _split(self, x: Tensor) -> Tensor:
        B, T, D = x.shape
        return x.view(B, T, self.heads, D // self.heads).transpose(1, 2)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        q, k, v = self._split(self.q_proj(x)), self._split(self.k_proj(x)), self._split(self.v_proj(x))
        p = self.dropout if self.training else 0.0
        if self.radius is None:
            out = full_attention(q, k, v, key_padding_mask, dropout=p)
        else:
            out = local_attention(q, k, v, self.radius, key_padding_mask, chunk=self.chunk,
                                  dropout=p)
        weights = attention_weights(q, k, key_padding_mask, self.radius) if need_weights else None
        B, H, T, Dh = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(B, T, H * Dh)), weights
