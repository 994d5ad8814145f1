"""The graph loss's CUDA kernels (speechlab.asr.ctc._graph_cuda), run without a GPU by numba's
CUDA simulator in a subprocess: for every topology, numerator and denominator graphs, the log
TotalScore and its occupancies equal the PyTorch device path's (itself held to the numba CPU
kernels in test_graph_loss.py) on ragged batches with NaN padding and an infeasible utterance.
On a GPU, tests/test_cuda.py holds the real kernels to the numba CPU kernels."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from speechlab.asr.ctc import topology

SCRIPT = r"""
import json, sys
import numpy as np
import torch
from speechlab.asr.ctc import _graph_cuda, _graph_torch, loss_graphs, topology

phones, frames, labels = 3, [7, 5, 1, 0], [3, 2, 3, 0]  # utterance 2: too few frames
report = {}
for name in sys.argv[1:]:
    rng = np.random.default_rng(4)
    vocab = topology.num_tokens(name, phones)
    x = rng.normal(size=(4, max(frames), vocab)) * 1.5
    lp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    for b, n in enumerate(frames):
        lp[b, n:] = np.nan  # padding may hold anything
    targets = rng.integers(1, phones + 1, size=(4, max(labels)))
    num = loss_graphs.numerator(name, targets, np.array(labels), phones)
    den = loss_graphs.denominator(name, phones)
    row = {}
    for kind, graph, which in (("numerator", num, np.arange(4)),
                               ("denominator", den, np.zeros(4, dtype=np.int64))):
        z_k, g_k = _graph_cuda.total_scores_arrays(lp, np.array(frames), graph, which, True,
                                                   threads=3)
        z_v, none = _graph_cuda.total_scores_arrays(lp, np.array(frames), graph, which, False,
                                                   threads=3)
        expanded = _graph_torch.expand(graph, which, torch.device("cpu"))
        z_t, g_t = _graph_torch.total_scores(torch.from_numpy(lp), torch.tensor(frames),
                                             expanded, True)
        z_t, g_t = z_t.numpy(), g_t.numpy()
        fin = np.isfinite(z_t)
        row[kind] = {"finite": fin.tolist(), "finite_kernels": np.isfinite(z_k).tolist(),
                     "z_diff": float(np.abs(z_k[fin] - z_t[fin]).max()),
                     "z_values_only_diff": float(np.abs(z_v[fin] - z_t[fin]).max()),
                     "grad_diff": float(np.abs(np.nan_to_num(g_k - g_t, nan=1.0)).max()),
                     "grad_sum": float(np.abs(g_k).sum()), "no_grad": none is None}
    report[name] = row
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def report():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, "-c", SCRIPT, *topology.TOPOLOGIES],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["numerator", "denominator"])
@pytest.mark.parametrize("name", list(topology.TOPOLOGIES))
def test_the_kernels_equal_the_device_path(report, name, kind):
    r = report[name][kind]
    assert r["finite"] == r["finite_kernels"] and r["no_grad"]
    assert r["z_diff"] < 1e-9 and r["z_values_only_diff"] < 1e-9 and r["grad_diff"] < 1e-9
    assert r["grad_sum"] > 0  # occupancies were added
    if kind == "numerator":
        assert r["finite"] == [True, True, False, True]  # utterance 2 cannot be read
