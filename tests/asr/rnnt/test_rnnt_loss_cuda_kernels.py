"""The RNN-T lattice's CUDA kernels (speechlab.asr.rnnt._loss_cuda), run without a GPU by
numba's CUDA simulator in a subprocess: the cost and both occupancies equal the numba CPU
kernel's on ragged batches, an impossible alignment and NaN included. On a GPU,
tests/test_cuda.py holds the real kernels to the same reference."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import json, math
import numpy as np
from speechlab.asr.rnnt import _loss_cuda
from speechlab.asr.rnnt._loss_numba import forward_backward

rng = np.random.default_rng(3)
report = {}
for name, (batch, frames_max, positions) in {"ragged": (4, 9, 6), "wide": (2, 3, 40)}.items():
    x = rng.normal(size=(batch, frames_max, positions, 2))
    lp = x - np.logaddexp(x[..., :1], x[..., 1:])  # (blank, label) log-probs that sum to one
    blank, label = np.ascontiguousarray(lp[..., 0]), np.ascontiguousarray(lp[..., 1])
    frames = np.array([frames_max, 1, 5, 7][:batch], dtype=np.int64)
    labels = np.array([positions - 1, 0, 2, positions - 1][:batch], dtype=np.int64)
    if name == "ragged":
        blank[2, 5:] = label[2, :, 3:] = np.nan  # padding (past T_b, U_b) may hold anything
        blank[1, 0, 0] = -np.inf  # the only way out of utterance 1: no path
        blank[3, 3, 4] = np.nan
    cost = np.zeros(batch); ob = np.zeros_like(blank); ol = np.zeros_like(blank)
    forward_backward(blank, label, frames, labels, np.arange(batch), True, cost, ob, ol)
    c2, ob2, ol2 = _loss_cuda.lattice_arrays(blank, label, frames, labels, True, threads=4)
    c3, none_b, none_l = _loss_cuda.lattice_arrays(blank, label, frames, labels, False, threads=4)
    finite = np.isfinite(cost)
    report[name] = {
        "cost": cost.tolist(), "cost_kernels": c2.tolist(), "cost_only": c3.tolist(),
        "same_nonfinite": bool(((np.isnan(cost) == np.isnan(c2))
                                & (np.isposinf(cost) == np.isposinf(c2))).all()),
        "cost_diff": float(np.abs(cost[finite] - c2[finite]).max()),
        "occ_diff": float(max(np.abs(ob - ob2).max(), np.abs(ol - ol2).max())),
        "none_without_occupancy": none_b is None and none_l is None,
    }
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["ragged", "wide"])
def test_the_kernels_equal_the_numba_cpu_kernel(report, case):
    r = report[case]
    assert r["same_nonfinite"] and r["none_without_occupancy"]
    assert r["cost_diff"] < 1e-9 and r["occ_diff"] < 1e-9
    assert r["cost_only"][0] == pytest.approx(r["cost"][0], abs=1e-9)


def test_impossible_and_nan_utterances_come_out_as_the_cpu_says(report):
    cost = report["ragged"]["cost_kernels"]
    assert math.isinf(cost[1]) and cost[1] > 0  # no path
    assert math.isnan(cost[3])  # a NaN inside the lattice spreads
    assert math.isfinite(cost[0]) and math.isfinite(cost[2])  # padding is never read


def test_threads_per_block():
    from speechlab.devices import cuda_threads

    assert [cuda_threads(p) for p in (1, 6, 32, 33, 1024, 5000)] == [32, 32, 32, 64, 1024, 1024]


def test_the_kernels_stay_off_on_the_cpu_and_when_turned_off(monkeypatch):
    import torch

    from speechlab import devices

    assert not devices.use_cuda_kernels(torch.zeros(2))
    monkeypatch.setattr(devices, "_numba_cuda_works", lambda: True)
    assert not devices.use_cuda_kernels(torch.zeros(2, device="meta"))
    monkeypatch.setenv(devices.CUDA_KERNELS_ENV, "0")
    assert not devices.use_cuda_kernels(torch.zeros(2))


@pytest.mark.parametrize("family", ["rnnt", "graph"])
def test_a_kernel_that_cannot_be_built_falls_back_once_with_a_warning(family, monkeypatch,
                                                                       caplog):
    """numba may see a GPU and still fail to compile (no NVVM in the image): the loss takes the
    PyTorch-ops path, says so once, and does not try the kernels again in this process."""
    import torch

    from speechlab import devices
    from speechlab.asr.ctc import _graph_cuda
    from speechlab.asr.ctc import loss as graph_loss_module
    from speechlab.asr.ctc.loss import graph_loss
    from speechlab.asr.rnnt import _loss_cuda
    from speechlab.asr.rnnt import loss as rnnt_loss_module
    from speechlab.asr.rnnt.loss import rnnt_loss

    monkeypatch.setattr(devices, "_kernels_failure", None)
    tried = []

    def broken(*args, **kwargs):
        tried.append(1)
        raise RuntimeError("libNVVM cannot be found")

    module, kernel = ((rnnt_loss_module, _loss_cuda) if family == "rnnt"
                      else (graph_loss_module, _graph_cuda))
    monkeypatch.setattr(module, "use_cuda_kernels", lambda x: devices._kernels_failure is None)
    monkeypatch.setattr(kernel, "lattice" if family == "rnnt" else "total_scores", broken)
    gen = torch.Generator().manual_seed(0)
    costs = []
    with devices.device_code():
        for _ in range(2):
            if family == "rnnt":
                logits = torch.randn(2, 5, 4, 6, generator=gen)
                cost = rnnt_loss(logits, torch.tensor([[1, 2, 3], [2, 3, 0]]),
                                 torch.tensor([5, 4]), torch.tensor([3, 2]))
            else:
                log_probs = torch.randn(2, 8, 7, generator=gen).log_softmax(-1)
                cost = graph_loss(log_probs, torch.tensor([8, 6]), torch.tensor([[1, 2], [3, 1]]),
                                  torch.tensor([2, 2]), topology="S2-T1").sum()
            costs.append(float(cost))
    assert len(tried) == 1 and all(c == c and abs(c) != float("inf") for c in costs)
    assert "libNVVM cannot be found" in devices._kernels_failure
    assert sum("CUDA kernels failed" in r.message for r in caplog.records) == 1
