"""Configs of the multi-softmax RNN-T family: model sizes, variants, search and early stopping.

The six models of the multi-softmax paper (Joshi et al., Tables 2-6) differ only in which parts
are shared between languages; :data:`VARIANTS` spells that out per variant, so ``build`` has one
code path and no per-variant classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from speechlab.errors import ConfigError


@dataclass(frozen=True)
class VariantSpec:
    """Which parts of the RNN-T are per language (Section 3, 4, 4.1, 4.2 of the paper)."""

    single_language: bool = False  # mono: exactly one language
    union_vocab: bool = False      # one softmax over blank + every language's symbols
    lang_onehot: bool = False      # language one-hot appended to encoder and predictor inputs
    lang_output: bool = False      # per-language embedding, joint output layer and softmax
    lang_predictor: bool = False   # per-language prediction LSTMs (LSP)
    lid_head: bool = False         # per-frame language classifier on the encoder output


VARIANTS: dict[str, VariantSpec] = {
    "mono": VariantSpec(single_language=True),
    "vanilla": VariantSpec(union_vocab=True),
    "onehot": VariantSpec(union_vocab=True, lang_onehot=True),
    "multisoftmax": VariantSpec(lang_output=True),
    "multisoftmax_lsp": VariantSpec(lang_output=True, lang_predictor=True),
    "multisoftmax_lid": VariantSpec(lang_output=True, lid_head=True),
}


@dataclass(frozen=True)
class ModelDims:
    """Layer sizes; ``presets.PRESETS`` holds the paper's and small ones.

    The encoder sees ``stack`` consecutive ``feature_dim`` frames (the current one and the
    previous ``stack - 1``), one stacked vector every ``stride`` frames (Section 5: 8 x 80 = 640
    dims, 30 ms shift).
    """

    feature_dim: int = 80
    stack: int = 8
    stride: int = 3
    encoder_layers: int = 6
    encoder_dim: int = 1024
    embed_dim: int = 1024
    predictor_layers: int = 2
    predictor_dim: int = 1024
    joint_dim: int = 1024
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("feature_dim", "stack", "stride", "encoder_layers", "encoder_dim",
                     "embed_dim", "predictor_layers", "predictor_dim", "joint_dim"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model dims: {name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model dims: dropout must be in [0, 1), got {self.dropout}")

    @property
    def input_dim(self) -> int:
        return self.feature_dim * self.stack


@dataclass(frozen=True)
class RNNTConfig:
    """What ``build_from_config`` needs: variant, per-language vocabulary sizes, sizes.

    ``vocab_sizes`` counts blank (id 0) in every language; its order fixes language ids.
    ``dims``, when given, replaces the sizes of ``preset``.
    """

    variant: str = "multisoftmax_lid"
    vocab_sizes: dict[str, int] = field(default_factory=dict)
    preset: str = "demo"
    dims: ModelDims | None = None


@dataclass(frozen=True)
class SearchConfig:
    """RNN-T search: ``method`` is a key of ``search.SEARCHES``.

    ``max_symbols_per_frame`` bounds the labels emitted on one encoder frame (after that the
    search takes blank), which keeps decoding time linear in the number of frames.
    """

    method: str = "beam"
    beam: int = 4
    max_symbols_per_frame: int = 3

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise ConfigError(f"search.beam must be >= 1, got {self.beam}")
        if self.max_symbols_per_frame < 1:
            raise ConfigError(
                f"search.max_symbols_per_frame must be >= 1, got {self.max_symbols_per_frame}")


@dataclass(frozen=True)
class EarlyStopConfig:
    """Section 6.3: decoders whose LID score falls ``s_th`` below the best after ``tau`` encoder
    frames are switched off. ``inf`` in either keeps every decoder running."""

    tau: float = math.inf
    s_th: float = math.inf

    def __post_init__(self) -> None:
        if math.isnan(self.tau) or math.isnan(self.s_th):
            raise ConfigError("early_stop: tau and s_th must be numbers, not nan")
        if self.s_th < 0:
            raise ConfigError(f"early_stop.s_th must be >= 0 (a margin below the best score), "
                              f"got {self.s_th}")


@dataclass(frozen=True)
class DecodeConfig:
    """Decoding of one model: search, LID-free selection (``lid`` or ``oracle``), streaming.

    ``chunk_frames`` is the streaming chunk in 10 ms feature frames; 0 decodes whole utterances.
    """

    search: SearchConfig = field(default_factory=SearchConfig)
    early_stop: EarlyStopConfig = field(default_factory=EarlyStopConfig)
    select: str = "lid"
    chunk_frames: int = 0

    def __post_init__(self) -> None:
        if self.chunk_frames < 0:
            raise ConfigError(f"decode.chunk_frames must be >= 0, got {self.chunk_frames}")
