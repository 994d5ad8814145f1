"""What every request of one server shares: the models, the limits, the worker threads, the
stream and job slots, per-model locks and a directory for uploads.

Inference is CPU-bound and runs off the event loop: streaming steps on ``workers`` threads
(one per core by default, each step single-threaded), everything else (whole-file
transcription, synthesis, the analysis panels, decoding a non-streaming model's recording at
``done``) on one more thread, one call per model at a time (the Kaldi decoder and lazily built
parts of a model are not thread-safe). A long upload therefore never stops partial results of
live streams. Slots bound how many streams and jobs run or wait at once; beyond them a client
is told the server is busy, so memory never grows with the number of clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError
from speechlab.files import make_temp_dir
from speechlab.serve.models import ServedModel


@dataclass(frozen=True)
class ServeLimits:
    """How much one server takes on (``speechlab serve`` options in brackets).

    ``max_upload_mb`` [--max-upload-mb]: largest request body; ``max_streams``
    [--max-streams]: live recognition streams at once (sized for 2 cores: see
    ``benchmarks/serve_load.py``); ``workers`` [--workers]: threads for streaming steps;
    ``max_jobs``: HTTP inference requests running or waiting; ``max_receiving``: request
    bodies being received (apart from the jobs, so slow uploads cannot hold inference slots); ``max_pending_seconds``: audio a
    stream has received but not yet decoded; ``max_buffered_seconds``: a recording kept whole
    for a model that decodes at ``done``; ``max_frame_mb``: largest WebSocket frame;
    ``max_text_chars``: text to synthesize; ``max_analysis_seconds``: audio the attention and
    lattice panels analyse (their cost grows with the square of the length, or faster);
    ``max_audio_seconds`` [--max-audio-s]: audio one upload or one stream may hold, read from
    the header before anything is decoded (bytes do not bound it: 100 MB of FLAC hold hours);
    ``idle_seconds`` [--idle-s]: a stream that sends nothing for this long before ``done`` is
    closed, so idle clients cannot hold every stream slot; ``body_idle_seconds`` and
    ``min_body_kbps`` [--min-body-kbps]: a request body that sends nothing for that long, or
    comes slower than that on average after 10 s, is dropped (HTTP 408), so a trickling
    upload cannot hold a request slot. ``new_words`` [--new-words]: whether a request's
    hotwords may add words to a model that can (``new_words`` capability: each new set of
    words builds its decoding graph again, seconds of CPU while that model's other requests
    wait), off by default.
    """

    max_upload_mb: float = ranged(100.0, gt=0, le=4096, why="uploads are spooled to disk")
    max_streams: int = ranged(8, ge=1, le=1024)
    workers: int = ranged(2, ge=1, le=64)
    max_jobs: int = ranged(4, ge=1, le=256)
    max_receiving: int = ranged(32, ge=1, le=1024)
    max_pending_seconds: float = ranged(30.0, gt=0, le=3600)
    max_buffered_seconds: float = ranged(600.0, gt=0, le=36000)
    max_frame_mb: float = ranged(4.0, gt=0, le=256)
    max_text_chars: int = ranged(2000, ge=1, le=100_000)
    max_analysis_seconds: float = ranged(30.0, gt=0, le=600)
    max_audio_seconds: float = ranged(3600.0, gt=0, le=86400)
    idle_seconds: float = ranged(30.0, gt=0, le=3600)
    body_idle_seconds: float = ranged(10.0, gt=0, le=600)
    min_body_kbps: float = ranged(16.0, ge=0, le=1e6)
    new_words: bool = False

    @property
    def body_pace(self) -> dict[str, float]:
        """``save_body`` / ``read_small_body``'s pacing keywords."""
        return {"idle_seconds": self.body_idle_seconds, "min_rate": self.min_body_kbps * 1024}

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 2**20)


class NotFound(Exception):
    """An unknown model (HTTP 404)."""


class Busy(Exception):
    """No slot is free: the client should try again later (HTTP 503, WebSocket 1013)."""


