"""The multi-softmax reproduction's recipe, jobs and data.

- :class:`MultiSoftmaxConfig`: one scale of the reproduction (a YAML per scale in
  ``speechlab/recipes/multisoftmax/``).
- :class:`ModelSpec`, :class:`DecodeOptions`: what the plan's train and decode jobs are.
- :func:`prepare_data`: corpus -> fbank -> grapheme vocabularies -> CMVN -> utterances, and
  the test sets each decoding reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from speechlab.asr.data import Utterance, load_utterances
from speechlab.asr.rnnt.config import ModelDims, SearchConfig
from speechlab.asr.rnnt.presets import PRESETS, get_preset
from speechlab.asr.rnnt.task import TaskConfig
from speechlab.config import check_fields, ranged
from speechlab.audio.transforms import GlobalCMVN
from speechlab.data.corpus import UNSEEN, CorpusConfig
from speechlab.data.text_harvest import check_languages
from speechlab.errors import ConfigError, DataError
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.text.graphemes import GraphemeTokenizer
from speechlab.train import TrainConfig

MULTILINGUAL = ("vanilla", "onehot", "multisoftmax", "multisoftmax_lsp", "multisoftmax_lid")


@dataclass(frozen=True)
class MultiSoftmaxConfig:
    """One scale of the reproduction (``speechlab/recipes/multisoftmax/<scale>.yaml``)."""

    languages: tuple[str, ...] = ("en", "hi", "ta", "gu")
    # The embedded corpus built when no ``--corpus`` is given.
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    preset: str = "demo"
    # None: the preset's dropout. Short runs that are far from overfitting learn more per
    # update without it.
    dropout: float | None = ranged(None, ge=0, lt=1)
    train: TrainConfig = field(default_factory=TrainConfig)
    # Monolingual models see only their language's data; the paper trains each to convergence,
    # here each gets this many updates.
    mono_steps: int = ranged(300, ge=1)
    # Updates of individual multilingual models instead of train.max_steps (e.g. the demo gives
    # its few CPU minutes mostly to MS and MS LID, whose results it shows first).
    variant_steps: dict[str, int] = ranged(default_factory=dict, ge=1)
    finetune: TrainConfig = field(default_factory=TrainConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    # Test utterances decoded per language (0: all).
    test_utterances: int = ranged(0, ge=0)
    # Training utterances longer than this are left out (0: keep all); short utterances make
    # the small scales learn faster per CPU second.
    max_train_seconds: float = ranged(0.0, ge=0)
    # Table 7: (tau in encoder frames (30 ms for the paper's LSTM, 40 ms for the Transformer),
    # s_th) pairs; "inf" keeps every decoder on.
    early_stop_grid: tuple[tuple[float, float], ...] = ranged(
        ((math.inf, math.inf), (1000, 0.2), (100, 0.2), (30, 0.2), (30, 0.5), (10, 0.2)),
        ge=0, allow_inf=True)
    # The paper's Table 7 uses a Hindi subset; "" uses every test language.
    grid_language: str = "hi"
    # Test utterances per language of the Table 7 decodings, each of which runs every
    # language's decoder (0: the same as test_utterances).
    grid_utterances: int = ranged(0, ge=0)
    # What this scale can and cannot show, put at the top of the report (the recipe says it).
    summary: str = ""
    # Models whose training starts before the others' (which start costliest first): a long
    # run then has its headline comparison's models before the rest.
    train_first: tuple[str, ...] = ()
    # The models this scale trains, by their names in the plan (empty: every model of the
    # paper). A table row whose model is not trained is left out, and a table with no row is
    # not written: the demo trains the few models that learn in its minutes.
    systems: tuple[str, ...] = ()
    seed: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        check_languages(self.languages)
        if self.preset not in PRESETS:
            raise ConfigError(f"preset {self.preset!r} is not a model preset; choose one of "
                              f"{sorted(PRESETS)}")
        if self.grid_language and self.grid_language not in self.languages:
            raise ConfigError(f"grid_language {self.grid_language!r} is not one of the "
                              f"languages {list(self.languages)}")
        for name, steps in self.variant_steps.items():
            if name not in MULTILINGUAL:
                raise ConfigError(f"variant_steps: {name!r} is not a multilingual model; "
                                  f"choose from {list(MULTILINGUAL)} (mono_steps sets the "
                                  "monolingual ones)")
            if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
                raise ConfigError(f"variant_steps.{name}: {steps!r} is not a positive number "
                                  "of updates")

    def dims(self) -> ModelDims:
        """The model sizes: the preset, with the recipe's dropout if it sets one."""
        dims = get_preset(self.preset)
        return dims if self.dropout is None else replace(dims, dropout=self.dropout)


# ---------------------------------------------------------------------------------------------
# What the plan's jobs are


@dataclass(frozen=True)
class ModelSpec:
    """One model of the paper: an RNN-T ``variant`` (a key of ``VARIANTS``) trained and
    validated on ``languages`` (empty: every language of the recipe)."""

    variant: str
    languages: tuple[str, ...] = ()


