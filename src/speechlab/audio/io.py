"""Reading audio, and checking audio and transcripts before anything trains on them.

Every check raises :class:`~speechlab.errors.DataError` naming the file and utterance and saying
what to do, so one bad file in a corpus of thousands is found at import time, not as a crash
or a silently wrong batch hours into training. Cases detected:

* unreadable: missing file, not an audio format libsndfile understands;
* truncated: a WAV whose ``data`` chunk declares more bytes than the file holds (libsndfile
  silently reads what is there), or audio shorter/longer than its manifest says;
* empty: zero samples;
* non-finite: NaN or inf samples (only float formats can hold them; their samples are read);
* wrong sample rate, wrong channel count;
* transcripts: empty text, unknown or missing language tag.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable

import numpy as np
import soundfile as sf

from speechlab.errors import DataError, where

# Samples a manifest's length may differ from the file by (rounding of durations in seconds).
SAMPLE_TOLERANCE = 1
#: The largest sample magnitude accepted (:func:`check_finite`): float audio lies within
#: [-1, 1]; a little beyond is clipping headroom, hundreds are a scaling mistake.
MAX_PEAK = 256.0
#: The sample rates audio may have wherever it enters (files, arrays, uploads): speech lies
#: within 8-192 kHz, and a rate is checked before anything is sized by it (a header that
#: declares 1 Hz would be resampled into hours of audio; 3 MHz sizes the resampling filter).
MIN_RATE, MAX_RATE = 8000, 192000


def check_rate(rate: Any, loc: str) -> int:
    """``rate`` as an int if it is a sample rate speechlab reads (:data:`MIN_RATE`..
    :data:`MAX_RATE` Hz); DataError naming ``loc`` otherwise."""
    whole = (isinstance(rate, (int, np.integer, float, np.floating))
             and not isinstance(rate, bool) and float(rate).is_integer())
    if not whole or not MIN_RATE <= int(rate) <= MAX_RATE:
        raise DataError(f"{loc}: sample rate {rate!r} Hz; speechlab reads audio at "
                        f"{MIN_RATE // 1000}-{MAX_RATE // 1000} kHz (resample it, e.g. sox in.wav "
                        "-r 16000 out.wav)")
    return int(rate)


# WAV writers that stream (pipes) put a placeholder size in the data chunk; not a truncation.
_STREAMING_SIZES = (0, 0xFFFFFFFF)
_STREAMING_MIN = 0x7FFFF000
# libsndfile subtypes holding floats (WAV/AIFF/CAF/W64/RF64 float, and raw).
FLOAT_SUBTYPES = ("FLOAT", "DOUBLE")


@dataclass(frozen=True)
class AudioInfo:
    """What the file header says: sample rate, channels, frames (samples per channel)."""

    sample_rate: int
    channels: int
    frames: int
    format: str
    subtype: str = ""

    @property
    def is_float(self) -> bool:
        """Float samples: the only kind that can be NaN or inf."""
        return self.subtype in FLOAT_SUBTYPES


def _wav_shortfall(path: Path) -> tuple[int, int] | None:
    """For a RIFF/WAVE file, (declared data bytes, bytes actually present); else None."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            return wav_shortfall(f, size)
    except OSError:
        return None


def wav_shortfall(f: BinaryIO, size: int) -> tuple[int, int] | None:
    """For RIFF/WAVE data of ``size`` bytes readable from ``f``, (declared data bytes, bytes
    actually present); None if it is not a WAV or its size is a streaming placeholder."""
    head = f.read(12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos = 12
    while pos + 8 <= size:
        f.seek(pos)
        chunk_id, chunk_len = struct.unpack("<4sI", f.read(8))
        if chunk_id == b"data":
            if chunk_len in _STREAMING_SIZES or chunk_len >= _STREAMING_MIN:
                return None
            return chunk_len, size - (pos + 8)
        pos += 8 + chunk_len + (chunk_len & 1)
    return None


def audio_info(path: str | Path, *, utt: str | None = None) -> AudioInfo:
    """Header information of an audio file; DataError if missing, unreadable or truncated."""
    path = Path(path)
    loc = where(path, utt=utt)
    if not path.exists():
        raise DataError(f"{loc}: audio file does not exist; " + (
            "fix the path in the manifest/wav.scp" if utt is not None else "check the path"))
    if path.stat().st_size == 0:
        raise DataError(f"{loc}: audio file is empty (0 bytes); re-create or drop it")
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError) as e:
        raise DataError(f"{loc}: unreadable audio ({e}); convert it to WAV/FLAC or drop it") \
            from None
    shortfall = _wav_shortfall(path)
    if shortfall is not None and shortfall[1] < shortfall[0]:
        declared, present = shortfall
        raise DataError(f"{loc}: truncated WAV: header declares {declared} data bytes but only "
                        f"{present} are present; re-create the file or drop it")
    check_rate(int(info.samplerate), loc)
    return AudioInfo(sample_rate=int(info.samplerate), channels=int(info.channels),
                     frames=int(info.frames), format=str(info.format),
                     subtype=str(info.subtype))