class Departed(Exception):
    """The client of a job left: the job stopped at its next chunk (nobody answers it)."""


class Departure(threading.Event):
    """Set when the client of a job has left; the job calls :meth:`check` at each chunk."""

    def check(self, *_: Any) -> None:
        if self.is_set():
            raise Departed("the client disconnected")


async def _disconnected(request: Any) -> bool:
    """True once ``request``'s client disconnects (its body already read: the next message
    the server gives is the disconnect)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return True


class Slots:
    """At most ``limit`` holders at once; taking never waits (the event loop's thread only)."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.what = what
        self.used = 0

    def take(self) -> None:
        if self.used >= self.limit:
            raise Busy(f"busy: {self.used} {self.what} are running, this server's limit; try "
                       "again in a moment")
        self.used += 1

    def give_back(self) -> None:
        self.used -= 1

    def __enter__(self) -> Slots:
        self.take()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.give_back()


class Runtime:
    """The shared state of one server (module doc)."""

    def __init__(self, models: Mapping[str, ServedModel], limits: ServeLimits) -> None:
        self.models = dict(models)
        self.limits = limits
        for served in self.models.values():
            if "new_words" in served.model.capabilities:
                served.model.new_words = limits.new_words
        self.stream_pool = ThreadPoolExecutor(limits.workers, thread_name_prefix="serve-stream")
        self.job_pool = ThreadPoolExecutor(1, thread_name_prefix="serve-job")
        self.streams = Slots(limits.max_streams, "streams")
        self.jobs = Slots(limits.max_jobs, "requests")
        self.receiving = Slots(limits.max_receiving, "uploads being received")
        self.locks = {name: threading.Lock() for name in self.models}
        # Uploads are spooled here; a server killed outright (SIGKILL) leaves its spool, which
        # the next server started in the same temporary directory removes (make_temp_dir).
        self.uploads = make_temp_dir(Path(tempfile.gettempdir()), "speechlab-serve")

    def model(self, name: str | None, kind: str | None = None) -> ServedModel:
        """The served model ``name``, checked to be of ``kind``."""
        if not name:
            raise ConfigError(f"say which model: ?model=NAME, one of {', '.join(self.models)}")
        served = self.models.get(name)
        if served is None:
            raise NotFound(f"no model named {name!r} here; this server has "
                           f"{', '.join(self.models) or 'none'}")
        if kind is not None and served.kind != kind:
            what = {"asr": "a speech recognizer", "tts": "a speech synthesizer"}.get(kind, kind)
            raise ConfigError(f"{name} is a {served.kind} model, not {what}")
        return served

    async def step(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on a streaming worker thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.stream_pool, functools.partial(fn, *args))

    async def job(self, served: ServedModel, fn: Callable[..., Any], *args: Any,
                  watch: Any = None) -> Any:
        """``fn(*args)`` on the job thread, holding ``served``'s lock.

        With ``watch`` (the request, its body already read), ``fn`` is called with one more
        argument, a :class:`Departure` it checks at each chunk of its work: when the client
        disconnects, the job still queued never starts and the job running stops at its
        next chunk (:class:`Departed`), so the thread goes to the clients still waiting."""
        lock = self.locks[served.name]
        departure = Departure() if watch is not None else None

        def locked() -> Any:
            if departure is None:
                with lock:
                    return fn(*args)
            departure.check()
            with lock:
                return fn(*args, departure)

        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self.job_pool, locked)
        if departure is None:
            return await work
        watcher = asyncio.ensure_future(_disconnected(watch))
        try:
            await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not watcher.done():
                watcher.cancel()
        if watcher.done() and not watcher.cancelled() and watcher.result():
            departure.set()
            with contextlib.suppress(Departed):
                await work  # the thread comes back at the job's next chunk
            raise Departed("the client disconnected before its answer")
        return await work

    def close(self) -> None:
        self.stream_pool.shutdown(wait=False, cancel_futures=True)
        self.job_pool.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(self.uploads, ignore_errors=True)
