"""Sizes of a wav2vec 2.0 model: one frozen dataclass, presets, and LMSAB block lists.

``base`` is the paper's model (wav2vec 2.0 Base: 7 conv layers of 512 channels, 12 blocks of
768 dims, 12 heads, 3072 FFN, 2 x 320 codebook entries; 95,044,608 parameters with the
pre-training heads, as ``transformers``' ``Wav2Vec2ForPreTraining`` at its default config).
``tiny`` and ``ci`` keep the architecture and shrink every width so that a model pre-trains
and fine-tunes on two CPU cores.

Block numbers in ``local_blocks`` are 1-based, as in the paper's model names (``L_B2-12``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError


# The widest LMSAB radius, in frames each side of the query: 10,000 frames of 20 ms are 200 s,
# more than any utterance, so a wider window is the same as global attention.
MAX_RADIUS = 10_000
MAX_RADIUS_WHY = "frames each side; 10000 frames (200 s) already cover any utterance"


@dataclass(frozen=True)
class Wav2Vec2Config:
    """One wav2vec 2.0 model.

    Feature encoder: ``conv_channels`` / ``conv_kernels`` / ``conv_strides`` per layer (16 kHz
    audio in, one frame per product of the strides: 320 samples, 20 ms, for Base);
    ``feature_norm`` ``group`` normalises the first layer's channels over time (Base), ``layer``
    every layer's channels per frame (Large). Transformer: ``layers`` blocks of ``dim`` with
    ``heads`` and ``ffn_dim``, post-norm (Base) or ``layer_norm_first`` (Large), a convolutional
    relative positional embedding of ``pos_conv_kernel`` taps in ``pos_conv_groups`` groups.
    Quantizer: ``codebook_groups`` x ``codebook_entries`` code vectors making a
    ``codevector_dim`` vector, projected with the context to ``final_dim`` for the contrastive
    loss. ``local_blocks``: the blocks made local (LMSAB) with ``radius``; ``local_chunk`` the
    query block of the banded computation. ``front_end``: ``conv`` (the paper's learned
    encoder) or ``fbank`` (a parameter-free log-mel front end at the same 20 ms
    frames, :class:`~.feature_encoder.FbankEncoder`; the conv fields are then unused).
    """

    conv_channels: tuple[int, ...] = ranged((512,) * 7, ge=1)
    conv_kernels: tuple[int, ...] = ranged((10, 3, 3, 3, 3, 2, 2), ge=1)
    conv_strides: tuple[int, ...] = ranged((5, 2, 2, 2, 2, 2, 2), ge=1)
    conv_bias: bool = False
    feature_norm: Literal["group", "layer"] = "group"
    front_end: Literal["conv", "fbank"] = "conv"
    dim: int = ranged(768, ge=1)
    layers: int = ranged(12, ge=1)
    heads: int = ranged(12, ge=1)
    ffn_dim: int = ranged(3072, ge=1)
    layer_norm_first: bool = False
    layer_norm_eps: float = ranged(1e-5, gt=0)
    pos_conv_kernel: int = ranged(128, ge=2)
    pos_conv_groups: int = ranged(16, ge=1)
    codebook_groups: int = ranged(2, ge=1)
    codebook_entries: int = ranged(320, ge=2)
    codevector_dim: int = ranged(256, ge=1)
    final_dim: int = ranged(256, ge=1)
    # Dropouts of the Base recipe: after the projection of the features (``dropout_input``),
    # on the quantizer's input features, in the Transformer (residual, attention weights, FFN).
    feature_dropout: float = ranged(0.1, ge=0, lt=1)
    quantizer_dropout: float = ranged(0.1, ge=0, lt=1)
    dropout: float = ranged(0.1, ge=0, lt=1)
    attention_dropout: float = ranged(0.1, ge=0, lt=1)
    activation_dropout: float = ranged(0.0, ge=0, lt=1)
    local_blocks: tuple[int, ...] = ranged((), ge=1)
    radius: int = ranged(30, ge=1, le=MAX_RADIUS, why=MAX_RADIUS_WHY)
    local_chunk: int = ranged(32, ge=1)
    # Std of the normal init of the Transformer's and projections' linear weights (BERT's 0.02,
    # which wav2vec 2.0 trains from). It sets the attention logits' scale at the start: their
    # std grows with dim at a fixed init std (about 0.3 at Base's 768, 0.03 at 64 dims, where
    # attention starts uniform); 0.02 * sqrt(768 / dim) gives a narrow model Base's per-unit scale.
    init_std: float = ranged(0.02, gt=0)

    def __post_init__(self) -> None:
        check_fields(self)
        n = len(self.conv_channels)
        if not n or len(self.conv_kernels) != n or len(self.conv_strides) != n:
            raise ConfigError(f"conv_channels, conv_kernels and conv_strides must have one "
                              f"entry per conv layer, got {len(self.conv_channels)}, "
                              f"{len(self.conv_kernels)}, {len(self.conv_strides)}")
        if self.dim % self.heads:
            raise ConfigError(f"dim {self.dim} is not a multiple of heads {self.heads}")
        if self.dim % self.pos_conv_groups:
            raise ConfigError(f"dim {self.dim} is not a multiple of pos_conv_groups "
                              f"{self.pos_conv_groups}")
        if self.codevector_dim % self.codebook_groups:
            raise ConfigError(f"codevector_dim {self.codevector_dim} is not a multiple of "
                              f"codebook_groups {self.codebook_groups}")
        check_blocks(self.local_blocks, self.layers)

    @property
    def feature_dim(self) -> int:
        """Channels of the front end's frames (C): the last conv layer's, or 160 (fbank)."""
        return 160 if self.front_end == "fbank" else self.conv_channels[-1]

    @property
    def receptive_field(self) -> int:
        """Samples the first output frame sees (400 for Base: 25 ms at 16 kHz)."""
        if self.front_end == "fbank":
            return 560
        field, hop = 1, 1
        for k, s in zip(self.conv_kernels, self.conv_strides):
            field += (k - 1) * hop
            hop *= s
        return field

    @property
    def hop(self) -> int:
        """Samples between output frames (320 for Base: 20 ms at 16 kHz)."""
        if self.front_end == "fbank":
            return 320
        out = 1
        for s in self.conv_strides:
            out *= s
        return out

    def localized(self, blocks: tuple[int, ...], radius: int | None = None) -> Wav2Vec2Config:
        """The same model with ``blocks`` (1-based) made local."""
        return dataclasses.replace(self, local_blocks=tuple(sorted(set(blocks))),
                                   radius=self.radius if radius is None else radius)


def check_blocks(blocks: tuple[int, ...], layers: int) -> None:
    bad = [b for b in blocks if not 1 <= b <= layers]
    if bad:
        raise ConfigError(f"block(s) {format_blocks(tuple(bad))} out of range: the model has "
                          f"blocks 1-{layers}")


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_blocks(text: str, layers: int) -> tuple[int, ...]:
    """``"2-12"``, ``"6-11,12"``, ``"1,3,5"`` or ``""`` (none) -> sorted 1-based block numbers,
    checked against the model's ``layers``."""
    blocks: set[int] = set()
    for part in [p for p in text.split(",") if p.strip()] if text.strip() else []:
        m = _RANGE.match(part)
        if m is None:
            raise ConfigError(f"block list {text!r}: {part.strip()!r} is not a block number or "
                              "a range like 2-12")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ConfigError(f"block list {text!r}: range {lo}-{hi} runs backwards")
        blocks.update(range(lo, hi + 1))
    out = tuple(sorted(blocks))
    try:
        check_blocks(out, layers)
    except ConfigError as e:
        raise ConfigError(f"block list {text!r}: {e}") from None
    return out