def check_finite(samples: np.ndarray, loc: str, sample_rate: int | None = None) -> None:
    """DataError naming ``loc`` if ``samples`` hold NaN or inf (no feature survives them), or
    reach beyond :data:`MAX_PEAK` in magnitude (float audio lies within [-1, 1]; samples of
    1e30 overflow the features into NaN, and int16 values passed as floats are 32768x too
    loud): refused, not normalised, so a caller learns that its audio is wrongly scaled."""
    if not samples.size:
        return
    # The extremes first: two passes that allocate nothing, and NaN or inf shows in them.
    low, high = float(samples.min()), float(samples.max())
    bad = np.zeros(0, dtype=bool) if math.isfinite(low) and math.isfinite(high) \
        else ~np.isfinite(samples)
    if bad.any():
        first = int(np.flatnonzero(bad.reshape(len(samples), -1).any(axis=1))[0])
        at = f" (at {first / sample_rate:.3f} s)" if sample_rate else ""
        raise DataError(f"{loc}: {int(bad.sum())} non-finite sample value(s) (NaN or inf), the "
                        f"first at sample {first}{at}; re-create the audio or drop it")
    peak = max(-low, high)
    if peak > MAX_PEAK:
        raise DataError(f"{loc}: samples reach {peak:.3g} in magnitude; audio as floats lies "
                        f"within [-1, 1] (at most {MAX_PEAK:g} is accepted): scale it (int16 "
                        "values as floats: divide by 32768)")


def _check_file_finite(path: Path, info: AudioInfo, loc: str) -> None:
    if not info.is_float:
        return
    try:
        # Block by block: a long recording need not be held in memory to be checked.
        for block in sf.blocks(str(path), blocksize=1 << 16, dtype="float32", always_2d=True):
            if not np.isfinite(block).all() or np.abs(block).max() > MAX_PEAK:
                # Once more over the whole file, for the count and the first bad position.
                audio, _ = sf.read(str(path), dtype="float32", always_2d=True)
                check_finite(audio, loc, info.sample_rate)
    except (sf.LibsndfileError, RuntimeError) as e:
        raise DataError(f"{loc}: unreadable audio ({e}); re-create it or drop it") from None


def _check_shape(info: AudioInfo, loc: str, expected_sr: int | None,
                 channels: int | None) -> None:
    if info.frames <= 0:
        raise DataError(f"{loc}: audio has no samples; drop this utterance")
    if expected_sr is not None and info.sample_rate != expected_sr:
        raise DataError(f"{loc}: sample rate {info.sample_rate} Hz, expected {expected_sr} Hz; "
                        f"resample it (e.g. sox in.wav -r {expected_sr} out.wav)")
    if channels is not None and info.channels != channels:
        raise DataError(f"{loc}: {info.channels} channels, expected {channels}; "
                        "downmix it (e.g. sox in.wav -c 1 out.wav)")


def validate_audio_file(path: str | Path, expected_sr: int | None = 16000,
                        channels: int | None = 1, *, utt: str | None = None,
                        finite: bool = True) -> AudioInfo:
    """Check a file is readable, complete, non-empty, at ``expected_sr`` with ``channels``,
    and (``finite``; float files only) holds no NaN or inf. ``finite=False`` reads the header
    only, for a caller whose reader checks each block as it decodes (the server)."""
    info = audio_info(path, utt=utt)
    _check_shape(info, where(path, utt=utt), expected_sr, channels)
    if finite:
        _check_file_finite(Path(path), info, where(path, utt=utt))
    return info


