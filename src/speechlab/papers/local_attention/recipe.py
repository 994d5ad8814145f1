"""The local-attention reproduction's recipe, jobs and data.

- :class:`LocalAttentionConfig`: one scale of the reproduction (a YAML per scale in
  ``speechlab/recipes/local-attention/``).
- :class:`Pretraining`, :class:`FineTuning`: what the plan's train jobs build;
  :class:`Diagnosis`, :class:`Transcription`: what its decode jobs do, and what they return
  (:class:`DiagnosisResult`, :class:`VariantDecoding`).
- :func:`prepare_data`: corpus -> English waveforms, a grapheme vocabulary, the LM's ARPA file.

A variant's blocks are written as a block list (``2-12``) or ``diagnosis:vertical|6-11`` /
``diagnosis:diagonal|2-5``: the blocks the diagnosis of the model pre-trained here finds with
vertical lines (or diagonal), the list after ``|`` when it finds none (:func:`fine_tuning`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from speechlab.config import ranged
from speechlab.data.corpus import SAMPLE_RATE, CorpusConfig
from speechlab.errors import ConfigError, DataError
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.ssl.wav2vec2.config import (MAX_RADIUS, MAX_RADIUS_WHY, Wav2Vec2Config,
                                           parse_blocks, preset)
from speechlab.ssl.wav2vec2.decode import LmDecoding, LmSearchConfig
from speechlab.ssl.wav2vec2.diagnose import (
    BlockDiagnosis,
    diagnosis_table,
    diagonal_blocks,
    suggested_blocks,
)
from speechlab.ssl.wav2vec2.finetune import FinetuneTaskConfig
from speechlab.ssl.wav2vec2.pretrain import PretrainTaskConfig
from speechlab.ssl.wav2vec2.training import Utterance
from speechlab.text.ngram import MAX_ORDER, MAX_ORDER_WHY
from speechlab.train import TrainConfig

SPLITS = ("train", "dev", "test")
UNSEEN = "unseen"  # speechlab.data.corpus.UNSEEN
DIAGNOSED = "diagnosis:"
#: ``diagnosis:KIND``: the blocks of the diagnosis a variant takes.
FOUND: dict[str, Callable[[Sequence[BlockDiagnosis]], tuple[int, ...]]] = {
    "vertical": suggested_blocks, "diagonal": diagonal_blocks}


def _corpus_default() -> CorpusConfig:
    return CorpusConfig(minutes={"en": 10.0})


def _variants_default() -> dict[str, str]:
    return {"Orig": "", "L_B1-12": "1-12", "L_B2-12": "2-12",
            "L_B6-11": "diagnosis:vertical|6-11", "L_B2-5": "diagnosis:diagonal|2-5"}


@dataclass(frozen=True)
class LocalAttentionConfig(LmSearchConfig):
    """One scale of the reproduction (``speechlab/recipes/local-attention/<scale>.yaml``); the
    LM search of Table 1 (beams, LM weights tried on dev, word bonus, pruning) is
    :class:`LmSearchConfig`'s, at the top level of the recipe."""

    corpus: CorpusConfig = field(default_factory=_corpus_default)
    # A preset of speechlab.ssl.wav2vec2.config.PRESETS (the paper's: base).
    model: str = "base"
    # The preset's front end: conv (the paper's learned feature encoder, frozen in fine-tuning)
    # or fbank (parameter-free log-mel frames, the demo and small recipes; docs/local-attention.md).
    front_end: str = "conv"
    # LMSAB radius in frames (the paper: 30, i.e. +-0.6 s at 20 ms).
    radius: int = ranged(30, ge=1, le=MAX_RADIUS, why=MAX_RADIUS_WHY)
    # The std of the linear layers' init (Wav2Vec2Config.init_std); None: the preset's (0.02).
    init_std: float | None = ranged(None, gt=0)
    variants: dict[str, str] = field(default_factory=_variants_default)
    pretrain: TrainConfig = field(default_factory=TrainConfig)
    pretrain_task: PretrainTaskConfig = field(default_factory=PretrainTaskConfig)
    finetune: TrainConfig = field(default_factory=TrainConfig)
    finetune_task: FinetuneTaskConfig = field(default_factory=FinetuneTaskConfig)
    # Utterances of the dev set whose maps the diagnosis reads (Fig. 2: six).
    diagnosis_utterances: int = ranged(6, ge=1)
    # The LM: order and vocabulary over the harvested English text (dev and test excluded).
    # (Its search, LmSearchConfig's fields: the LM weights are tried at the first beam on
    # dev_utterances; tighter pruning keeps beam 1500 affordable at the demo scale.)
    lm_order: int = ranged(4, ge=1, le=MAX_ORDER, why=MAX_ORDER_WHY)
    lm_vocab: int = ranged(20000, ge=1)
    dev_utterances: int = ranged(30, ge=1)
    seed: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        super().__post_init__()  # every field's range, and the search's
        if not self.variants:
            raise ConfigError("variants: give at least one model (e.g. Orig: '')")
        if self.front_end not in ("conv", "fbank"):
            raise ConfigError(f"front_end: {self.front_end!r} is not conv or fbank")
        model = model_config(self)
        for name, spec in self.variants.items():
            fine_tuning(spec, model.layers, name=name)
        # A masked span must fit in a crop (masking.span_mask leaves shorter utterances
        # unmasked), or pre-training finds nothing to predict once features are computed.
        task = self.pretrain_task
        crop_frames = int(task.crop_seconds * SAMPLE_RATE) // model.hop
        if task.mask_length >= crop_frames:
            raise ConfigError(
                f"pretrain_task.mask_length {task.mask_length} frames is not shorter than a "
                f"crop: pretrain_task.crop_seconds {task.crop_seconds:g} s is {crop_frames} "
                f"frames of {1000 * model.hop / SAMPLE_RATE:g} ms, so no frame could be masked; "
                "the paper's span is 10")

    def lm_search(self) -> LmSearchConfig:
        """The search alone (a decode job's options: its key names these fields only)."""
        return LmSearchConfig(**{f.name: getattr(self, f.name) for f in fields(LmSearchConfig)})


