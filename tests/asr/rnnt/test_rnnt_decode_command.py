"""``speechlab rnnt decode``: options checked before any work, progress on long inputs."""

from __future__ import annotations

import logging

import pytest

from speechlab.asr.rnnt import commands
from speechlab.cli import main
from speechlab.testing.audio import tone_cut
from speechlab.testing.rnnt import untrained_run


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("rnnt_run")
    untrained_run(d / "run", "multisoftmax_lid")
    tone_cut(d / "tone.wav", duration=1.2)
    return d


def test_long_inputs_log_progress_and_real_time_factor(run, monkeypatch, caplog, capsys):
    monkeypatch.setattr(commands, "LONG_INPUT_SECONDS", 1.0)
    monkeypatch.setattr("speechlab.progress.LOG_EVERY_SECONDS", 0.0)
    with caplog.at_level(logging.INFO, logger="speechlab.progress"):
        assert main(["rnnt", "decode", str(run / "run"), "multisoftmax_lid", str(run / "tone.wav"),
                     "--chunk-ms", "300"]) == 0
    lines = [r.getMessage() for r in caplog.records]
    assert any("s audio (" in m and "real-time factor" in m and "left" in m for m in lines)
    assert "1.2 s audio in" in lines[-1] and "real-time factor" in lines[-1]
    assert capsys.readouterr().out.startswith(str(run / "tone.wav") + "\t")


def test_short_inputs_stay_quiet(run, caplog):
    with caplog.at_level(logging.INFO, logger="speechlab.progress"):
        assert main(["rnnt", "decode", str(run / "run"), "multisoftmax_lid",
                     str(run / "tone.wav"), "--language", "en", "--method", "greedy"]) == 0
    assert not caplog.records
