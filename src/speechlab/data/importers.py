"""Importing existing corpora into the speechlab corpus layout.

Two sources: a Kaldi data directory (see :mod:`speechlab.data.kaldi`) and the RecordingSet +
SupervisionSet manifests any lhotse recipe writes (LibriSpeech, MUCS, CMU ARCTIC...). Both end as
``{split}_recordings/supervisions/cuts.jsonl.gz`` plus an entry in ``corpus.json``, exactly like
the embedded corpus, so every recipe reads real and synthetic data the same way
(:func:`speechlab.data.corpus.load_cuts`).

Every recording and transcript is validated on the way in (:mod:`speechlab.audio.io`). With
``on_error="raise"`` the first bad utterance stops the import with a message naming it; with
``"skip"`` it is dropped, counted per reason, and the counts are logged and returned.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Literal

import soundfile as sf

from speechlab.audio.io import validate_recording, validate_supervision
from speechlab.data.corpus import (
    CORPUS_FORMAT,
    read_corpus_json,
    split_summary,
    write_split,
)
from speechlab.data.kaldi import (
    KaldiDataDir,
    is_command,
    read_kaldi_dir,
    resolve_wav_path,
    run_wav_command,
)
from speechlab.data.text_harvest import LANGUAGES
from speechlab.errors import DataError
from speechlab.utils import atomic_path, atomic_write_json

log = logging.getLogger(__name__)

# Spellings of our languages found in recipes' manifests ("English" in LibriSpeech, "Hindi" in
# MUCS) -> the tags speechlab uses. Region suffixes ("en-IN", "hi_IN") are stripped first.
LANGUAGE_NAMES = {"english": "en", "hindi": "hi", "tamil": "ta", "gujarati": "gu"}


@dataclass(frozen=True)
class ImportConfig:
    """How an import treats its input.

    Args:
        split: split name to write (default: the Kaldi directory's name; required for lhotse).
        language: language tag for utterances that carry none (no utt2lang / empty field).
        known_languages: accepted language tags.
        on_error: "raise" stops at the first bad utterance; "skip" drops and counts it.
        sample_rate: required sample rate of the audio.
        resample: resample other rates (on load, via lhotse) instead of rejecting them.
    """

    split: str | None = None
    language: str | None = None
    known_languages: tuple[str, ...] = LANGUAGES
    on_error: Literal["raise", "skip"] = "raise"
    sample_rate: int = 16000
    resample: bool = False


@dataclass
class ImportReport:
    """What an import kept and what it skipped (reason -> count, plus a few examples)."""

    split: str
    out_dir: Path
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())


def normalize_language(tag: str | None) -> str | None:
    """``"English"``/``"en-IN"``/``"hi_IN"`` -> ``"en"``/``"en"``/``"hi"``; None stays None."""
    if not tag:
        return None
    t = tag.strip().lower().replace("_", "-")
    t = LANGUAGE_NAMES.get(t, t)
    return t.split("-")[0] if len(t.split("-")[0]) in (2, 3) else t


def _raise(report: ImportReport, reason: str, err: DataError) -> None:
    raise err


def _skip(report: ImportReport, reason: str, err: DataError) -> None:
    report.skipped[reason] += 1
    if len(report.examples) < 10:
        report.examples.append(str(err))
    log.debug("skipping: %s", err)


# on_error -> what to do with a bad utterance
ERROR_POLICIES: dict[str, Callable[[ImportReport, str, DataError], None]] = {
    "raise": _raise,
    "skip": _skip,
}


def _policy(cfg: ImportConfig) -> Callable[[ImportReport, str, DataError], None]:
    if cfg.on_error not in ERROR_POLICIES:
        raise DataError(f"on_error must be one of {list(ERROR_POLICIES)}, got {cfg.on_error!r}")
    return ERROR_POLICIES[cfg.on_error]


def _conform(rec: Any, cfg: ImportConfig) -> Any:
    if cfg.resample and rec.sampling_rate != cfg.sample_rate:
        return rec.resample(cfg.sample_rate)
    return rec


def finish_import(recordings: list[Any], supervisions: list[Any], out_dir: Path,
                  cfg: ImportConfig, report: ImportReport, origin: str,
                  rejected: set[str] | None = None) -> ImportReport:
    """Validate, drop or raise on bad items, write the split and merge it into corpus.json.

    ``rejected`` are recording ids already dropped by the caller; their utterances are counted
    as "recording skipped" rather than reported again.
    """
    handle = _policy(cfg)
    rejected = set(rejected or ())
    good_recs: dict[str, Any] = {}
    for rec in recordings:
        rec = _conform(rec, cfg)
        try:
            validate_recording(rec, cfg.sample_rate, channels=1)
        except DataError as e:
            handle(report, "bad audio", e)
            rejected.add(rec.id)
            continue
        good_recs[rec.id] = rec
    kept_sups = []
    for sup in supervisions:
        if sup.recording_id in rejected:
            report.skipped["recording skipped"] += 1
            continue
        if sup.recording_id not in good_recs:
            handle(report, "unknown recording", DataError(
                f"utterance {sup.id!r}: its recording {sup.recording_id!r} is not in the "
                "recordings"))
            continue
        rec = good_recs[sup.recording_id]
        if sup.end > rec.duration + 1e-2:
            handle(report, "segment past end of audio", DataError(
                f"utterance {sup.id!r}: ends at {sup.end:.2f} s but recording {rec.id!r} lasts "
                f"{rec.duration:.2f} s"))
            continue
        try:
            validate_supervision(sup.text, sup.language, cfg.known_languages, utt=sup.id)
        except DataError as e:
            handle(report, "bad transcript or language", e)
            continue
        kept_sups.append(sup)
    used = {s.recording_id for s in kept_sups}
    kept_recs = [r for rid, r in good_recs.items() if rid in used]
    if not kept_sups:
        raise DataError(f"{origin}: no usable utterance left to import "
                        f"(skipped: {dict(report.skipped)})")
    out_dir.mkdir(parents=True, exist_ok=True)
    write_split(out_dir, report.split, kept_recs, kept_sups)
    report.kept = len(kept_sups)
    _merge_corpus_json(out_dir, report.split, kept_sups, origin, cfg)
    if report.total_skipped:
        log.warning("%s: imported %d utterances, skipped %d: %s", origin, report.kept,
                    report.total_skipped, dict(report.skipped))
    return report


def _merge_corpus_json(out_dir: Path, split: str, supervisions: list[Any], origin: str,
                       cfg: ImportConfig) -> None:
    info = read_corpus_json(out_dir) or {"format": CORPUS_FORMAT, "sample_rate": cfg.sample_rate,
                                         "splits": {}}
    if info.get("sample_rate") != cfg.sample_rate:
        raise DataError(f"{out_dir / 'corpus.json'}: corpus is at {info.get('sample_rate')} Hz, "
                        f"this import at {cfg.sample_rate} Hz; import into another directory")
    summary = split_summary(supervisions)
    summary["origin"] = origin
    info["splits"][split] = summary
    langs = {lang for s in info["splits"].values() for lang in s.get("languages", {})}
    info["languages"] = [lang for lang in LANGUAGES if lang in langs] + sorted(
        langs - set(LANGUAGES))
    atomic_write_json(out_dir / "corpus.json", info)


# --------------------------------------------------------------------------------------------
# Kaldi


def _kaldi_recordings(kdir: KaldiDataDir, out_dir: Path, split: str, report: ImportReport,
                      handle: Callable[[ImportReport, str, DataError], None]
                      ) -> tuple[list[Any], set[str]]:
    """Recordings of wav.scp (and the ids rejected); piped commands are run once and their
    audio stored as WAV."""
    from lhotse import AudioSource, Recording

    needed = {kdir.recording_of(u) for u in kdir.utterances}
    recs = []
    rejected: set[str] = set()
    scp = kdir.path / "wav.scp"
    for rec_id in sorted(needed):
        entry = kdir.wav[rec_id]
        try:
            if is_command(entry.value):
                audio, sr = run_wav_command(entry.value, file=scp, line=entry.line, rec=rec_id)
                # Store the command's output: training reads it many times, the command runs
                # once, and the file can be validated like any other.
                wav = out_dir / "wav" / split / f"{rec_id}.wav"
                with atomic_path(wav) as tmp:
                    sf.write(tmp, audio, sr, subtype="PCM_16", format="WAV")
                path = wav
            else:
                path = resolve_wav_path(entry.value, kdir.path)
            info = sf.info(str(path)) if path.exists() else None
            if info is None:
                raise DataError(f"{scp}:{entry.line} (recording {rec_id!r}): audio file "
                                f"{path} does not exist")
        except (sf.LibsndfileError, RuntimeError) as e:
            handle(report, "bad audio", DataError(
                f"{scp}:{entry.line} (recording {rec_id!r}): unreadable audio {entry.value!r} "
                f"({e})"))
            rejected.add(rec_id)
            continue
        except DataError as e:
            handle(report, "bad audio", e)
            rejected.add(rec_id)
            continue
        recs.append(Recording(
            id=rec_id, sources=[AudioSource(type="file", channels=list(range(info.channels)),
                                            source=str(path))],
            sampling_rate=int(info.samplerate), num_samples=int(info.frames),
            duration=round(info.frames / info.samplerate, 6)))
    return recs, rejected


def import_kaldi(kaldi_dir: str | Path, out_dir: str | Path,
                 cfg: ImportConfig = ImportConfig()) -> ImportReport:
    """Import a Kaldi data directory as split ``cfg.split`` (default: its directory name)."""
    from lhotse import SupervisionSegment

    kdir = read_kaldi_dir(kaldi_dir)
    out_dir = Path(out_dir).resolve()
    split = cfg.split or kdir.path.resolve().name
    handle = _policy(cfg)
    report = ImportReport(split=split, out_dir=out_dir)
    recs, rejected = _kaldi_recordings(kdir, out_dir, split, report, handle)
    by_id = {r.id: r for r in recs}
    sups = []
    for utt in kdir.utterances:
        lang_entry = kdir.utt2lang.get(utt) if kdir.utt2lang is not None else None
        language = normalize_language(lang_entry.value if lang_entry else cfg.language)
        rec_id = kdir.recording_of(utt)
        if kdir.segments is not None:
            seg = kdir.segments[utt]
            start = seg.start
            end = seg.end if seg.end is not None else (
                by_id[rec_id].duration if rec_id in by_id else start)
        else:
            start, end = 0.0, by_id[rec_id].duration if rec_id in by_id else 0.0
        sups.append(SupervisionSegment(
            id=utt, recording_id=rec_id, start=start, duration=round(max(end - start, 0.0), 6),
            channel=0, text=kdir.text[utt].value, language=language,
            speaker=kdir.utt2spk[utt].value))
    return finish_import(recs, sups, out_dir, cfg, report, f"kaldi:{kdir.path.resolve()}",
                         rejected)


# --------------------------------------------------------------------------------------------
# lhotse


def import_lhotse(recordings: str | Path, supervisions: str | Path, out_dir: str | Path,
                  cfg: ImportConfig) -> ImportReport:
    """Import a lhotse recipe's RecordingSet + SupervisionSet files as split ``cfg.split``."""
    from lhotse import RecordingSet, SupervisionSet

    if not cfg.split:
        raise DataError("importing lhotse manifests needs a split name (--split train/dev/test)")
    recs = _load_manifest(RecordingSet, Path(recordings), "RecordingSet")
    sups = _load_manifest(SupervisionSet, Path(supervisions), "SupervisionSet")
    fixed_recs = [_absolute_sources(r) for r in recs]
    fixed_sups = [replace(s, language=normalize_language(s.language)
                          or normalize_language(cfg.language)) for s in sups]
    out = Path(out_dir).resolve()
    return finish_import(fixed_recs, fixed_sups, out, cfg, ImportReport(cfg.split, out),
                         f"lhotse:{Path(recordings).resolve()}")


def _load_manifest(cls: Any, path: Path, kind: str) -> list[Any]:
    if not path.exists():
        raise DataError(f"{path}: {kind} manifest does not exist")
    try:
        return list(cls.from_file(path))
    except Exception as e:  # noqa: BLE001 - lhotse raises KeyError/ValueError/JSON errors
        raise DataError(f"{path}: not a valid lhotse {kind} ({type(e).__name__}: {e})") from None


def _absolute_sources(rec: Any) -> Any:
    """File sources made absolute (relative to the working directory, lhotse's convention),
    so the imported corpus can be read from anywhere."""
    sources = [replace(s, source=str(Path(s.source).resolve())) if s.type == "file" else s
               for s in rec.sources]
    return replace(rec, sources=sources)
