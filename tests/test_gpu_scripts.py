"""The GPU scripts' CPU-checkable parts: scripts/gpu-train.sh end to end on the CPU (a packed
corpus unpacked, a ci-scale model trained until SIGTERM, its checkpoints collected in parts) and
scripts/gpu_train_parts.py putting them back into a run that then resumes."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = runpy.run_path(str(ROOT / "scripts" / "gpu_train_parts.py"))


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    from speechlab.data.pack import pack_corpus
    from speechlab.testing.corpus import tiny_corpus

    tmp = tmp_path_factory.mktemp("gpu")
    corpus = tiny_corpus(tmp / "tiny")
    pack = tmp / "corpus.tar"
    pack_corpus(corpus, pack, others=2, progress=False)
    env = dict(os.environ, DEVICE="cpu", GPU_RUN=str(tmp / "run"), OUT=str(tmp / "out"),
               PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-train.sh"), "multisoftmax", "multisoftmax", "ci",
         str(pack), "1000", "--", "--set", "train.max_steps=6", "train.checkpoint_every=2",
         "train.valid_every=3"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return corpus, tmp / "out" / "gpu-train"


def test_the_training_script_leaves_checkpoints_in_parts(collected):
    _, out = collected
    info = json.loads((out / "collected.json").read_text())
    assert info["files"]["latest"]["step"] == 6 and info["files"]["best"]["step"] in (3, 6)
    assert info["files"]["best"]["without"] == ["optimizer", "scheduler"]
    for entry in info["files"].values():
        assert all((out / p).stat().st_size <= PARTS["PART_BYTES"] for p in entry["parts"])
    assert (out / "log.jsonl").is_file() and "step 6" in (out / "train.log").read_text()


def test_restored_checkpoints_resume_the_run(collected, tmp_path):
    import torch

    from speechlab.cli import main

    corpus, out = collected
    run = tmp_path / "run"
    written = PARTS["restore"](out, run / "models" / "multisoftmax")
    assert [p.name for p in written] == ["ckpt-00000006.pt", "best.pt"]
    best = torch.load(written[1], map_location="cpu", weights_only=True)
    assert "optimizer" in best  # the format's every field, the optimizer's from the latest
    with pytest.raises(SystemExit, match="not older than the collected one"):
        PARTS["restore"](out, run / "models" / "multisoftmax")
    assert main(["train", "multisoftmax", "multisoftmax", "--scale", "ci", "--out", str(run),
                 "--corpus", str(corpus), "--device", "cpu", "--set", "train.max_steps=8",
                 "train.checkpoint_every=2", "train.valid_every=3", "train.log_every=1"]) == 0
    log = [json.loads(line) for line in (run / "models" / "multisoftmax" / "log.jsonl")
           .read_text().splitlines()]
    steps = [r["step"] for r in log if r["kind"] == "train"]
    assert steps == [2, 4, 6, 7, 8]  # the collected log (every 2nd), then on from update 6


def test_a_damaged_part_is_refused(collected, tmp_path):
    _, out = collected
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in out.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    part = copy / "latest.pt.part0"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(SystemExit, match="does not match its SHA-256"):
        PARTS["restore"](copy, tmp_path / "run")
    assert not any((tmp_path / "run").glob("ckpt-*.pt"))
