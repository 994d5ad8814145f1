"""The graph loss's kernel (``_graph_numba``) where its arithmetic is tested hardest: scores
exp() cannot hold, -inf, frames thousands of nats apart.

References: ``math.exp``; ``torch.nn.functional.ctc_loss`` (S1-T1); and a log-semiring forward
written here in torch, node by node, whose autograd gives the occupancies.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from speechlab.asr.ctc import loss_graphs, topology
from speechlab.asr.ctc._graph_numba import _split_emissions, log_total_score
from speechlab.asr.ctc.loss import graph_loss

F64 = torch.float64
NAMES = list(topology.TOPOLOGIES)


def reference_log_z(g: loss_graphs.GraphBatch, log_probs: torch.Tensor) -> torch.Tensor:
    """log TotalScore of a one-utterance graph under (T, V) log_probs, in torch (differentiable).

    Nodes no path has reached are ``None`` rather than -inf, so autograd never meets a
    log-sum-exp of nothing."""
    n, eps, start = len(g.column), int(g.eps[0]), int(g.start[0])
    sources = [g.in_src[g.in_ptr[i]:g.in_ptr[i + 1]].tolist() for i in range(n)]

    def lse(terms):
        terms = [x for x in terms if x is not None]
        return torch.logsumexp(torch.stack(terms), 0) if terms else None

    alpha = [None] * n
    alpha[start] = torch.zeros((), dtype=F64)
    for i in range(eps, n):
        alpha[i] = lse([alpha[s] for s in sources[i]])
    for t in range(log_probs.shape[0]):
        new = [None] * n
        for i in range(eps):
            total = lse([alpha[s] for s in sources[i]])
            new[i] = None if total is None else total + log_probs[t, int(g.column[i])]
        for i in range(eps, n):
            new[i] = lse([new[s] for s in sources[i]])
        alpha = new
    return lse([alpha[i] for i in np.flatnonzero(g.final)])


def far_apart(name: str, num_phones: int, frames: int, seed: int) -> torch.Tensor:
    """(T, V) log-probs whose frames sit hundreds of nats apart and whose tokens within a
    frame spread over ~1000 nats: far outside what exp() can hold."""
    gen = torch.Generator().manual_seed(seed)
    vocab = topology.num_tokens(name, num_phones)
    scores = torch.randn(frames, vocab, generator=gen, dtype=F64) * 300.0
    scores += torch.randn(frames, 1, generator=gen, dtype=F64) * 800.0
    return scores


def test_split_emissions_is_exp_within_an_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(scale=5.0, size=500), rng.normal(scale=250.0, size=500),
                        [0.0, 1e-300, -1e-300, 709.0, -700.0, -1e4, 3e4]])
    mant, expo = _split_emissions(x.reshape(1, 1, -1), 0, 1)
    mant, expo = mant[0], expo[0]
    assert np.all((mant >= 1.0) & (mant <= 2.0))
    assert np.array_equal(expo, np.floor(expo))
    inside = np.abs(x) < 700  # where exp(x) is a normal float64
    exact = np.exp(x[inside])
    ulps = np.abs(np.ldexp(mant[inside], expo[inside].astype(int)) - exact) / np.spacing(exact)
    assert ulps.max() <= 1.0
    # Everywhere: exp(x) = mant * 2**expo, compared in the log.
    np.testing.assert_allclose(np.log(mant) + expo * math.log(2.0), x, rtol=1e-15, atol=1e-16)


def test_split_emissions_special_values():
    log_probs = np.array([[[-np.inf, np.nan, np.inf, -1e30, 1e30]]])
    mant, expo = _split_emissions(log_probs, 0, 1)
    assert mant[0, 0] == 0.0 and expo[0, 0] == -np.inf
    assert np.isnan(mant[0, 1]) and np.isnan(mant[0, 2])
    # Past 2**52 nats the split keeps what float64 resolves of the score itself.
    for v, score in ((3, -1e30), (4, 1e30)):
        assert 1.0 <= mant[0, v] <= 2.0
        assert expo[0, v] * math.log(2.0) == pytest.approx(score, rel=1e-15)


@pytest.mark.parametrize("scale", [8.0, 60.0])
def test_s1_t1_equals_ctc_loss_on_peaky_emissions(scale):
    """Trained-model-like emissions (one token per frame near 0, the others tens to
    hundreds of nats below), and columns at -inf: values and gradients."""
    gen = torch.Generator().manual_seed(3)
    batch, frames, vocab, labels = 4, 40, 6, 8
    logits = torch.randn(batch, frames, vocab, generator=gen, dtype=F64) * scale
    logits[..., 0] += scale  # blank favoured
    logits[1, :, 5] = -math.inf  # a phone the network never emits (in no target)
    log_probs = logits.log_softmax(-1)
    targets = torch.randint(1, 5, (batch, labels), generator=gen)
    t_len = torch.tensor([40, 33, 25, 40])
    u_len = torch.tensor([8, 5, 8, 0])
    x = log_probs.detach().requires_grad_(True)
    ours = graph_loss(x, t_len, targets, u_len, "S1-T1")
    ref = F.ctc_loss(x.transpose(0, 1), targets, t_len, u_len, reduction="none")
    torch.testing.assert_close(ours, ref, rtol=1e-11, atol=1e-9)
    (g_ours,) = torch.autograd.grad(ours.sum(), x)
    (g_ref,) = torch.autograd.grad(ref.sum(), x)
    never = torch.isinf(log_probs)
    assert torch.all(g_ours[never] == 0)  # ctc_loss has NaN there
    torch.testing.assert_close(g_ours[~never], g_ref[~never], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_numerator_far_outside_exp_range_equals_torch_reference(name):
    """Value and occupancies of every topology's numerator against the torch reference."""
    phones = [2, 1, 1, 3] if topology.get(name).states < 3 else [2, 1, 3]
    frames = 14
    lp = far_apart(name, 3, frames, seed=len(name))
    x = lp.clone().requires_grad_(True)
    ours = graph_loss(x[None], torch.tensor([frames]), torch.tensor([phones]),
                      torch.tensor([len(phones)]), name, denominator=False)
    (g_ours,) = torch.autograd.grad(ours.sum(), x)

    num = loss_graphs.numerator(name, np.array([phones]), np.array([len(phones)]), 3).select(0)
    y = lp.clone().requires_grad_(True)
    log_z = reference_log_z(num, y)
    (g_ref,) = torch.autograd.grad(log_z, y)
    assert ours.item() == pytest.approx(-log_z.item(), rel=1e-13)
    torch.testing.assert_close(g_ours, -g_ref, rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("name", ["S2-T1★", "S3-T2"])
def test_denominator_far_outside_exp_range_equals_torch_reference(name):
    """Spreads the probability-domain pass refuses: the loss runs the kernel on the
    denominator graph (with its epsilon node) instead."""
    frames, phones = 9, [1, 2]
    lp = far_apart(name, 2, frames, seed=7)
    args = (torch.tensor([frames]), torch.tensor([phones]), torch.tensor([2]), name)
    log_den = (graph_loss(lp[None], *args) - graph_loss(lp[None], *args, denominator=False))
    den = loss_graphs.denominator(name, 2)
    x = lp.numpy()[None]
    occupancy = np.zeros_like(x)
    floor = math.log(np.finfo(np.float64).tiny)
    kernel = log_total_score(x, 0, frames, den.arrays(), 0, 1.0, True, occupancy, floor)

    y = lp.clone().requires_grad_(True)
    log_z = reference_log_z(den, y)
    (g_ref,) = torch.autograd.grad(log_z, y)
    assert log_den.item() == pytest.approx(log_z.item(), rel=1e-13)
    assert kernel == pytest.approx(log_z.item(), rel=1e-13)
    torch.testing.assert_close(torch.from_numpy(occupancy[0]), g_ref, rtol=1e-10, atol=1e-300)
