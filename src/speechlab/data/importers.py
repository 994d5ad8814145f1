"""Importing existing corpora into the speechlab corpus layout.

Two sources: a Kaldi data directory (see :mod:`speechlab.data.kaldi`) and the RecordingSet +
SupervisionSet manifests any lhotse recipe writes (LibriSpeech, MUCS, CMU ARCTIC...). Both end as
``{split}_recordings/supervisions/cuts.jsonl.gz`` plus an entry in ``corpus.json``, exactly like
the embedded corpus, so every recipe reads real and synthetic data the same way
(:func:`speechlab.data.corpus.load_cuts`).

Every recording and transcript is validated on the way in (:mod:`speechlab.audio.io`). With
``on_error="raise"`` the first bad utterance stops the import with a message naming it; with
``"skip"`` it is dropped and counted once, under the first reason found (a bad recording
drops each of its utterances), and the counts are logged and returned.

An import never loses data: a split the directory already holds is replaced only with
``overwrite=True`` (``--overwrite``), and everything an import makes (the audio of piped
``wav.scp`` commands, the manifests) is written into a temporary directory inside the corpus
directory and moved into place at the end, with ``corpus.json`` last; a failed or killed import
leaves the corpus as it was (a killed one leaves a ``.import-*.tmp`` directory, removed by the
next import into that directory).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Literal

import soundfile as sf

from speechlab.audio.io import validate_recording, validate_supervision
from speechlab.config import check_fields, ranged
from speechlab.data.corpus import (
    CORPUS_FORMAT,
    MANIFEST_KINDS,
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
from speechlab.errors import ConfigError, DataError
from speechlab.files import atomic_write_json, make_temp_dir

log = logging.getLogger(__name__)

# Spellings of our languages found in recipes' manifests ("English" in LibriSpeech, "Hindi" in
# MUCS) -> the tags speechlab uses. Region suffixes ("en-IN", "hi_IN") are stripped first.
LANGUAGE_NAMES = {"english": "en", "hindi": "hi", "tamil": "ta", "gujarati": "gu"}

# A split name becomes part of file names: {split}_cuts.jsonl.gz, wav/{split}/.
_SPLIT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


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
    sample_rate: int = ranged(16000, ge=1, le=384_000, why="the highest rate audio is made at")
    resample: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
        if self.split is not None:
            check_split_name(self.split)


def check_split_name(split: str) -> str:
    if not _SPLIT_NAME.fullmatch(split):
        raise ConfigError(f"split name {split!r} must be letters, digits, '_', '-' or '.', "
                          "starting with a letter or digit (it names files and directories)")
    return split


@dataclass
class ImportReport:
    """What an import kept and what it dropped: each dropped utterance once, with its reason
    (the first one found), plus a few example messages."""

    split: str
    out_dir: Path
    kept: int = 0
    dropped: dict[str, str] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def drop(self, utterances: list[str], reason: str, err: DataError | None = None) -> None:
        """Count ``utterances`` as skipped for ``reason``; one already counted stays as it was."""
        for utt in utterances:
            self.dropped.setdefault(utt, reason)
        if err is not None and len(self.examples) < 10:
            self.examples.append(str(err))

    @property
    def skipped(self) -> Counter:
        """Dropped utterances per reason."""
        return Counter(self.dropped.values())

    @property
    def total_skipped(self) -> int:
        return len(self.dropped)


def normalize_language(tag: str | None) -> str | None:
    """``"English"``/``"en-IN"``/``"hi_IN"`` -> ``"en"``/``"en"``/``"hi"``; None stays None."""
    if not tag:
        return None
    t = tag.strip().lower().replace("_", "-")
    t = LANGUAGE_NAMES.get(t, t)
    return t.split("-")[0] if len(t.split("-")[0]) in (2, 3) else t


Policy = Callable[[ImportReport, list[str], str, DataError], None]


def _raise(report: ImportReport, utterances: list[str], reason: str, err: DataError) -> None:
    raise err


def _skip(report: ImportReport, utterances: list[str], reason: str, err: DataError) -> None:
    report.drop(utterances, reason, err)
    log.debug("skipping %s: %s", utterances, err)


# on_error -> what to do with the utterances of a bad item
ERROR_POLICIES: dict[str, Policy] = {
    "raise": _raise,
    "skip": _skip,
}


def _policy(cfg: ImportConfig) -> Policy:
    if cfg.on_error not in ERROR_POLICIES:
        raise DataError(f"on_error must be one of {list(ERROR_POLICIES)}, got {cfg.on_error!r}")
    return ERROR_POLICIES[cfg.on_error]


def _conform(rec: Any, cfg: ImportConfig) -> Any:
    if cfg.resample and rec.sampling_rate != cfg.sample_rate:
        return rec.resample(cfg.sample_rate)
    return rec


# --------------------------------------------------------------------------------------------
# Where an import writes


def check_split_free(out_dir: Path, split: str, sample_rate: int, overwrite: bool) -> None:
    """Refuse, before any work, an import that would replace a split without ``overwrite`` or
    mix sample rates in one corpus."""
    info = read_corpus_json(out_dir)
    if info and info.get("sample_rate") != sample_rate:
        raise DataError(f"{out_dir / 'corpus.json'}: corpus is at {info.get('sample_rate')} Hz, "
                        f"this import at {sample_rate} Hz; import into another directory")
    listed = (info.get("splits") or {}).get(split)
    present = [k for k in MANIFEST_KINDS if (out_dir / f"{split}_{k}.jsonl.gz").exists()]
    if (listed or present) and not overwrite:
        what = (f"{listed.get('utterances', '?')} utterances, from {listed.get('origin', '?')}"
                if isinstance(listed, dict) else f"files {split}_*.jsonl.gz")
        raise DataError(f"{out_dir} already holds split {split!r} ({what}); pass --overwrite "
                        "to replace it, or import under another name (--split NAME)")


@contextmanager
def staging(out_dir: Path, split: str) -> Iterator[Path]:
    """A temporary directory inside ``out_dir`` for everything the import makes; removed at
    the end whatever happens (its contents are moved out on success). ``out_dir`` itself is
    removed again if this import created it and failed."""
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = make_temp_dir(out_dir, f"import-{split}")
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        if created:
            try:
                out_dir.rmdir()
            except OSError:
                pass
        raise
    shutil.rmtree(stage, ignore_errors=True)


def _moved_sources(rec: Any, stage: Path, final: Path) -> Any:
    """``rec`` with file sources inside ``stage`` pointed at their place under ``final``."""
    sources = []
    for s in rec.sources:
        p = Path(s.source)
        if s.type == "file" and p.is_relative_to(stage):
            s = replace(s, source=str(final / p.relative_to(stage)))
        sources.append(s)
    return replace(rec, sources=sources)


def commit_split(stage: Path, out_dir: Path, split: str, recordings: list[Any],
                 supervisions: list[Any], media: tuple[str, ...] = ("wav",)) -> None:
    """Move the staged files of ``split`` (``stage/{medium}/{split}/`` for each of ``media``:
    audio, labels) and its manifests into ``out_dir``."""
    recordings = [_moved_sources(r, stage, out_dir) for r in recordings]
    write_split(stage, split, recordings, supervisions)
    for medium in media:
        staged = stage / medium / split
        if not staged.is_dir():
            continue
        final = out_dir / medium / split
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():  # the files of the split being replaced (--overwrite)
            os.rename(final, stage / f"replaced-{medium}")
        os.rename(staged, final)
    for kind in MANIFEST_KINDS:
        os.replace(stage / f"{split}_{kind}.jsonl.gz", out_dir / f"{split}_{kind}.jsonl.gz")


def finish_import(recordings: list[Any], supervisions: list[Any], out_dir: Path,
                  cfg: ImportConfig, report: ImportReport, origin: str, stage: Path) -> ImportReport:
    """Validate, drop or raise on bad items, then move the split from ``stage`` into
    ``out_dir`` and merge it into corpus.json.

    Recordings the caller already rejected are simply absent; their utterances were counted
    by the caller and are not counted again.
    """
    handle = _policy(cfg)
    by_recording: dict[str, list[str]] = {}
    for sup in supervisions:
        by_recording.setdefault(sup.recording_id, []).append(sup.id)
    good_recs: dict[str, Any] = {}
    for rec in recordings:
        rec = _conform(rec, cfg)
        try:
            validate_recording(rec, cfg.sample_rate, channels=1)
        except DataError as e:
            handle(report, by_recording.get(rec.id, []), "bad audio", e)
            continue
        good_recs[rec.id] = rec
    kept_sups = []
    for sup in supervisions:
        if sup.id in report.dropped:
            continue
        if sup.recording_id not in good_recs:
            handle(report, [sup.id], "unknown recording", DataError(
                f"utterance {sup.id!r}: its recording {sup.recording_id!r} is not in the "
                "recordings"))
            continue
        rec = good_recs[sup.recording_id]
        if sup.end > rec.duration + 1e-2:
            handle(report, [sup.id], "segment past end of audio", DataError(
                f"utterance {sup.id!r}: ends at {sup.end:.2f} s but recording {rec.id!r} lasts "
                f"{rec.duration:.2f} s"))
            continue
        try:
            validate_supervision(sup.text, sup.language, cfg.known_languages, utt=sup.id)
        except DataError as e:
            handle(report, [sup.id], "bad transcript or language", e)
            continue
        kept_sups.append(sup)
    used = {s.recording_id for s in kept_sups}
    kept_recs = [r for rid, r in good_recs.items() if rid in used]
    if not kept_sups:
        raise DataError(f"{origin}: no usable utterance left to import "
                        f"(skipped: {dict(report.skipped)})")
    commit_split(stage, out_dir, report.split, kept_recs, kept_sups)
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
    summary = split_summary(supervisions)
    summary["origin"] = origin
    info["splits"][split] = summary
    langs = {lang for s in info["splits"].values() for lang in s.get("languages", {})}
    info["languages"] = [lang for lang in LANGUAGES if lang in langs] + sorted(
        langs - set(LANGUAGES))
    atomic_write_json(out_dir / "corpus.json", info)


# --------------------------------------------------------------------------------------------
# Kaldi


def _kaldi_recordings(kdir: KaldiDataDir, stage: Path, split: str, report: ImportReport,
                      handle: Policy) -> list[Any]:
    """Recordings of wav.scp that can be read; piped commands are run once and their audio
    stored as WAV under ``stage`` (moved into the corpus when the import succeeds)."""
    from lhotse import AudioSource, Recording

    utts_of: dict[str, list[str]] = {}
    for u in kdir.utterances:
        utts_of.setdefault(kdir.recording_of(u), []).append(u)
    recs = []
    scp = kdir.path / "wav.scp"
    for rec_id in sorted(utts_of):
        entry = kdir.wav[rec_id]
        try:
            if is_command(entry.value):
                audio, sr = run_wav_command(entry.value, file=scp, line=entry.line, rec=rec_id)
                # Store the command's output: training reads it many times, the command runs
                # once, and the file can be validated like any other.
                path = stage / "wav" / split / f"{rec_id}.wav"
                path.parent.mkdir(parents=True, exist_ok=True)
                sf.write(path, audio, sr, subtype="PCM_16", format="WAV")
            else:
                path = resolve_wav_path(entry.value, kdir.path)
            info = sf.info(str(path)) if path.exists() else None
            if info is None:
                raise DataError(f"{scp}:{entry.line} (recording {rec_id!r}): audio file "
                                f"{path} does not exist")
        except (sf.LibsndfileError, RuntimeError) as e:
            handle(report, utts_of[rec_id], "bad audio", DataError(
                f"{scp}:{entry.line} (recording {rec_id!r}): unreadable audio {entry.value!r} "
                f"({e})"))
            continue
        except DataError as e:
            handle(report, utts_of[rec_id], "bad audio", e)
            continue
        recs.append(Recording(
            id=rec_id, sources=[AudioSource(type="file", channels=list(range(info.channels)),
                                            source=str(path))],
            sampling_rate=int(info.samplerate), num_samples=int(info.frames),
            duration=round(info.frames / info.samplerate, 6)))
    return recs


def import_kaldi(kaldi_dir: str | Path, out_dir: str | Path,
                 cfg: ImportConfig = ImportConfig(), *, overwrite: bool = False) -> ImportReport:
    """Import a Kaldi data directory as split ``cfg.split`` (default: its directory name).

    An existing split of that name is replaced only with ``overwrite``.
    """
    from lhotse import SupervisionSegment

    kdir = read_kaldi_dir(kaldi_dir)
    out_dir = Path(out_dir).resolve()
    split = check_split_name(cfg.split or kdir.path.resolve().name)
    handle = _policy(cfg)
    check_split_free(out_dir, split, cfg.sample_rate, overwrite)
    report = ImportReport(split=split, out_dir=out_dir)
    with staging(out_dir, split) as stage:
        recs = _kaldi_recordings(kdir, stage, split, report, handle)
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
                id=utt, recording_id=rec_id, start=start,
                duration=round(max(end - start, 0.0), 6), channel=0,
                text=kdir.text[utt].value, language=language, speaker=kdir.utt2spk[utt].value))
        return finish_import(recs, sups, out_dir, cfg, report, f"kaldi:{kdir.path.resolve()}",
                             stage)


# --------------------------------------------------------------------------------------------
# lhotse


def import_lhotse(recordings: str | Path, supervisions: str | Path, out_dir: str | Path,
                  cfg: ImportConfig, *, overwrite: bool = False) -> ImportReport:
    """Import a lhotse recipe's RecordingSet + SupervisionSet files as split ``cfg.split``.

    An existing split of that name is replaced only with ``overwrite``.
    """
    from lhotse import RecordingSet, SupervisionSet

    if not cfg.split:
        raise DataError("importing lhotse manifests needs a split name (--split train/dev/test)")
    out = Path(out_dir).resolve()
    from lhotse import Recording, SupervisionSegment

    recs = _load_manifest(RecordingSet, Recording, Path(recordings), "RecordingSet")
    sups = _load_manifest(SupervisionSet, SupervisionSegment, Path(supervisions), "SupervisionSet")
    check_split_free(out, cfg.split, cfg.sample_rate, overwrite)
    fixed_recs = [_absolute_sources(r) for r in recs]
    fixed_sups = [replace(s, language=normalize_language(s.language)
                          or normalize_language(cfg.language)) for s in sups]
    with staging(out, cfg.split) as stage:
        return finish_import(fixed_recs, fixed_sups, out, cfg, ImportReport(cfg.split, out),
                             f"lhotse:{Path(recordings).resolve()}", stage)


def _load_manifest(cls: Any, item_cls: type, path: Path, kind: str) -> list[Any]:
    if not path.exists():
        raise DataError(f"{path}: {kind} manifest does not exist")
    try:
        items = list(cls.from_file(path))
    except Exception as e:  # noqa: BLE001 - lhotse raises KeyError/ValueError/JSON errors
        raise DataError(f"{path}: not a valid lhotse {kind} ({type(e).__name__}: {e})") from None
    # lhotse reads any manifest into any set: a CutSet given as recordings loads as cuts.
    wrong = next((x for x in items if not isinstance(x, item_cls)), None)
    if wrong is not None:
        raise DataError(f"{path}: not a lhotse {kind}: it holds {type(wrong).__name__} items "
                        f"(e.g. {getattr(wrong, 'id', '?')!r}); give the {kind} file")
    return items


def _absolute_sources(rec: Any) -> Any:
    """File sources made absolute (relative to the working directory, lhotse's convention),
    so the imported corpus can be read from anywhere."""
    sources = [replace(s, source=str(Path(s.source).resolve())) if s.type == "file" else s
               for s in rec.sources]
    return replace(rec, sources=sources)
