"""Feature transforms between the fbank cache and an encoder, all on ``(B, T, D)`` batches whose
valid lengths ``x_lens (B,)`` travel alongside.

* :class:`FrameStacker` -- the multi-softmax paper's input: 80-dim frames stacked over eight past
  frames into 640 dims, one output every 30 ms; exact in streaming.
* :class:`SpecAugment` -- time/frequency masking (and optional time warping) for training.
* :class:`GlobalCMVN` -- per-dimension mean/variance normalisation with statistics accumulated
  over the training features.

Shape legend: B batch, T frames, D feature dim.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.config import check_fields, ranged
from speechlab.errors import DataError
from speechlab.files import atomic_path
from speechlab.nn.mask import lengths_to_mask

# ---------------------------------------------------------------------------------------------
# Frame stacking
# ---------------------------------------------------------------------------------------------


@dataclass
class StackerState:
    """Streaming state of :class:`FrameStacker`.

    Attributes:
        history: ``(B, stack-1, D)`` the last ``stack-1`` input frames of each stream (the
            left padding, i.e. copies of frame 0, before enough frames have arrived).
        seen: ``(B,)`` input frames consumed so far per stream.
    """

    history: Tensor
    seen: Tensor


class FrameStacker(nn.Module):
    """Stack ``stack`` consecutive frames, keeping every ``stride``-th output (Sec. 4 of the
    multi-softmax paper: 8 x 80-dim frames -> 640 dims, shifted by 30 ms).

    Output frame ``t'`` is the concatenation, oldest first, of input frames
    ``stride*t' - (stack-1) .. stride*t'`` -- only past and current frames, so the stacker adds no
    look-ahead. Frames before the start are copies of frame 0 (not zeros: zeros are an
    implausible log-mel value that would look like a loud click to the first outputs, and
    whether they are "silence" would depend on whether CMVN ran before the stacker).
    ``y_lens = ceil(x_lens / stride)``: every input frame whose index is a multiple of ``stride``
    ends one output frame.

    Args:
        stack: frames per output (8 in the paper).
        stride: input frames per output frame (3: 30 ms at a 10 ms shift).
        feature_dim: ``D`` of the inputs (only used by :meth:`init_state`).
    """

    def __init__(self, stack: int = 8, stride: int = 3, feature_dim: int = 80) -> None:
        super().__init__()
        if stack < 1 or stride < 1:
            raise ValueError(f"stack and stride must be >= 1, got {stack}, {stride}")
        self.stack = stack
        self.stride = stride
        self.feature_dim = feature_dim

    @property
    def output_dim(self) -> int:
        return self.stack * self.feature_dim

    def output_lengths(self, x_lens: Tensor) -> Tensor:
        """``(B,)`` -> ``(B,)``: ``ceil(x_lens / stride)`` (0 stays 0)."""
        return torch.div(x_lens + self.stride - 1, self.stride, rounding_mode="floor")

    def forward(self, x: Tensor, x_lens: Tensor) -> tuple[Tensor, Tensor]:
        """Whole utterances.

        Args:
            x: ``(B, T, D)`` features, valid up to ``x_lens``.
            x_lens: ``(B,)``.
        Returns:
            ``y (B, T', stack*D)`` with ``T' = ceil(T / stride)``, frames past ``y_lens`` zero;
            ``y_lens (B,)``.
        """
        B, T, D = x.shape
        y_lens = self.output_lengths(x_lens)
        if T == 0:
            return x.new_zeros(B, 0, self.stack * D), y_lens
        pad = x[:, :1].expand(B, self.stack - 1, D)
        padded = torch.cat([pad, x], dim=1)  # (B, T+stack-1, D); padded[k+stack-1] == x[k]
        # Window t' covers padded[stride*t' : stride*t' + stack] == x[stride*t'-stack+1 .. stride*t'].
        win = padded.unfold(1, self.stack, self.stride)  # (B, T', D, stack)
        y = win.transpose(2, 3).reshape(B, win.shape[1], self.stack * D)
        return y.masked_fill(~lengths_to_mask(y_lens, y.shape[1])[..., None], 0.0), y_lens

    def init_state(self, batch: int, device: torch.device | str | None = None,
                   dtype: torch.dtype = torch.float32) -> StackerState:
        return StackerState(
            history=torch.zeros(batch, self.stack - 1, self.feature_dim, device=device, dtype=dtype),
            seen=torch.zeros(batch, dtype=torch.long, device=device),
        )

    def streaming_forward(self, x: Tensor, x_lens: Tensor,
                          state: StackerState) -> tuple[Tensor, Tensor, StackerState]:
        """One chunk per stream; concatenated outputs equal :meth:`forward` on the whole input.

        Args:
            x: ``(B, Tc, D)`` the next chunk of each stream, valid up to ``x_lens``.
            x_lens: ``(B,)`` frames in this chunk (may be 0, and differ between streams).
            state: from :meth:`init_state` or the previous call.
        Returns:
            ``y (B, T', stack*D)`` the output frames completed by this chunk (zero past
            ``y_lens``), ``y_lens (B,)``, the new state.
        """
        B, Tc, D = x.shape
        K = self.stack - 1
        seen = state.seen
        history = state.history
        if Tc > 0:
            # A stream's first frame is also its left padding.
            first = (seen == 0) & (x_lens > 0)
            history = torch.where(first[:, None, None], x[:, :1].expand(B, K, D), history)
        buf = torch.cat([history, x], dim=1)  # (B, K+Tc, D); buf[K+j] is global frame seen+j
        # Output t' is emitted by the chunk holding global frame stride*t'.
        first_out = torch.div(seen + self.stride - 1, self.stride, rounding_mode="floor")
        end_out = torch.div(seen + x_lens + self.stride - 1, self.stride, rounding_mode="floor")
        y_lens = end_out - first_out
        n_out = int(y_lens.max()) if B > 0 else 0
        if n_out == 0:
            y = x.new_zeros(B, 0, self.stack * D)
        else:
            k = torch.arange(n_out, device=x.device)
            # Buffer position of the newest frame of output first_out+k, then its window.
            newest = K + self.stride * (first_out[:, None] + k[None, :]) - seen[:, None]  # (B, n)
            idx = newest[..., None] + torch.arange(-K, 1, device=x.device)  # (B, n, stack)
            idx = idx.clamp(0, K + Tc - 1)
            g = torch.gather(buf, 1, idx.reshape(B, -1, 1).expand(-1, -1, D))
            y = g.reshape(B, n_out, self.stack * D)
            y = y.masked_fill(~lengths_to_mask(y_lens, n_out)[..., None], 0.0)
        # New history: the K frames ending at each stream's last valid frame.
        hidx = (x_lens[:, None] + torch.arange(K, device=x.device)[None, :]).clamp(max=K + Tc - 1)
        new_history = torch.gather(buf, 1, hidx[..., None].expand(-1, -1, D)) if K else history
        return y, y_lens, StackerState(history=new_history, seen=seen + x_lens)


# ---------------------------------------------------------------------------------------------
# SpecAugment
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecAugmentConfig:
    """SpecAugment (Park et al., 2019) settings; field names are :class:`SpecAugment` kwargs.

    Attributes:
        num_freq_masks: frequency masks per utterance.
        freq_mask_width: largest frequency mask (``F``), in bins.
        num_time_masks: time masks per utterance.
        time_mask_width: largest time mask (``T``), in frames.
        time_mask_max_ratio: a time mask covers at most this fraction of the utterance
            (``p``), so short utterances are not wiped out.
        time_warp: largest warp distance (``W``) in frames; 0 disables warping (the default:
            the papers we reproduce do not warp, and it is the costliest part).
        mask_value: what masked cells become (0 is the mean after CMVN).
    """

    num_freq_masks: int = ranged(2, ge=0)
    freq_mask_width: int = ranged(27, ge=0)
    num_time_masks: int = ranged(2, ge=0)
    time_mask_width: int = ranged(40, ge=0)
    time_mask_max_ratio: float = ranged(0.2, ge=0, le=1)
    time_warp: int = ranged(0, ge=0)
    mask_value: float = ranged(0.0)

    def __post_init__(self) -> None:
        check_fields(self)


class SpecAugment(nn.Module):
    """Random time/frequency masks (settings: :class:`SpecAugmentConfig`); identity in eval mode.

    Each mask's width is uniform in ``[0, max]`` and its start uniform over the positions where
    it fits inside the utterance's valid frames (time) or the ``D`` bins (frequency). Pass a
    ``torch.Generator`` to :meth:`forward` for reproducible masks.
    """

    def __init__(self, cfg: SpecAugmentConfig = SpecAugmentConfig()) -> None:
        super().__init__()
        self.cfg = cfg

    @staticmethod
    def _spans(limit: Tensor, max_width: Tensor, n: int, size: int,
               generator: torch.Generator | None) -> Tensor:
        """``(B, size)`` bool: ``n`` random spans per row, widths <= ``max_width``, inside
        ``[0, limit)``.  ``limit``/``max_width``: ``(B,)`` long."""
        B = limit.shape[0]
        if n == 0 or size == 0:
            return torch.zeros(B, size, dtype=torch.bool, device=limit.device)
        u = torch.rand(B, n, 2, generator=generator, device=limit.device)
        width = torch.minimum((u[..., 0] * (max_width[:, None] + 1)).long(), max_width[:, None])
        room = (limit[:, None] - width).clamp(min=0)  # start in [0, room]
        start = torch.minimum((u[..., 1] * (room + 1)).long(), room)
        pos = torch.arange(size, device=limit.device)[None, None, :]
        inside = (pos >= start[..., None]) & (pos < (start + width)[..., None])
        return inside.any(dim=1)

    def _warp(self, x: Tensor, x_lens: Tensor, generator: torch.Generator | None) -> Tensor:
        """Time warp: move a random anchor frame by up to ``W`` frames, stretching both sides
        linearly (per utterance; off by default)."""
        W = self.cfg.time_warp
        out = x.clone()
        for b in range(x.shape[0]):
            n = int(x_lens[b])
            if n <= 2 * W + 1:
                continue
            r = torch.rand(2, generator=generator, device=x.device)
            centre = W + 1 + int(r[0] * (n - 2 * W - 2))
            dest = centre + int(round((2 * float(r[1]) - 1) * W))
            dest = min(max(dest, 1), n - 1)
            seg = x[b, :n].t()[None]  # (1, D, n)
            left = F.interpolate(seg[..., :centre], size=dest, mode="linear", align_corners=False)
            right = F.interpolate(seg[..., centre:], size=n - dest, mode="linear", align_corners=False)
            out[b, :n] = torch.cat([left, right], dim=-1)[0].t()
        return out

    def forward(self, x: Tensor, x_lens: Tensor,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """``x (B, T, D)``, ``x_lens (B,)`` -> augmented copy of ``x``, ``x_lens`` (unchanged)."""
        if not self.training:
            return x, x_lens
        c = self.cfg
        B, T, D = x.shape
        if c.time_warp > 0:
            x = self._warp(x, x_lens, generator)
        lens = x_lens.to(device=x.device, dtype=torch.long)
        fmask = self._spans(torch.full((B,), D, device=x.device),
                            torch.full((B,), min(c.freq_mask_width, D), device=x.device),
                            c.num_freq_masks, D, generator)
        tmax = torch.minimum(torch.full_like(lens, c.time_mask_width),
                             (lens.double() * c.time_mask_max_ratio).floor().long())
        tmask = self._spans(lens, tmax, c.num_time_masks, T, generator)
        mask = fmask[:, None, :] | tmask[:, :, None]
        return x.masked_fill(mask, c.mask_value), x_lens


# ---------------------------------------------------------------------------------------------
# Global CMVN
# ---------------------------------------------------------------------------------------------


class GlobalCMVN(nn.Module):
    """``y = (x - mean) / std`` per feature dimension, with training-set statistics.

    Statistics are accumulated batch by batch (:meth:`accumulate`, float64 sums so a corpus of
    millions of frames loses no precision), then frozen by :meth:`finalize`. They live in buffers,
    so they travel in the model's ``state_dict``; :meth:`save`/:meth:`load` write them alone as
    safetensors. Normalisation is per frame, hence identical in streaming.

    Args:
        dim: ``D``.
        std_floor: smallest std used (a constant dimension would otherwise divide by 0).
    """

    def __init__(self, dim: int = 80, std_floor: float = 1e-5) -> None:
        super().__init__()
        self.dim = dim
        self.std_floor = std_floor
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("sum", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("sum_sq", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))

    @torch.no_grad()
    def accumulate(self, x: Tensor, x_lens: Tensor | None = None) -> None:
        """Add the valid frames of ``x (B, T, D)`` (or ``(T, D)``) to the statistics."""
        if x.dim() == 2:
            x = x[None]
        if x.shape[-1] != self.dim:
            raise DataError(f"CMVN for dim {self.dim} got features of dim {x.shape[-1]}")
        x = x.to(torch.float64)
        if x_lens is not None:
            valid = lengths_to_mask(x_lens.to(x.device), x.shape[1])[..., None]
            x = x.masked_fill(~valid, 0.0)
            n = x_lens.sum()
        else:
            n = x.shape[0] * x.shape[1]
        self.count += n
        self.sum += x.sum(dim=(0, 1))
        self.sum_sq += (x * x).sum(dim=(0, 1))

    @torch.no_grad()
    def finalize(self) -> GlobalCMVN:
        """Turn the accumulated sums into ``mean``/``std``; returns self."""
        if self.count <= 0:
            raise DataError("GlobalCMVN.finalize: no frames were accumulated")
        mean = self.sum / self.count
        var = (self.sum_sq / self.count - mean * mean).clamp(min=0.0)
        self.mean.copy_(mean.to(self.mean.dtype))
        self.std.copy_(var.sqrt().clamp(min=self.std_floor).to(self.std.dtype))
        return self

    def forward(self, x: Tensor, x_lens: Tensor) -> tuple[Tensor, Tensor]:
        """``x (B, T, D)`` -> normalised ``(B, T, D)``; ``x_lens`` unchanged."""
        return (x - self.mean) / self.std, x_lens

    def streaming_forward(self, x: Tensor, x_lens: Tensor, state: None = None
                          ) -> tuple[Tensor, Tensor, None]:
        """Per-frame, so stateless; here so pipelines can treat every transform alike."""
        y, y_lens = self.forward(x, x_lens)
        return y, y_lens, None

    def init_state(self, batch: int) -> None:
        return None

    def to_dict(self) -> dict[str, list[float]]:
        """The frozen statistics as JSON lists (a package card's ``cmvn``)."""
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, list[float]]) -> GlobalCMVN:
        cmvn = cls(dim=len(d["mean"]))
        cmvn.mean.copy_(torch.tensor(d["mean"]))
        cmvn.std.copy_(torch.tensor(d["std"]))
        return cmvn

    def save(self, path: str | Path) -> None:
        from safetensors.torch import save_file

        with atomic_path(path) as tmp:
            save_file({k: v.contiguous() for k, v in self.state_dict().items()}, str(tmp))

    @classmethod
    def load(cls, path: str | Path) -> GlobalCMVN:
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file(str(path))
        except FileNotFoundError:
            raise DataError(f"CMVN file {path} does not exist") from None
        except (SafetensorError, OSError) as e:
            raise DataError(f"CMVN file {path} is not a safetensors file: {e}") from None
        if "mean" not in state or state["mean"].dim() != 1:
            raise DataError(f"CMVN file {path} has no 1-D 'mean' tensor")
        cmvn = cls(dim=state["mean"].shape[0])
        try:
            cmvn.load_state_dict(state)
        except RuntimeError as e:
            raise DataError(f"CMVN file {path} does not hold GlobalCMVN statistics: {e}") from None
        return cmvn
