"""The embedded multilingual ASR corpus: harvested real sentences spoken by espeak-ng voices.

Stands in for the Indian English / Hindi / Tamil / Gujarati data of the multi-softmax RNN-T
paper, which cannot be had offline. :func:`make_asr_corpus` plans utterances per language and
split, synthesizes them in fixed batches (see :mod:`speechlab.data.synth` for why that makes the
audio byte-reproducible), and writes the layout every speechlab recipe reads::

    out_dir/wav/{split}/{lang}/{utt}.wav          16 kHz mono 16-bit
    out_dir/{split}_recordings.jsonl.gz           lhotse RecordingSet
    out_dir/{split}_supervisions.jsonl.gz         lhotse SupervisionSet (language, speaker, text)
    out_dir/{split}_cuts.jsonl.gz                 lhotse CutSet
    out_dir/corpus.json                           counts/hours per split and language, voices,
                                                  text sources; written last = corpus complete

Splits: sentences are partitioned between train/dev/test before any audio is made, so no
sentence (compared case- and punctuation-blind) is in two splits; the test split is spoken only by
held-out voice variants (``test_variants``), so test speakers are unseen in training.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import math
import random
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import soundfile as sf

from speechlab.audio.augment import CHANNEL_KINDS, AugmentPlan, Effect, draw_effects
from speechlab.config import check_fields, ranged, to_dict
from speechlab.data import festival
from speechlab.data.synth import (
    NOISE_COLORS,
    SAMPLE_RATE,
    VARIANTS,
    BatchSynthesizer,
    SynthRequest,
)
from speechlab.data.text_harvest import (
    LANGUAGES,
    Sentence,
    harvest_provenance,
    harvest_sentences,
)
from speechlab.errors import ConfigError, DataError
from speechlab.files import atomic_path, atomic_write_json, read_json, removed_on_failure

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
# The test sentences again, spoken by voices training never heard (CorpusConfig.unseen_voices).
UNSEEN = "unseen"
BUILT_SPLITS = (*SPLITS, UNSEEN)
CORPUS_FORMAT = "speechlab-corpus/1"


@dataclass(frozen=True)
class BaseVoice:
    """A speaker family: the synthesizer (``engine``) and voice it uses, and how its text is
    turned into input. espeak-ng families take a voice variant per utterance (``hi+f2``);
    festival's voices are one recorded speaker each."""

    voice: str
    accent: str = "native"
    engine: str = "espeak-ng"

    @property
    def has_variants(self) -> bool:
        return self.engine == "espeak-ng"


# Speaker families by name. "en-in" is the Indian-English *approximation* (English phonemes in
# the Hindi inventory, spoken by the Hindi voice; see speechlab.data.synth). The festival
# families are speechlab.data.festival's voices; "gu-nsk" and "ta-nsk" are the Hindi voice
# reading Gujarati and Tamil text letter by letter in Devanagari: a Hindi speaker's reading,
# the only voice other than espeak-ng's that those languages have here. "en-dita" ... "en-pc"
# are festival's Czech, Finnish and Italian speakers reading English respelt in their own
# spelling (speechlab.text.respell): accented English, in no default (see docs/corpus.md).
BASE_VOICES: dict[str, BaseVoice] = {
    "en-in": BaseVoice("hi", "indian_english"),
    "en-gb": BaseVoice("en"),  # espeak-ng's British English voice is named "en"
    "en-us": BaseVoice("en-us"),
    "en-029": BaseVoice("en-029"),
    "en-kal": BaseVoice("kal_diphone", engine="festival"),
    "en-ked": BaseVoice("ked_diphone", engine="festival"),
    "en-slt": BaseVoice("cmu_us_slt_arctic_hts", engine="festival"),
    # SLT through its model converted to 16 kHz: twice as fast to build, in no default corpus
    # (recognizers that learnt en-slt read it worse: docs/corpus.md, "Speed")
    "en-slt16": BaseVoice("cmu_us_slt_arctic_hts_16k", engine="festival"),
    "en-dita": BaseVoice("czech_dita", "respelt", engine="festival"),
    "en-machac": BaseVoice("czech_machac", "respelt", engine="festival"),
    "en-ph": BaseVoice("czech_ph", "respelt", engine="festival"),
    "en-lj": BaseVoice("suo_fi_lj_diphone", "respelt", engine="festival"),
    "en-mv": BaseVoice("hy_fi_mv_diphone", "respelt", engine="festival"),
    "en-lp": BaseVoice("lp_diphone", "respelt", engine="festival"),
    "en-pc": BaseVoice("pc_diphone", "respelt", engine="festival"),
    "hi": BaseVoice("hi"),
    "hi-nsk": BaseVoice("hindi_NSK_diphone", engine="festival"),
    "ta": BaseVoice("ta"),
    "ta-nsk": BaseVoice("hindi_NSK_diphone", "devanagari", engine="festival"),
    "gu": BaseVoice("gu"),
    "gu-nsk": BaseVoice("hindi_NSK_diphone", "devanagari", engine="festival"),
}


