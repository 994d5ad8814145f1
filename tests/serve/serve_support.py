"""Clients of the test server (conftest.py): plain HTTP and a synchronous WebSocket."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import soundfile as sf

MAX_STREAMS = 3  # the test server's --max-streams


@contextlib.contextmanager
def running(models: dict[str, Any], limits: Any) -> Iterator[tuple[str, Any]]:
    """A real server of ``models``: uvicorn on a free loopback port, in a thread, configured
    as `speechlab serve` configures it; yields its URL and app."""
    import uvicorn

    from speechlab.serve.app import create_app
    from speechlab.serve.commands import bind, uvicorn_config

    app = create_app(models, limits)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, limits))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def http_json(url: str) -> tuple[int, Any]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, json.loads(r.read())


def post(base: str, path: str, body: bytes, raw: bool = False) -> tuple[int, Any]:
    """POST ``body``; (status, JSON answer) or, with ``raw``, (status, bytes)."""
    request = urllib.request.Request(base + path, data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            data, status = r.read(), r.status
    except urllib.error.HTTPError as e:
        data, status = e.read(), e.code
    return status, data if raw and status == 200 else json.loads(data)


def ws_connect(server: Any, path: str, origin: str | None = None):
    """A connection the test closes itself (``legacy``: websockets >= 17 asks for a ``with``
    block otherwise)."""
    import inspect

    from websockets.sync.client import connect

    direct = {"legacy": True} if "legacy" in inspect.signature(connect).parameters else {}
    return connect(server.ws + path, origin=origin, compression=None, open_timeout=10,
                   proxy=None, max_size=None, **direct)


def collect(ws, timeout: float = 30.0) -> tuple[list[dict], int | None]:
    """Every message until the server closes the socket, and its close code."""
    from websockets.exceptions import ConnectionClosed

    messages = []
    try:
        while True:
            messages.append(json.loads(ws.recv(timeout=timeout)))
    except ConnectionClosed:
        pass
    return messages, ws.close_code


def send_frames(ws, frames) -> int:
    """Sends each frame until the server closes the socket (a limit it enforces closes it
    mid-stream, and a send after that raises): how many frames went out."""
    from websockets.exceptions import ConnectionClosed

    sent = 0
    for frame in frames:
        try:
            ws.send(frame)
        except ConnectionClosed:
            break
        sent += 1
    return sent


def stream_file(server: Any, model: str, wav: Path, query: str = "",
                chunk_seconds: float = 0.1) -> list[dict]:
    """A file sent to /ws/asr in ``chunk_seconds`` frames, then 'done': every message."""
    audio, rate = sf.read(wav, dtype="float32")
    assert rate == 16000
    ws = ws_connect(server, f"/ws/asr?model={model}{query}")
    step = int(chunk_seconds * rate)
    for i in range(0, len(audio), step):
        ws.send(audio[i:i + step].astype("<f4").tobytes())
    ws.send("done")
    messages, code = collect(ws)
    assert code == 1000, messages[-1:]
    return messages
