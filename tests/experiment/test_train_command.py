"""`speechlab train PAPER MODEL` under torchrun: two gloo processes train a paper's model on
the `ci` recipe, a stopped run resumes under DDP, and the directory is the kind `reproduce`
makes (decoding and the tables run on it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from speechlab.cli import main
from speechlab.report import Results
from speechlab.report.results import read_invocations
from speechlab.testing.corpus import tiny_corpus
from speechlab.train.checkpoint import load_checkpoint
from speechlab.train.log import read_log

pytestmark = [pytest.mark.slow, pytest.mark.needs_espeak]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return tiny_corpus(tmp_path_factory.mktemp("corpus"))


def _command(out, corpus, steps, *extra):
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
            "-m", "speechlab", "train", "multisoftmax", "multisoftmax", "--scale", "ci",
            "--out", str(out), "--corpus", str(corpus), "--set", f"train.max_steps={steps}",
            *extra]


ENV = dict(os.environ, OMP_NUM_THREADS="1", SPEECHLAB_PROGRESS="0")


def _torchrun(out, corpus, steps, *extra):
    proc = subprocess.run(_command(out, corpus, steps, *extra), env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_two_processes_train_resume_and_leave_a_reproduce_directory(tmp_path, corpus, capsys):
    out = tmp_path / "run"
    first = _torchrun(out, corpus, steps=2)
    model_dir = out / "models" / "multisoftmax"
    assert first.stdout.strip() == str(model_dir)  # rank 0 alone prints (and writes)
    ckpt = load_checkpoint(model_dir / "ckpt-00000002.pt")
    assert ckpt["world_size"] == 2 and len(ckpt["rng"]) == 2
    assert ckpt["model_config"]["config"]["variant"] == "multisoftmax"

    second = _torchrun(out, corpus, steps=4)
    assert "resuming from" in second.stderr and "at update 2" in second.stderr
    # each start is recorded once (rank 0), so a model shipped from the run names its command
    calls = read_invocations(out)
    assert len(calls) == 2 and all(" train multisoftmax multisoftmax " in c["command"]
                                   and c["model"] == "multisoftmax" for c in calls)
    steps = [r["step"] for r in read_log(model_dir / "log.jsonl") if r["kind"] == "train"]
    assert steps == [2, 4]  # ci logs every 2 updates; nothing logged twice after the resume

    # The same directory serves `rnnt decode` and `reproduce` (which trains the other models
    # and keeps this one: its log does not grow).
    wav = sorted((corpus / "wav").rglob("*.wav"))[0]
    assert main(["rnnt", "decode", str(out), "multisoftmax", str(wav), "--language", "hi"]) == 0
    assert capsys.readouterr().out.startswith(str(wav))
    log_before = (model_dir / "log.jsonl").read_text()
    assert main(["reproduce", "multisoftmax", "--scale", "ci", "--out", str(out), "--corpus",
                 str(corpus), "--jobs", "2"]) == 0
    assert (model_dir / "log.jsonl").read_text() == log_before
    assert [r[0] for r in Results.load(out).table("table2").rows][3] == "Multi-softmax"


def test_a_killed_ddp_run_resumes_and_finishes(tmp_path, corpus):
    import signal
    import time

    out = tmp_path / "run"
    model_dir = out / "models" / "multisoftmax"
    cmd = _command(out, corpus, 40, "train.checkpoint_every=1", "train.log_every=1",
                   "train.valid_every=0")
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while not (model_dir / "ckpt-00000003.pt").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher and both ranks, mid-training
    proc.wait()
    killed_at = max(r["step"] for r in read_log(model_dir / "log.jsonl") if r["kind"] == "train")
    assert 3 <= killed_at < 40
    resumed = _torchrun(out, corpus, 40, "train.checkpoint_every=1", "train.log_every=1",
                        "train.valid_every=0")
    assert "resuming from" in resumed.stderr
    steps = [r["step"] for r in read_log(model_dir / "log.jsonl") if r["kind"] == "train"]
    assert steps == list(range(1, 41))  # every update logged once, none lost or repeated


# One model of each paper, as its ci recipe stands (the command: no override). The
# tiny corpora put fewer utterances in a language than two ranks' batches would hold, so the
# sampler splits them (train/sampler.py:_at_least). A fine-tuning job of each paper that has
# one runs after its seed, in the same directory.
PAPER_MODELS = [("multisoftmax", ["multisoftmax", "ft_ms_hi"]),
                ("topologies", ["en_S3-T2s"]),
                ("local-attention", ["pretrained", "L_B2-12"]),
                ("salad", ["big_salad"])]


@pytest.mark.parametrize("paper,models", PAPER_MODELS, ids=[p for p, _ in PAPER_MODELS])
def test_every_paper_trains_under_torchrun_at_the_ci_scale(tmp_path, paper, models):
    for model in models:
        proc = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
             "2", "-m", "speechlab", "train", paper, model, "--scale", "ci", "--out",
             str(tmp_path)], env=ENV, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        model_dir = tmp_path / "models" / model
        assert proc.stdout.strip().splitlines()[-1] == str(model_dir)
        last = load_checkpoint(sorted(model_dir.glob("ckpt-*.pt"))[-1])
        assert last["world_size"] == 2 and len(last["rng"]) == len(last["batches"]) == 2
        assert last["step"] >= 1 and "Traceback" not in proc.stderr


def test_train_names_models_it_does_not_know_and_missing_seeds(tmp_path):
    from speechlab.errors import ConfigError
    from speechlab.experiment import load_run, train_one
    from speechlab.papers import get_paper

    run = load_run(get_paper("multisoftmax"), "ci", tmp_path / "run")
    with pytest.raises(ConfigError, match="trains no model 'nonesuch'; its models: vanilla, "):
        train_one(run, "nonesuch")
    with pytest.raises(ConfigError, match="ft_ms_hi starts from multisoftmax, which is not trained"):
        train_one(run, "ft_ms_hi")
    assert not (tmp_path / "run").exists()


def test_a_model_another_process_trains_is_refused_and_its_start_not_recorded(tmp_path):
    """A second `speechlab train` of a model in training fails at once, and a package shipped
    from the run does not name it as the model's last start."""
    from speechlab.errors import SpeechlabError
    from speechlab.experiment import load_run, train_one
    from speechlab.files import exclusive_dir
    from speechlab.papers import get_paper

    run = load_run(get_paper("multisoftmax"), "ci", tmp_path / "run")
    with exclusive_dir(tmp_path / "run" / "models" / "multisoftmax", "a training run"):
        with pytest.raises(SpeechlabError, match="in use by another process"):
            train_one(run, "multisoftmax")
    assert read_invocations(tmp_path / "run") == []


