"""Work stops when nobody waits for it: an upload's transcription whose client disconnects stops
at its next chunk, and a job still queued behind it never runs (a server of its own, with
recognizers whose progress the test can see)."""

from __future__ import annotations

import io
import socket
import threading
import time
from typing import Any

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from serve_support import post, running  # noqa: E402

from speechlab.contract import Transcript  # noqa: E402
from speechlab.testing.toy_family import ToyConfig, ToyNet, ToyRecognizer  # noqa: E402


class Endless(ToyRecognizer):
    """Transcribes one chunk after another for up to a minute, reporting progress after each,
    until the progress callback stops it."""

    def __init__(self) -> None:
        super().__init__(ToyNet(ToyConfig()))
        self.started = threading.Event()
        self.stopped = threading.Event()
        self.chunks = 0

    def transcribe(self, audio: Any, sample_rate: int = 16000, language: str | None = None, *,
                   method: str | None = None, beam: int | None = None,
                   progress: Any = None) -> Transcript:
        self.started.set()
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                self.chunks += 1
                progress(self.chunks * 0.1)
                time.sleep(0.005)
        except BaseException:
            self.stopped.set()
            raise
        return Transcript("nobody stopped me", "en")


class Counting(ToyRecognizer):
    def __init__(self) -> None:
        super().__init__(ToyNet(ToyConfig()))
        self.calls = 0

    def transcribe(self, audio: Any, *args: Any, **kw: Any) -> Transcript:
        self.calls += 1
        return super().transcribe(audio, *args, **kw)


def _wav() -> bytes:
    out = io.BytesIO()
    sf.write(out, np.full(16000, 0.1, dtype=np.float32), 16000, format="WAV")
    return out.getvalue()


def _send_and_keep(url: str, model: str, body: bytes) -> socket.socket:
    """A client that sends a whole upload and then waits (the test closes it)."""
    host, port = url.removeprefix("http://").split(":")
    s = socket.create_connection((host, int(port)), timeout=30)
    s.sendall(f"POST /api/transcribe?model={model} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
              f"Content-Type: audio/wav\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    return s


def _until(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_a_departed_clients_job_stops_at_its_next_chunk_and_a_queued_one_never_runs():
    from speechlab.serve.runtime import ServeLimits

    endless, counting = Endless(), Counting()
    body = _wav()
    with running({"endless": endless, "toy": counting}, ServeLimits()) as (url, app):
        first = _send_and_keep(url, "endless", body)
        assert endless.started.wait(30), "the first job never started"
        second = _send_and_keep(url, "toy", body)  # queued behind the first on the job thread
        # the second request holds a job slot once its body is in
        assert _until(lambda: app.state.runtime.jobs.used == 2), "the second job never queued"
        second.close()
        first.close()
        assert endless.stopped.wait(30), "the departed client's job went on"
        chunks = endless.chunks
        status, answer = post(url, "/api/transcribe?model=toy", body)
        assert status == 200 and answer["text"] == "speech"
        assert counting.calls == 1, "the departed client's queued job ran"
        assert endless.chunks == chunks  # and the stopped one did not come back
        assert _until(lambda: app.state.runtime.jobs.used == 0)