def _default_minutes() -> dict[str, float]:
    # Table 1 of the multi-softmax paper: En 10077 h, Hi 10591 h, Ta 925 h, Gu 1205 h of
    # training data. Same proportions, scaled so English is one hour.
    return {"en": 60.0, "hi": 63.0, "ta": 5.5, "gu": 7.2}


def _default_voices() -> dict[str, dict[str, float]]:
    # Sampling weights of speaker families per language. English: espeak-ng's accents (Indian
    # English first, as in the paper's data) and two of festival's recorded voices, one diphone
    # man and the HTS woman; Hindi: espeak-ng and festival's Hindi diphone voice.
    return {
        "en": {"en-in": 0.3, "en-gb": 0.1, "en-us": 0.1, "en-029": 0.05, "en-kal": 0.25,
               "en-slt": 0.2},
        "hi": {"hi": 0.6, "hi-nsk": 0.4},
        "ta": {"ta": 1.0},
        "gu": {"gu": 1.0},
    }


def _default_effects() -> AugmentPlan:
    # WORLD voices for festival's utterances (see CorpusConfig.effects), then speed, rooms,
    # a line or codec, and level, each for a share of the utterances.
    return AugmentPlan(world_prob=0.3, formant_warp=(0.9, 1.12), speed_prob=0.3,
                       reverb_prob=0.3, channel_prob=0.25, channels=CHANNEL_KINDS,
                       gain_prob=0.5)


def _default_unseen_voices() -> dict[str, dict[str, float]]:
    # What no training utterance is spoken by. English: festival's ked, a man recorded for
    # another diphone voice. Hindi has no third voice here, so its unseen speakers are
    # espeak-ng's held-out variants with the same test sentences. Tamil and Gujarati: the Hindi
    # diphone voice reading them, a speaker and a synthesizer their training never heard.
    return {"en": {"en-ked": 1.0}, "hi": {"hi": 1.0}, "ta": {"ta-nsk": 1.0},
            "gu": {"gu-nsk": 1.0}}


