"""Two-process DDP (gloo on CPU) under torchrun, on the toy task: both ranks finish with the same
weights, draw the same language sequence and disjoint items, skip a NaN batch together even
though only one rank holds it, and both resume from rank 0's checkpoint with their own sampler
state."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import torch

from speechlab.testing.toy_task import ToyConfig, make_data
from speechlab.train.checkpoint import latest_checkpoint, load_checkpoint
from speechlab.train.log import read_log
from speechlab.train.sampler import LanguageBatches

ITEMS = 192


def torchrun(out: Path, trace: Path, max_steps: int, poison: int | None, *extra: str) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", SPEECHLAB_PROGRESS="0")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "speechlab.testing.toy_task", "--out", str(out), "--trace", str(trace),
           "--toy.items", str(ITEMS), "--toy.poison", f"[{'' if poison is None else poison}]",
           "--train.max_steps", str(max_steps), "--train.checkpoint_every", "3",
           "--train.log_every", "1", "--train.find_unused_parameters", "true", *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]


def expected_stream(rank: int, n: int) -> list:
    """What rank ``rank``'s sampler must produce, computed independently of the trainer."""
    toy = ToyConfig(items=ITEMS)
    _, _, languages = make_data(toy, ITEMS, 0)
    sampler = LanguageBatches(languages, weights=dict(zip(toy.languages, toy.hours)),
                              batch_size=toy.batch_size, seed=0, rank=rank, world_size=2)
    return list(itertools.islice(sampler, n))


def test_ddp_two_ranks_then_resume(tmp_path):
    out, trace = tmp_path / "out", tmp_path / "trace"
    # Plant a NaN item in rank 1's second batch: rank 0's batch is fine, yet both must skip.
    poison = expected_stream(1, 2)[1].indices[0]

    torchrun(out, trace, max_steps=6, poison=poison)
    first = [torch.load(trace / f"rank{r}.pt", weights_only=True) for r in range(2)]
    torchrun(out, trace, max_steps=12, poison=poison)  # resumes from ckpt at update 6
    second = [torch.load(trace / f"rank{r}.pt", weights_only=True) for r in range(2)]

    # 6 updates + 1 skipped batch in the first run, 6 more updates in the second.
    streams = [expected_stream(r, 13) for r in range(2)]
    for r in range(2):
        assert first[r]["seen"].tolist() == [i for b in streams[r][:7] for i in b.indices]
        assert second[r]["seen"].tolist() == [i for b in streams[r][7:] for i in b.indices]
        assert first[r]["languages"] + second[r]["languages"] == [b.language
                                                                  for b in streams[r]]
    assert first[0]["languages"] == first[1]["languages"]
    seen = [set(first[r]["seen"].tolist()) for r in range(2)]
    assert seen[0] and seen[1] and not (seen[0] & seen[1])

    for params in (first, second):
        for k, v in params[0]["params"].items():
            assert torch.equal(v, params[1]["params"][k]), k
    final = load_checkpoint(latest_checkpoint(out))
    assert final["step"] == 12 and len(final["rng"]) == 2
    for k, v in final["model"].items():
        assert torch.equal(v, second[0]["params"][k]), k

    # A head gets no gradient on the other language's batches on any rank: DDP must leave its
    # grad None so Adam does not advance it (optimiser ids follow model.parameters(): encoder
    # weight/bias, then heads a and b).
    updates = [b.language for k, b in enumerate(streams[0]) if k != 1]  # batch 1 was skipped
    state = final["optimizer"]["state"]
    assert state[0]["step"].item() == 12
    assert state[2]["step"].item() == updates.count("a")
    assert state[4]["step"].item() == updates.count("b")

    log = read_log(out / "log.jsonl")
    bad = [r for r in log if r["kind"] == "nonfinite"]
    assert len(bad) == 1 and bad[0]["step"] == 2 and f"item-{poison}" in bad[0]["ids"]
    assert [r["step"] for r in log if r["kind"] == "train"] == list(range(1, 13))
    # Logged weights add up both ranks' batches (4 items each).
    assert {r["weight"] for r in log if r["kind"] == "train"} == {8.0}


def test_ddp_with_the_weights_average(tmp_path):
    """With ``ema_decay`` both ranks validate the same averaged weights, and the checkpoint's
    ``model`` (the average) differs from training's own weights, which both ranks hold."""
    out, trace = tmp_path / "out", tmp_path / "trace"
    torchrun(out, trace, 6, None, "--train.ema_decay", "0.9", "--train.valid_every", "3")
    ranks = [torch.load(trace / f"rank{r}.pt", weights_only=True) for r in range(2)]
    final = load_checkpoint(latest_checkpoint(out))
    assert final["average_updates"] == 6
    for k, v in ranks[0]["params"].items():
        assert torch.equal(v, ranks[1]["params"][k]), k
        assert torch.equal(final["training_model"][k], v), k
    assert not torch.equal(final["model"]["encoder.0.weight"],
                           final["training_model"]["encoder.0.weight"])
    valid = [r for r in read_log(out / "log.jsonl") if r["kind"] == "valid"]
    assert [r["step"] for r in valid] == [3, 6]
