"""Request bodies within a size limit, and the audio in them.

An upload is refused before it is read when its ``Content-Length`` says it is too large, and
while it is read when it grows past the limit without one (chunked); what is accepted goes to
a temporary file a block at a time, so a body never sits in memory whole and the recognizers
read it a block at a time as ``speechlab transcribe`` reads a file.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from speechlab.audio.io import check_finite
from speechlab.errors import DataError


class TooLarge(Exception):
    """A body over the limit (HTTP 413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the upload is larger than this server takes ({limit / 2**20:g} MB, "
                         "--max-upload-mb); send a shorter recording")


async def save_body(request: Any, directory: Path, limit: int, suffix: str = ".wav") -> Path:
    """The body of ``request`` (a Starlette request) written to a new file in ``directory``;
    :class:`TooLarge` once it passes ``limit`` bytes (before reading, from Content-Length)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise DataError(f"Content-Length {declared!r} is not a number") from None
        if size > limit:
            raise TooLarge(limit)
    fd, name = tempfile.mkstemp(suffix=suffix, dir=directory)
    path = Path(name)
    received = 0
    try:
        with os.fdopen(fd, "wb") as f:
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit:
                    raise TooLarge(limit)
                f.write(chunk)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    if received == 0:
        path.unlink(missing_ok=True)
        raise DataError("the request has no body; send the audio file as the body")
    return path


async def read_small_body(request: Any, limit: int) -> bytes:
    """A small body (JSON) read whole, refused past ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(limit)
    parts, received = [], 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise TooLarge(limit)
        parts.append(chunk)
    return b"".join(parts)


def read_audio(path: Path, name: str, max_seconds: float | None = None) -> np.ndarray:
    """The mono 16 kHz samples of an uploaded file, checked as ``speechlab transcribe`` checks
    its inputs; messages name the upload by ``name``, never the server's temporary path."""
    from speechlab.audio.io import as_samples, validate_audio_file

    with renamed_errors(path, name):
        info = validate_audio_file(path, expected_sr=None, channels=None)
        seconds = info.frames / info.sample_rate
        if max_seconds is not None and seconds > max_seconds:
            raise DataError(f"{path}: {seconds:.1f} s of audio; this panel analyses at most "
                            f"{max_seconds:g} s: trim the recording")
        return as_samples(path, 16000, 16000, what=str(path))


class renamed_errors:
    """A context in which a :class:`DataError` naming ``path`` names ``name`` instead."""

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = str(path), name

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, tb: Any) -> bool:
        if isinstance(error, DataError) and self.path in str(error):
            raise DataError(str(error).replace(self.path, self.name)) from None
        return False


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """16-bit PCM WAV of float samples in [-1, 1]."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.clip(samples, -1.0, 1.0), sample_rate, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def pcm_frame(data: bytes) -> np.ndarray:
    """A WebSocket audio frame: float32 little-endian mono samples (16 kHz), checked."""
    if not data:
        raise DataError("an empty audio frame")
    if len(data) % 4:
        raise DataError(f"an audio frame of {len(data)} bytes: frames are float32 samples "
                        "(a multiple of 4 bytes)")
    samples = np.frombuffer(data, dtype="<f4").astype(np.float32)
    check_finite(samples, "an audio frame")  # NaN, inf, or far beyond [-1, 1]
    return samples
