"""``speechlab data ...`` end to end through the console-script entry point."""

from __future__ import annotations

import json

import pytest

from speechlab.cli import main
from speechlab.data.commands import parse_minutes
from speechlab.errors import ConfigError


def test_parse_minutes():
    assert parse_minutes("en=60,hi=63.5") == {"en": 60.0, "hi": 63.5}
    with pytest.raises(ConfigError, match="lang=minutes"):
        parse_minutes("en:60")
    with pytest.raises(ConfigError, match="not a number"):
        parse_minutes("en=lots")


def test_make_tiny_corpus_and_info(tmp_path, capsys, harvested):
    out = tmp_path / "c"
    rc = main(["data", "make-asr-corpus", "--out", str(out), "--tiny", "--no-progress",
               "--minutes", "hi=1,gu=1", "--seed", "4"])
    assert rc == 0
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert info["languages"] == ["hi", "gu"]
    assert info["synthetic"]["config"]["seed"] == 4
    capsys.readouterr()
    assert main(["data", "info", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "train   hi" in printed and "test speakers:" in printed
    assert "unseen-voice speakers (no training utterance): gu-nsk" in printed


def test_errors_are_printed_without_traceback(tmp_path, capsys):
    d = tmp_path / "kaldi"
    d.mkdir()
    (d / "wav.scp").write_text("a /x.wav\n")
    (d / "text").write_text("a hello there\n")
    (d / "utt2spk").write_text("a\n")
    assert main(["data", "import-kaldi", str(d), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("speechlab: error: ") and "utt2spk:1" in err
    assert "Traceback" not in err
    assert main(["data", "info", str(tmp_path)]) == 2
    assert "not a complete speechlab corpus" in capsys.readouterr().err
    assert main(["data", "make-asr-corpus", "--out", str(tmp_path / "m"), "--tiny",
                 "--minutes", "fr=2"]) == 2
    assert "unknown language" in capsys.readouterr().err
