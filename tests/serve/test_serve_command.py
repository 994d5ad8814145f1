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
