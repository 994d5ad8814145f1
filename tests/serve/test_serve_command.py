"""``speechlab serve`` as a user starts it: a child process serving the demo's models (or
saying which are missing), one error line for a port in use, and model names."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

from speechlab.cli import main
from speechlab.serve.commands import bind
from speechlab.serve.models import unique_names


def test_serve_without_paths_serves_the_demo_models_it_finds(model_paths, tmp_path):
    demo = tmp_path / "demo"
    shutil.copytree(model_paths["tones"].parent.parent, demo / "multisoftmax")
    from speechlab.testing.serve_process import serve_process

    with serve_process(["--demo", str(demo), "--port", "0"]) as (url, out):
        assert "lacks topologies/models/en_S1-T1" in out and "salad/models/big_salad" in out
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "api/models", timeout=30) as r:
            assert json.loads(r.read()) == [{"name": "multisoftmax_lid", "kind": "asr",
                                             "streaming": True, "languages": ["en", "hi"]}]
        with urllib.request.urlopen(url, timeout=30) as r:
            page = r.read().decode()
            assert "<title>speechlab serve</title>" in page
            assert r.headers["Content-Security-Policy"].startswith("default-src 'self'")
        with urllib.request.urlopen(url + "static/app.js", timeout=30) as r:
            assert r.headers["Content-Type"].startswith("text/javascript")


def test_a_port_in_use_is_one_error_line(model_paths, capsys):
    sock = bind("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        assert main(["serve", str(model_paths["hf"]), "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"port {port} on 127.0.0.1 is in use" in err
    finally:
        sock.close()


def test_models_are_named_by_their_directory_and_told_apart():
    assert unique_names([Path("/r/models/a"), Path("/pkg/b")]) == ["a", "b"]
    assert unique_names([Path("/x/en/models/m"), Path("/x/hi/models/m")]) == ["en/m", "hi/m"]
    assert unique_names([Path("/p/a"), Path("/p/a")]) == ["a", "a-2"]


def test_sigterm_stops_the_server_during_a_slow_upload_and_a_decode(model_paths, tmp_path):
    """SIGTERM while a client trickles an upload and another's long recording decodes: the
    process ends within a few seconds (not when the work would have finished) and its spool
    is gone."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    import numpy as np
    import soundfile as sf

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "speechlab", "serve", str(model_paths["hf"]),
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)
    try:
        url = ""
        for line in proc.stdout:
            if "http://" in line:
                url = line.split()[2]
                break
        assert url, "the server did not start"
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        slow = socket.create_connection((host, int(port)), timeout=10)
        slow.sendall(b"POST /api/transcribe?model=hf HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Content-Length: 100000000\r\n\r\nRIFF")
        long_wav = tmp_path / "long.wav"
        sf.write(long_wav, 0.1 * np.random.default_rng(0).standard_normal(16000 * 600)
                 .astype(np.float32), 16000, subtype="PCM_16")
        busy = socket.create_connection((host, int(port)), timeout=10)
        body = long_wav.read_bytes()
        busy.sendall(b"POST /api/transcribe?model=hf HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        spools = list(tmp_path.glob(".speechlab-serve-*"))
        assert len(spools) == 1
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # before the change it never exited during the slow upload
        assert time.monotonic() - started < 30
        assert not spools[0].exists()
        slow.close()
        busy.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
