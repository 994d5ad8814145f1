"""A training asked to stop (SIGTERM, Ctrl-C) finishes its update, writes a checkpoint there and
exits; rerun, it continues to exactly the run that was never stopped. Periodic checkpoints are
off here, so the only checkpoint a stopped run can leave is the one the signal wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from speechlab.train.checkpoint import latest_checkpoint, load_checkpoint
from speechlab.train.log import read_log
from speechlab.train.trainer import Interrupted, _stop_requests

MAX_STEPS = 400
ARGS = ["--train.max_steps", str(MAX_STEPS), "--train.checkpoint_every", "0",
        "--train.log_every", "1", "--train.valid_every", "50", "--train.seed", "5"]


def launch(out: Path) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", SPEECHLAB_PROGRESS="0")
    return subprocess.Popen([sys.executable, "-m", "speechlab.testing.toy_task", "--out", str(out),
                             *ARGS], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=_default_dispositions)


def _default_dispositions() -> None:
    """In the child: SIGTERM and SIGINT as a fresh process has them (a shell's background job
    inherits SIGINT ignored, and Python then leaves it so)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def train_steps(out: Path) -> list[int]:
    return [r["step"] for r in read_log(out / "log.jsonl") if r["kind"] == "train"]


def strip_time(records):
    return [{k: v for k, v in r.items() if k not in ("time", "data_time")} for r in records]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signalled_run_checkpoints_where_it_stopped_and_resumes_exactly(tmp_path, signum):
    ref_out, out = tmp_path / "ref", tmp_path / "run"
    reference = launch(ref_out)  # on the other core meanwhile
    proc = launch(out)
    deadline = time.monotonic() + 60
    while proc.poll() is None and len(train_steps(out)) < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be stopped"
    proc.send_signal(signum)
    assert proc.wait(timeout=60) == 128 + signum, proc.stderr.read().decode()
    step = load_checkpoint(latest_checkpoint(out))["step"]
    assert 20 <= step < MAX_STEPS
    assert train_steps(out)[-1] == step  # every update it made is in the checkpoint

    final = launch(out)
    assert final.wait(timeout=120) == 0, final.stderr.read().decode()
    assert reference.wait(timeout=120) == 0, reference.stderr.read().decode()
    assert train_steps(out) == list(range(1, MAX_STEPS + 1))
    assert strip_time(read_log(out / "log.jsonl")) == strip_time(read_log(ref_out / "log.jsonl"))
    ref, got = (load_checkpoint(latest_checkpoint(d)) for d in (ref_out, out))
    for k, v in ref["model"].items():
        assert torch.equal(v, got["model"][k]), k


@pytest.fixture
def default_handlers():
    """SIGTERM and SIGINT with Python's default handlers (whatever runs the tests), put back
    after."""
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    for sig, handler in old.items():
        signal.signal(sig, handler)


def test_the_handlers_are_put_back_and_a_program_s_own_are_left_alone(default_handlers):
    before = signal.getsignal(signal.SIGTERM)
    with _stop_requests(True) as stop:
        assert signal.getsignal(signal.SIGTERM) is not before
        assert stop == []
    assert signal.getsignal(signal.SIGTERM) is before

    def own(signum, frame):
        pass

    signal.signal(signal.SIGTERM, own)
    try:
        with _stop_requests(True):
            assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, before)


def test_the_first_signal_is_recorded_and_the_second_acts_as_before(default_handlers):
    with _stop_requests(True) as stop:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)  # Python runs the handler between bytecodes
        assert stop == [signal.SIGINT]
        with pytest.raises(KeyboardInterrupt):  # the default handler is back
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)


def test_interrupted_survives_pickling():
    import pickle

    e = pickle.loads(pickle.dumps(Interrupted(signal.SIGTERM, 12)))
    assert (e.signum, e.step) == (signal.SIGTERM, 12) and "after update 12" in str(e)