def format_blocks(blocks: tuple[int, ...]) -> str:
    """(2, 3, 4, 5, 9) -> ``"2-5,9"`` (the inverse of :func:`parse_blocks`)."""
    parts, run = [], []
    for b in sorted(set(blocks)):
        if run and b == run[-1] + 1:
            run.append(b)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [b]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)


# The paper's model and the sizes that train on two CPU cores: the same 7-layer conv encoder
# (400-sample field, 320 samples per frame) with fewer channels, fewer and narrower blocks.
PRESETS: dict[str, Wav2Vec2Config] = {
    "base": Wav2Vec2Config(),
    # tiny is pre-norm (as Large) and without dropout: at this size and budget a post-norm
    # stack stayed on the CTC blank plateau through 500 fine-tuning updates where the pre-norm
    # one learned (docs/local-attention.md).
    "tiny": Wav2Vec2Config(conv_channels=(32,) * 7, dim=64, layers=6, heads=4, ffn_dim=128,
                           layer_norm_first=True, feature_dropout=0.0, quantizer_dropout=0.0,
                           dropout=0.0, attention_dropout=0.0,
                           pos_conv_kernel=16, pos_conv_groups=4, codebook_groups=2,
                           codebook_entries=32, codevector_dim=32, final_dim=32,
                           radius=4, local_chunk=16),
    "ci": Wav2Vec2Config(conv_channels=(8,) * 7, dim=16, layers=2, heads=2, ffn_dim=32, pos_conv_kernel=4,
                         pos_conv_groups=2, codebook_groups=2, codebook_entries=4,
                         codevector_dim=8, final_dim=8, radius=2, local_chunk=4),
}


# wide: tiny twice as wide and a third deeper (about 8x its Transformer parameters), the
# larger model of the pre-training scan (recipes/local-attention/scan.yaml).
PRESETS["wide"] = dataclasses.replace(PRESETS["tiny"], conv_channels=(64,) * 7, dim=128, layers=8,
                                      ffn_dim=512, codebook_entries=64, codevector_dim=64,
                                      final_dim=64)


def preset(name: str, **changes) -> Wav2Vec2Config:
    """A preset by name, with fields replaced by ``changes``."""
    if name not in PRESETS:
        raise ConfigError(f"unknown wav2vec 2.0 preset {name!r}; presets: {sorted(PRESETS)}")
    return dataclasses.replace(PRESETS[name], **changes)
