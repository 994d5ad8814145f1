"""The SALAD reproduction's recipe, jobs and data.

- :class:`Role`, :data:`ROLES`: the paper's four models (Table 1), a size and a family each.
- :class:`SaladConfig`: one scale of the reproduction (a YAML per scale in
  ``speechlab/recipes/salad/``); :func:`model_config` and :func:`train_config` what it says
  about one model.
- :class:`ModelSpec`, :class:`DecodeOptions`: what the plan's train and decode jobs are;
  :class:`SaladDecoding`: what a decoding gives the tables.
- :func:`prepare_data`: corpus (built if needed) -> features, normalizers fitted on train.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.train import OptimConfig, ScheduleConfig, TrainConfig
from speechlab.tts.corpus import SPLITS, TtsCorpusConfig
from speechlab.tts.features import TtsData
from speechlab.tts.model import PRESETS, AcousticModelConfig, preset
from speechlab.tts.task import TtsTaskConfig

FAMILY_TITLES = {"rnn": "RNN", "salad": "SALAD"}


@dataclass(frozen=True)
class Role:
    """One of the paper's four models (Table 1): a ``size`` and a ``family``."""

    size: Literal["small", "big"]
    family: Literal["rnn", "salad"]

    @property
    def name(self) -> str:
        """``big_salad``: its key in the recipe's ``models``, its model directory, and the name
        of its Table 1 preset (:data:`speechlab.tts.model.PRESETS`)."""
        return f"{self.size}_{self.family}"

    @property
    def title(self) -> str:
        """``Big SALAD``, as the paper's tables say."""
        return f"{self.size.capitalize()} {FAMILY_TITLES[self.family]}"

    @property
    def partner(self) -> Role:
        """The RNN of the same size: what Table 2 compares a SALAD with."""
        return Role(self.size, "rnn")


#: The paper's order (Table 2).
ROLES = tuple(Role(size, family) for size in ("small", "big") for family in ("rnn", "salad"))
BY_NAME = {r.name: r for r in ROLES}


def _models_default() -> dict[str, str]:
    return {r.name: r.name for r in ROLES}


def _rnn_train() -> TrainConfig:
    # Sec. 3.3: Adam with PyTorch's defaults.
    return TrainConfig(early_stop_metric="mcd", progress=False, log_every=50)


def _salad_train() -> TrainConfig:
    # Sec. 3.3: Noam, Adam(0.9, 0.98, 1e-9), lr = H^-0.5 min(s^-0.5, s w^-1.5) with w = 4000.
    return TrainConfig(early_stop_metric="mcd", progress=False, log_every=50,
                       optim=OptimConfig(lr=1.0, betas=(0.9, 0.98), eps=1e-9),
                       schedule=ScheduleConfig(name="noam", warmup_steps=4000))


@dataclass(frozen=True)
class SaladConfig:
    """One scale of the reproduction (``speechlab/recipes/salad/<scale>.yaml``).

    ``models`` maps each of the paper's four roles (by :attr:`Role.name`) to a model preset
    (:data:`.model.PRESETS`; the paper's sizes are the role names; smaller scales may train
    smaller stand-ins, and Table 2 shows the parameters actually trained). ``epochs`` and
    ``patience`` are the paper's 300 and 20 (the trainer's steps and validations are derived
    from them); ``rnn_train`` and ``salad_train`` hold the rest of each family's training setup.
    """

    corpus: TtsCorpusConfig = field(default_factory=TtsCorpusConfig)
    questions: str | None = None  # a question file; None: the project's English set
    models: dict[str, str] = field(default_factory=_models_default)
    epochs: int = ranged(300, ge=1, le=10_000, why="the paper trains 300 epochs")
    patience: int = ranged(20, ge=0)
    rnn_train: TrainConfig = field(default_factory=_rnn_train)
    salad_train: TrainConfig = field(default_factory=_salad_train)
    task: TtsTaskConfig = field(default_factory=TtsTaskConfig)
    # None: the paper's dropout (0.5; SALAD 0.5 in FFN and after positions, 0.1 in attention).
    # A short run may lower the 0.5 ones (the demo does: a few epochs cannot afford them).
    dropout: float | None = ranged(None, ge=0, lt=1)
    # Beyond the paper (its future work): SALAD's output layer as a centred 1-D convolution of
    # this odd kernel width over frames instead of the linear layer (0: the paper's).
    output_conv: int = ranged(0, ge=0)
    feature_workers: int = ranged(2, ge=1)
    # Listening examples: this many test sentences per model.
    examples: int = ranged(3, ge=0)
    # Fig. 3: lengths (seconds) of the synthetic long inputs, repeats per point, and at most this
    # many test files timed per model.
    latency_lengths: tuple[float, ...] = ranged((1.0, 5.0, 10.0, 20.0, 35.0), gt=0)
    latency_files: int = ranged(20, ge=0)
    latency_threads: int = ranged(2, ge=1)
    # "paper": time the Table 1 sizes (untrained when the run trained stand-ins: time does not
    # depend on the weights); "trained": time the models the run trained (quick, for tests).
    latency_models: Literal["paper", "trained"] = "paper"
    seed: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        for key, name in self.models.items():
            role = BY_NAME.get(key)
            if role is None:
                raise ConfigError(f"models: {key!r} is not one of the paper's models "
                                  f"{tuple(BY_NAME)}")
            if name not in PRESETS:
                raise ConfigError(f"models.{key}: unknown preset {name!r}; choose one of "
                                  f"{sorted(PRESETS)}")
            if PRESETS[name].kind != role.family:
                raise ConfigError(f"models.{key}: preset {name!r} is a {PRESETS[name].kind} "
                                  "model")

    def roles(self) -> list[Role]:
        """The roles this scale trains, in the paper's order."""
        return [r for r in ROLES if r.name in self.models]

    def preset_of(self, role: Role) -> str:
        return self.models[role.name]


