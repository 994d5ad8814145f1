"""Shipped models by name: speechlab.load, speechlab transcribe, speechlab models, and
speechlab serve with no PATH all reach the packages under models/ (or $SPEECHLAB_MODELS)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import speechlab
from speechlab.cli import main
from speechlab.errors import DataError
from speechlab.shipped import MODELS_ENV, models_dir, resolve, shipped
from speechlab.testing.tiny_models import ctc_package


@pytest.fixture(scope="module")
def ships(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    ctc_package(root / "en_tiny_ctc")
    (root / "not_a_package").mkdir()
    return root


def test_a_shipped_name_loads_like_its_path(ships, monkeypatch):
    monkeypatch.setenv(MODELS_ENV, str(ships))
    assert models_dir() == ships
    assert list(shipped()) == ["en_tiny_ctc"]
    assert resolve("en_tiny_ctc") == ships / "en_tiny_ctc"
    by_name, by_path = speechlab.load("en_tiny_ctc"), speechlab.load(ships / "en_tiny_ctc")
    audio = np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.1
    assert by_name.transcribe(audio).text == by_path.transcribe(audio).text


def test_an_unknown_name_names_the_shipped_models(ships, monkeypatch, capsys):
    monkeypatch.setenv(MODELS_ENV, str(ships))
    assert resolve("no_such_model") == Path("no_such_model")
    with pytest.raises(DataError, match=r"no_such_model does not exist; give .*, or a shipped "
                                        r"model's name \(en_tiny_ctc\)"):
        speechlab.load("no_such_model")
    assert main(["transcribe", "no_such_model", "x.wav"]) == 2
    assert "or a shipped model's name (en_tiny_ctc)" in capsys.readouterr().err


def test_speechlab_models_lists_them(ships, monkeypatch, capsys):
    monkeypatch.setenv(MODELS_ENV, str(ships))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "en_tiny_ctc" in out and "not_a_package" not in out
    assert main(["models", "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| Model | Family") and lines[2].startswith("| en_tiny_ctc |")


def test_serve_without_paths_serves_the_shipped_models(ships):
    from speechlab.testing.serve_process import serve_process

    with serve_process(["--port", "0"], {MODELS_ENV: str(ships)}) as (url, printed):
        assert "en_tiny_ctc" in printed
        with urllib.request.urlopen(url + "api/models", timeout=30) as r:
            assert [m["name"] for m in json.loads(r.read())] == ["en_tiny_ctc"]