def load_audio(path: str | Path, expected_sr: int | None = 16000, *, channels: int | None = 1,
               utt: str | None = None) -> np.ndarray:
    """Read a mono audio file as float32 in [-1, 1].

    Args:
        path: audio file (anything libsndfile reads: WAV, FLAC, OGG...).
        expected_sr: required sample rate (None: accept any).
        channels: required channel count (None: accept any; the result is then (T, C)).
        utt: utterance id, for error messages.

    Returns:
        (T,) float32 for mono, (T, C) if ``channels`` is not 1.
    """
    info = audio_info(path, utt=utt)
    _check_shape(info, where(path, utt=utt), expected_sr, channels)
    try:
        audio, _sr = sf.read(str(path), dtype="float32", always_2d=False)
    except (sf.LibsndfileError, RuntimeError) as e:
        raise DataError(f"{where(path, utt=utt)}: unreadable audio ({e})") from None
    if audio.shape[0] != info.frames:
        raise DataError(f"{where(path, utt=utt)}: header says {info.frames} samples but "
                        f"{audio.shape[0]} could be read (truncated or corrupt); re-create it")
    check_finite(audio, where(path, utt=utt), info.sample_rate)
    return audio


def validate_recording(rec: Any, expected_sr: int | None = 16000,
                       channels: int | None = 1) -> None:
    """Check a lhotse ``Recording``: rate, channels, and that its audio matches the manifest."""
    loc = f"recording {rec.id!r}"
    if expected_sr is not None and rec.sampling_rate != expected_sr:
        raise DataError(f"{loc}: sample rate {rec.sampling_rate} Hz, expected {expected_sr} Hz; "
                        "resample it (import with resampling enabled)")
    if channels is not None and rec.num_channels != channels:
        raise DataError(f"{loc}: {rec.num_channels} channels, expected {channels}; downmix it")
    if rec.num_samples <= 0:
        raise DataError(f"{loc}: no samples; drop it")
    plain_files = not rec.transforms and all(s.type == "file" for s in rec.sources)
    if plain_files:
        for src in rec.sources:
            info = audio_info(src.source, utt=rec.id)
            _check_shape(info, where(src.source, utt=rec.id), rec.sampling_rate,
                         len(src.channels) if channels is not None else None)
            if abs(info.frames - rec.num_samples) > SAMPLE_TOLERANCE:
                raise DataError(f"{where(src.source, utt=rec.id)}: file has {info.frames} "
                                f"samples but the manifest says {rec.num_samples} (truncated or "
                                "replaced); re-create the file or the manifest")
            _check_file_finite(Path(src.source), info, where(src.source, utt=rec.id))
        return
    if all(s.type == "file" for s in rec.sources) and _resampled_only(rec):
        # lhotse pads or cuts what it decodes to the manifest's length, so the length is
        # checked against the files themselves: their frames at the resampled rate.
        for src in rec.sources:
            info = audio_info(src.source, utt=rec.id)
            expected = round(info.frames * rec.sampling_rate / info.sample_rate)
            if abs(expected - rec.num_samples) > SAMPLE_TOLERANCE + 1:
                raise DataError(f"{where(src.source, utt=rec.id)}: file has {info.frames} "
                                f"samples at {info.sample_rate} Hz ({expected} at "
                                f"{rec.sampling_rate} Hz) but the manifest says "
                                f"{rec.num_samples}; re-create the file or the manifest")
    # Commands, URLs, in-memory audio, resampling transforms: decode to check.
    try:
        audio = rec.load_audio()
    except Exception as e:  # noqa: BLE001 - lhotse/backends raise many types
        raise DataError(f"{loc}: audio cannot be loaded ({type(e).__name__}: {e})") from None
    if abs(audio.shape[-1] - rec.num_samples) > SAMPLE_TOLERANCE:
        raise DataError(f"{loc}: decoded {audio.shape[-1]} samples but the manifest says "
                        f"{rec.num_samples}; re-create the manifest")
    check_finite(np.asarray(audio).T, loc, rec.sampling_rate)