def model_config(cfg: SaladConfig, role: Role, input_dim: int) -> AcousticModelConfig:
    """The sizes of ``role``'s model: its preset, with the recipe's dropout and (SALAD only)
    output convolution if it sets them."""
    mcfg = preset(cfg.preset_of(role), input_dim=input_dim)
    if cfg.dropout is not None:
        mcfg = dataclasses.replace(mcfg, dropout=cfg.dropout)
    if cfg.output_conv and mcfg.kind == "salad":
        mcfg = dataclasses.replace(mcfg, output_conv=cfg.output_conv)
    return mcfg


def train_config(cfg: SaladConfig, role: Role) -> TrainConfig:
    """The training setup of ``role``'s family (Sec. 3.3), with the recipe's seed."""
    base = cfg.rnn_train if role.family == "rnn" else cfg.salad_train
    return dataclasses.replace(base, seed=cfg.seed)


# ---------------------------------------------------------------------------------------------
# What the plan's jobs are, and what a decoding gives


@dataclass(frozen=True)
class ModelSpec:
    """One model of the paper: its ``role`` and the ``preset`` trained for it."""

    role: Role
    preset: str


@dataclass(frozen=True)
class DecodeOptions:
    """One decoding of the test set: Table 2's measures with whole-utterance attention and,
    with ``window``, also with SALAD attending within windows of that many frames (its
    training condition; the examples are then synthesized from the windowed predictions)."""

    window: int | None = None


Train = TrainJob[ModelSpec]
Decode = DecodeJob[ModelSpec, DecodeOptions]


@dataclass
class SaladDecoding:
    """One model on the test set: parameters, scores per attention mode ("full" whole
    utterances; "window" SALAD limited to the training window), predicted F0 (Hz) of the
    voiced test frames, and the example wavs written (paths relative to the run dir)."""

    preset: str
    params: int
    scores: dict[str, dict[str, float]]
    f0: np.ndarray
    wavs: list[str]
    epochs: float
    output_conv: int = 0
    # Per attention mode, each test utterance's summed per-frame MCD (for paired intervals).
    mcd_sums: dict[str, np.ndarray] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Data


def prepare_data(cfg: SaladConfig, out: Path, corpus_dir: Path | None, *,
                 write: bool = True) -> TtsData:
    """Corpus (built if needed) -> features of every split, normalizers fitted on train."""
    from speechlab.experiment.corpus import corpus_dir as corpus_of
    from speechlab.tts.corpus import load_tts_split, make_tts_corpus
    from speechlab.tts.features import prepare
    from speechlab.tts.questions import load_questions

    load_questions(cfg.questions)  # a question file that does not parse fails before any work
    corpus = corpus_of(out, corpus_dir, lambda d: make_tts_corpus(cfg.corpus, d), write=write,
                       what="TTS corpus")
    splits = {s: load_tts_split(corpus, s) for s in SPLITS}
    data = prepare(splits, out, cfg.questions, tolerance=cfg.corpus.tolerance,
                   workers=cfg.feature_workers, write=write)
    # What the report says the targets are.
    data.corpus = (f"`{corpus_dir}`" if corpus_dir is not None else "festival's SLT HTS voice "
                   "(the embedded corpus), so the targets are themselves synthetic speech")
    return data