@dataclass(frozen=True)
class CorpusConfig:
    """How the embedded corpus is made.

    Args:
        minutes: minutes of audio per language over all splits; its keys (en, hi, ta, gu) are
            the corpus languages.
        utterances_per_language: if set, make exactly this many utterances per language instead
            of ``minutes`` worth (the tiny test corpus).
        seed: everything random (sentence order, voices, prosody, noise) derives from it.
        dev_fraction, test_fraction: share of each language's audio (and of its sentences).
        test_variants: espeak voice variants used only in test (held-out speakers).
        voices: per language, speaker family (key of BASE_VOICES) -> sampling weight.
        unseen_voices: per language, the families of the ``unseen`` split: the test sentences
            again, spoken by voices no training utterance has (a language without an entry
            gets no unseen split). espeak-ng families there speak with ``test_variants``.
        rate_wpm, pitch, pitch_range, word_gap: (low, high) ranges sampled per utterance.
        noise_prob: probability that an utterance gets additive noise.
        noise_snr_db: (low, high) SNR range of that noise.
        noise_colors: noise colours sampled from (keys of synth.NOISE_COLORS).
        tempo_prob, tempo: probability and (low, high) range of a sox tempo change.
        effects: the speaker and channel effects drawn per utterance
            (:class:`~speechlab.audio.augment.AugmentPlan`: WORLD voices, speed, rooms, lines
            and codecs, gain). Its ``world_prob`` is the share of festival's utterances given
            another voice: festival's voices are one recorded speaker each, espeak-ng's are
            already many (its variants), and WORLD costs more than synthesizing them. Noise is
            ``noise_prob``'s (below), not the plan's.
        babble_prob: share of the noisy utterances whose noise is other utterances (babble).
        batch_size: utterances per synthesis batch (one fresh process each).
        workers: parallel synthesis processes.
        cache_dir: harvested-text cache (default $SPEECHLAB_CACHE or ~/.cache/speechlab).
    """

    minutes: dict[str, float] = ranged(default_factory=_default_minutes, ge=0, le=1440,
                                       why="a day of speech per language is the most built")
    # one per split at least
    utterances_per_language: int | None = ranged(None, ge=3, le=100_000,
                                                 why="about a day of speech")
    seed: int = ranged(0, ge=0)
    dev_fraction: float = ranged(0.05, gt=0, lt=1)
    test_fraction: float = ranged(0.1, gt=0, lt=1)
    test_variants: tuple[str, ...] = ("m4", "f4")
    voices: dict[str, dict[str, float]] = ranged(default_factory=_default_voices, ge=0)
    unseen_voices: dict[str, dict[str, float]] = ranged(default_factory=_default_unseen_voices,
                                                        ge=0)
    # espeak-ng's ranges: -s 80..450 words per minute, -p and -a 0..99, -g in 10 ms units.
    rate_wpm: tuple[int, int] = ranged((140, 200), ge=80, le=450)
    pitch: tuple[int, int] = ranged((30, 70), ge=0, le=99)
    pitch_range: tuple[int, int] = ranged((30, 80), ge=0, le=99)
    word_gap: tuple[int, int] = ranged((0, 3), ge=0)
    noise_prob: float = ranged(0.5, ge=0, le=1)
    noise_snr_db: tuple[float, float] = ranged((10.0, 30.0))
    noise_colors: tuple[str, ...] = ("white", "pink", "brown")
    tempo_prob: float = ranged(0.0, ge=0, le=1)
    tempo: tuple[float, float] = ranged((0.9, 1.1), gt=0)
    effects: AugmentPlan = field(default_factory=_default_effects)
    babble_prob: float = ranged(0.25, ge=0, le=1)
    batch_size: int = ranged(32, ge=1, le=4096, why="utterances held in memory at once")
    workers: int = ranged(2, ge=1, le=64, why="one synthesis process each")
    cache_dir: str | None = None

    @classmethod
    def tiny(cls, seed: int = 0) -> CorpusConfig:
        """Six utterances per language (4 train, 1 dev, 1 test): builds in seconds."""
        return cls(utterances_per_language=6, seed=seed, dev_fraction=0.17, test_fraction=0.17,
                   batch_size=8)

    @classmethod
    def espeak_only(cls, **overrides: Any) -> CorpusConfig:
        """The corpus before festival's voices and the speaker/channel effects: espeak-ng
        voices, white/pink/brown noise, nothing else (the baseline the varied corpus is
        measured against)."""
        fields = dict(
            voices={"en": {"en-in": 0.6, "en-gb": 0.2, "en-us": 0.15, "en-029": 0.05},
                    "hi": {"hi": 1.0}, "ta": {"ta": 1.0}, "gu": {"gu": 1.0}},
            effects=AugmentPlan(), babble_prob=0.0)
        fields.update(overrides)
        return cls(**fields)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("rate_wpm", "pitch", "pitch_range", "word_gap", "noise_snr_db", "tempo"):
            low, high = getattr(self, name)
            if low > high:
                raise ConfigError(f"{name} is a (low, high) range, got low {low} > high {high}")
        langs = set(self.minutes)
        unknown = sorted(langs - set(LANGUAGES))
        if unknown:
            raise ConfigError(f"unknown language(s) {unknown} in corpus config; known: "
                              f"{list(LANGUAGES)}")
        missing = sorted(langs - set(self.voices))
        if missing:
            raise ConfigError(f"no voices configured for language(s) {missing} (key 'voices')")
        for key, table in (("voices", self.voices), ("unseen_voices", self.unseen_voices)):
            for lang, fams in table.items():
                bad = sorted(set(fams) - set(BASE_VOICES))
                if bad:
                    raise ConfigError(f"{key}.{lang}: unknown speaker famil(ies) {bad}; known: "
                                      f"{list(BASE_VOICES)}")
                if not fams or any(w < 0 for w in fams.values()) or sum(fams.values()) <= 0:
                    raise ConfigError(f"{key}.{lang}: weights must be >= 0 with a positive sum")
        for lang, fams in self.unseen_voices.items():
            # A festival voice is one speaker: in training it cannot be unseen. (espeak-ng
            # families are unseen through their held-out variants.)
            heard = sorted(f for f in fams if f in self.voices.get(lang, {})
                           and not BASE_VOICES[f].has_variants)
            if heard:
                raise ConfigError(f"unseen_voices.{lang}: {heard} also speak in training "
                                  f"(voices.{lang}); an unseen voice must be one training "
                                  "never heard")
        bad_variants = sorted(set(self.test_variants) - set(VARIANTS))
        if bad_variants:
            raise ConfigError(f"test_variants: unknown espeak variant(s) {bad_variants}; "
                              f"known: {list(VARIANTS)}")
        if not self.test_variants or set(self.test_variants) == set(VARIANTS):
            raise ConfigError("test_variants must hold out some, but not all, voice variants")
        if self.dev_fraction + self.test_fraction >= 1:
            raise ConfigError("dev_fraction and test_fraction must be > 0 and sum to < 1")
        if self.effects.vtlp_prob > 0:
            raise ConfigError("effects.vtlp_prob: vocal tract length perturbation warps the "
                              "features of each batch; give it in the recipe's task.augment "
                              "(the corpus keeps samples)")
        unknown_colors = sorted(set(self.noise_colors) - set(NOISE_COLORS))
        if not self.noise_colors or unknown_colors:
            raise ConfigError(f"noise_colors: unknown colour(s) {unknown_colors}; known: "
                              f"{list(NOISE_COLORS)}")

    @property
    def languages(self) -> tuple[str, ...]:
        """The corpus languages: the keys of ``minutes``, in :data:`LANGUAGES` order."""
        return tuple(lang for lang in LANGUAGES if lang in self.minutes)

    def families(self, lang: str, split: str) -> dict[str, float]:
        """The speaker families (-> weights) of ``lang``'s ``split``."""
        return self.unseen_voices[lang] if split == UNSEEN else self.voices[lang]

    def splits(self, lang: str) -> tuple[str, ...]:
        """The splits built for ``lang``: train, dev, test, and unseen if it has unseen voices."""
        return SPLITS + ((UNSEEN,) if lang in self.unseen_voices else ())

    def engines(self) -> set[str]:
        """The synthesizers the build uses."""
        return {BASE_VOICES[f].engine for lang in self.languages
                for split in self.splits(lang) for f in self.families(lang, split)}

    def festival_voices(self) -> list[str]:
        return sorted({BASE_VOICES[f].voice for lang in self.languages
                       for split in self.splits(lang) for f in self.families(lang, split)
                       if BASE_VOICES[f].engine == "festival"})


