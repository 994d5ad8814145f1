"""Reading a Kaldi data directory (wav.scp, text, utt2spk, optional utt2lang and segments).

Kaldi's conventions, as checked by its ``utils/validate_data_dir.sh``: one ``<id> <value>`` entry
per line, ids unique per file; ``text`` and ``utt2spk`` list the same utterances; without
``segments`` an utterance id is a recording id of ``wav.scp``, with it each utterance is a
``<utt> <recording> <start> <end>`` span (``end`` of -1 meaning "to the end of the file").
A ``wav.scp`` value is a path or a shell command ending in ``|`` that writes audio to stdout
(``sph2pipe -f wav x.sph |``, ``sox x.flac -t wav - |``).

A structural fault (missing file, malformed line, duplicate id, utterance without speaker...)
raises one DataError naming the file and line. Per-utterance content (empty transcript, bad
audio) is left to the importer, which may raise or skip it.
"""

from __future__ import annotations

import io
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from speechlab.audio.io import FLOAT_SUBTYPES, check_finite, wav_shortfall
from speechlab.errors import DataError, where

REQUIRED_FILES = ("wav.scp", "text", "utt2spk")


@dataclass(frozen=True)
class Entry:
    """A value read from a Kaldi table, with the line it came from (for error messages)."""

    value: str
    line: int


@dataclass(frozen=True)
class Segment:
    """One line of ``segments``: an utterance's span of a recording, in seconds."""

    recording: str
    start: float
    end: float | None  # None: to the end of the recording
    line: int


@dataclass(frozen=True)
class KaldiDataDir:
    """The parsed tables of one Kaldi data directory (keys are utterance/recording ids)."""

    path: Path
    wav: dict[str, Entry]
    text: dict[str, Entry]
    utt2spk: dict[str, Entry]
    utt2lang: dict[str, Entry] | None
    segments: dict[str, Segment] | None

    @property
    def utterances(self) -> list[str]:
        return sorted(self.text)

    def recording_of(self, utt: str) -> str:
        return self.segments[utt].recording if self.segments is not None else utt


def read_table(path: Path, *, allow_empty_value: bool = False) -> dict[str, Entry]:
    """``<key> <value...>`` per line; DataError naming file:line on a malformed/duplicate line."""
    table: dict[str, Entry] = {}
    try:
        # utf-8-sig: a byte-order mark, as some editors write one, is not part of the first id.
        # Lines end at "\n" alone, as for Kaldi (str.splitlines also splits at U+2028 etc.).
        lines = path.read_text(encoding="utf-8-sig").split("\n")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text ({e}); convert it with iconv") from None
    for i, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line:
            continue
        if "\0" in line:
            raise DataError(f"{where(path, i)}: line holds a NUL byte (binary data, not text)")
        parts = line.split(maxsplit=1)
        key = parts[0]
        value = parts[1].strip() if len(parts) > 1 else ""
        if not value and not allow_empty_value:
            raise DataError(f"{where(path, i)}: expected '<id> <value>', got {raw!r}")
        if key in table:
            raise DataError(f"{where(path, i)}: duplicate id {key!r} (first on line "
                            f"{table[key].line}); ids must be unique")
        table[key] = Entry(value, i)
    return table


def _read_segments(path: Path) -> dict[str, Segment]:
    segs: dict[str, Segment] = {}
    for key, entry in read_table(path).items():
        fields = entry.value.split()
        loc = where(path, entry.line)
        if len(fields) != 3:
            raise DataError(f"{loc}: expected '<utt> <recording> <start> <end>', got "
                            f"{key} {entry.value!r}")
        rec, start_s, end_s = fields
        try:
            start, end = float(start_s), float(end_s)
        except ValueError:
            raise DataError(f"{loc}: start/end {start_s!r} {end_s!r} are not numbers") from None
        if start < 0 or (end != -1 and end <= start):
            raise DataError(f"{loc}: segment {key!r} has start {start} and end {end}; need "
                            "0 <= start < end (or end = -1 for 'to the end')")
        segs[key] = Segment(rec, start, None if end == -1 else end, entry.line)
    return segs