@dataclass(frozen=True)
class DecodeOptions:
    """One decoding of the test set: its ``languages`` (empty: all); with ``early_stop``
    (tau, s_th) LID-free, every language's decoder on one encoder pass; ``grid``: on Table 7's
    subset (``grid_utterances`` per language); ``unseen``: the unseen-voice utterances instead
    of the test set."""

    languages: tuple[str, ...] = ()
    early_stop: tuple[float, float] | None = None
    grid: bool = False
    # The unseen-voice utterances (the test sentences by voices training never heard) instead.
    unseen: bool = False


Train = TrainJob[ModelSpec]
Decode = DecodeJob[ModelSpec, DecodeOptions]


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class Data:
    languages: tuple[str, ...]
    tokenizers: dict[str, GraphemeTokenizer]
    train: list[Utterance]
    dev: list[Utterance]
    test: list[Utterance]
    train_hours: dict[str, float]
    skipped: dict[str, dict[str, int]]
    # The test sentences by voices training never heard (empty if the corpus has none).
    unseen: list[Utterance] = field(default_factory=list)
    # The run's feature normalisation (what on-the-fly augmentation normalises with).
    cmvn: GlobalCMVN | None = None

    @property
    def vocab_sizes(self) -> dict[str, int]:
        return {lang: len(self.tokenizers[lang]) for lang in self.languages}


def prepare_data(cfg: MultiSoftmaxConfig, out_dir: Path, corpus_dir: Path | None, *,
                 write: bool = True) -> Data:
    """Corpus -> fbank -> per-language grapheme vocabularies -> CMVN -> utterances in memory.

    With ``write`` (the main process) the embedded corpus is built if missing, and the
    vocabularies and CMVN statistics are written to ``out_dir/lang`` (what a model of the run
    needs to decode a file); without (workers, DDP ranks > 0) the same data is rebuilt from
    those caches.
    """
    from lhotse import CutSet

    from speechlab.audio.features import FbankConfig, compute_features, fit_cmvn
    from speechlab.data.corpus import make_asr_corpus
    from speechlab.experiment.corpus import asr_manifests, corpus_dir as corpus_of

    corpus = corpus_of(out_dir, corpus_dir, lambda d: make_asr_corpus(cfg.corpus, d), write=write)
    cuts = {split: compute_features(CutSet.from_file(path), out_dir / "fbank", FbankConfig())
            for split, path in asr_manifests(corpus, optional=(UNSEEN,)).items()}
    languages = tuple(cfg.languages)
    texts: dict[str, list[str]] = {lang: [] for lang in languages}
    for cut in cuts["train"]:
        for sup in cut.supervisions:
            if sup.language in texts and (sup.text or "").strip():
                texts[sup.language].append(sup.text)
    missing = [lang for lang in languages if not texts[lang]]
    if missing:
        raise DataError(f"{corpus}: no training utterances for language(s) {missing}")
    tokenizers = {lang: GraphemeTokenizer.build(texts[lang], lang) for lang in languages}
    cmvn = fit_cmvn(cuts["train"])
    if write:
        for lang, tok in tokenizers.items():
            tok.save(out_dir / "lang" / f"{lang}.json")
        cmvn.save(out_dir / "lang" / "cmvn.safetensors")
    utts, skipped = {}, {}
    for split in cuts:
        utts[split], report = load_utterances(
            cuts[split], tokenizers, cmvn, min_frames=3, split=split,
            keep_audio=split == "train" and cfg.task.augment.active)
        skipped[split] = dict(report.counts)
    if cfg.max_train_seconds > 0:
        kept = [u for u in utts["train"] if u.num_frames <= 100 * cfg.max_train_seconds]
        skipped["train"][f"longer than {cfg.max_train_seconds:g} s"] = len(utts["train"]) - len(kept)
        utts["train"] = kept
    hours = {lang: sum(u.num_frames for u in utts["train"] if u.language == lang) / 360000
             for lang in languages}
    return Data(languages, tokenizers, utts["train"], utts["dev"], utts["test"], hours, skipped,
                utts.get(UNSEEN, []), cmvn)


def _first_per_language(utts: Sequence[Utterance], languages: Sequence[str], n: int) -> list[Utterance]:
    if not n:
        return list(utts)
    return [u for lang in languages for u in [v for v in utts if v.language == lang][:n]]


def test_set(cfg: MultiSoftmaxConfig, data: Data) -> list[Utterance]:
    """The test utterances decoded: the first ``cfg.test_utterances`` of each language (all if 0)."""
    return _first_per_language(data.test, data.languages, cfg.test_utterances)


def unseen_set(cfg: MultiSoftmaxConfig, data: Data) -> list[Utterance]:
    """The unseen-voice utterances decoded: as many per language as :func:`test_set` takes."""
    return _first_per_language(data.unseen, data.languages, cfg.test_utterances)


def decode_set(cfg: MultiSoftmaxConfig, data: Data, options: DecodeOptions) -> list[Utterance]:
    """What a decoding reads: the test set in its languages, cut to the first
    ``cfg.grid_utterances`` per language for the Table 7 grid; with ``options.unseen`` the
    unseen-voice utterances, as many per language."""
    base = unseen_set(cfg, data) if options.unseen else test_set(cfg, data)
    utts = [u for u in base if not options.languages or u.language in options.languages]
    if options.grid:
        utts = _first_per_language(utts, data.languages, cfg.grid_utterances)
    return utts
