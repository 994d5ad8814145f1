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


class SlowBody(Exception):
    """A request body that stalls or trickles (HTTP 408): a client cannot hold a request slot
    by sending a few bytes a second."""


async def paced(request: Any, idle_seconds: float, min_rate: float, grace_seconds: float = 10.0,
                clock: Any = None) -> Any:
    """The chunks of ``request``'s body, while they keep coming: :class:`SlowBody` if none
    arrives for ``idle_seconds``, or if after ``grace_seconds`` the body has come at less
    than ``min_rate`` bytes a second on average."""
    import asyncio
    import time

    clock = clock or time.monotonic
    start = clock()
    received = 0
    chunks = request.stream().__aiter__()
    while True:
        try:
            chunk = await asyncio.wait_for(chunks.__anext__(), idle_seconds)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise SlowBody(f"no byte of the body for {idle_seconds:g} s; the request is "
                           "dropped") from None
        received += len(chunk)
        elapsed = clock() - start
        if elapsed > grace_seconds and received / elapsed < min_rate:
            raise SlowBody(f"the body comes at {received / elapsed:.0f} bytes/s, under the "
                           f"{min_rate:g} this server waits for; the request is dropped")
        yield chunk


async def save_body(request: Any, directory: Path, limit: int, suffix: str = ".wav", *,
                    idle_seconds: float = 10.0, min_rate: float = 16384.0) -> Path:
    """The body of ``request`` (a Starlette request) written to a new file in ``directory``;
    :class:`TooLarge` once it passes ``limit`` bytes (before reading, from Content-Length);
    :class:`SlowBody` if it stalls or trickles (:func:`paced`)."""
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
            async for chunk in paced(request, idle_seconds, min_rate):
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


async def read_small_body(request: Any, limit: int, *, idle_seconds: float = 10.0,
                          min_rate: float = 16384.0) -> bytes:
    """A small body (JSON) read whole, refused past ``limit`` bytes or if it stalls or
    trickles (:func:`paced`)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(limit)
    parts, received = [], 0
    async for chunk in paced(request, idle_seconds, min_rate):
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
