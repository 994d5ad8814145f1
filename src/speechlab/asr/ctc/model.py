"""The acoustic model of the CTC-topologies reproduction: fbank -> per-frame token log-probs.

``CtcModel(subsampling, encoder, output)`` receives ready-built parts; :func:`build` makes them
from a :class:`CtcModelConfig`. The paper fine-tunes wav2vec 2.0; on two CPU cores a small
model trained from scratch must learn fast per CPU second, and two stride-2 convolutions
(40 ms frames) in front of a few small pre-norm Transformer blocks do: on 38 minutes of the
embedded Hindi audio such a 3.0M-parameter encoder reached 22% CER (characters) after three
minutes of training on both cores, where a 4.2M BiLSTM over stacked frames was at 79% after
ten. The output layer has one unit per token of the topology (``topology.num_tokens``).

Shapes: B batch, T input frames (10 ms), T' = T/4 (or T/2) output frames, F features, D model
dim, V tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torch import Tensor, nn

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError
from speechlab.train.card import config_builder, load_trained
from speechlab.nn.transformer import Conv2dSubsampling, TransformerEncoder


@dataclass(frozen=True)
class CtcModelConfig:
    """Sizes of the acoustic model; ``num_tokens`` is the topology's output count."""

    num_tokens: int = ranged(2, ge=2, le=1_000_000,
                             why="blank and at least one token; phone sets hold tens to hundreds")
    feature_dim: int = ranged(80, ge=1, le=1024, why="speech features use 40-128")
    # 4: 40 ms output frames; 2: 20 ms, as wav2vec 2.0's (the paper's encoder). A T2 topology
    # needs two frames per phone, which 40 ms frames cannot give fast speech.
    subsampling: int = 4
    channels: int = ranged(64, ge=1, le=4096)
    dim: int = ranged(192, ge=1, le=8192)
    layers: int = ranged(6, ge=1, le=100)
    heads: int = ranged(4, ge=1, le=128)
    ff_dim: int = ranged(768, ge=1, le=65536)
    dropout: float = ranged(0.1, ge=0.0, lt=1.0)
    # What the outputs mean: the token topology they follow and the language of the phones
    # (recorded so that a trained model can be used on its own; "" in older checkpoints).
    topology: str = ""
    language: str = ""

    def __post_init__(self) -> None:
        check_fields(self)
        if self.subsampling not in (2, 4):
            raise ConfigError(f"ctc model: subsampling must be 2 or 4, got {self.subsampling}")
        if self.dim % self.heads:
            raise ConfigError(f"ctc model: dim {self.dim} is not divisible by {self.heads} heads")


# Sizes by name; ``num_tokens`` is filled in from the topology and the phone set.
PRESETS: dict[str, dict[str, int]] = {
    "small": dict(channels=64, dim=192, layers=6, heads=4, ff_dim=768),   # about 3M parameters
    "demo": dict(channels=32, dim=144, layers=4, heads=4, ff_dim=576),
    "tiny": dict(channels=4, dim=16, layers=1, heads=2, ff_dim=32),       # unit tests
}


def preset(name: str, num_tokens: int, feature_dim: int = 80, dropout: float = 0.1,
           subsampling: int = 4, topology: str = "", language: str = "") -> CtcModelConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown CTC model preset {name!r}; choose one of {sorted(PRESETS)}")
    return CtcModelConfig(num_tokens=num_tokens, feature_dim=feature_dim, dropout=dropout,
                          subsampling=subsampling, topology=topology, language=language,
                          **PRESETS[name])


class CtcModel(nn.Module):
    """Subsampling -> Transformer encoder -> linear -> log-softmax over tokens."""

    def __init__(self, subsampling: Conv2dSubsampling, encoder: TransformerEncoder,
                 output: nn.Linear) -> None:
        super().__init__()
        self.subsampling = subsampling
        self.encoder = encoder
        self.output = output
        self.config: CtcModelConfig | None = None  # set by build(), so a checkpoint rebuilds it

    def forward(self, x: Tensor, x_lens: Tensor) -> tuple[Tensor, Tensor]:
        """x (B,T,F), x_lens (B,) -> log_probs (B,T',V), lengths (B,)."""
        h, lens = self.subsampling(x, x_lens)
        h = self.encoder(h, lens)
        return self.output(h).log_softmax(-1), lens


def build(cfg: CtcModelConfig) -> CtcModel:
    model = CtcModel(Conv2dSubsampling(cfg.feature_dim, cfg.channels, cfg.dim,
                                       second_stride=cfg.subsampling // 2),
                     TransformerEncoder(cfg.dim, cfg.layers, cfg.heads, cfg.ff_dim, cfg.dropout),
                     nn.Linear(cfg.dim, cfg.num_tokens))
    model.config = cfg
    return model


# ---------------------------------------------------------------------------------------------
# The family: rebuilding a trained model from its checkpoint's card

FAMILY = "ctc"
#: family name -> builder from the config dict, for :func:`speechlab.train.card.load_trained`.
BUILDERS = {FAMILY: config_builder(CtcModelConfig, build)}


def load(path: str | Path) -> CtcModel:
    """The CTC acoustic model trained in ``path`` (a model directory or a checkpoint)."""
    return load_trained(path, BUILDERS)  # type: ignore[return-value]
