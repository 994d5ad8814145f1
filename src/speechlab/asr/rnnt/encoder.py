"""Streaming RNN-T encoder: frame stacking + unidirectional LSTM stack (Section 5 of the paper).

Every ``stride``-th feature frame (10 ms each) is concatenated with the ``stack - 1`` frames
before it, giving ``stack * F``-dim vectors every ``stride`` frames (paper: 8 x 80 = 640 dims
every 30 ms), which feed a unidirectional LSTM stack. The stacking is
:class:`speechlab.audio.transforms.FrameStacker` (frames before the start are copies of frame 0).
Both the stacking and the LSTM are causal, so the encoder streams exactly: ``streaming_forward``
over any chunking of the input gives the frames ``forward`` gives on the whole input. The state
carries the stacker's state (last ``stack - 1`` frames, frames seen) and the LSTM state; nothing
is hidden in buffers.

:class:`ConvTransformerEncoder` (not the paper's; the ``fast`` preset) streams as exactly, with
a key/value cache (:class:`TransformerState`): its state grows by 2 N D numbers per encoder
frame, and a chunk's attention with it, so long streams are cut into segments by the caller
(:class:`~.recognizer.RnntStream`).

Shapes: B batch, T frames, D dims, F feature dim, C conditioning dim (convolution channels in
the subsampling), N layers, H heads, S cache slots.
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
from speechlab.nn.dropout import Dropout, attention


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
    live = (lens > 0).nonzero().squeeze(1)
    if T == 0 or live.numel() == 0:
        return x.new_zeros(B, T, lstm.hidden_size), h, c
    packed = pack_padded_sequence(x[live], lens[live].cpu(), batch_first=True, enforce_sorted=False)
    y, (h_live, c_live) = lstm(packed, (h[:, live].contiguous(), c[:, live].contiguous()))
    y, _ = pad_packed_sequence(y, batch_first=True, total_length=T)
    # Under autocast on a GPU the LSTM answers in bf16/fp16: the output keeps its dtype, the
    # state keeps the caller's (it is carried from chunk to chunk).
    out = y.new_zeros(B, T, lstm.hidden_size)
    out[live] = y
    h = h.clone()
    c = c.clone()
    h[:, live] = h_live.to(h.dtype)
    c[:, live] = c_live.to(c.dtype)
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
class TransformerState:
    """Streaming state of :class:`ConvTransformerEncoder` for a batch: what the next chunk
    needs, nothing more.

    feats (B, 2, F): the last two feature frames received (zeros before the start: the first
        convolution's left padding);
    conv (B, C, 2, F1): the first convolution's last two output rows (zeros before the start:
        the second convolution's left padding);
    seen (B,): feature frames received; it fixes both convolutions' stride phases and the
        encoder frames emitted, :attr:`frames`, which are the positions of the next ones;
    keys, values (N, B, H, S, D/H): each of the N layers' keys and values of the frames
        emitted, row b's in the first ``frames[b]`` of the S slots (S: the largest).
    """

    feats: Tensor
    conv: Tensor
    seen: Tensor
    keys: Tensor
    values: Tensor

    @property
    def frames(self) -> Tensor:
        """(B,) encoder frames emitted so far, whose keys and values the state holds.

        The state grows with them (2 N D floats a frame: 9 KB for the ``fast`` preset, 0.8 GB
        an hour) and so does a chunk's attention, the one cost that grows with the stream; a
        caller with long streams starts a fresh state (``init_state``) at segment boundaries
        once this passes its bound.
        """
        return (self.seen + 3) // 4


def _strided_chunk(conv: nn.Conv2d, past: Tensor, x: Tensor, x_lens: Tensor, done: Tensor
                   ) -> tuple[Tensor, Tensor, Tensor]:
    """One of :class:`_CausalSubsampling`'s convolutions (and its ReLU) over the next rows of
    its input.

    past (B,C,2,F): the two input rows before the chunk (zeros before the start); x (B,C,T,F):
    the chunk's rows, the first ``x_lens`` (B,) of each real; done (B,): rows before the chunk
    -> y (B,C',T',F') the output rows the chunk completes, y_lens (B,) how many are real, and
    the new ``past``. Output row t reads input rows 2t-2..2t, so it is complete once row 2t
    has come; after an odd number of rows the next window starts one row into ``past``.
    """
    B, C, T, Fq = x.shape
    buf = torch.cat([past, x], dim=2)  # buf[:, :, j] is input row done - 2 + j
    y_lens = (done + x_lens + 1) // 2 - (done + 1) // 2
    n = y_lens.max()
    # Every row's windows from its own phase on, and one window more than any row completes, so
    # that the convolution has one to read when none completes (the rows past a row's length are
    # read from padding, then dropped).
    rows = ((done % 2)[:, None] + torch.arange(2 * n + 3, device=x.device)).clamp(max=T + 1)
    windows = buf.gather(2, rows[:, None, :, None].expand(B, C, -1, Fq))
    y = F.relu(conv(F.pad(windows, (1, 1))))[:, :, :n]
    last = x_lens[:, None] + torch.arange(2, device=x.device)  # where each row's last two are
    return y, y_lens, buf.gather(2, last[:, None, :, None].expand(B, C, 2, Fq))


class _CausalSubsampling(nn.Module):
    """Two Conv2d(3x3, stride 2) layers over (time, frequency), padded on the left in time only:
    output frame t sees input frames up to 4t and nothing later, so the 4x subsampling is causal.
    (B,T,F) -> (B, ceil(ceil(T/2)/2), channels * F'')."""

    def __init__(self, feature_dim: int, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, stride=2)
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=2)
        self.conv1_width = (feature_dim + 2 - 3) // 2 + 1  # F1, its rows' frequency bins
        f2 = (self.conv1_width + 2 - 3) // 2 + 1
        self.output_dim = channels * f2

    @staticmethod
    def _pad(x: Tensor) -> Tensor:
        return F.pad(x, (1, 1, 2, 0))  # frequency: one each side; time: two on the left

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.conv1(self._pad(x[:, None])))
        y = F.relu(self.conv2(self._pad(y)))
        B, C, T, Fq = y.shape
        return y.transpose(1, 2).reshape(B, T, C * Fq)

    def streaming_forward(self, x: Tensor, x_lens: Tensor, feats: Tensor, conv: Tensor,
                          seen: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The next chunk, x (B,T,F) with x_lens (B,), after ``seen`` (B,) feature frames whose
        last two are ``feats`` (B,2,F) and whose first convolution's last two rows are ``conv``
        (B,C,2,F1) -> the frames it completes y (B,T',C*F''), y_lens (B,), and the new
        ``feats``, ``conv`` (see :class:`TransformerState`)."""
        h, h_lens, feats = _strided_chunk(self.conv1, feats[:, None], x[:, None], x_lens, seen)
        y, y_lens, conv = _strided_chunk(self.conv2, conv, h, h_lens, (seen + 1) // 2)
        # the frame size as a number, not a product of traced shapes: an exported graph would
        # reshape to (B, T, -1), which onnxruntime cannot resolve for a chunk of no frames
        return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], self.output_dim), y_lens, \
            feats[:, 0], conv


class _CausalBlock(nn.Module):
    """Pre-norm Transformer layer with causal self-attention (SDPA, no T x T mask tensor)."""

    def __init__(self, dim: int, heads: int, ffn_dim: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.dim = dim
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, ffn_dim), nn.GELU(), Dropout(dropout),
                                 nn.Linear(ffn_dim, dim))
        self.dropout = Dropout(dropout)
        self.attn_dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self._qkv(x)
        a = attention(q, k, v, is_causal=True,
                      dropout_p=self.attn_dropout if self.training else 0.0)
        return self._rest(x, a)

    def cached(self, x: Tensor, keys: Tensor, values: Tensor, allowed: Tensor
               ) -> tuple[Tensor, Tensor, Tensor]:
        """The layer on new frames x (B,T,D) after past frames whose keys and values are
        ``keys``, ``values`` (B,H,S,D/H); ``allowed`` (B,1,T,S+T): which of the past and new
        frames each new frame attends to -> y (B,T,D) and the new frames' keys, values
        (B,H,T,D/H). The past keys are read where they lie, not copied next to the new ones.
        """
        q, k, v = self._qkv(x)
        S = keys.shape[2]
        scores = torch.cat([q @ keys.transpose(2, 3), q @ k.transpose(2, 3)], dim=3)
        p = (scores / math.sqrt(q.shape[-1])).masked_fill(~allowed, -math.inf).softmax(dim=-1)
        return self._rest(x, p[..., :S] @ values + p[..., S:] @ v), k, v

    # Sizes other than B and T are the layer's numbers, not read from shapes (see
    # _CausalSubsampling.streaming_forward).
    def _qkv(self, x: Tensor) -> Tensor:
        """x (B,T,D) -> queries, keys and values stacked (3,B,H,T,D/H)."""
        B, T = x.shape[:2]
        return self.qkv(self.norm1(x)).view(B, T, 3, self.heads, self.dim // self.heads
                                            ).permute(2, 0, 3, 1, 4)

    def _rest(self, x: Tensor, a: Tensor) -> Tensor:
        """The attention's output a (B,H,T,D/H) through the output projection and the FFN, with
        both residuals: (B,T,D)."""
        B, T = x.shape[:2]
        x = x + self.dropout(self.out(a.transpose(1, 2).reshape(B, T, self.dim)))
        return x + self.dropout(self.ffn(self.norm2(x)))


