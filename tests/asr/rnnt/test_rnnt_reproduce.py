"""`speechlab reproduce multisoftmax` end to end at the `ci` scale on the tiny embedded corpus."""

from __future__ import annotations

import json

import pytest

from speechlab.cli import main
from speechlab.report import Results

pytestmark = [pytest.mark.slow, pytest.mark.needs_espeak]


def test_reproduce_writes_every_table_and_figure(tmp_path, capsys):
    out = tmp_path / "run"
    # Two models at a time, each in a worker process.
    assert main(["reproduce", "multisoftmax", "--scale", "ci", "--out", str(out), "--jobs", "2"]) == 0
    res = Results.load(out)
    names = [t.name for t in res.tables]
    assert names == ["table2", "unseen", "table3", "table4", "table5", "table6", "table7",
                     "table2_cer", "table4_cer", "training"]
    t2 = res.table("table2")
    assert [r[0] for r in t2.rows] == ["Monolingual", "Multilingual Vanilla", "Multilingual Onehot",
                                      "Multi-softmax", "Multi-softmax LSP"]
    assert t2.columns == ["System", "En-IN", "Hi-IN", "Ta-IN", "Gu-IN", "Avg.", "WERR", "WERR 95% CI"]
    assert t2.rows[0][-1] is None and all(r[-1].startswith("[") for r in t2.rows[1:])
    assert res.table("table2_cer").columns[-2:] == ["CERR", "CERR 95% CI"]
    t5 = [r[0] for r in res.table("table5").rows]
    assert t5[-1] == "Multi-softmax LID (LID head, summed log-posteriors)"
    assert res.scale == "ci"
    # The tables are the hypotheses scored: Table 2's Multi-softmax row re-scored from the
    # hypothesis files it wrote.
    from speechlab.metrics import wer, word_weighted_average

    refs = dict(l.split(" ", 1) for l in (out / "hyps" / "ref.txt").read_text().splitlines())
    hyps = dict((l.split(" ", 1) + [""])[:2] for l in (out / "hyps" / "multisoftmax.txt").read_text().splitlines())
    lang_of = {uid: uid.split("-")[0] for uid in refs}
    rates = {lang: wer([refs[u] for u in refs if lang_of[u] == lang],
                       [hyps[u] for u in refs if lang_of[u] == lang]) for lang in set(lang_of.values())}
    ms = next(r for r in t2.rows if r[0] == "Multi-softmax")
    assert ms[5] == pytest.approx(100 * word_weighted_average(rates))
    # The unseen-voice table: Table 2's test WERs beside the unseen-voice ones, which are the
    # unseen-voice hypotheses it wrote, re-scored.
    unseen = {r[0]: r for r in res.table("unseen").rows}
    assert unseen["Multi-softmax"][1::2][:4] == pytest.approx(ms[1:5])
    u_refs = dict(l.split(" ", 1) for l in
                  (out / "hyps" / "unseen" / "ref.txt").read_text().splitlines())
    u_hyps = dict((l.split(" ", 1) + [""])[:2] for l in
                  (out / "hyps" / "unseen" / "multi-softmax.txt").read_text().splitlines())
    assert u_refs and all("-unseen-" in u for u in u_refs)
    en = [u for u in u_refs if u.startswith("en-")]
    assert unseen["Multi-softmax"][2] == pytest.approx(
        100 * wer([u_refs[u] for u in en], [u_hyps[u] for u in en]).wer)
    assert "Multi-softmax LID (language unknown)" in unseen
    # Table 6: the paper preset's counts within 1% of the paper for Mono, MS and MS LSP.
    t6 = {r[0]: r for r in res.table("table6").rows}
    for name in ("mono", "multisoftmax", "multisoftmax_lsp"):
        assert abs(t6[name][3]) < 1.0
    # Table 7: T_avg is 4 with early stopping off and never above it.
    t7 = res.table("table7").rows
    assert t7[0][:2] == ["inf", "inf"] and t7[0][3] == pytest.approx(4.0)
    assert all(0 < r[3] <= 4.0 for r in t7)
    assert "load average" in res.table("table7").caption
    assert [f.path for f in res.figures] == ["wer_vs_tavg.png", "dev_loss.png", "lid_accuracy.png"]
    assert all((out / f.path).stat().st_size > 0 for f in res.figures)
    # Every model's training is summarised from its log (17 models, each validated).
    training = {r[0]: r for r in res.table("training").rows}
    assert len(training) == 17 and training["multisoftmax"][1] > 0
    # Hypotheses of every system are written next to the reference.
    hyps = out / "hyps"
    assert (hyps / "ref.txt").read_text().count("\n") == 4
    summary = json.loads((hyps / "summary.json").read_text())
    assert {"mono", "vanilla", "multisoftmax_lid", "ms_lid_oracle"} <= set(summary)
    # Exported, loaded from the package alone, MS and MS LID (LID-free) give the run's own
    # hypotheses on the test set.
    from speechlab.testing.packages import package_decodes_as_run

    test_cuts = out / "corpus" / "test_cuts.jsonl.gz"
    assert package_decodes_as_run(out / "models" / "multisoftmax", tmp_path / "pkg-ms",
                                  test_cuts, hyps / "multisoftmax.txt", with_language=True) >= 4
    assert package_decodes_as_run(out / "models" / "multisoftmax_lid", tmp_path / "pkg-lid",
                                  test_cuts, hyps / "ms_lid.txt") >= 4
    # Every model trained in a worker rebuilds from its directory alone.
    from speechlab.asr.rnnt.model import load

    models = sorted(p.name for p in (out / "models").iterdir())
    assert len(models) == 17
    assert load(out / "models" / "ft_ms_hi").languages == ("hi",)
    # A second run (in one process) resumes from the finished checkpoints instead of training again.
    log_lines = (out / "models" / "vanilla" / "log.jsonl").read_text().count("\n")
    assert main(["reproduce", "multisoftmax", "--scale", "ci", "--out", str(out)]) == 0
    assert (out / "models" / "vanilla" / "log.jsonl").read_text().count("\n") == log_lines
    # ... and decoding in this process gives what the workers gave.
    again = Results.load(out)
    for name in ("table2", "table3", "table4", "table5", "table2_cer", "table4_cer"):
        assert again.table(name).rows == res.table(name).rows, name
    assert [r[:4] for r in again.table("table7").rows] == [r[:4] for r in t7]

    # The trained models stream-decode audio files from the CLI, with and without a language.
    wav = sorted((out / "corpus" / "wav").rglob("*.wav"))[0]
    assert main(["rnnt", "decode", str(out), "multisoftmax_lid", str(wav), "--partials",
                 "--chunk-ms", "200", "--tau", "3", "--s-th", "0.2"]) == 0
    assert main(["rnnt", "decode", str(out), "vanilla", str(wav), "--method", "greedy"]) == 0
    assert main(["rnnt", "decode", str(out), "multisoftmax", str(wav), "--language", "hi"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith(str(wav))]
    assert len(lines) == 3
    assert lines[0].split("\t")[1] in {"en", "hi", "ta", "gu"}  # the LID head's pick
    assert lines[2].split("\t")[1] == "hi"


def test_reproduce_rejects_bad_jobs_and_unknown_scale(tmp_path):
    from speechlab.errors import ConfigError
    from speechlab.experiment import load_run
    from speechlab.experiment import run_reproductions as reproduce
    from speechlab.papers import get_paper

    paper = get_paper("multisoftmax")
    with pytest.raises(ConfigError, match="jobs must be >= 1"):
        reproduce([load_run(paper, "ci", tmp_path / "a")], jobs=0)
    with pytest.raises(ConfigError, match="no scale 'huge'"):
        load_run(paper, "huge", tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_failing_job_stops_a_parallel_run_with_its_error(tmp_path):
    from speechlab.errors import SpeechlabError
    from speechlab.experiment import load_run
    from speechlab.experiment import run_reproductions as reproduce
    from speechlab.papers import get_paper

    out = tmp_path / "run"
    bad = out / "models" / "vanilla" / "ckpt-00000001.pt"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(SpeechlabError, match="ckpt-00000001.pt is corrupt"):
        reproduce([load_run(get_paper("multisoftmax"), "ci", out)], jobs=2)
    # vanilla is the first job: the run stopped there instead of training the rest
    assert not (out / "models" / "mono_gu").exists()
    assert not (out / "results.json").exists()


def _sleep_forever_watching(parent):
    import time

    from speechlab.processes import exit_with_parent

    exit_with_parent(parent, period=0.05)
    time.sleep(60)


def test_training_workers_end_with_their_parent():
    import multiprocessing
    import signal
    import subprocess
    import sys

    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    worker = multiprocessing.get_context("spawn").Process(target=_sleep_forever_watching,
                                                          args=(parent.pid,))
    worker.start()
    parent.wait()
    worker.join(timeout=20)
    assert worker.exitcode == -signal.SIGTERM  # asked to stop (a training would checkpoint)
