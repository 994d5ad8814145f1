"""A training process killed with SIGKILL at random moments resumes to exactly the run that was
never interrupted: same per-step losses in the log (each step once), same final weights and
optimiser state."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from speechlab.train.checkpoint import latest_checkpoint, load_checkpoint
from speechlab.train.log import read_log

MAX_STEPS = 150
ARGS = ["--train.max_steps", str(MAX_STEPS), "--train.checkpoint_every", "1",
        "--train.log_every", "1", "--train.valid_every", "20", "--train.keep_checkpoints", "2",
        "--train.seed", "3", "--toy.poison", "[7]"]


def launch(out: Path) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS="1", SPEECHLAB_PROGRESS="0")
    return subprocess.Popen([sys.executable, "-m", "speechlab.testing.toy_task", "--out", str(out),
                             *ARGS], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def log_size(out: Path) -> int:
    try:
        return (out / "log.jsonl").stat().st_size
    except FileNotFoundError:
        return 0


def kill_when_training(proc: subprocess.Popen, out: Path, delay: float) -> bool:
    """SIGKILL ``proc`` ``delay`` seconds after its log grows (it resumed and is training);
    False if it finished first."""
    start = log_size(out)  # the resumed run first truncates, then appends: wait for growth
    deadline = time.monotonic() + 60
    while proc.poll() is None and log_size(out) <= start and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(delay)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return True


def strip_time(records):
    return [{k: v for k, v in r.items() if k not in ("time", "data_time")} for r in records]


def test_sigkill_at_random_moments_then_resume_matches_uninterrupted(tmp_path):
    ref_out, out = tmp_path / "ref", tmp_path / "run"
    reference = launch(ref_out)  # runs on the other core meanwhile
    rng = random.Random(20240611)
    kills = 0
    for _ in range(3):
        if kill_when_training(launch(out), out, rng.uniform(0.0, 0.2)):
            kills += 1
    final = launch(out)
    assert final.wait(timeout=120) == 0, final.stderr.read().decode()
    assert reference.wait(timeout=120) == 0, reference.stderr.read().decode()
    assert kills >= 2, "the runs finished before they could be killed"

    ref_log, log = read_log(ref_out / "log.jsonl"), read_log(out / "log.jsonl")
    train_steps = [r["step"] for r in log if r["kind"] == "train"]
    assert train_steps == list(range(1, MAX_STEPS + 1))  # each step exactly once
    assert any(r["kind"] == "nonfinite" for r in ref_log)  # the poisoned item was hit
    assert strip_time(log) == strip_time(ref_log)

    ref_ckpt = load_checkpoint(latest_checkpoint(ref_out))
    ckpt = load_checkpoint(latest_checkpoint(out))
    assert ckpt["step"] == ref_ckpt["step"] == MAX_STEPS
    for k, v in ref_ckpt["model"].items():
        assert torch.equal(ckpt["model"][k], v), k
    for pid, state in ref_ckpt["optimizer"]["state"].items():
        for k, v in state.items():
            assert torch.equal(ckpt["optimizer"]["state"][pid][k], v), (pid, k)
    assert ckpt["batches"] == ref_ckpt["batches"]
    assert not list(out.glob(".*.tmp"))  # leftovers of killed saves are cleaned up
