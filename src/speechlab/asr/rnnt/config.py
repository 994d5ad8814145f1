"""Configs of the multi-softmax RNN-T family: model sizes, variants, search and early stopping.

The six models of the multi-softmax paper (Joshi et al., Tables 2-6) differ only in which parts
are shared between languages; :data:`VARIANTS` spells that out per variant, so ``build`` has one
code path and no per-variant classes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from speechlab.config import check_fields, ranged
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

    ``encoder`` picks the encoder: ``"lstm"`` is the paper's (stacked frames + unidirectional
    LSTM); ``"transformer"`` is a causal 4x Conv2d subsampling (``conv_channels``) + pre-norm
    causal Transformer (``encoder_layers`` x ``encoder_dim``, ``heads``, ``ffn_dim``), not in
    the paper, which learns several times more per CPU second (docs/multisoftmax.md).
    ``stack`` / ``stride`` only apply to the LSTM encoder. ``lid_dim`` > 0 gives the LID head a
    hidden ReLU layer of that size (the paper's MS LID has ~1.5M parameters more than MS,
    Table 6); 0 keeps it one linear layer.
    """

    feature_dim: int = ranged(80, ge=1)
    stack: int = ranged(8, ge=1)
    stride: int = ranged(3, ge=1)
    encoder_layers: int = ranged(6, ge=1)
    encoder_dim: int = ranged(1024, ge=1)
    embed_dim: int = ranged(1024, ge=1)
    predictor_layers: int = ranged(2, ge=1)
    predictor_dim: int = ranged(1024, ge=1)
    joint_dim: int = ranged(1024, ge=1)
    dropout: float = ranged(0.0, ge=0, lt=1)
    encoder: Literal["lstm", "transformer"] = "lstm"
    heads: int = ranged(4, ge=1)
    ffn_dim: int = ranged(768, ge=1)
    conv_channels: int = ranged(64, ge=1)
    lid_dim: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.encoder not in ("lstm", "transformer"):
            raise ConfigError(f"unknown encoder {self.encoder!r}; choose 'lstm' or 'transformer'")

    @property
    def input_dim(self) -> int:
        return self.feature_dim * self.stack

    @property
    def subsampling(self) -> int:
        """Input (10 ms) frames per encoder frame: 4 for the Transformer, ``stride`` for the LSTM."""
        return 4 if self.encoder == "transformer" else self.stride


@dataclass(frozen=True)
class RNNTConfig:
    """What ``build_from_config`` needs: variant, per-language vocabulary sizes, sizes.

    ``vocab_sizes`` counts blank (id 0) in every language; its order fixes language ids.
    ``dims``, when given, replaces the sizes of ``preset``.
    """

    variant: str = "multisoftmax_lid"
    # Blank plus at least one symbol per language.
    vocab_sizes: dict[str, int] = ranged(default_factory=dict, ge=2)
    preset: str = "demo"
    dims: ModelDims | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if self.variant not in VARIANTS:
            raise ConfigError(f"unknown RNN-T variant {self.variant!r}; choose one of "
                              f"{list(VARIANTS)}")


#: The searches of :data:`speechlab.asr.rnnt.search.SEARCHES`, by name (this module is below
#: the search, so it lists the names; a test keeps the two in step).
SEARCH_METHODS = ("greedy", "beam", "modified_beam")


@dataclass(frozen=True)
class SearchConfig:
    """RNN-T search: ``method`` is a key of ``search.SEARCHES``.

    ``max_symbols_per_frame`` bounds the labels emitted on one encoder frame (after that the
    search takes blank), which keeps decoding time linear in the number of frames.
    ``modified_beam`` emits at most one label a frame whatever it says (the search's doc).
    """

    method: str = "beam"
    beam: int = ranged(4, ge=1, le=1000, why="hypotheses kept per frame; the paper uses 4")
    max_symbols_per_frame: int = ranged(3, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.method not in SEARCH_METHODS:
            raise ConfigError(f"unknown search method {self.method!r}; choose one of "
                              f"{list(SEARCH_METHODS)}")


@dataclass(frozen=True)
class EarlyStopConfig:
    """Section 6.3: decoders whose LID score falls ``s_th`` below the best after ``tau`` encoder
    frames are switched off. ``inf`` in either keeps every decoder running."""

    tau: float = ranged(math.inf, ge=0, allow_inf=True)
    # A margin below the best score.
    s_th: float = ranged(math.inf, ge=0, allow_inf=True)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class DecodeConfig:
    """Decoding of one model: search, LID-free selection (``lid`` or ``oracle``), streaming.

    ``chunk_frames`` is the streaming chunk in 10 ms feature frames; 0 decodes whole utterances.
    ``lid_average`` is how the LID head's frames are pooled for the choice: ``posterior``
    averages P_t(l) over frames (the paper's description), ``log`` sums log P_t(l) (the
    score early stopping uses: a frame on which a language is all but impossible counts
    against it far more than in the average).
    """

    search: SearchConfig = field(default_factory=SearchConfig)
    early_stop: EarlyStopConfig = field(default_factory=EarlyStopConfig)
    select: str = "lid"
    lid_average: Literal["posterior", "log"] = "posterior"
    chunk_frames: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