def model_config(cfg: LocalAttentionConfig) -> Wav2Vec2Config:
    """The pre-training model's sizes: the preset with the recipe's front end and radius."""
    changes = {} if cfg.init_std is None else {"init_std": cfg.init_std}
    return preset(cfg.model, radius=cfg.radius, front_end=cfg.front_end, **changes)


# ---------------------------------------------------------------------------------------------
# What the plan's jobs are


@dataclass(frozen=True)
class Pretraining:
    """The one wav2vec 2.0 model pre-trained on the corpus's English audio; every variant is
    fine-tuned from it. The paper pre-trains one per variant; here the variants differ in their
    fine-tuning attention only."""

    model: Wav2Vec2Config


@dataclass(frozen=True)
class FineTuning:
    """A CTC fine-tune of the pre-trained model with LMSABs in ``blocks`` (1-based; none: Orig,
    the baseline). With ``diagnosed`` (``vertical`` or ``diagonal``): in the blocks the
    diagnosis of the pre-trained model finds of that kind, ``blocks`` when it finds none."""

    blocks: tuple[int, ...] = ()
    diagnosed: str | None = None

    @property
    def original(self) -> bool:
        """Full attention in every block: the model the others are compared with."""
        return not self.blocks and self.diagnosed is None

    def local_blocks(self, diagnosis: Sequence[BlockDiagnosis] = ()) -> tuple[int, ...]:
        """The blocks made local, given the ``diagnosis`` of the pre-trained model."""
        return (FOUND[self.diagnosed](diagnosis) if self.diagnosed else ()) or self.blocks


@dataclass(frozen=True)
class Diagnosis:
    """Sec. 3: every block's attention maps on ``utterances`` dev utterances spread over the
    dev set's durations, their patterns, and Fig. 2 written to ``figure`` in the run dir."""

    utterances: int
    figure: str = "diagnosis_fig2.png"


@dataclass(frozen=True)
class Transcription:
    """Table 1: the dev and test sets with Viterbi and the LM search, its weight chosen on the
    first ``tune_utterances`` of dev."""

    search: LmSearchConfig
    tune_utterances: int


Spec = Pretraining | FineTuning
Train = TrainJob[Spec]
Decode = DecodeJob[Spec, Diagnosis | Transcription]


def fine_tuning(spec: str, layers: int, *, name: str = "") -> FineTuning:
    """A recipe's variant (module doc for the ``diagnosis:`` form) as its job's spec, its block
    lists checked against the model's ``layers``."""
    where = f"variant {name!r}: " if name else ""
    kind, blocks = None, spec
    if spec.startswith(DIAGNOSED):
        kind, _, blocks = spec[len(DIAGNOSED):].partition("|")
        if kind not in FOUND:
            raise ConfigError(f"{where}{spec!r}: after 'diagnosis:' write vertical or diagonal")
    try:
        return FineTuning(parse_blocks(blocks, layers), kind)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from None


# ---------------------------------------------------------------------------------------------
# What the decode jobs return


@dataclass
class VariantDecoding:
    """One fine-tuned model's Table 1 decodings, the LMSAB ``blocks`` it was trained with and
    the CPU seconds decoding took."""

    blocks: tuple[int, ...]
    decoding: LmDecoding
    seconds: float


