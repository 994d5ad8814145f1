"""Streaming RNN-T encoder: frame stacking + unidirectional LSTM stack (Section 5 of the paper).

Every ``stride``-th feature frame (10 ms each) is concatenated with the ``stack - 1`` frames
before it, giving ``stack * F``-dim vectors every ``stride`` frames (paper: 8 x 80 = 640 dims
every 30 ms), which feed a unidirectional LSTM stack. The stacking is
:class:`speechlab.audio.transforms.FrameStacker` (frames before the start are copies of frame 0).
Both the stacking and the LSTM are causal, so the encoder streams exactly: ``streaming_forward``
over any chunking of the input gives the frames ``forward`` gives on the whole input. The state
carries the stacker's state (last ``stack - 1`` frames, frames seen) and the LSTM state; nothing
is hidden in buffers.

Shapes: B batch, T frames, D dims, F feature dim, C conditioning dim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from speechlab.audio.transforms import FrameStacker, StackerState
from speechlab.errors import ConfigError, DataError


@dataclass(frozen=True)
class EncoderState:
    """Streaming state of :class:`LSTMEncoder` for a batch.

    stacker: the frame stacker's state (last ``stack - 1`` feature frames (B, stack-1, F) and
        frames seen per row (B,), which decides where the next stacked frame falls);
    h, c (layers, B, D): LSTM state.
    """

    stacker: StackerState
    h: Tensor
    c: Tensor


def _lstm(x: Tensor, lens: Tensor, lstm: nn.LSTM, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Run ``lstm`` on padded ``x`` (B,T,D) with ``lens`` (B,); rows with length 0 keep their state.

    Packing makes the returned state the one after each row's last real frame, which is what
    lets a chunk with padded rows continue exactly where the previous chunk stopped.
    """
    B, T = x.shape[:2]
    out = x.new_zeros(B, T, lstm.hidden_size)
    live = (lens > 0).nonzero().squeeze(1)
    if T == 0 or live.numel() == 0:
        return out, h, c
    packed = pack_padded_sequence(x[live], lens[live].cpu(), batch_first=True, enforce_sorted=False)
    y, (h_live, c_live) = lstm(packed, (h[:, live].contiguous(), c[:, live].contiguous()))
    y, _ = pad_packed_sequence(y, batch_first=True, total_length=T)
    out[live] = y
    h = h.clone()
    c = c.clone()
    h[:, live] = h_live
    c[:, live] = c_live
    return out, h, c