def test_decode_one_model_now_writes_its_tuned_settings_and_keeps_the_result(tmp_path, corpus,
                                                                             capsys, caplog):
    """`speechlab decode` on a model whose run has not finished: the acoustic weight tuned on
    dev is written beside it (what export and `models ship` read), the WERs are printed, and a
    second call reuses the kept decoding while the checkpoint is unchanged."""
    import json
    import logging

    out = tmp_path / "run"
    common = ["--scale", "ci", "--out", str(out), "--corpus", str(corpus)]
    assert main(["decode", "topologies", "en_S3-T2s", *common]) == 2  # nothing trained yet
    assert "holds no checkpoint: train it first" in capsys.readouterr().err
    assert main(["decode", "topologies", "nonesuch", *common]) == 2
    assert "trains no model 'nonesuch'" in capsys.readouterr().err
    assert not out.exists()  # refused before anything is written

    assert main(["train", "topologies", "en_S3-T2s", *common]) == 0
    capsys.readouterr()
    assert main(["decode", "topologies", "en_S3-T2s", *common]) == 0
    printed = capsys.readouterr().out.splitlines()  # progress bars draw on stderr
    assert printed[0].startswith("topologies/en_S3-T2s: test WER ") and "acoustic weight" in \
        printed[0]
    assert printed[-1] == str(out / "models" / "en_S3-T2s")
    settings = json.loads((out / "models" / "en_S3-T2s" / "decoding.json").read_text())
    assert f"acoustic weight {settings['acoustic_weight']:g} (chosen on dev" in printed[0]

    caplog.set_level(logging.INFO, logger="speechlab.experiment.decoded")
    assert main(["decode", "topologies", "en_S3-T2s", *common]) == 0
    assert capsys.readouterr().out.splitlines()[0] == printed[0]
    assert "kept from an earlier run" in caplog.text
