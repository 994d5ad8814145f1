"""The convolutional feature encoder: 16 kHz audio -> latent speech frames (Fig. 1 of the
local-attention paper, the ``CNN`` box).

Each layer is a 1-D convolution, a normalisation and GELU. ``group`` normalisation (Base)
normalises each channel of the first layer over time, per utterance; ``layer`` normalisation
(Large) normalises the channels of every frame of every layer.

:class:`FbankEncoder` is the front end of the demo and small recipes (``front_end: fbank``):
parameter-free log-mel filter banks, normalised per utterance and stacked in pairs to the same
20 ms frames.

Shapes: B batch, S samples, T frames, C channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.errors import DataError



def _checked_lengths(wav: Tensor, wav_lens: Tensor | None, receptive_field: int,
                     what: str) -> Tensor:
    """``wav_lens`` (all samples if None) after checking that ``wav`` is (B, samples) and that
    no utterance is shorter than the front end's receptive field."""
    if wav.dim() != 2:
        raise DataError(f"the feature encoder takes (batch, samples) audio, got shape "
                        f"{tuple(wav.shape)}")
    if wav_lens is None:
        wav_lens = torch.full((wav.shape[0],), wav.shape[1], dtype=torch.long, device=wav.device)
    short = int(wav_lens.min()) if wav_lens.numel() else 0
    if short < receptive_field:
        raise DataError(f"audio of {short} samples is shorter than the {what}'s receptive field "
                        f"({receptive_field} samples, {receptive_field / 16:.0f} ms at 16 kHz): "
                        "give longer audio")
    return wav_lens

class _ChannelLayerNorm(nn.LayerNorm):
    """LayerNorm over the channels of (B, C, T)."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


class ConvLayer(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, *,
                 bias: bool, norm: nn.Module | None) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride=stride, bias=bias)
        # He initialisation: with PyTorch's default the features of a 7-layer stack shrink to
        # ~1e-4, below the next layer norm's epsilon.
        nn.init.kaiming_normal_(self.conv.weight)
        self.norm = norm

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv(x)
        if self.norm is not None:
            x = self.norm(x)
        return F.gelu(x)


class FeatureEncoder(nn.Module):
    """Conv layers of (channels, kernel, stride); ``forward(wav, wav_lens)``: (B, S), (B,) ->
    (B, T, C), (B,). Audio shorter than :attr:`receptive_field` has no frame and is refused."""

    def __init__(self, channels: tuple[int, ...], kernels: tuple[int, ...],
                 strides: tuple[int, ...], *, norm: str = "group", bias: bool = False) -> None:
        super().__init__()
        layers = []
        prev = 1
        for i, (c, k, s) in enumerate(zip(channels, kernels, strides)):
            if norm == "layer":
                n: nn.Module | None = _ChannelLayerNorm(c)
            elif norm == "group" and i == 0:
                n = nn.GroupNorm(c, c)
            else:
                n = None
            layers.append(ConvLayer(prev, c, k, s, bias=bias, norm=n))
            prev = c
        self.layers = nn.ModuleList(layers)
        self.kernels, self.strides = tuple(kernels), tuple(strides)
        field, hop = 1, 1
        for k, s in zip(kernels, strides):
            field, hop = field + (k - 1) * hop, hop * s
        self.receptive_field = field

    def output_lengths(self, wav_lens: Tensor) -> Tensor:
        out = torch.as_tensor(wav_lens)
        for k, s in zip(self.kernels, self.strides):
            out = torch.div(out - k, s, rounding_mode="floor") + 1
        return out.clamp(min=0)

    def forward(self, wav: Tensor, wav_lens: Tensor | None = None) -> tuple[Tensor, Tensor]:
        wav_lens = _checked_lengths(wav, wav_lens, self.receptive_field, "feature encoder")
        x = wav[:, None, :]
        for layer in self.layers:
            x = layer(x)
        return x.transpose(1, 2), self.output_lengths(wav_lens)


class FbankEncoder(nn.Module):
    """80 log-mel filter banks (25 ms window, 10 ms hop, Kaldi's), each bin normalised over the
    utterance's frames (as Base's group norm normalises its first layer's channels), and pairs
    of frames stacked: (B, S), (B,) -> (B, T, 160), (B,) at the conv encoder's 20 ms frames.

    Not the paper's front end: it has no parameters, so it is frozen by construction. At the
    demo's size and budget the learned conv encoder, frozen after a short pre-training, gave the
    fine-tuned models features they could not learn from (docs/local-attention.md).
    """

    mel_bins = 80
    stack = 2
    window, shift = 400, 160  # samples at 16 kHz

    def __init__(self) -> None:
        super().__init__()
        self.receptive_field = self.window + (self.stack - 1) * self.shift
        self.dim = self.mel_bins * self.stack

    def output_lengths(self, wav_lens: Tensor) -> Tensor:
        frames = torch.div(torch.as_tensor(wav_lens) - self.window, self.shift,
                           rounding_mode="floor") + 1
        return torch.div(frames.clamp(min=0), self.stack, rounding_mode="floor")

    def _one(self, wav: Tensor, frames: int) -> Tensor:
        from speechlab.audio.features import FbankConfig, fbank

        cfg = FbankConfig(num_mel_bins=self.mel_bins, snip_edges=True)
        f = torch.from_numpy(fbank(wav.detach().cpu().numpy(), cfg))
        f = (f - f.mean(0)) / (f.std(0, unbiased=False) + 1e-5)
        return f[: frames * self.stack].reshape(frames, self.dim)

    def forward(self, wav: Tensor, wav_lens: Tensor | None = None) -> tuple[Tensor, Tensor]:
        wav_lens = _checked_lengths(wav, wav_lens, self.receptive_field, "fbank front end")
        lens = self.output_lengths(wav_lens)
        out = wav.new_zeros(wav.shape[0], int(lens.max()), self.dim)
        for b in range(wav.shape[0]):
            out[b, : int(lens[b])] = self._one(wav[b, : int(wav_lens[b])], int(lens[b]))
        return out, lens