class LSTMEncoder(nn.Module):
    """Frame stacking + ``num_layers`` x ``hidden_dim`` unidirectional LSTM.

    ``cond_dim`` > 0 appends a per-utterance vector (the onehot variant's language one-hot) to
    every stacked frame.
    """

    def __init__(self, feature_dim: int, stack: int, stride: int, hidden_dim: int,
                 num_layers: int, cond_dim: int = 0, dropout: float = 0.0) -> None:
        super().__init__()
        self.stacker = FrameStacker(stack, stride, feature_dim)
        self.cond_dim = cond_dim
        self.output_dim = hidden_dim
        self.lstm = nn.LSTM(self.stacker.output_dim + cond_dim, hidden_dim, num_layers,
                            batch_first=True, dropout=dropout if num_layers > 1 else 0.0)

    # The stacker's sizes, not copies of them.
    @property
    def feature_dim(self) -> int:
        return self.stacker.feature_dim

    @property
    def stride(self) -> int:
        return self.stacker.stride

    def init_state(self, batch: int, device: torch.device | str | None = None) -> EncoderState:
        p = next(self.parameters())
        device = p.device if device is None else torch.device(device)
        h = torch.zeros(self.lstm.num_layers, batch, self.output_dim, device=device, dtype=p.dtype)
        return EncoderState(stacker=self.stacker.init_state(batch, device, p.dtype), h=h, c=h.clone())

    def output_lengths(self, x_lens: Tensor) -> Tensor:
        """Encoder frames for whole utterances of ``x_lens`` feature frames: ceil(T / stride)."""
        return self.stacker.output_lengths(x_lens)

    def forward(self, x: Tensor, x_lens: Tensor, cond: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B,T,F), x_lens (B,), cond (B,C) or None -> y (B,T',D), y_lens (B,), T' = ceil(T/stride)."""
        x_lens = x_lens.to(x.device)
        self._check(x, x_lens, cond)
        stacked, y_lens = self.stacker(x, x_lens)
        state = self.init_state(x.shape[0], x.device)
        y, _, _ = _lstm(self._condition(stacked, cond), y_lens, self.lstm, state.h, state.c)
        return y, y_lens

    def streaming_forward(self, x: Tensor, x_lens: Tensor, state: EncoderState,
                          cond: Tensor | None = None) -> tuple[Tensor, Tensor, EncoderState]:
        """Consume the next chunk: x (B,T,F), x_lens (B,) -> y (B,T',D), y_lens (B,), new state.

        Row b yields one frame for each of its feature frames whose absolute index (counting
        all chunks so far) is a multiple of ``stride``; rows may be at different stride phases
        and may bring 0 frames (their state is kept).
        """
        x_lens = x_lens.to(x.device)
        self._check(x, x_lens, cond)
        stacked, y_lens, stacker_state = self.stacker.streaming_forward(x, x_lens, state.stacker)
        y, h, c = _lstm(self._condition(stacked, cond), y_lens, self.lstm, state.h, state.c)
        return y, y_lens, EncoderState(stacker_state, h, c)

    def _condition(self, stacked: Tensor, cond: Tensor | None) -> Tensor:
        """Append the per-utterance vector to every stacked frame: (B,T',S*F) -> (B,T',S*F+C)."""
        if not self.cond_dim:
            return stacked
        return torch.cat([stacked, cond[:, None, :].expand(-1, stacked.shape[1], -1)], dim=-1)

    def _check(self, x: Tensor, x_lens: Tensor, cond: Tensor | None) -> None:
        _check_input(self, x, x_lens, cond)


# ---------------------------------------------------------------------------------------------
# A causal convolution + Transformer encoder: not the paper's, an option that learns far more per
# CPU second (docs/multisoftmax.md has the measurement).


@dataclass(frozen=True)
class PrefixState:
    """Streaming state of :class:`ConvTransformerEncoder` for a batch.

    feats (B, T, F) and lens (B,): every feature frame each row has received so far (padded);
    emitted (B,): encoder frames already returned. The encoder is causal, so recomputing it
    over the prefix and returning the frames not yet emitted is exact; the cost of a chunk
    grows with the prefix (fine for utterances of seconds, not for hours of audio).
    """

    feats: Tensor
    lens: Tensor
    emitted: Tensor


class _CausalSubsampling(nn.Module):
    """Two Conv2d(3x3, stride 2) layers over (time, frequency), padded on the left in time only:
    output frame t sees input frames up to 4t and nothing later, so the 4x subsampling is causal.
    (B,T,F) -> (B, ceil(ceil(T/2)/2), channels * F'')."""

    def __init__(self, feature_dim: int, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, stride=2)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=2)
        f1 = (feature_dim + 2 - 3) // 2 + 1
        f2 = (f1 + 2 - 3) // 2 + 1
        self.output_dim = channels * f2

    @staticmethod
    def _pad(x: Tensor) -> Tensor:
        return F.pad(x, (1, 1, 2, 0))  # frequency: one each side; time: two on the left

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.conv1(self._pad(x[:, None])))
        y = F.relu(self.conv2(self._pad(y)))
        B, C, T, Fq = y.shape
        return y.transpose(1, 2).reshape(B, T, C * Fq)


class _CausalBlock(nn.Module):
    """Pre-norm Transformer layer with causal self-attention (SDPA, no T x T mask tensor)."""

    def __init__(self, dim: int, heads: int, ffn_dim: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(ffn_dim, dim))
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.attn_dropout if self.training else 0.0)
        x = x + self.dropout(self.out(a.transpose(1, 2).reshape(B, T, D)))
        return x + self.dropout(self.ffn(self.norm2(x)))


def _sinusoids(length: int, dim: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    pos = torch.arange(length, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim, device=device)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return pe.to(dtype)


class ConvTransformerEncoder(nn.Module):
    """Causal 4x Conv2d subsampling + ``num_layers`` pre-norm causal Transformer layers.

    Encoder frames are 40 ms (the paper's LSTM encoder: 30 ms). Every part is causal (the
    convolutions are padded on the left, attention is masked to the past, positions are
    counted from the utterance start), so the encoder streams exactly. ``cond_dim`` > 0
    appends a per-utterance vector (the onehot variant's language one-hot) to every
    subsampled frame before the input projection. Padding frames never reach real frames:
    everything a real frame depends on lies before it.
    """

    def __init__(self, feature_dim: int, hidden_dim: int, num_layers: int, heads: int,
                 ffn_dim: int, channels: int, cond_dim: int = 0, dropout: float = 0.0) -> None:
        super().__init__()
        if hidden_dim % heads or (hidden_dim // heads) % 2:
            raise ConfigError(f"encoder_dim {hidden_dim} must split into {heads} heads of even size")
        self.feature_dim = feature_dim
        self.cond_dim = cond_dim
        self.output_dim = hidden_dim
        self.subsampling = _CausalSubsampling(feature_dim, channels)
        self.project = nn.Linear(self.subsampling.output_dim + cond_dim, hidden_dim)
        self.input_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(_CausalBlock(hidden_dim, heads, ffn_dim, dropout)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(hidden_dim)

    def output_lengths(self, x_lens: Tensor) -> Tensor:
        """Encoder frames for ``x_lens`` feature frames: ceil(ceil(T / 2) / 2)."""
        return (x_lens + 3) // 4

    def init_state(self, batch: int, device: torch.device | str | None = None) -> PrefixState:
        p = next(self.parameters())
        device = p.device if device is None else torch.device(device)
        zeros = torch.zeros(batch, dtype=torch.long, device=device)
        return PrefixState(torch.zeros(batch, 0, self.feature_dim, device=device, dtype=p.dtype),
                           zeros, zeros.clone())

    def forward(self, x: Tensor, x_lens: Tensor, cond: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B,T,F), x_lens (B,), cond (B,C) or None -> y (B,T',D), y_lens (B,), T' = ceil(T/4)."""
        x_lens = x_lens.to(x.device)
        _check_input(self, x, x_lens, cond)
        y_lens = self.output_lengths(x_lens)
        if x.shape[1] == 0:
            return x.new_zeros(x.shape[0], 0, self.output_dim), y_lens
        h = self.subsampling(x)
        if self.cond_dim:
            h = torch.cat([h, cond[:, None, :].to(h.dtype).expand(-1, h.shape[1], -1)], dim=-1)
        h = self.project(h) * math.sqrt(self.output_dim)
        h = self.input_dropout(h + _sinusoids(h.shape[1], self.output_dim, h.device, h.dtype))
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h)
        mask = torch.arange(h.shape[1], device=h.device)[None, :] < y_lens[:, None]
        return h * mask[..., None].to(h.dtype), y_lens

    def streaming_forward(self, x: Tensor, x_lens: Tensor, state: PrefixState,
                          cond: Tensor | None = None) -> tuple[Tensor, Tensor, PrefixState]:
        """Consume the next chunk: x (B,T,F), x_lens (B,) -> the encoder frames that became
        computable, y (B,T',D), y_lens (B,), and the new state (see :class:`PrefixState`)."""
        x_lens = x_lens.to(x.device)
        _check_input(self, x, x_lens, cond)
        rows = [torch.cat([state.feats[b, : int(state.lens[b])], x[b, : int(x_lens[b])]])
                for b in range(x.shape[0])]
        lens = state.lens + x_lens
        feats = nn.utils.rnn.pad_sequence(rows, batch_first=True) if rows else state.feats
        y_all, total = self.forward(feats, lens, cond)
        y_lens = total - state.emitted
        out = y_all.new_zeros(x.shape[0], int(y_lens.max()) if len(rows) else 0, self.output_dim)
        for b in range(x.shape[0]):
            out[b, : int(y_lens[b])] = y_all[b, int(state.emitted[b]) : int(total[b])]
        return out, y_lens, PrefixState(feats, lens, total)


def _check_input(encoder: nn.Module, x: Tensor, x_lens: Tensor, cond: Tensor | None) -> None:
    if x.dim() != 3 or x.shape[-1] != encoder.feature_dim:
        raise DataError(f"encoder input must be features (B, T, {encoder.feature_dim}), "
                        f"got shape {tuple(x.shape)}")
    if x_lens.shape != (x.shape[0],) or bool((x_lens < 0).any()) or bool((x_lens > x.shape[1]).any()):
        raise DataError(f"feature lengths {x_lens.tolist()} do not fit a batch of shape "
                        f"{tuple(x.shape)}")
    if encoder.cond_dim and (cond is None or cond.shape != (x.shape[0], encoder.cond_dim)):
        got = None if cond is None else tuple(cond.shape)
        raise DataError(f"this encoder needs a (B, {encoder.cond_dim}) language one-hot, got {got}")
