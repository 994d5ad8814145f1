"""The convolutional feature encoder: 16 kHz audio -> latent speech frames (Fig. 1 of the
local-attention paper, the ``CNN`` box).

Each layer is a 1-D convolution, a normalisation and GELU. ``group`` normalisation (Base)
normalises each channel of the first layer over time, per utterance; ``layer`` normalisation
(Large) normalises the channels of every frame of every layer.

Shapes: B batch, S samples, T frames, C channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.errors import DataError


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
        if wav.dim() != 2:
            raise DataError(f"the feature encoder takes (batch, samples) audio, got shape "
                            f"{tuple(wav.shape)}")
        if wav_lens is None:
            wav_lens = torch.full((wav.shape[0],), wav.shape[1], dtype=torch.long)
        short = int(wav_lens.min()) if wav_lens.numel() else 0
        if short < self.receptive_field:
            raise DataError(f"audio of {short} samples is shorter than the feature encoder's "
                            f"receptive field ({self.receptive_field} samples, "
                            f"{self.receptive_field / 16:.0f} ms at 16 kHz): give longer audio")
        x = wav[:, None, :]
        for layer in self.layers:
            x = layer(x)
        return x.transpose(1, 2), self.output_lengths(wav_lens)