@dataclass
class DiagnosisResult:
    """The diagnosis of the pre-trained model: each block's pattern, the diagnosis table, the
    file of Fig. 2 and the blocks it suggests making local (vertical and vertical+diagonal)."""

    labels: dict[int, str]
    table: object
    figure: str
    suggested: tuple[int, ...]

    @classmethod
    def of(cls, diagnosis: Sequence[BlockDiagnosis], figure: str) -> DiagnosisResult:
        return cls({d.block: d.label for d in diagnosis}, diagnosis_table(diagnosis), figure,
                   suggested_blocks(diagnosis))


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class LocalAttentionData:
    tokenizer: object
    train: list[Utterance]
    dev: list[Utterance]
    test: list[Utterance]
    lm_path: Path
    skipped: dict[str, int]
    # The test sentences by voices training never heard (empty if the corpus has none).
    unseen: list[Utterance] = field(default_factory=list)

    def spread_dev(self, n: int) -> list[Utterance]:
        """``n`` dev utterances spread over the dev set's durations (the diagnosis reads them)."""
        dev = sorted(self.dev, key=lambda u: (len(u.wav), u.id))
        n = min(n, len(dev))
        return [dev[round(i * (len(dev) - 1) / max(n - 1, 1))] for i in range(n)]

    def decode_sets(self) -> dict[str, dict[str, torch.Tensor]]:
        """Table 1's sets: ``{"dev" | "test" [| "unseen"]: {utt id: waveform}}``."""
        sets = [("dev", self.dev), ("test", self.test)]
        if self.unseen:
            sets.append((UNSEEN, self.unseen))
        return {s: {u.id: u.wav for u in utts} for s, utts in sets}

    def tune_references(self, n: int) -> dict[str, str]:
        """``{utt id: text}`` of the first ``n`` dev utterances (the LM weight is chosen on them)."""
        return {u.id: u.text for u in self.dev[:n]}


def _utterances(cuts: Sequence, texts: Sequence[str], tokenizer, receptive_field: int
                ) -> tuple[list[Utterance], int]:
    """The cuts' waveforms with their texts and label ids, and how many were skipped (no text,
    or shorter than the front end's receptive field)."""
    utts, skipped = [], 0
    for cut, text in zip(cuts, texts):
        audio = torch.from_numpy(cut.load_audio()[0].copy()).float()
        if not text.strip() or len(audio) < receptive_field:
            skipped += 1
            continue
        try:
            tokens: tuple[int, ...] | None = tuple(tokenizer.encode(text, utt=cut.id))
        except DataError:
            tokens = None  # scored on its text, never trained on
        utts.append(Utterance(cut.id, audio, text, tokens))
    return utts, skipped


def prepare_data(cfg: LocalAttentionConfig, out: Path, corpus_dir: Path | None, *,
                 write: bool = True) -> LocalAttentionData:
    """Corpus -> English waveforms in memory, a grapheme vocabulary, the LM's ARPA file."""
    from lhotse import CutSet

    from speechlab.data.corpus import make_asr_corpus
    from speechlab.experiment.corpus import asr_manifests, held_out_lm_text
    from speechlab.experiment.corpus import corpus_dir as corpus_of
    from speechlab.text.graphemes import GraphemeTokenizer
    from speechlab.text.ngram import write_lm
    from speechlab.text.normalize import normalize_text

    corpus = corpus_of(out, corpus_dir, lambda d: make_asr_corpus(cfg.corpus, d), write=write)
    cuts = {split: [c for c in CutSet.from_file(path)
                    if c.supervisions and c.supervisions[0].language == "en"]
            for split, path in asr_manifests(corpus, SPLITS, optional=(UNSEEN,)).items()}
    texts = {s: [normalize_text(c.supervisions[0].text or "", "en") for c in cuts[s]]
             for s in cuts}
    tokenizer = GraphemeTokenizer.build([t for t in texts["train"] if t.strip()], "en")
    field_ = model_config(cfg).receptive_field
    utts: dict[str, list[Utterance]] = {}
    skipped: dict[str, int] = {}
    for split in cuts:
        utts[split], n = _utterances(cuts[split], texts[split], tokenizer, field_)
        if n:
            skipped[split] = n
        if not utts[split] and split != UNSEEN:
            raise DataError(f"{corpus}: no usable English utterance in {split}")
    lm_path = out / "lang" / "en.arpa"
    if write:  # what a fine-tuned model of the run needs to transcribe on its own
        tokenizer.save(out / "lang" / "en.json")
    if write and not lm_path.exists():
        lm_text = held_out_lm_text("en", [u.text for s in ("dev", "test") for u in utts[s]],
                                   cfg.corpus.cache_dir)
        lm_text += [u.text for u in utts["train"]]
        write_lm(lm_text, lm_path, order=cfg.lm_order, vocab_size=cfg.lm_vocab)
    return LocalAttentionData(tokenizer, utts["train"], utts["dev"], utts["test"], lm_path,
                              skipped, utts.get(UNSEEN, []))