@dataclass(frozen=True)
class PlannedUtterance:
    """One utterance before synthesis: id, split, text, speaker and the synthesis request."""

    id: str
    language: str
    split: str
    speaker: str
    sentence: Sentence
    request: SynthRequest


# --------------------------------------------------------------------------------------------
# Planning


def split_sentences_disjoint(sentences: list[Sentence], cfg: CorpusConfig,
                             rng: random.Random) -> dict[str, list[Sentence]]:
    """Shuffle (real sentences first) and cut into disjoint train/dev/test pools."""
    real = [s for s in sentences if s.is_real]
    filler = [s for s in sentences if not s.is_real]
    rng.shuffle(real)
    rng.shuffle(filler)
    fractions = {"test": cfg.test_fraction, "dev": cfg.dev_fraction}
    pools: dict[str, list[Sentence]] = {}
    # Cut real and filler lists separately so every split gets real sentences first.
    for group in (real, filler):
        start = 0
        for split, frac in fractions.items():
            n = max(1, round(len(group) * frac)) if group else 0
            pools.setdefault(split, []).extend(group[start:start + n])
            start += n
        pools.setdefault("train", []).extend(group[start:])
    for split in SPLITS:
        if not pools.get(split):
            raise DataError(f"too few sentences ({len(sentences)}) to fill split {split!r}")
    return pools


def _weighted_choice(weights: dict[str, float], rng: random.Random) -> str:
    names = sorted(weights)
    return rng.choices(names, weights=[weights[n] for n in names])[0]


def plan_utterances(lang: str, split: str, pool: list[Sentence],
                    cfg: CorpusConfig) -> Iterator[PlannedUtterance]:
    """Endless, deterministic stream of utterances for one language and split.

    Sentences are taken in pool order and reused (with other voices/prosody) once exhausted.
    Every utterance draws the same random numbers whatever it turns out to be, so changing one
    probability changes what that probability decides, not every later utterance.
    """
    rng = random.Random(f"{cfg.seed}/{lang}/{split}")
    variants = (cfg.test_variants if split in ("test", UNSEEN)
                else tuple(v for v in VARIANTS if v not in cfg.test_variants))
    plan = cfg.effects
    i = 0
    while True:
        sentence = pool[i % len(pool)]
        family = _weighted_choice(cfg.families(lang, split), rng)
        variant = rng.choice(variants)
        base = BASE_VOICES[family]
        noisy = rng.random() < cfg.noise_prob
        tempo = rng.uniform(*cfg.tempo) if rng.random() < cfg.tempo_prob else 1.0
        snr = round(rng.uniform(*cfg.noise_snr_db), 1)
        babble = rng.random() < cfg.babble_prob
        effects = draw_effects(plan, rng)
        if base.engine != "festival":
            effects = tuple(e for e in effects if e.name != "world")
        if noisy and babble:
            # Babble is an effect (it mixes the batch's other utterances), placed after the
            # room, before the channel, as noise in the room would be.
            at = sum(e.name in ("world", "speed", "reverb") for e in effects)
            effects = (*effects[:at], Effect.of("babble", snr_db=snr, seed=i), *effects[at:])
        request = SynthRequest(
            text=sentence.text,
            voice=f"{base.voice}+{variant}" if base.has_variants else base.voice,
            engine=base.engine,
            accent=base.accent,
            rate=rng.randint(*cfg.rate_wpm),
            pitch=rng.randint(*cfg.pitch),
            pitch_range=rng.randint(*cfg.pitch_range),
            word_gap=rng.randint(*cfg.word_gap),
            noise_snr_db=snr if noisy and not babble else None,
            noise_color=rng.choice(cfg.noise_colors),
            tempo=round(tempo, 3),
            seed=rng.randrange(2**31),
            effects=effects,
        )
        speaker = f"{family}+{variant}" if base.has_variants else family
        yield PlannedUtterance(f"{lang}-{split}-{i:06d}", lang, split, speaker, sentence, request)
        i += 1


def _split_counts(n: int, cfg: CorpusConfig) -> dict[str, int]:
    test = max(1, round(n * cfg.test_fraction))
    dev = max(1, round(n * cfg.dev_fraction))
    return {"train": n - test - dev, "dev": dev, "test": test}


@dataclass(frozen=True)
class _Budget:
    """When to stop a (language, split) stream: after ``count`` utterances or ``seconds``."""

    count: int | None = None
    seconds: float | None = None

    def done(self, n: int, seconds: float) -> bool:
        if self.count is not None:
            return n >= self.count
        return seconds >= (self.seconds or 0.0)


