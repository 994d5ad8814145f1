"""The contract every loaded model keeps (speechlab.contract), checked two ways: the type
checker over the public API and each family's classes (src/speechlab/typing_check.py), and the
registry (speechlab.families) read as the CLI, load and serve read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from speechlab import contract, families

ROOT = Path(__file__).resolve().parents[1]


def test_the_type_checker_holds_every_family_to_its_contract():
    """mypy over the files pyproject's [tool.mypy] lists: the public API (contract, families,
    load/export/transcribe, the server's model table) and an assignment of each family's
    classes to the protocol of its kind."""
    pytest.importorskip("mypy")
    got = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-1000:]


def test_a_class_that_drifts_from_its_protocol_fails_the_check(tmp_path):
    """The check can fail: a recognizer whose transcribe lacks the contract's keywords."""
    pytest.importorskip("mypy")
    bad = tmp_path / "drift.py"
    bad.write_text(
        "from speechlab.contract import ModelBase, Recognizer, Transcript\n"
        "class Drifted(ModelBase):\n"
        "    kind = 'asr'\n    family = 'x'\n    title = 'a drifted model'\n"
        "    languages = ('en',)\n    sample_rate = 16000\n"
        "    def to_package(self): raise NotImplementedError\n"
        "    def transcribe(self, audio, sample_rate: int = 16000) -> Transcript:\n"
        "        return Transcript('')\n"
        "r: Recognizer = Drifted()\n", encoding="utf-8")
    got = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--config-file",
                          str(ROOT / "pyproject.toml"), str(bad)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert got.returncode == 1 and "transcribe" in got.stdout, got.stdout[-2000:]


def test_every_family_is_registered_once_and_resolves():
    names = [f.name for f in families.FAMILIES]
    assert len(names) == len(set(names))
    builders = families.builders()
    for f in families.FAMILIES:
        assert f.kind in contract.KINDS
        cls = f.runtime_class()
        assert cls.family == f.name and cls.kind == f.kind and cls.title == f.title
        assert hasattr(cls, "from_package") and hasattr(cls, "from_run")
        assert f.name in builders
        assert set(cls.CAPABILITIES if isinstance(cls.CAPABILITIES, frozenset) else ()) <= \
            set(contract.CAPABILITIES)
    # every family's commands are reached by the CLI, and no module it names is missing
    from speechlab.cli import command_modules

    mods = command_modules()
    assert all(m in mods for m in families.command_modules())
    import importlib

    for m in mods:
        assert hasattr(importlib.import_module(m), "add_commands"), m


def test_an_unknown_family_and_the_wrong_kind_are_one_clear_error():
    from speechlab.errors import DataError

    with pytest.raises(DataError, match="family 'nope', which this speechlab does not know "
                                        r"\(it knows rnnt, ctc"):
        families.family("nope", "pkg")

    class Tts(contract.ModelBase):
        kind, family, title = "tts", "tts", "a TTS acoustic model"

    with pytest.raises(DataError, match="pkg: a TTS acoustic model \\(tts\\), not a speech "
                                        "recognizer"):
        contract.as_recognizer(Tts(), "pkg")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="does not stream"):
        Tts().stream()
    with pytest.raises(Exception, match="does not run on onnxruntime"):
        Tts().onnx()


def test_a_toy_family_plugs_in_with_one_registry_entry(tmp_path, monkeypatch, capsys):
    """The toy family (speechlab.testing.toy_family) added to the registry and nowhere else:
    a run directory of it loads, exports to a package that loads, transcribes from the CLI,
    and the server's model table says what it offers."""
    import numpy as np
    import soundfile as sf

    from speechlab import load
    from speechlab.cli import main
    from speechlab.serve.models import ServedModel
    from speechlab.testing import toy_family as toy
    from speechlab.train.card import ModelCard
    from speechlab.train.checkpoint import save_checkpoint

    monkeypatch.setattr(families, "FAMILIES", (*families.FAMILIES, toy.TOY))
    run = tmp_path / "run" / "models" / "toy"
    run.mkdir(parents=True)
    net = toy.build(toy.ToyConfig(threshold_db=-30.0))
    save_checkpoint(run / "best.pt", model=net.state_dict(),
                    model_config=ModelCard.of(toy.FAMILY, net.config).to_dict())
    loud, quiet = tmp_path / "loud.wav", tmp_path / "quiet.wav"
    t = np.arange(16000) / 16000
    sf.write(loud, 0.3 * np.sin(2 * np.pi * 220 * t), 16000)
    sf.write(quiet, 0.0001 * np.sin(2 * np.pi * 220 * t), 16000)
    model = load(run)
    assert model.title == "a toy energy recognizer"
    assert main(["export", str(run), "--out", str(tmp_path / "pkg")]) == 0
    capsys.readouterr()
    assert main(["transcribe", str(tmp_path / "pkg"), str(loud), str(quiet)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("\ten\tspeech") and out[1].endswith("\ten\tsilence"), out
    # it reads whole recordings: a stream's utterances are cut by voice activity, and a tone
    # is no voice, so the one line is empty (in the model's one language)
    assert main(["transcribe", str(tmp_path / "pkg"), str(loud), "--stream"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{loud}\ten\t"]
    served = ServedModel("toy", load(tmp_path / "pkg"))
    assert served.describe() == {"name": "toy", "kind": "asr", "streaming": False,
                                 "languages": ["en"]}
    assert served.capabilities() == ["transcribe"] and served.encoder is None
