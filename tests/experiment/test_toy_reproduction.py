"""A new paper plugs in with a plan and its tables alone: the toy reproduction trains and
decodes through the shared scheduler, in worker processes or in this one, with the same
results; several papers share one scheduler and report their time against their budgets."""

from __future__ import annotations

import pytest
import torch

from speechlab.experiment import Run
from speechlab.experiment import run_reproductions as reproduce
from speechlab.experiment.runner import budget_lines
from speechlab.report import Results
from speechlab.testing.toy_reproduction import ToyRecipe, ToyReproduction
from speechlab.testing.toy_task import BUILDERS
from speechlab.train.card import load_trained


def _direct_mse(out, model_name, lang):
    """What the MSE must be, computed here from the trained checkpoint."""
    paper = ToyReproduction()
    data = paper.prepare(ToyRecipe(), out / "elsewhere", None)
    model = load_trained(out / "models" / model_name, BUILDERS)
    sel = [i for i, l in enumerate(data.languages) if l == lang]
    with torch.no_grad():
        return float(((model(data.x[sel], lang) - data.y[sel]) ** 2).mean())


def test_toy_paper_trains_and_decodes_through_worker_processes(tmp_path):
    out = tmp_path / "toy"
    [summary] = reproduce([Run(ToyReproduction(), ToyRecipe(), "ci", out)], jobs=2)
    assert summary.out == out and summary.scale == "ci"
    res = Results.load(out)
    assert res.scale == "ci"
    rows = {r[0]: r for r in res.table("mse").rows}
    for model, lang, col in (("base", "a", 1), ("tuned", "b", 2)):
        assert rows[model][col] == pytest.approx(_direct_mse(out, model, lang), rel=1e-6)
    # the job restricted to language a decoded nothing else
    assert rows["tuned_a"][2] is None and rows["tuned_a"][1] == pytest.approx(rows["tuned"][1])
    # fine-tuning started from the trained base: it finished after it, and it is better
    jobs = (out / "jobs.txt").read_text().split("\n")
    assert jobs.index("train base") < jobs.index("train tuned")
    assert rows["tuned"][1] + rows["tuned"][2] < rows["base"][1] + rows["base"][2]
    # the main process wrote the data once; each worker read it once, however many jobs it ran
    prepared = (out / "prepared.txt").read_text().split("\n")[:-1]
    assert prepared[0].endswith("write")
    readers = [p.split()[0] for p in prepared[1:]]
    assert 1 <= len(readers) <= 2 and len(set(readers)) == len(readers)

    # In one process the decoded numbers are the same (the models are already trained).
    again = tmp_path / "again"
    import shutil

    shutil.copytree(out / "models", again / "models")
    reproduce([Run(ToyReproduction(), ToyRecipe(), "ci", again)], jobs=1)
    assert Results.load(again).table("mse").rows == res.table("mse").rows
    # nothing was trained again: the logs did not grow
    assert (again / "models" / "base" / "log.jsonl").read_text() == \
        (out / "models" / "base" / "log.jsonl").read_text()


def test_two_papers_share_one_scheduler_and_report_their_budgets(tmp_path):
    runs = [Run(ToyReproduction("toy_a", demo_minutes=5.0), ToyRecipe(), "demo", tmp_path / "a"),
            Run(ToyReproduction("toy_b", demo_minutes=0.0), ToyRecipe(), "demo", tmp_path / "b")]
    summaries = reproduce(runs, jobs=2)
    assert sorted(s.paper for s in summaries) == ["toy_a", "toy_b"]
    lines = {s.paper: line for s, line in zip(summaries, budget_lines(summaries))}
    assert "of 5.0 (within budget)" in lines["toy_a"]
    assert "of 0.0 (OVER BUDGET)" in lines["toy_b"]
    for d in ("a", "b"):
        assert Results.load(tmp_path / d).scale == "demo"

    from speechlab.papers import demo_summary

    lines = demo_summary(summaries, 4.0, 5.0, setup_seconds=150)
    assert "4.0 min of 5.0 (within budget)" in lines[-3]
    assert lines[-2].split()[:3] == ["set-up", "2.5", "min"]
    assert lines[-1].split()[:3] == ["in", "all", "6.5"]
    assert "OVER BUDGET" in demo_summary(summaries, 5.5, 5.0)[-1]  # no set-up line without it


def test_a_paper_cannot_run_twice_in_one_call(tmp_path):
    from speechlab.errors import ConfigError

    runs = [Run(ToyReproduction(), ToyRecipe(), "ci", tmp_path / "a"),
            Run(ToyReproduction(), ToyRecipe(), "ci", tmp_path / "b")]
    with pytest.raises(ConfigError, match="once per call"):
        reproduce(runs)


class _Planted:
    """Pickles as a call of ``os.system``: what a kept decoding must never run."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def test_a_resumed_run_keeps_finished_decodings_and_decodes_again_what_changed(tmp_path):
    out = tmp_path / "toy"
    run = Run(ToyReproduction(), ToyRecipe(), "ci", out)
    reproduce([run], jobs=1)
    first = Results.load(out).table("mse").rows
    kept = sorted(p.name for p in (out / "decoded").iterdir())
    assert kept == ["base.pt", "tuned.pt", "tuned_a.pt"]

    def decodes():
        return [line for line in (out / "jobs.txt").read_text().split("\n")
                if line.startswith("decode")]

    # Killed after its decodings (or run again): nothing is decoded again, same tables.
    before = decodes()
    reproduce([run], jobs=1)
    assert decodes() == before
    assert Results.load(out).table("mse").rows == first

    # A model trained again: its decodings (and only they) run again.
    import os

    ckpt = sorted((out / "models" / "tuned").glob("*.pt"))[0]
    os.utime(ckpt, ns=(ckpt.stat().st_atime_ns, ckpt.stat().st_mtime_ns + 10**9))
    reproduce([run], jobs=1)
    assert sorted(decodes()[len(before):]) == ["decode tuned", "decode tuned_a"]

    # A kept file that would run code is refused unread and decoded again.
    marker = tmp_path / "ran"
    torch.save({"key": "x", "value": _Planted(marker)}, out / "decoded" / "base.pt")
    n = len(decodes())
    reproduce([run], jobs=1)
    assert not marker.exists()
    assert decodes()[n:] == ["decode base"]
    assert Results.load(out).table("mse").rows == first
