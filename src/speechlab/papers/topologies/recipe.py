"""The CTC-topologies reproduction's recipe, jobs and data.

- :class:`TopologiesConfig`: one scale of the reproduction (a YAML per scale in
  ``speechlab/recipes/topologies/``).
- :class:`ModelSpec`, :class:`DecodeOptions`: what the plan's train and decode jobs are.
- :func:`prepare_data`: corpus -> fbank -> lexicon and phone set per language -> utterances,
  and each language's grammar G (an ARPA n-gram LM over held-out text).
- :func:`model_config`, :func:`decoding_graph`: the recipe's model and decoding graph as the
  library takes them (its decoding settings already are a :class:`GraphDecodingConfig`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from speechlab.asr.ctc.model import PRESETS, CtcModelConfig
from speechlab.asr.ctc.phones import PhoneTokenizer, lexicon_for
from speechlab.asr.ctc.task import CtcTaskConfig
from speechlab.papers.topologies.decoding import GraphDecodingConfig, TopologyDecoding
from speechlab.asr.data import Utterance, load_utterances
from speechlab.audio.transforms import GlobalCMVN
from speechlab.config import ranged
from speechlab.data.corpus import UNSEEN, CorpusConfig
from speechlab.data.text_harvest import check_languages
from speechlab.errors import ConfigError, DataError
from speechlab.text.ngram import MAX_ORDER, MAX_ORDER_WHY
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.text.normalize import normalize_text
from speechlab.train import TrainConfig

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")


def _corpus_default() -> CorpusConfig:
    return CorpusConfig(minutes={"en": 10.0, "hi": 10.0})


@dataclass(frozen=True)
class TopologiesConfig(GraphDecodingConfig):
    """One scale of the reproduction (``speechlab/recipes/topologies/<scale>.yaml``); the
    decoding settings (Viterbi search of Section 3.2, lattice beam, acoustic weights, prefix
    beam) are :class:`GraphDecodingConfig`'s, at the top level of the recipe."""

    languages: tuple[str, ...] = ("en", "hi")
    topologies: tuple[str, ...] = ("S1-T1", "S2-T1", "S2-T1★", "S2-T2★", "S2-T2", "S3-T2",
                                   "S3-T2★", "S3-T2★★")
    corpus: CorpusConfig = field(default_factory=_corpus_default)
    model: str = "demo"
    # Output frame rate of the acoustic model (4: 40 ms, 2: 20 ms); the paper's is 20 ms.
    subsampling: int = ranged(2, ge=2, le=4)
    train: TrainConfig = field(default_factory=TrainConfig)
    task: CtcTaskConfig = field(default_factory=CtcTaskConfig)
    # The grammar G: an n-gram LM of this order over the language's harvested text (dev and
    # test sentences excluded), restricted to its ``lm_vocab`` most frequent words.
    lm_order: int = ranged(3, ge=1, le=MAX_ORDER, why=MAX_ORDER_WHY)
    lm_vocab: int = ranged(20000, ge=1)
    # The acoustic weights are tried on at most this many dev utterances.
    dev_utterances: int = ranged(100, ge=1)
    seed: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        from speechlab.asr.ctc.topology import get

        super().__post_init__()
        check_languages(self.languages)
        if not self.topologies:
            raise ConfigError("topologies: give at least one, e.g. [S1-T1]")
        for name in self.topologies:
            get(name)
        if self.model not in PRESETS:
            raise ConfigError(f"model {self.model!r} is not a CTC model preset; choose one of "
                              f"{sorted(PRESETS)}")


# ---------------------------------------------------------------------------------------------
# What the plan's jobs are

#: The topology that is plain CTC, the one also decoded by prefix search (eq. 9).
CTC = "S1-T1"


@dataclass(frozen=True)
class ModelSpec:
    """One model of the paper: the acoustic model of ``topology`` trained on the corpus of
    ``language`` (one column of the paper's tables)."""

    language: str
    topology: str


@dataclass(frozen=True)
class DecodeOptions:
    """A test-set decoding: Viterbi over T∘L∘G with its lattices measured; with
    ``prefix_search`` (plain CTC) also full-sum prefix beam search, without and with the LM."""

    prefix_search: bool = False


Train = TrainJob[ModelSpec]
Decode = DecodeJob[ModelSpec, DecodeOptions]


def model_name(language: str, topology: str) -> str:
    """``en_S2-T1s``: a directory name (``★`` written ``s``)."""
    return f"{language}_{topology.replace('★', 's')}"


def model_config(cfg: TopologiesConfig, topology: str, num_phones: int, language: str = ""
                 ) -> CtcModelConfig:
    """The acoustic model of ``topology`` over ``num_phones`` phones at this scale."""
    from speechlab.asr.ctc.model import preset
    from speechlab.asr.ctc.topology import num_tokens

    return preset(cfg.model, num_tokens(topology, num_phones), subsampling=cfg.subsampling,
                  topology=topology, language=language)


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class LanguageData:
    """One corpus column: its phone tokenizer, utterances per split, and the LM text (the
    harvested sentences of the language minus every dev and test sentence)."""

    language: str
    tokenizer: PhoneTokenizer
    train: list[Utterance]
    dev: list[Utterance]
    test: list[Utterance]
    lm_text: list[str]
    skipped: dict[str, dict[str, int]]
    # The test sentences by voices training never heard (empty if the corpus has none).
    unseen: list[Utterance] = field(default_factory=list)
    # The run's feature normalisation (what on-the-fly augmentation normalises with).
    cmvn: GlobalCMVN | None = None


