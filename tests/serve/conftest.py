"""One real server for the serve tests: uvicorn on a free loopback port, in a thread, holding a
model of every kind the page shows (built once per session, in about three seconds):

- ``tones``: the multi-softmax LID RNN-T planted to spell "the fox" from tone bursts
  (:mod:`speechlab.testing.tone_rnnt`), so that audio through the browser's microphone path
  must come out exactly as the file does;
- ``hf``: a Hugging Face wav2vec 2.0 CTC directory (reads whole recordings);
- ``ctc``: a CTC S1-T1 package with its decoding graph (the lattice panel);
- ``w2v``: a wav2vec 2.0 encoder package (the attention panel);
- ``salad``: a SALAD package (the TTS panel).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("websockets")

from serve_support import MAX_STREAMS, running  # noqa: E402


@dataclass(frozen=True)
class Served:
    url: str  # http://127.0.0.1:PORT
    paths: dict[str, Path]  # model name -> its directory
    wav: Path  # the tone recording
    app: object

    @property
    def ws(self) -> str:
        return "ws" + self.url.removeprefix("http")


@pytest.fixture(scope="session")
def model_paths(tmp_path_factory) -> dict[str, Path]:
    from speechlab.testing.tiny_models import (ctc_package, hf_ctc_directory, salad_package,
                                               wav2vec2_package)
    from speechlab.testing.tone_rnnt import MODEL, planted_run

    pytest.importorskip("transformers")
    root = tmp_path_factory.mktemp("served")
    return {"tones": planted_run(root / "tones") / "models" / MODEL,
            "hf": hf_ctc_directory(root / "hf"),
            "ctc": ctc_package(root / "ctc"),
            "w2v": wav2vec2_package(root / "w2v", preset="tiny", local_blocks=(2, 3), radius=4),
            "salad": salad_package(root / "salad")}


@pytest.fixture(scope="session")
def tone_wav(tmp_path_factory) -> Path:
    from speechlab.testing.tone_rnnt import write_tone_wav

    return write_tone_wav(tmp_path_factory.mktemp("audio") / "the_fox.wav")


@pytest.fixture(scope="session")
def server(model_paths, tone_wav):
    import speechlab
    from speechlab.serve.runtime import ServeLimits

    models = {name: speechlab.load(path) for name, path in model_paths.items()}
    with running(models, ServeLimits(max_streams=MAX_STREAMS)) as (url, app):
        yield Served(url, dict(model_paths), tone_wav, app)


@pytest.fixture(scope="session")
def cli_json(model_paths):
    """``speechlab transcribe MODEL WAV --json`` as a dict, per (model name, wav)."""
    import contextlib
    import io
    import json

    from speechlab.cli import main

    cache: dict[tuple[str, Path], dict] = {}

    def run(name: str, wav: Path) -> dict:
        if (name, wav) not in cache:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                assert main(["transcribe", str(model_paths[name]), str(wav), "--json"]) == 0
            cache[(name, wav)] = json.loads(out.getvalue())
        return cache[(name, wav)]

    return run
