"""Every paper's training task, end to end through the trainer, on the code paths a GPU takes:
the losses' device (PyTorch) code, mixed precision and batches made by worker processes,
here on the CPU, at the ci scale on
synthetic utterances (speechlab.testing.synthetic_training)."""

from __future__ import annotations

import math

import pytest

from speechlab.devices import device_code
from speechlab.testing.synthetic_training import PAPERS, Counting
from speechlab.train.config import TrainConfig
from speechlab.train.log import read_log
from speechlab.train.trainer import Trainer


@pytest.mark.parametrize("paper", list(PAPERS))
@pytest.mark.parametrize("path", ["device code", "bf16", "loader workers"])
def test_each_paper_trains_on_the_gpu_code_paths(tmp_path, paper, path):
    model, task, count = PAPERS[paper]("ci", utterances=8)
    counting = Counting(task, count)
    precision = "bf16" if path == "bf16" else "fp32"
    cfg = TrainConfig(max_steps=2, log_every=1, progress=False, precision=precision,
                      loader_workers=2 if path == "loader workers" else 0)
    with device_code(path == "device code"):
        result = Trainer(model, counting, cfg, tmp_path, device="cpu").fit()
    assert result.steps == 2 and result.nonfinite_batches == 0
    losses = [r["loss"] for r in read_log(result.log_path) if r["kind"] == "train"]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert counting.utterances > 0 and counting.seconds > 0
