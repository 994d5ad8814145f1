"""Clients of the test server (conftest.py): plain HTTP and a synchronous WebSocket."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import soundfile as sf

MAX_STREAMS = 3  # the test server's --max-streams


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