def _sinusoids(positions: Tensor, dim: int, dtype: torch.dtype) -> Tensor:
    """The sinusoidal position encodings of ``positions`` (any shape, integers): (..., dim)."""
    pos = positions.to(torch.float32)[..., None]
    freq = torch.exp(torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
                     * (-math.log(10000.0) / dim))
    pe = torch.stack([torch.sin(pos * freq), torch.cos(pos * freq)], dim=-1)  # sin, cos alternate
    return pe.reshape(*positions.shape, dim).to(dtype)


class ConvTransformerEncoder(nn.Module):
    """Causal 4x Conv2d subsampling + ``num_layers`` pre-norm causal Transformer layers.

    Encoder frames are 40 ms (the paper's LSTM encoder: 30 ms). Every part is causal (the
    convolutions are padded on the left, attention is masked to the past, positions are
    counted from the utterance start), so the encoder streams exactly. ``cond_dim`` > 0
    appends a per-utterance vector (the onehot variant's language one-hot) to every
    subsampled frame before the input projection. Padding frames never reach real frames:
    everything a real frame depends on lies before it.

    Streaming carries what the next chunk needs (:class:`TransformerState`): the
    convolutions' left context, the count of frames, each layer's keys and values. A chunk
    costs the work of its own frames plus their attention to the past ones.
    """

    def __init__(self, feature_dim: int, hidden_dim: int, num_layers: int, heads: int,
                 ffn_dim: int, channels: int, cond_dim: int = 0, dropout: float = 0.0) -> None:
        super().__init__()
        if hidden_dim % heads or (hidden_dim // heads) % 2:
            raise ConfigError(f"encoder_dim {hidden_dim} must split into {heads} heads of even size")
        self.feature_dim = feature_dim
        self.cond_dim = cond_dim
        self.output_dim = hidden_dim
        self.heads = heads
        self.subsampling = _CausalSubsampling(feature_dim, channels)
        self.project = nn.Linear(self.subsampling.output_dim + cond_dim, hidden_dim)
        self.input_dropout = Dropout(dropout)
        self.layers = nn.ModuleList(_CausalBlock(hidden_dim, heads, ffn_dim, dropout)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(hidden_dim)

    def output_lengths(self, x_lens: Tensor) -> Tensor:
        """Encoder frames for ``x_lens`` feature frames: ceil(ceil(T / 2) / 2)."""
        return (x_lens + 3) // 4

    def init_state(self, batch: int, device: torch.device | str | None = None) -> TransformerState:
        p = next(self.parameters())
        device = p.device if device is None else torch.device(device)
        conv = self.subsampling.conv1
        cache = torch.zeros(len(self.layers), batch, self.heads, 0, self.output_dim // self.heads,
                            device=device, dtype=p.dtype)
        return TransformerState(
            feats=torch.zeros(batch, 2, self.feature_dim, device=device, dtype=p.dtype),
            conv=torch.zeros(batch, conv.out_channels, 2, self.subsampling.conv1_width,
                             device=device, dtype=p.dtype),
            seen=torch.zeros(batch, dtype=torch.long, device=device),
            keys=cache, values=cache.clone())

    def forward(self, x: Tensor, x_lens: Tensor, cond: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """x (B,T,F), x_lens (B,), cond (B,C) or None -> y (B,T',D), y_lens (B,), T' = ceil(T/4)."""
        x_lens = x_lens.to(x.device)
        _check_input(self, x, x_lens, cond)
        y_lens = self.output_lengths(x_lens)
        if x.shape[1] == 0:
            return x.new_zeros(x.shape[0], 0, self.output_dim), y_lens
        h = self.subsampling(x)
        h = self._embed(h, torch.arange(h.shape[1], device=h.device), cond)
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h)
        mask = torch.arange(h.shape[1], device=h.device)[None, :] < y_lens[:, None]
        return h * mask[..., None].to(h.dtype), y_lens

    def streaming_forward(self, x: Tensor, x_lens: Tensor, state: TransformerState,
                          cond: Tensor | None = None) -> tuple[Tensor, Tensor, TransformerState]:
        """Consume the next chunk: x (B,T,F), x_lens (B,) -> the encoder frames it completes,
        y (B,T',D) (zeros past each row's y_lens), y_lens (B,), and the new state.

        Row b's frames are exactly those :meth:`forward` gives on its whole input so far, for
        any chunking; rows may be at different positions and may bring 0 frames (their state
        is kept). Batches of one row and rows at one position trace as one graph
        (:mod:`.onnx_graphs`): every size comes from a shape or a tensor.
        """
        x_lens = x_lens.to(x.device)
        _check_input(self, x, x_lens, cond)
        h, y_lens, feats, conv = self.subsampling.streaming_forward(
            x, x_lens, state.feats, state.conv, state.seen)
        past = state.frames
        S, T = state.keys.shape[3], h.shape[1]
        h = self._embed(h, past[:, None] + torch.arange(T, device=x.device), cond)
        # Attention runs over the past slots followed by the new frames: a row sees its own
        # past frames (its first past[b] slots) and the new frames up to itself.
        slot = torch.arange(S + T, device=x.device)
        upto = S + torch.arange(T, device=x.device)
        allowed = (slot[None, None, :] < past[:, None, None]) | (
            (slot[None, None, :] >= S) & (slot[None, None, :] <= upto[None, :, None]))
        keys, values = [], []
        for i, layer in enumerate(self.layers):
            h, k, v = layer.cached(h, state.keys[i], state.values[i], allowed[:, None])
            keys.append(k)
            values.append(v)
        h = self.norm(h)
        y = h * (torch.arange(T, device=x.device)[None, :] < y_lens[:, None])[..., None].to(h.dtype)
        keys = torch.cat([state.keys, torch.stack(keys)], dim=3)
        values = torch.cat([state.values, torch.stack(values)], dim=3)
        if x.shape[0] > 1 and bool((past != past[0]).any()):
            keys, values = _compact(keys, values, past, y_lens, S)
        return y, y_lens, TransformerState(feats, conv, state.seen + x_lens, keys, values)

    def _embed(self, h: Tensor, positions: Tensor, cond: Tensor | None) -> Tensor:
        """Subsampled frames h (B,T,C*F'') at ``positions`` (B,T) or (T,) (encoder frames from
        the start) -> the first layer's input (B,T,D): the one-hot appended, projected, scaled,
        positioned."""
        if self.cond_dim:
            h = torch.cat([h, cond[:, None, :].to(h.dtype).expand(-1, h.shape[1], -1)], dim=-1)
        h = self.project(h) * math.sqrt(self.output_dim)
        return self.input_dropout(h + _sinusoids(positions, self.output_dim, h.dtype))


def _compact(keys: Tensor, values: Tensor, past: Tensor, new: Tensor, S: int
             ) -> tuple[Tensor, Tensor]:
    """Caches (N,B,H,S+T,D/H) whose row b holds its ``past[b]`` frames in the first slots and
    its ``new[b]`` in the slots from S -> (N,B,H,S',D/H), each row's frames in its first slots,
    S' = max(past + new) (rows at different positions: a batch streamed in uneven pieces)."""
    N, B, H, _, Dh = keys.shape
    slot = torch.arange(int((past + new).max()), device=keys.device)[None, :]
    src = torch.where(slot < past[:, None], slot, S + slot - past[:, None]).clamp(
        max=keys.shape[3] - 1)
    index = src[None, :, None, :, None].expand(N, B, H, -1, Dh)
    return keys.gather(3, index), values.gather(3, index)


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
