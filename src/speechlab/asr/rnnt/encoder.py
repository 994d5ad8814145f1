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

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from speechlab.audio.transforms import FrameStacker, StackerState
from speechlab.errors import DataError


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
        self.feature_dim = feature_dim
        self.stack = stack
        self.stride = stride
        self.cond_dim = cond_dim
        self.output_dim = hidden_dim
        self.stacker = FrameStacker(stack, stride, feature_dim)
        self.lstm = nn.LSTM(self.stacker.output_dim + cond_dim, hidden_dim, num_layers,
                            batch_first=True, dropout=dropout if num_layers > 1 else 0.0)

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
        if x.dim() != 3 or x.shape[-1] != self.feature_dim:
            raise DataError(f"encoder input must be features (B, T, {self.feature_dim}), "
                            f"got shape {tuple(x.shape)}")
        if x_lens.shape != (x.shape[0],) or bool((x_lens < 0).any()) or bool((x_lens > x.shape[1]).any()):
            raise DataError(f"feature lengths {x_lens.tolist()} do not fit a batch of shape "
                            f"{tuple(x.shape)}")
        if self.cond_dim and (cond is None or cond.shape != (x.shape[0], self.cond_dim)):
            got = None if cond is None else tuple(cond.shape)
            raise DataError(f"this encoder needs a (B, {self.cond_dim}) language one-hot, got {got}")