# Rough seconds per utterance, only used to size batches (never to decide what is made).
_SECONDS_PER_UTTERANCE_GUESS = 3.5


def _batch_size(budget: _Budget, largest: int) -> int:
    """Batch size of one stream, from its budget alone (so it is part of the config's output).

    Counted budgets get batches no larger than the count; small time budgets (dev/test of the
    small languages) get small batches, so the utterances synthesized past the budget and thrown
    away stay few; large budgets get ``largest``.
    """
    if budget.count is not None:
        return max(1, min(largest, budget.count))
    expected = (budget.seconds or 0.0) / _SECONDS_PER_UTTERANCE_GUESS
    return max(2, min(largest, math.ceil(expected / 4)))


def _budget_total(b: _Budget) -> float:
    return float(b.count if b.count is not None else (b.seconds or 0.0))


def _budgets(cfg: CorpusConfig) -> dict[tuple[str, str], _Budget]:
    """Each (language, split)'s budget; the unseen split gets the test split's."""
    out = {}
    for lang in cfg.languages:
        if cfg.utterances_per_language is not None:
            for split, n in _split_counts(cfg.utterances_per_language, cfg).items():
                out[(lang, split)] = _Budget(count=n)
        else:
            total = cfg.minutes[lang] * 60.0
            fr = {"dev": cfg.dev_fraction, "test": cfg.test_fraction}
            fr["train"] = 1.0 - fr["dev"] - fr["test"]
            for split in SPLITS:
                out[(lang, split)] = _Budget(seconds=total * fr[split])
        if UNSEEN in cfg.splits(lang):
            out[(lang, UNSEEN)] = out[(lang, "test")]
    return out


# --------------------------------------------------------------------------------------------
# Writing


def write_manifest(items: Iterable[Any], path: Path) -> None:
    """Write lhotse manifest items as gzipped JSON lines, atomically and byte-reproducibly.

    (gzip's header timestamp is zeroed so the same manifest gives the same bytes.)
    """
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                   mtime=0) as gz:
            for item in items:
                gz.write((json.dumps(item.to_dict(), ensure_ascii=False) + "\n").encode("utf-8"))


# The manifests of one split: {split}_{kind}.jsonl.gz.
MANIFEST_KINDS = ("recordings", "supervisions", "cuts")


def write_split(out_dir: Path, split: str, recordings: Iterable[Any],
                supervisions: Iterable[Any]) -> Any:
    """Write ``{split}_{recordings,supervisions,cuts}.jsonl.gz``; returns the CutSet.

    There is one cut per supervision (utterance), with the supervision's id, so a segmented
    recording (Kaldi ``segments``) gives one cut per segment.
    """
    from lhotse import CutSet, RecordingSet, SupervisionSet

    rec_set = RecordingSet.from_recordings(sorted(recordings, key=lambda r: r.id))
    sup_set = SupervisionSet.from_segments(sorted(supervisions, key=lambda s: s.id))
    cuts = CutSet.from_manifests(recordings=rec_set, supervisions=sup_set, random_ids=False)
    cuts = CutSet.from_cuts(sorted(cuts.trim_to_supervisions(keep_overlapping=False),
                                   key=lambda c: c.id))
    write_manifest(rec_set, out_dir / f"{split}_recordings.jsonl.gz")
    write_manifest(sup_set, out_dir / f"{split}_supervisions.jsonl.gz")
    write_manifest(cuts, out_dir / f"{split}_cuts.jsonl.gz")
    return cuts


def split_summary(supervisions: Iterable[Any]) -> dict[str, Any]:
    """Counts, hours and speakers per language of one split's supervisions."""
    per_lang: dict[str, dict[str, Any]] = {}
    for s in supervisions:
        d = per_lang.setdefault(s.language, {"utterances": 0, "seconds": 0.0, "speakers": set()})
        d["utterances"] += 1
        d["seconds"] += s.duration
        d["speakers"].add(s.speaker)
    langs = {
        lang: {"utterances": d["utterances"], "hours": round(d["seconds"] / 3600, 4),
               "speakers": sorted(d["speakers"])}
        for lang, d in sorted(per_lang.items())
    }
    return {
        "utterances": sum(d["utterances"] for d in langs.values()),
        "hours": round(sum(d["seconds"] for d in per_lang.values()) / 3600, 4),
        "languages": langs,
    }


def read_corpus_json(corpus_dir: Path) -> dict[str, Any]:
    """The summary of a corpus directory ({} if it has none: not built or interrupted)."""
    path = Path(corpus_dir) / "corpus.json"
    if not path.exists():
        return {}
    info = read_json(path, "corpus summary")
    if not isinstance(info, dict) or not isinstance(info.get("splits"), dict) or not all(
            isinstance(d, dict) for d in info["splits"].values()):
        raise DataError(f"{path}: not a speechlab corpus summary (no 'splits' mapping); "
                        "rebuild or re-import the corpus")
    return info