def arpa_path(out: Path, language: str) -> Path:
    """The grammar G of ``language`` in the run directory ``out``."""
    return out / "lang" / f"{language}.arpa"


def decoding_graph(out: Path, data: LanguageData, topology: str):
    """T∘L∘G of ``topology`` for one corpus, built once per run in ``out/graphs``."""
    from speechlab.asr.ctc.graphs import cached_decoding_graph

    return cached_decoding_graph(out / "graphs", topology, data.tokenizer.lexicon,
                                 arpa_path(out, data.language), phones=data.tokenizer.phones)


def decode_model(job: Decode, cfg: TopologiesConfig, data: dict[str, LanguageData],
                 out: Path) -> TopologyDecoding:
    """A decode job of the run ``out``: its model's test set over its T∘L∘G (the acoustic
    weight tuned on dev), plain CTC's also by prefix search with the run's G; the tuned
    settings are written beside the model."""
    from speechlab.asr.ctc.model import load
    from speechlab.papers.topologies.decoding import decode_topology

    spec, model_dir = job.model.spec, out / "models" / job.model.name
    lang = data[spec.language]
    prefix = job.options.prefix_search
    return decode_topology(load(model_dir), decoding_graph(out, lang, spec.topology),
                           lang.test, lang.dev[: cfg.dev_utterances], cfg,
                           prefix_lexicon=lang.tokenizer if prefix else None,
                           arpa=arpa_path(out, spec.language) if prefix else None,
                           model_dir=model_dir, unseen=lang.unseen)


def _words(cuts, language: str) -> set[str]:
    return {w for cut in cuts for sup in cut.supervisions if sup.language == language
            for w in normalize_text(sup.text or "", language).split()}


def prepare_data(cfg: TopologiesConfig, out: Path, corpus_dir: Path | None, *,
                 write: bool = True) -> dict[str, LanguageData]:
    """Corpus -> fbank -> lexicon and phone set per language -> utterances in memory.

    With ``write`` (the main process) the embedded corpus is built if missing, and each
    language's tokenizer and ARPA LM and the CMVN statistics are written to ``out/lang``;
    without (workers, DDP ranks > 0) the same data is rebuilt in memory."""
    from lhotse import CutSet

    from speechlab.audio.features import FbankConfig, compute_features, fit_cmvn
    from speechlab.data.corpus import make_asr_corpus
    from speechlab.experiment.corpus import asr_manifests, held_out_lm_text
    from speechlab.experiment.corpus import corpus_dir as corpus_of
    from speechlab.text.ngram import lm_vocabulary, write_lm

    corpus = corpus_of(out, corpus_dir, lambda d: make_asr_corpus(cfg.corpus, d), write=write)
    cuts = {split: compute_features(CutSet.from_file(path), out / "fbank", FbankConfig())
            for split, path in asr_manifests(corpus, optional=(UNSEEN,)).items()}
    cmvn = fit_cmvn(cuts["train"])
    data = {}
    for lang in cfg.languages:
        words = set().union(*(_words(cuts[s], lang) for s in SPLITS))
        if not words:
            raise DataError(f"{corpus}: no {lang} utterances")
        # The LM never sees a dev or test sentence. The lexicon covers the LM's vocabulary (the
        # most frequent words of its text) and the transcripts (to make training targets), so
        # the decoder's vocabulary, L∘G's words, is the LM's alone, not narrowed to the words
        # of the corpus: a test word outside it is an honest error, as on WSJ's 20k.
        lm_text = held_out_lm_text(lang, [sup.text or "" for s in ("dev", "test")
                                          for cut in cuts[s] for sup in cut.supervisions
                                          if sup.language == lang], cfg.corpus.cache_dir)
        vocab = lm_vocabulary(lm_text, cfg.lm_vocab)
        lexicon = lexicon_for(lang, sorted(words | vocab))
        tokenizer = PhoneTokenizer(lexicon, lang)
        if write:
            tokenizer.save(out / "lang" / f"{lang}.json")
        utts, skipped = {}, {}
        for split in cuts:
            sel = cuts[split].filter(lambda c, lang=lang: c.supervisions and
                                     c.supervisions[0].language == lang)
            keep = split == "train" and cfg.task.augment.active
            utts[split], report = load_utterances(sel, {lang: tokenizer}, cmvn, min_frames=7,
                                                  split=f"{lang} {split}", keep_audio=keep)
            skipped[split] = dict(report.counts)
        if write:
            write_lm(lm_text, arpa_path(out, lang), order=cfg.lm_order, vocab_size=cfg.lm_vocab)
        data[lang] = LanguageData(lang, tokenizer, utts["train"], utts["dev"], utts["test"],
                                  lm_text, skipped, utts.get(UNSEEN, []), cmvn)
    if write:
        cmvn.save(out / "lang" / "cmvn.safetensors")
    return data