def read_kaldi_dir(path: str | Path) -> KaldiDataDir:
    """Parse and cross-check a Kaldi data directory; DataError (file:line) on any fault."""
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: not a directory; give a Kaldi data dir (wav.scp, text, utt2spk)")
    for name in REQUIRED_FILES:
        if not (path / name).is_file():
            raise DataError(f"{path / name}: missing; a Kaldi data dir needs "
                            f"{', '.join(REQUIRED_FILES)}")
    wav = read_table(path / "wav.scp")
    text = read_table(path / "text", allow_empty_value=True)
    utt2spk = read_table(path / "utt2spk")
    utt2lang = read_table(path / "utt2lang") if (path / "utt2lang").is_file() else None
    segments = _read_segments(path / "segments") if (path / "segments").is_file() else None

    for rec, entry in wav.items():
        if _is_ark(entry.value):
            raise DataError(f"{where(path / 'wav.scp', entry.line)}: {entry.value!r} is an ark "
                            "offset; only paths and piped commands are supported")
    # What each line of text needs, checked line by line: the first fault reported is the
    # one on the earliest line.
    text_needs: list[tuple[Mapping[str, object], str]] = [(utt2spk, "has no speaker in utt2spk")]
    if utt2lang is not None:
        text_needs.append((utt2lang, "has no language in utt2lang"))
    if segments is not None:
        text_needs.append((segments, "is not in segments"))
    else:
        text_needs.append((wav, "is not in wav.scp (and there is no segments file)"))
    _check_listed(path / "text", text, text_needs)
    _check_listed(path / "utt2spk", utt2spk, [(text, "has no transcript in text")])
    if segments is not None:
        for utt, seg in segments.items():
            if seg.recording not in wav:
                raise DataError(f"{where(path / 'segments', seg.line)}: recording "
                                f"{seg.recording!r} of utterance {utt!r} is not in wav.scp")
    return KaldiDataDir(path, wav, text, utt2spk, utt2lang, segments)


def _check_listed(file: Path, table: Mapping[str, Entry],
                  needs: Sequence[tuple[Mapping[str, object], str]]) -> None:
    """Each utterance of ``table`` (read from ``file``) is a key of every mapping in ``needs``;
    else a DataError at its line saying what it lacks (the text paired with that mapping)."""
    for utt, entry in table.items():
        for other, lacks in needs:
            if utt not in other:
                raise DataError(f"{where(file, entry.line)}: utterance {utt!r} {lacks}")


def _is_ark(value: str) -> bool:
    if value.endswith("|"):
        return False
    head, sep, offset = value.rpartition(":")
    return bool(sep) and offset.isdigit() and head.endswith(".ark")


def is_command(value: str) -> bool:
    """Whether a wav.scp value is a piped command (ends with ``|``)."""
    return value.rstrip().endswith("|")


def run_wav_command(value: str, *, file: Path, line: int, rec: str,
                    timeout: float = 120.0) -> tuple[np.ndarray, int]:
    """Run a wav.scp command; returns (samples (T,) or (T, C) int16, sample rate)."""
    cmd = value.rstrip()[:-1].strip()
    loc = where(file, line, rec)
    try:
        r = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise DataError(f"{loc}: command timed out after {timeout:.0f} s: {cmd}") from None
    if r.returncode != 0:
        err = r.stderr.decode(errors="replace").strip()[-300:]
        raise DataError(f"{loc}: command failed (exit {r.returncode}): {cmd}"
                        + (f": {err}" if err else ""))
    if not r.stdout:
        raise DataError(f"{loc}: command wrote no audio: {cmd}")
    shortfall = wav_shortfall(io.BytesIO(r.stdout), len(r.stdout))
    if shortfall is not None and shortfall[1] < shortfall[0]:
        raise DataError(f"{loc}: command output is truncated: its WAV header declares "
                        f"{shortfall[0]} data bytes but {shortfall[1]} came: {cmd}")
    try:
        if sf.info(io.BytesIO(r.stdout)).subtype in FLOAT_SUBTYPES:
            # NaN would silently become some integer below; refuse it here.
            floats, sr = sf.read(io.BytesIO(r.stdout), dtype="float32")
            check_finite(floats, f"{loc}: output of {cmd}", int(sr))
        audio, sr = sf.read(io.BytesIO(r.stdout), dtype="int16")
    except (sf.LibsndfileError, RuntimeError) as e:
        raise DataError(f"{loc}: command output is not audio ({e}): {cmd}") from None
    return audio, int(sr)


def resolve_wav_path(value: str, data_dir: Path) -> Path:
    """A wav.scp path: absolute, else relative to the working directory (Kaldi's convention,
    the recipe directory), else relative to the data directory."""
    p = Path(value)
    if p.is_absolute() or p.exists():
        return p.resolve()
    candidate = data_dir / p
    return candidate.resolve() if candidate.exists() else p.resolve()
