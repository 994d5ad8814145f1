"""The SALAD reproduction's roles, plan, switch and Table 2 pairing, without training."""

from __future__ import annotations

import numpy as np
import pytest

from speechlab.cli import main
from speechlab.errors import ConfigError
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.tts.evaluate import Evaluation
from speechlab.tts.features import TtsUtteranceData
from speechlab.papers.salad.recipe import ROLES, Role, SaladConfig, SaladDecoding
from speechlab.papers.salad.reproduce import SaladPaper
from speechlab.papers.salad.tables import _by_role, table2


def test_roles_name_their_partner_title_and_directory():
    assert [r.name for r in ROLES] == ["small_rnn", "small_salad", "big_rnn", "big_salad"]
    big_salad = Role("big", "salad")
    assert big_salad.partner == Role("big", "rnn") and big_salad.title == "Big SALAD"
    assert Role("small", "rnn").partner == Role("small", "rnn")
    assert Role("small", "salad").title == "Small SALAD"


def test_the_recipe_refuses_unknown_roles_and_presets_of_the_other_family():
    with pytest.raises(ConfigError, match=r"'huge_rnn' is not one of the paper's models "
                                          r"\('small_rnn', 'small_salad', 'big_rnn', 'big_salad'\)"):
        SaladConfig(models={"huge_rnn": "tiny_rnn"})
    with pytest.raises(ConfigError, match="models.big_salad: preset 'tiny_rnn' is a rnn model"):
        SaladConfig(models={"big_salad": "tiny_rnn"})
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        SaladConfig(models={"big_rnn": "nope"})


def test_plan_trains_costliest_first_and_decodes_each_model_it_trains():
    cfg = SaladConfig(models={"small_salad": "tiny_salad", "small_rnn": "tiny_rnn",
                              "big_salad": "mid_salad", "big_rnn": "mid_rnn"})
    plan = SaladPaper().plan(cfg)
    trains = [j for j in plan if isinstance(j, TrainJob)]
    decodes = [j for j in plan if isinstance(j, DecodeJob)]
    assert [j.spec.role for j in trains] == [Role("big", "rnn"), Role("big", "salad"),
                                             Role("small", "rnn"), Role("small", "salad")]
    assert [j.name for j in trains] == ["big_rnn", "big_salad", "small_rnn", "small_salad"]
    assert [j.spec.preset for j in trains] == ["mid_rnn", "mid_salad", "tiny_rnn", "tiny_salad"]
    # each decoding holds its model's very job; SALAD is also scored in training windows
    assert [d.model for d in decodes] == trains and all(d.model is t for d, t in zip(decodes, trains))
    assert [d.options.window for d in decodes] == [None, cfg.task.window, None, cfg.task.window]
    # a recipe of the big pair only plans the big pair
    only_big = SaladPaper().plan(SaladConfig(models={"big_salad": "tiny_salad", "big_rnn": "tiny_rnn"}))
    assert [j.name for j in only_big if isinstance(j, TrainJob)] == ["big_rnn", "big_salad"]


def _decoding(mcd_by_mode: dict[str, float], frames: list[int]) -> SaladDecoding:
    scores = {m: {"mcd": v, "f0_rmse": 1.0, "vuv": 0.5, "f0_std": 2.0} for m, v in mcd_by_mode.items()}
    sums = {m: np.array([v * n for n in frames]) for m, v in mcd_by_mode.items()}
    return SaladDecoding("tiny", 10, scores, np.ones(3), [], 1.0, 0, sums)


def test_table2_puts_each_salad_against_the_rnn_of_its_size():
    frames = [10, 30]
    test = [TtsUtteranceData(f"t{i}", np.zeros((1, 2), np.float32), np.zeros(n, np.int64),
                             np.zeros((n, 2), np.float32), np.zeros((n, 43), np.float32), ["a"])
            for i, n in enumerate(frames)]
    data = type("Data", (), {"test": test})()
    cfg = SaladConfig(models={"small_rnn": "tiny_rnn", "small_salad": "tiny_salad",
                              "big_rnn": "tiny_rnn", "big_salad": "tiny_salad"})
    plan = SaladPaper().plan(cfg)
    mcd = {"small_rnn": {"full": 6.0}, "small_salad": {"full": 5.0, "window": 5.5},
           "big_rnn": {"full": 7.0}, "big_salad": {"full": 4.0, "window": 4.5}}
    decoded = {j: _decoding(mcd[j.name], frames) for j in plan if isinstance(j, DecodeJob)}
    results = _by_role(plan, decoded)
    assert list(results) == list(ROLES)  # the paper's order, whatever the plan's
    baseline = Evaluation([], {"mcd": 8.0, "f0_rmse": 3.0, "vuv": 0.7, "f0_std": 1.5},
                          np.zeros(2), np.zeros(0))
    rows = table2(cfg, data, results, baseline, np.array([100.0, 0.0, 120.0])).rows
    assert rows[0][8] == pytest.approx(10.0)  # the recordings' voiced F0 spread
    gaps = {(r[0], r[3]): (r[9], r[10]) for r in rows[2:]}
    assert gaps[("Small RNN", "-")] == (None, None) and gaps[("Big RNN", "-")] == (None, None)
    assert gaps[("Small SALAD", "whole utterance")] == (pytest.approx(-1.0), "[-1.00, -1.00]")
    assert gaps[("Small SALAD", f"{cfg.task.window}-frame windows")][0] == pytest.approx(-0.5)
    assert gaps[("Big SALAD", "whole utterance")] == (pytest.approx(-3.0), "[-3.00, -3.00]")
    assert gaps[("Big SALAD", f"{cfg.task.window}-frame windows")][0] == pytest.approx(-2.5)


def test_no_stateful_switch_sets_the_recipe_and_other_papers_refuse_it(tmp_path, monkeypatch,
                                                                      capsys):
    from speechlab.experiment import runner

    runs = []
    monkeypatch.setattr(runner, "run_reproductions", lambda rs, jobs=1: runs.extend(rs))
    out = tmp_path / "run"
    assert main(["reproduce", "salad", "--scale", "ci", "--out", str(out), "--no-stateful"]) == 0
    (run,) = runs
    assert run.cfg.task.stateful is False
    assert main(["reproduce", "salad", "--scale", "ci", "--out", str(out)]) == 0
    assert runs[1].cfg.task.stateful is True
    capsys.readouterr()
    other = tmp_path / "other"
    assert main(["reproduce", "multisoftmax", "--scale", "ci", "--out", str(other),
                 "--no-stateful"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert "--no-stateful: not an option of `multisoftmax` (its own switches: none)" in err
    assert len(runs) == 2 and not other.exists()