def _write_wav(path: Path, audio: np.ndarray) -> None:
    """Write a 16-bit WAV via a temporary name and a rename (never half-written).

    Unlike manifests, wavs are not fsync'ed: two fsyncs per utterance cost more than the
    synthesis, and a wav lost to a power cut is rewritten by the rerun (corpus.json, written
    last, is what marks a build complete).
    """
    buf = io.BytesIO()
    sf.write(buf, audio, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    with atomic_path(path, durable=False) as tmp:
        tmp.write_bytes(buf.getvalue())


def _progress(enabled: bool):  # noqa: ANN202 (rich types are optional here)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # on stderr, so that what the command prints (the corpus's path) is all its stdout holds;
    # drawn on a terminal only
    console = Console(stderr=True)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), disable=not enabled or not console.is_terminal,
                    transient=False, console=console)


def splits_a_build_keeps(out_dir: Path, built: Iterable[str], sample_rate: int,
                         overwrite: bool) -> dict[str, Any]:
    """The splits listed in ``out_dir``'s corpus.json that a build of the splits ``built`` keeps
    (all the others); DataError, before any work, if the build would replace a listed split
    (built earlier or imported) without ``overwrite``. Imported splits at another sample rate
    cannot stay in the corpus, so they count as replaced. Shared by the ASR and TTS corpus
    builds, so neither drops another's splits from corpus.json without a word."""
    info = read_corpus_json(out_dir)
    listed = {s: d for s, d in (info.get("splits") or {}).items()}
    imported = {s for s, d in listed.items()
                if not (isinstance(d, dict) and d.get("origin") == "synthetic")}
    clash = sorted(set(listed) & set(built))
    if imported and info.get("sample_rate") != sample_rate:
        clash = sorted(set(clash) | imported)
    if clash and not overwrite:
        if set(clash) & imported:
            what = f"imported split(s) {sorted(set(clash) & imported)}"
        else:
            what = f"split(s) {clash} of an earlier build"
        raise DataError(f"{out_dir} holds {what} that building the corpus would replace; pass "
                        "--overwrite to replace them, or build into another directory")
    kept = {s: d for s, d in listed.items() if s not in clash}
    if kept:
        log.info("%s: keeping split(s) %s", out_dir, sorted(kept))
    return kept


def _corpus_languages(splits: dict[str, Any]) -> list[str]:
    langs = {lang for s in splits.values() for lang in s.get("languages", {})}
    return [lang for lang in LANGUAGES if lang in langs] + sorted(langs - set(LANGUAGES))


def make_asr_corpus(cfg: CorpusConfig, out_dir: str | Path, *, progress: bool = True,
                    overwrite: bool = False) -> Path:
    """Build the corpus described by ``cfg`` into ``out_dir``; returns ``out_dir``.

    Deterministic for ``cfg`` (same manifests modulo the absolute ``out_dir`` in recording
    paths, same audio bytes). Train/dev/test splits that ``out_dir`` already lists (of an
    earlier build or imported) are replaced only with ``overwrite``; an interrupted build
    leaves no ``corpus.json`` listing its splits (so :func:`load_cuts` refuses them, and a rerun
    rebuilds them) and no half-written file; a build that fails removes the files it wrote.
    Splits under other names are kept (and stay listed in ``corpus.json`` throughout).
    """
    out_dir = Path(out_dir).resolve()
    kept = splits_a_build_keeps(out_dir, BUILT_SPLITS, SAMPLE_RATE, overwrite)
    if "festival" in cfg.engines():
        festival.check_voices(cfg.festival_voices())
    with removed_on_failure(out_dir) as made:
        _build_asr_corpus(cfg, out_dir, kept, progress, made)
    return out_dir