def _resampled_only(rec: Any) -> bool:
    """Whether ``rec``'s transforms are all resampling (lhotse's ``Resample``), which keep a
    file's duration."""
    return all(type(t).__name__ == "Resample" or (isinstance(t, dict) and t.get("name") ==
                                                     "Resample") for t in rec.transforms)


def validate_supervision(text: str | None, language: str | None, known_languages: Iterable[str],
                         *, utt: str | None = None) -> None:
    """Check a transcript is non-empty and its language tag is one of ``known_languages``."""
    known = list(known_languages)
    loc = f"utterance {utt!r}" if utt is not None else "transcript"
    if text is None or not text.strip():
        raise DataError(f"{loc}: empty transcript; fix the text or drop the utterance")
    if not language:
        raise DataError(f"{loc}: no language tag; give one (utt2lang, --language) from {known}")
    if language not in known:
        raise DataError(f"{loc}: unknown language tag {language!r}; known: {known}")


def validate_cut(cut: Any, expected_sr: int | None = 16000, known_languages: Iterable[str] = (
        "en", "hi", "ta", "gu"), channels: int | None = 1) -> None:
    """Check a lhotse cut: its recording, its bounds, and every supervision's text and language."""
    known = list(known_languages)
    if cut.has_recording:
        validate_recording(cut.recording, expected_sr, channels)
        if cut.start < 0 or cut.end > cut.recording.duration + 1e-3:
            raise DataError(f"cut {cut.id!r}: spans {cut.start:.3f}-{cut.end:.3f} s but recording "
                            f"{cut.recording.id!r} lasts {cut.recording.duration:.3f} s")
    else:
        raise DataError(f"cut {cut.id!r}: has no recording")
    if not cut.supervisions:
        raise DataError(f"cut {cut.id!r}: has no supervision (transcript)")
    for sup in cut.supervisions:
        validate_supervision(sup.text, sup.language, known, utt=sup.id)


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """``samples`` at ``to_rate`` (polyphase filtering; the same array when the rates agree)."""
    if from_rate == to_rate:
        return samples
    from math import gcd

    from scipy.signal import resample_poly

    g = gcd(int(from_rate), int(to_rate))
    return resample_poly(samples, int(to_rate) // g, int(from_rate) // g).astype(np.float32)


def as_samples(audio: Any, sample_rate: int, target_rate: int, *, what: str = "audio"
               ) -> np.ndarray:
    """Mono float32 samples at ``target_rate`` from what a user passes to ``transcribe``: a
    path to an audio file (its own rate is used), or a 1-D array / tensor of samples at
    ``sample_rate``. Multi-channel files are averaged to mono; NaN or inf, an empty recording
    and a non-positive rate are refused, naming ``what``."""
    if isinstance(audio, (str, Path)):
        path = Path(audio)
        info = audio_info(path)
        samples = load_audio(path, expected_sr=None, channels=None)
        if samples.ndim == 2:
            samples = samples.mean(axis=1)
        return resample(np.ascontiguousarray(samples, dtype=np.float32), info.sample_rate,
                        target_rate)
    check_rate(sample_rate, what)
    if hasattr(audio, "detach"):  # a torch tensor
        audio = audio.detach().cpu().numpy()
    samples = np.asarray(audio)
    if samples.ndim == 2 and 1 in samples.shape:
        samples = samples.reshape(-1)
    if samples.ndim != 1:
        raise DataError(f"{what}: expected mono samples (one dimension), got shape "
                        f"{tuple(samples.shape)}")
    if not np.issubdtype(samples.dtype, np.number):
        raise DataError(f"{what}: samples must be numbers, got {samples.dtype}")
    if np.issubdtype(samples.dtype, np.integer):  # PCM: scale to [-1, 1]
        samples = samples.astype(np.float32) / float(np.iinfo(samples.dtype).max + 1)
    samples = samples.astype(np.float32, copy=False)
    if not len(samples):
        raise DataError(f"{what}: no samples")
    check_finite(samples, what, sample_rate)
    return resample(samples, int(sample_rate), target_rate)