def _build_asr_corpus(cfg: CorpusConfig, out_dir: Path, kept: dict[str, Any], progress: bool,
                      made: list[Path]) -> None:
    """The body of :func:`make_asr_corpus`; records each file it writes in ``made``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # Invalidate first: from here until the new summary is written the built splits are
    # incomplete. Imported splits stay listed.
    if kept:
        atomic_write_json(out_dir / "corpus.json", {
            "format": CORPUS_FORMAT, "sample_rate": SAMPLE_RATE, "splits": kept,
            "languages": _corpus_languages(kept)})
    else:
        (out_dir / "corpus.json").unlink(missing_ok=True)
    for tmp in (out_dir / "wav").glob("**/.*.tmp"):
        tmp.unlink()  # left by a killed build

    cache = Path(cfg.cache_dir) if cfg.cache_dir else None
    sentences = harvest_sentences(cfg.languages, cache)
    pools = {lang: split_sentences_disjoint(sentences[lang], cfg,
                                            random.Random(f"{cfg.seed}/{lang}/sentences"))
             for lang in cfg.languages}
    for pool in pools.values():
        pool[UNSEEN] = pool["test"]  # the same sentences, other voices
    budgets = _budgets(cfg)
    built = [s for s in BUILT_SPLITS if any((lang, s) in budgets for lang in cfg.languages)]

    from lhotse import AudioSource, Recording, SupervisionSegment

    recordings: dict[str, list[Recording]] = {s: [] for s in built}
    supervisions: dict[str, list[SupervisionSegment]] = {s: [] for s in built}
    reused: Counter[str] = Counter()
    streams = []
    for (lang, split), budget in budgets.items():
        size = _batch_size(budget, cfg.batch_size)
        streams.append(_Stream((lang, split), plan_utterances(lang, split, pools[lang][split], cfg),
                               budget, size))
    with _progress(progress) as bar, BatchSynthesizer(cfg.workers) as synth:
        tasks = {st.key: bar.add_task(f"{st.key[0]} {st.key[1]}",
                                      total=round(_budget_total(st.budget), 1))
                 for st in streams}
        for st, utt, audio in synthesize_streams(streams, synth, max_inflight=2 * cfg.workers):
            lang, split = st.key
            wav = out_dir / "wav" / split / lang / f"{utt.id}.wav"
            made.append(wav)
            _write_wav(wav, audio)
            dur = len(audio) / SAMPLE_RATE
            recordings[split].append(Recording(
                id=utt.id, sources=[AudioSource(type="file", channels=[0], source=str(wav))],
                sampling_rate=SAMPLE_RATE, num_samples=len(audio), duration=dur))
            req = utt.request
            supervisions[split].append(SupervisionSegment(
                id=utt.id, recording_id=utt.id, start=0.0, duration=dur, channel=0,
                text=utt.sentence.text, language=lang, speaker=utt.speaker,
                custom={"text_source": utt.sentence.source, "voice": req.voice,
                        "accent": req.accent, "rate_wpm": req.rate, "pitch": req.pitch,
                        "pitch_range": req.pitch_range, "word_gap": req.word_gap,
                        "snr_db": req.noise_snr_db,
                        "noise": req.noise_color if req.noise_snr_db is not None else None,
                        "tempo": req.tempo, "engine": req.engine,
                        "effects": [e.describe() for e in req.effects]}))
            if st.done_n > len(pools[lang][split]):
                reused[f"{lang}/{split}"] += 1
            done = st.done_n if st.budget.count is not None else st.done_s
            bar.update(tasks[st.key], completed=min(done, _budget_total(st.budget)))
    for key, k in sorted(reused.items()):
        log.warning("%s: sentence pool exhausted; %d utterances reuse a sentence with another "
                    "voice (raise the harvest size or lower the minutes)", key, k)
    unspoken = sum(st.unspoken for st in streams)
    if unspoken:
        log.warning("%d planned utterance(s) came back without audio (festival could not speak "
                    "them) and were left out", unspoken)

    summary: dict[str, Any] = {"format": CORPUS_FORMAT, "sample_rate": SAMPLE_RATE, "splits": {}}
    for split in built:
        made.extend(out_dir / f"{split}_{kind}.jsonl.gz" for kind in MANIFEST_KINDS)
        write_split(out_dir, split, recordings[split], supervisions[split])
        summary["splits"][split] = split_summary(supervisions[split])
        summary["splits"][split]["origin"] = "synthetic"
    summary["splits"].update(kept)
    _remove_stale_wavs(out_dir, {r.sources[0].source for rs in recordings.values() for r in rs})
    text_sources: dict[str, dict[str, int]] = {}
    for split in built:
        for s in supervisions[split]:
            src = text_sources.setdefault(s.language, {})
            src[s.custom["text_source"]] = src.get(s.custom["text_source"], 0) + 1
    provenance = harvest_provenance(cache)
    summary["languages"] = list(cfg.languages) + [
        lang for lang in _corpus_languages(kept) if lang not in cfg.languages]
    summary["synthetic"] = {
        "config": to_dict(cfg),
        "voices": {split: sorted({s.speaker for s in supervisions[split]}) for split in built},
        "text_sources": {lang: dict(sorted(v.items())) for lang, v in text_sources.items()},
        "debian_packages": provenance.get("packages", {}),
        "missing_debian_packages": provenance.get("missing_packages", []),
        "engines": sorted(cfg.engines()),
        "festival_models": festival.model_conversions(cfg.festival_voices())
        if "festival" in cfg.engines() else {},
        "unspoken_utterances": unspoken,
    }
    atomic_write_json(out_dir / "corpus.json", summary)


@dataclass
class _Stream:
    """Synthesis state of one (language, split): its planned utterances and budget."""

    key: tuple[str, str]
    plan: Iterator[PlannedUtterance]
    budget: _Budget
    batch_size: int
    done_n: int = 0
    done_s: float = 0.0
    inflight_n: int = 0
    finished: bool = False
    unspoken: int = 0

    def wants_more(self, sec_per_utt: float) -> bool:
        """Whether the finished plus in-flight utterances are expected to fall short."""
        if self.finished:
            return False
        if self.budget.count is not None:
            return self.done_n + self.inflight_n < self.budget.count
        return self.done_s + self.inflight_n * sec_per_utt < (self.budget.seconds or 0.0)


def synthesize_streams(streams: list[_Stream], synth: BatchSynthesizer, max_inflight: int
                       ) -> Iterator[tuple[_Stream, PlannedUtterance, np.ndarray]]:
    """Synthesize every stream until its budget is met; yields each stream's utterances in order.

    A stream is cut into fixed consecutive batches of ``batch_size`` whatever the timing, and
    results past a budget are discarded, so *what* is produced never depends on scheduling;
    only how many spare utterances are synthesized and thrown away does. Batches are submitted
    while a stream's expected total (done + in flight x seconds per utterance so far) is short
    of its budget, earliest stream first, at most ``max_inflight`` at once.
    """
    pending: deque = deque()
    sec_per_utt = _SECONDS_PER_UTTERANCE_GUESS  # replaced by the running mean once known
    total_n, total_s = 0, 0.0
    for st in streams:
        st.finished = st.budget.done(0, 0.0)
    while True:
        while len(pending) < max_inflight:
            st = next((x for x in streams if x.wants_more(sec_per_utt)), None)
            if st is None:
                break
            batch = [next(st.plan) for _ in range(st.batch_size)]
            st.inflight_n += len(batch)
            pending.append((st, batch, synth.submit([u.request for u in batch])))
        if not pending:
            return
        st, batch, fut = pending.popleft()
        st.inflight_n -= len(batch)
        for utt, audio in zip(batch, fut.result()):
            total_n += 1
            total_s += len(audio) / SAMPLE_RATE
            if st.finished:
                continue
            if len(audio) == 0:
                st.unspoken += 1  # festival could not speak it: deterministic, so skipped
                continue
            st.done_n += 1
            st.done_s += len(audio) / SAMPLE_RATE
            st.finished = st.budget.done(st.done_n, st.done_s)
            yield st, utt, audio
        sec_per_utt = total_s / total_n


def _remove_stale_wavs(out_dir: Path, keep: set[str]) -> None:
    """Delete wavs of the built splits (``wav/{split}/{lang}/``) left by an earlier, larger
    build; the audio of imported splits is never touched."""
    for split in BUILT_SPLITS:
        for p in (out_dir / "wav" / split).glob("*/*.wav"):
            if str(p) not in keep:
                p.unlink()


def check_corpus_dir(corpus_dir: str | Path, languages: Iterable[str] | None = None) -> None:
    """Before any work on a given ``--corpus``: the train, dev and test cut manifests must all
    be there (a missing one used to be found after features were computed), its corpus.json,
    if it has one, must read and list them, and it must hold ``languages``. ConfigError or
    DataError naming the file otherwise."""
    corpus_dir = Path(corpus_dir)
    for split in SPLITS:
        path = corpus_dir / f"{split}_cuts.jsonl.gz"
        if not path.is_file():
            found = sorted(p.name for p in corpus_dir.glob("*_cuts.jsonl.gz"))
            raise ConfigError(f"{path} is missing: a corpus dir needs train/dev/test cut "
                              f"manifests (found {found or 'none'}); import the split with "
                              "'speechlab data import-kaldi ... --split NAME'")
    info = read_corpus_json(corpus_dir)
    if not info:
        return  # manifests made elsewhere: nothing more to check here
    unlisted = [s for s in SPLITS if s not in info["splits"]]
    if unlisted:
        raise DataError(f"{corpus_dir / 'corpus.json'}: split(s) {unlisted} are not listed (an "
                        "interrupted build or import); rebuild or re-import them")
    held = set(info.get("languages") or [lang for s in info["splits"].values()
                                         for lang in (s.get("languages") or {})])
    missing = [lang for lang in languages or () if held and lang not in held]
    if missing:
        raise ConfigError(f"{corpus_dir}: the corpus holds no {missing} utterances (it holds "
                          f"{sorted(held)}); set the recipe's languages to those it holds")


def load_cuts(corpus_dir: str | Path, split: str) -> Any:
    """The lhotse CutSet of ``split`` from a corpus directory (built or imported).

    Raises DataError if the corpus is incomplete (no corpus.json: interrupted build) or the split
    does not exist.
    """
    from lhotse import CutSet

    corpus_dir = Path(corpus_dir)
    info = read_corpus_json(corpus_dir)
    if not info:
        raise DataError(f"{corpus_dir}: not a complete speechlab corpus (no corpus.json); "
                        "build it with 'speechlab data make-asr-corpus' or import one")
    if split not in info.get("splits", {}):
        raise DataError(f"{corpus_dir}: no split {split!r}; available: "
                        f"{sorted(info.get('splits', {}))}")
    path = corpus_dir / f"{split}_cuts.jsonl.gz"
    if not path.exists():
        raise DataError(f"{path} is missing; rebuild or re-import the corpus")
    try:
        return CutSet.from_file(path)
    except (OSError, EOFError, ValueError, KeyError, TypeError) as e:  # gzip, JSON, fields
        if isinstance(e, OSError) and e.errno is not None:
            raise  # an operating-system fault (permission, I/O), reported as such
        raise DataError(f"{path}: corrupt cuts manifest ({type(e).__name__}: {e}); rebuild or "
                        "re-import the corpus") from None
