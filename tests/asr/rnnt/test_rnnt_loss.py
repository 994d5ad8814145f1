"""Tests of the RNN-T loss against answers computed independently in this file.

* values: a brute-force sum over every monotonic alignment (tiny T, U, V, float64);
* gradients: ``torch.autograd.gradcheck`` and autograd through a naive cell-by-cell recursion;
* the fused and pruned paths against the plain loss and against a banded naive recursion;
* padding, reductions, dtypes and every kind of bad input.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.asr.rnnt.loss import (
    prune_ranges,
    rnnt_loss,
    rnnt_loss_from_log_probs,
    rnnt_loss_fused,
    rnnt_loss_pruned,
)
from speechlab.devices import device_code
from speechlab.errors import ConfigError, DataError
from speechlab.testing.devices import loss_path  # noqa: F401 (a fixture)

# Every test runs twice: on the numba kernels (the CPU's path) and on the PyTorch code a GPU
# runs, here on the CPU.
pytestmark = pytest.mark.usefixtures("loss_path")

F64 = torch.float64


# ------------------------------------------------------------------------------------------
# Independent references


def brute_force_nll(logits: torch.Tensor, targets: list[int], blank: int = 0) -> float:
    """-log sum over all alignments, by enumeration.  logits (T, U+1, V) of one utterance.

    An alignment is an ordering of T blanks and U labels whose last symbol is a blank; walking
    it from (0, 0), a blank reads log_probs[t, u, blank] and moves t, a label reads
    log_probs[t, u, y_{u+1}] and moves u.
    """
    log_probs = logits.to(F64).log_softmax(-1)
    n_t, n_u = logits.shape[0], len(targets)
    scores = []
    for label_slots in itertools.combinations(range(n_t - 1 + n_u), n_u):
        t = u = 0
        score = 0.0
        for k in range(n_t - 1 + n_u):
            if k in label_slots:
                score += log_probs[t, u, targets[u]].item()
                u += 1
            else:
                score += log_probs[t, u, blank].item()
                t += 1
        score += log_probs[t, u, blank].item()  # the terminating blank at (T-1, U)
        scores.append(score)
    return -torch.logsumexp(torch.tensor(scores, dtype=F64), 0).item()


def naive_nll(
    logits: torch.Tensor, targets: list[int], blank: int = 0, band: list[range] | None = None
) -> torch.Tensor:
    """Cell-by-cell alpha recursion with autograd; ``band[t]`` restricts the nodes of frame t
    (a path may enter a node outside it but nothing leaves it), as pruned RNN-T does."""
    log_probs = logits.log_softmax(-1)
    n_t, n_u = logits.shape[0], len(targets)
    minus_inf = torch.tensor(-math.inf, dtype=logits.dtype)

    def lp(t: int, u: int, k: int) -> torch.Tensor:
        if band is not None and u not in band[t]:
            return minus_inf
        return log_probs[t, u, k]

    alpha: dict[tuple[int, int], torch.Tensor] = {}
    for t in range(n_t):
        for u in range(n_u + 1):
            if t == 0 and u == 0:
                alpha[t, u] = torch.zeros((), dtype=logits.dtype)
                continue
            terms = []
            if t > 0:
                terms.append(alpha[t - 1, u] + lp(t - 1, u, blank))
            if u > 0:
                terms.append(alpha[t, u - 1] + lp(t, u - 1, targets[u - 1]))
            alpha[t, u] = torch.logsumexp(torch.stack(terms), 0)
    return -(alpha[n_t - 1, n_u] + lp(n_t - 1, n_u, blank))


def random_batch(shape, frames, labels, dtype=F64, seed=0, pad_value=None):
    """Random logits (B, T, U+1, V) and targets (B, U) in 1..V-1, ragged lengths."""
    batch, max_t, max_u, vocab = shape
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, max_t, max_u + 1, vocab, generator=gen, dtype=dtype) * 2
    targets = torch.randint(1, vocab, (batch, max_u), generator=gen)
    if pad_value is not None:
        for b in range(batch):
            logits[b, frames[b]:] = pad_value
            logits[b, :, labels[b] + 1:] = pad_value
            targets[b, labels[b]:] = -1
    return logits, targets, torch.tensor(frames), torch.tensor(labels)


def _targets(targets: torch.Tensor, labels: torch.Tensor, b: int) -> list[int]:
    return targets[b, : int(labels[b])].tolist()


# ------------------------------------------------------------------------------------------
# Values and gradients of rnnt_loss


CASES = [
    # (B, T, U, V), frames, labels
    ((3, 4, 3, 5), [4, 3, 1], [3, 2, 3]),  # ragged; T=1 with 3 labels (all on one frame)
    ((2, 3, 0, 4), [3, 2], [0, 0]),  # no labels at all
    ((2, 1, 2, 3), [1, 1], [2, 0]),  # a single frame
    ((1, 2, 4, 6), [2], [4]),  # more labels than frames
]


@pytest.mark.parametrize("shape, frames, labels", CASES)
def test_values_equal_brute_force_sum_over_alignments(shape, frames, labels):
    logits, targets, t_len, u_len = random_batch(shape, frames, labels, pad_value=7.0)
    costs = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    assert costs.shape == (shape[0],) and costs.dtype == F64
    for b in range(shape[0]):
        expected = brute_force_nll(
            logits[b, : frames[b], : labels[b] + 1], _targets(targets, u_len, b)
        )
        assert costs[b].item() == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_values_with_a_nonzero_blank_id():
    logits, _, t_len, u_len = random_batch((2, 3, 2, 5), [3, 2], [2, 1], seed=3)
    targets = torch.tensor([[0, 4], [1, 0]])  # blank is 2 here, so 0 is an ordinary label
    costs = rnnt_loss(logits, targets, t_len, u_len, blank=2, reduction="none")
    for b in range(2):
        expected = brute_force_nll(
            logits[b, : int(t_len[b]), : int(u_len[b]) + 1], _targets(targets, u_len, b), blank=2
        )
        assert costs[b].item() == pytest.approx(expected, rel=1e-12)


def test_gradcheck_float64():
    logits, targets, t_len, u_len = random_batch((3, 3, 2, 4), [3, 2, 1], [2, 1, 2], seed=1)
    logits.requires_grad_(True)
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=F64)  # distinct per-utterance upstream grads

    def loss(x):
        return rnnt_loss(x, targets, t_len, u_len, reduction="none") * weights

    assert torch.autograd.gradcheck(loss, (logits,), eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("shape, frames, labels", CASES)
def test_gradients_equal_autograd_through_naive_recursion(shape, frames, labels):
    logits, targets, t_len, u_len = random_batch(shape, frames, labels, seed=2)
    logits.requires_grad_(True)
    ours = rnnt_loss(logits, targets, t_len, u_len, reduction="sum")
    (grad,) = torch.autograd.grad(ours, logits)

    ref_logits = logits.detach().clone().requires_grad_(True)
    ref = sum(
        naive_nll(ref_logits[b, : frames[b], : labels[b] + 1], _targets(targets, u_len, b))
        for b in range(shape[0])
    )
    (ref_grad,) = torch.autograd.grad(ref, ref_logits)
    assert ours.item() == pytest.approx(ref.item(), rel=1e-12)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-10, atol=1e-12)
    assert grad.abs().sum() > 0


def test_padding_changes_nothing_and_gets_no_gradient():
    frames, labels = [4, 2, 3], [1, 3, 0]
    clean, targets, t_len, u_len = random_batch((3, 4, 3, 6), frames, labels, seed=4)
    dirty = clean.clone()
    for b in range(3):  # NaN and huge values in every padded cell, -1 in padded targets
        dirty[b, frames[b]:] = float("nan")
        dirty[b, :, labels[b] + 1:] = 1e30
    dirty_targets = targets.clone()
    for b in range(3):
        dirty_targets[b, labels[b]:] = -1
    for x in (clean, dirty):
        x.requires_grad_(True)
    a = rnnt_loss(clean, targets, t_len, u_len, reduction="none")
    b_ = rnnt_loss(dirty, dirty_targets, t_len, u_len, reduction="none")
    torch.testing.assert_close(a, b_, rtol=0, atol=0)
    (g_clean,) = torch.autograd.grad(a.sum(), clean)
    (g_dirty,) = torch.autograd.grad(b_.sum(), dirty)
    torch.testing.assert_close(g_clean, g_dirty, rtol=0, atol=0)
    for b in range(3):
        assert torch.all(g_dirty[b, frames[b]:] == 0)
        assert torch.all(g_dirty[b, :, labels[b] + 1:] == 0)


def test_gradient_at_first_and_last_node_is_softmax_minus_exit_probabilities():
    """Every alignment visits (0, 0) and (T-1, U): occupancy 1, so there the gradient is
    softmax - P(exit by blank) onehot(blank) - P(exit by y_1) onehot(y_1); at (T-1, U) the only
    exit is the terminating blank.  Every row of the gradient sums to zero."""
    logits, targets, t_len, u_len = random_batch((2, 5, 3, 7), [5, 3], [3, 2], seed=5)
    logits.requires_grad_(True)
    (grad,) = torch.autograd.grad(rnnt_loss(logits, targets, t_len, u_len, reduction="sum"), logits)
    zeros = torch.zeros(grad.shape[:3], dtype=F64)
    torch.testing.assert_close(grad.sum(-1), zeros, atol=1e-12, rtol=0)
    p = logits.detach().softmax(-1)
    for b in range(2):
        y1 = int(targets[b, 0])
        others = [k for k in range(7) if k not in (0, y1)]
        torch.testing.assert_close(grad[b, 0, 0, others], p[b, 0, 0, others], rtol=1e-12, atol=0)
        exits = grad[b, 0, 0, 0] + grad[b, 0, 0, y1]
        assert exits.item() == pytest.approx(p[b, 0, 0, 0].item() + p[b, 0, 0, y1].item() - 1)
        last = p[b, int(t_len[b]) - 1, int(u_len[b])].clone()
        last[0] -= 1
        torch.testing.assert_close(grad[b, int(t_len[b]) - 1, int(u_len[b])], last)


def test_reductions():
    logits, targets, t_len, u_len = random_batch((3, 3, 2, 4), [3, 2, 3], [2, 2, 0], seed=6)
    costs = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    assert costs.shape == (3,)
    assert rnnt_loss(logits, targets, t_len, u_len).item() == pytest.approx(costs.mean().item())
    assert rnnt_loss(logits, targets, t_len, u_len, reduction="sum").item() == pytest.approx(
        costs.sum().item()
    )
    with pytest.raises(ConfigError, match="reduction"):
        rnnt_loss(logits, targets, t_len, u_len, reduction="max")


def test_float32_agrees_with_float64():
    logits, targets, t_len, u_len = random_batch((4, 30, 10, 50), [30, 25, 17, 1], [10, 4, 9, 3])
    x64 = logits.clone().requires_grad_(True)
    x32 = logits.float().requires_grad_(True)
    c64 = rnnt_loss(x64, targets, t_len, u_len, reduction="none")
    c32 = rnnt_loss(x32, targets, t_len, u_len, reduction="none")
    assert c32.dtype == torch.float32
    torch.testing.assert_close(c32.double(), c64, rtol=1e-5, atol=1e-4)
    (g64,) = torch.autograd.grad(c64.sum(), x64)
    (g32,) = torch.autograd.grad(c32.sum(), x32)
    assert g32.dtype == torch.float32
    torch.testing.assert_close(g32.double(), g64, rtol=1e-4, atol=1e-5)


def test_small_chunks_give_the_same_result():
    logits, targets, t_len, u_len = random_batch((2, 6, 3, 5), [6, 4], [3, 1], seed=7)
    logits.requires_grad_(True)
    a = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    b = rnnt_loss(logits, targets, t_len, u_len, reduction="none", chunk_elements=1)
    torch.testing.assert_close(a, b)
    ga = torch.autograd.grad(a.sum(), logits)[0]
    gb = torch.autograd.grad(b.sum(), logits)[0]
    torch.testing.assert_close(ga, gb)


def test_threaded_run_equals_serial_run_and_restores_thread_count():
    logits, targets, t_len, u_len = random_batch((5, 7, 4, 9), [7, 2, 5, 7, 1], [4, 0, 3, 2, 4])
    logits.requires_grad_(True)
    serial = rnnt_loss(logits, targets, t_len, u_len, reduction="none", chunk_elements=40)
    (g_serial,) = torch.autograd.grad(serial.sum(), logits)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        threaded = rnnt_loss(logits, targets, t_len, u_len, reduction="none", chunk_elements=40)
        (g_threaded,) = torch.autograd.grad(threaded.sum(), logits)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(threaded, serial, rtol=0, atol=0)
    torch.testing.assert_close(g_threaded, g_serial, rtol=0, atol=0)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_evaluation_modes(threads, mode):
    """Validation loops run the loss under no_grad or inference_mode, on any thread count."""
    logits, targets, t_len, u_len = random_batch((3, 5, 3, 6), [5, 4, 2], [3, 1, 0], seed=15)
    expected = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with mode():
            costs = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(costs, expected, rtol=0, atol=0)


def test_log_probs_entry_point_accepts_minus_infinity():
    """A transition with log-prob -inf removes paths; the rest of the lattice still counts."""
    blank = torch.log(torch.full((1, 2, 2), 0.5, dtype=F64))
    label = torch.log(torch.full((1, 2, 2), 0.5, dtype=F64))
    label[0, 0, 0] = -math.inf  # forbid emitting y1 at frame 0: one path left
    blank.requires_grad_(True)
    cost = rnnt_loss_from_log_probs(blank, label, torch.tensor([2]), torch.tensor([1]))
    assert cost.item() == pytest.approx(-3 * math.log(0.5))
    (grad,) = torch.autograd.grad(cost, blank)  # the one path uses blanks at (0,0) and (1,1)
    torch.testing.assert_close(grad, torch.tensor([[[-1.0, 0.0], [0.0, -1.0]]], dtype=F64))


# ------------------------------------------------------------------------------------------
# Fused joiner + loss


class TanhJoiner(torch.nn.Module):
    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.out = torch.nn.Linear(dim, vocab, dtype=F64)

    def forward(self, enc, pred):
        return self.out(torch.tanh(enc + pred))


def _joiner_inputs(batch, frames, positions, dim, vocab, seed):
    torch.manual_seed(seed)
    joiner = TanhJoiner(dim, vocab)
    enc = torch.randn(batch, frames, dim, dtype=F64, requires_grad=True)
    pred = torch.randn(batch, positions, dim, dtype=F64, requires_grad=True)
    return joiner, enc, pred


@pytest.mark.parametrize("chunk_elements", [1, 50, 1 << 22])
def test_fused_equals_full_logits_values_and_gradients(chunk_elements):
    frames, labels = [5, 3, 1], [2, 3, 0]
    joiner, enc, pred = _joiner_inputs(3, 5, 4, 6, 7, seed=8)
    targets = torch.tensor([[3, 1, -1], [2, 6, 5], [-1, -1, -1]])
    t_len, u_len = torch.tensor(frames), torch.tensor(labels)
    inputs = [enc, pred, *joiner.parameters()]

    logits = joiner(enc[:, :, None], pred[:, None])
    full = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    fused = rnnt_loss_fused(
        enc, pred, joiner, targets, t_len, u_len, reduction="none", chunk_elements=chunk_elements
    )
    torch.testing.assert_close(fused, full, rtol=1e-12, atol=1e-12)
    weights = torch.tensor([0.5, 1.0, 2.0], dtype=F64)
    g_full = torch.autograd.grad((full * weights).sum(), inputs)
    g_fused = torch.autograd.grad((fused * weights).sum(), inputs)
    for a, b in zip(g_fused, g_full):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert torch.all(g_fused[0][1, 3:] == 0) and torch.all(g_fused[0][2, 1:] == 0)  # padded frames


def test_fused_replays_joiner_dropout_exactly():
    """The backward's recomputed logits use the forward's dropout masks: the result equals the
    full-logits loss of the same chunk-by-chunk joiner calls under the same seed."""
    frames, labels = [4, 3], [2, 1]
    joiner, enc, pred = _joiner_inputs(2, 4, 3, 6, 5, seed=14)
    dropout = torch.nn.Dropout(0.5)

    def noisy_joiner(e, p):
        return joiner(dropout(e + 0 * p), p)

    targets = torch.tensor([[1, 2], [3, -1]])
    t_len, u_len = torch.tensor(frames), torch.tensor(labels)
    inputs = [enc, pred, *joiner.parameters()]
    chunk_frames = 2  # chunk_elements = B * (U+1) * V * 2 frames
    torch.manual_seed(123)
    fused = rnnt_loss_fused(enc, pred, noisy_joiner, targets, t_len, u_len,
                            chunk_elements=2 * 3 * 5 * chunk_frames)
    g_fused = torch.autograd.grad(fused, inputs)
    torch.manual_seed(123)
    logits = torch.cat([noisy_joiner(enc[:, t0:t0 + chunk_frames, None], pred[:, None])
                        for t0 in range(0, 4, chunk_frames)], 1)
    full = rnnt_loss(logits, targets, t_len, u_len)
    g_full = torch.autograd.grad(full, inputs)
    torch.testing.assert_close(fused, full, rtol=1e-12, atol=1e-12)
    for a, b in zip(g_fused, g_full):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_fused_and_pruned_ignore_nan_padding_in_joiner_inputs():
    """Padded frames / label positions of enc, pred, am, lm may hold NaN: same losses, same
    gradients, exactly zero gradient on the padding, finite joiner-parameter gradients."""
    joiner, enc, pred, targets, t_len, u_len, am, lm = _pruned_inputs(16)
    frames, labels = t_len.tolist(), u_len.tolist()

    def dirty(x, lengths, extra):
        x = x.detach().clone()
        for b, n in enumerate(lengths):
            x[b, n + extra:] = float("nan")
        return x.requires_grad_(True)

    clean = [x.detach().clone().requires_grad_(True) for x in (enc, pred, am, lm)]
    noisy = [dirty(enc, frames, 0), dirty(pred, labels, 1), dirty(am, frames, 0),
             dirty(lm, labels, 1)]
    params = list(joiner.parameters())
    results = []
    for e, p, a, m in (clean, noisy):
        fused = rnnt_loss_fused(e, p, joiner, targets, t_len, u_len, chunk_elements=100)
        pruned = rnnt_loss_pruned(e, p, joiner, targets, t_len, u_len, am=a, lm=m, s_range=3)
        total = fused + pruned.simple + pruned.pruned
        results.append((total, torch.autograd.grad(total, [e, p, a, m, *params])))
    (clean_total, clean_grads), (noisy_total, noisy_grads) = results
    torch.testing.assert_close(noisy_total, clean_total, rtol=1e-12, atol=1e-12)
    for g_clean, g_noisy in zip(clean_grads, noisy_grads):
        assert torch.isfinite(g_noisy).all()
        torch.testing.assert_close(g_noisy, g_clean, rtol=1e-10, atol=1e-12)
    assert torch.all(noisy_grads[0][1, frames[1]:] == 0)


def test_fused_rejects_targets_outside_the_joiner_vocabulary():
    joiner, enc, pred = _joiner_inputs(1, 2, 2, 3, 4, seed=9)
    with pytest.raises(DataError, match=r"batch index 0: targets\[0, 0\] = 4"):
        rnnt_loss_fused(
            enc, pred, joiner, torch.tensor([[4]]), torch.tensor([2]), torch.tensor([1])
        )


# ------------------------------------------------------------------------------------------
# Pruned RNN-T


def _pruned_inputs(seed):
    frames, labels = [6, 4, 5], [4, 2, 5]
    joiner, enc, pred = _joiner_inputs(3, 6, 6, 5, 8, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    targets = torch.randint(1, 8, (3, 5), generator=gen)
    am = torch.randn(3, 6, 8, generator=gen, dtype=F64, requires_grad=True)
    lm = torch.randn(3, 6, 8, generator=gen, dtype=F64, requires_grad=True)
    return joiner, enc, pred, targets, torch.tensor(frames), torch.tensor(labels), am, lm


def test_pruned_with_full_band_equals_the_full_loss():
    joiner, enc, pred, targets, t_len, u_len, am, lm = _pruned_inputs(10)
    losses = rnnt_loss_pruned(
        enc, pred, joiner, targets, t_len, u_len, am=am, lm=lm, s_range=6, reduction="none"
    )
    logits = joiner(enc[:, :, None], pred[:, None])
    full = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    torch.testing.assert_close(losses.pruned, full, rtol=1e-12, atol=1e-12)
    inputs = [enc, pred, *joiner.parameters()]
    for a, b in zip(torch.autograd.grad(losses.pruned.sum(), inputs),
                    torch.autograd.grad(full.sum(), inputs)):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    # The simple loss is the plain loss of the additive joiner am + lm.
    simple = rnnt_loss(am[:, :, None] + lm[:, None], targets, t_len, u_len, reduction="none")
    torch.testing.assert_close(losses.simple, simple, rtol=1e-10, atol=1e-10)
    for a, b in zip(torch.autograd.grad(losses.simple.sum(), [am, lm]),
                    torch.autograd.grad(simple.sum(), [am, lm])):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("s_range", [2, 3])
def test_pruned_equals_banded_naive_recursion(s_range):
    joiner, enc, pred, targets, t_len, u_len, am, lm = _pruned_inputs(11)
    losses = rnnt_loss_pruned(
        enc, pred, joiner, targets, t_len, u_len, am=am, lm=lm, s_range=s_range, reduction="none"
    )
    # The same bands, from the simple joiner's occupancies recomputed here by autograd.
    frames, labels = t_len.numpy(), u_len.numpy()
    occupancy = _node_occupancy_by_autograd(am, lm, targets, frames, labels)
    starts = prune_ranges(occupancy, frames, labels, s_range)
    logits = joiner(enc[:, :, None], pred[:, None])
    full = rnnt_loss(logits, targets, t_len, u_len, reduction="none")
    for b in range(3):
        band = [range(int(s), int(s) + s_range) for s in starts[b, : frames[b]]]
        expected = naive_nll(
            logits[b, : frames[b], : labels[b] + 1], _targets(targets, u_len, b), band=band
        )
        assert losses.pruned[b].item() == pytest.approx(expected.item(), rel=1e-10)
        assert losses.pruned[b].item() >= full[b].item() - 1e-12  # fewer paths
    assert any(losses.pruned[b] > full[b] + 1e-6 for b in range(3))  # the band did prune


def _node_occupancy_by_autograd(am, lm, targets, frames, labels):
    """Occupancy of lattice nodes: d(-cost)/d(log-prob) summed over the node's two exits."""
    batch, max_t, positions = am.shape[0], am.shape[1], lm.shape[1]
    log_probs = (am[:, :, None] + lm[:, None]).detach().log_softmax(-1)
    blank_lp = log_probs[..., 0].clone().requires_grad_(True)
    ids = torch.cat([targets, torch.zeros(batch, 1, dtype=targets.dtype)], 1)
    label_lp = log_probs.gather(3, ids[:, None, :, None].expand(-1, max_t, -1, 1))[..., 0]
    label_lp = label_lp.clone().requires_grad_(True)
    occupancy = torch.zeros(batch, max_t, positions, dtype=F64)
    for b in range(batch):
        n_t, n_u = int(frames[b]), int(labels[b])
        alpha = {}
        for t in range(n_t):
            for u in range(n_u + 1):
                if t == u == 0:
                    alpha[t, u] = torch.zeros((), dtype=F64)
                    continue
                terms = []
                if t > 0:
                    terms.append(alpha[t - 1, u] + blank_lp[b, t - 1, u])
                if u > 0:
                    terms.append(alpha[t, u - 1] + label_lp[b, t, u - 1])
                alpha[t, u] = torch.logsumexp(torch.stack(terms), 0)
        log_p = alpha[n_t - 1, n_u] + blank_lp[b, n_t - 1, n_u]
        g_blank, g_label = torch.autograd.grad(log_p, [blank_lp, label_lp])
        occupancy[b] = g_blank[b] + g_label[b]
    return occupancy


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(
    data=st.data(),
    s_range=st.integers(2, 5),
    max_t=st.integers(1, 8),
    max_u=st.integers(0, 9),
)
def test_prune_ranges_keep_a_full_alignment_inside_the_bands(data, s_range, max_t, max_u):
    batch = 2
    frames = np.array([data.draw(st.integers(1, max_t)) for _ in range(batch)])
    labels = np.array([data.draw(st.integers(0, max_u)) for _ in range(batch)])
    width = min(s_range, max_u + 1)
    labels = np.minimum(labels, (width - 1) * frames)  # feasible utterances only
    seed = data.draw(st.integers(0, 2**16))
    occupancy = torch.rand(batch, max_t, max_u + 1, generator=torch.Generator().manual_seed(seed))
    starts = prune_ranges(occupancy, frames, labels, width)
    assert starts.shape == (batch, max_t)
    assert starts.min() >= 0 and starts.max() <= max_u + 1 - width
    for b in range(batch):
        s = starts[b, : frames[b]].tolist()
        assert s[0] == 0
        assert s[-1] <= labels[b] <= s[-1] + width - 1  # U_b inside the last band
        assert all(0 <= s[t + 1] - s[t] <= width - 1 for t in range(len(s) - 1))


def test_pruned_rejects_utterances_that_cannot_fit_the_bands():
    joiner, enc, pred = _joiner_inputs(1, 2, 6, 3, 5, seed=12)
    am, lm = torch.zeros(1, 2, 5, dtype=F64), torch.zeros(1, 6, 5, dtype=F64)
    targets = torch.tensor([[1, 2, 3, 4, 1]])
    with pytest.raises(DataError, match="batch index 0.*s_range >= 4"):
        rnnt_loss_pruned(enc, pred, joiner, targets, torch.tensor([2]), torch.tensor([5]),
                         am=am, lm=lm, s_range=3)
    with pytest.raises(ConfigError, match="s_range"):
        rnnt_loss_pruned(enc, pred, joiner, targets, torch.tensor([2]), torch.tensor([5]),
                         am=am, lm=lm, s_range=1)


# ------------------------------------------------------------------------------------------
# Bad inputs


def _ok_inputs():
    logits, targets, t_len, u_len = random_batch((2, 3, 2, 4), [3, 2], [2, 1], seed=13)
    return logits, targets, t_len, u_len


def _set(**changes):
    """An edit of the valid inputs (logits, targets, logit_lengths, target_lengths)."""
    names = ("logits", "targets", "logit_lengths", "target_lengths")

    def edit(*inputs):
        named = dict(zip(names, inputs))
        for key, change in changes.items():
            named[key] = change(named[key]) if callable(change) else change
        return tuple(named[n] for n in names)

    return edit


BAD_INPUTS = [
    (_set(logit_lengths=torch.tensor([3, 0])), r"batch index 1: logit_lengths\[1\] = 0"),
    (_set(logit_lengths=torch.tensor([4, 2])), r"batch index 0: logit_lengths\[0\] = 4"),
    (_set(target_lengths=torch.tensor([2, 3])), r"batch index 1: target_lengths\[1\] = 3"),
    (_set(target_lengths=torch.tensor([-1, 1])), r"batch index 0: target_lengths"),
    (_set(targets=torch.tensor([[1, 2], [0, 9]])), r"batch index 1: targets\[1, 0\] = 0 is the blank"),
    (_set(targets=torch.tensor([[1, 4], [1, 9]])), r"batch index 0: targets\[0, 1\] = 4 is outside"),
    (_set(targets=torch.tensor([[1, 2], [-3, 1]])), r"batch index 1: targets\[1, 0\] = -3"),
    (_set(targets=lambda y: y[:, :1]), r"targets must be \(B, U\) = \(2, 2\)"),
    (_set(targets=lambda y: y.float()), "integer ids"),
    (_set(logits=lambda x: x[0]), "logits must have 4 dims"),
    (_set(logits=lambda x: x.long()), "must be a float tensor"),
    (_set(logit_lengths=lambda t: t[:1]), "logit_lengths must be"),
    (_set(logits=lambda x: x[:, :0]), "batch index 0: logit_lengths"),
]


@pytest.mark.parametrize("edit, message", BAD_INPUTS)
def test_bad_inputs_raise_a_clear_data_error(edit, message):
    with pytest.raises(DataError, match=message):
        rnnt_loss(*edit(*_ok_inputs()))


def test_non_finite_logits_raise_instead_of_returning_nan():
    logits, targets, t_len, u_len = _ok_inputs()
    logits[1, 0, 0, 0] = float("nan")
    with pytest.raises(DataError, match="batch index 1: no alignment"):
        rnnt_loss(logits, targets, t_len, u_len)
    logits, targets, t_len, u_len = _ok_inputs()
    logits[0, :, :, 0] = -math.inf  # blank impossible everywhere: no path ends
    with pytest.raises(DataError, match="batch index 0: no alignment"):
        rnnt_loss(logits, targets, t_len, u_len)


def test_blank_id_outside_vocabulary_is_a_config_error():
    logits, targets, t_len, u_len = _ok_inputs()
    with pytest.raises(ConfigError, match="blank id 4"):
        rnnt_loss(logits, targets, t_len, u_len, blank=4)


# ------------------------------------------------------------------------------------------
# The device path against the numba path


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_device_path_equals_the_numba_path(loss_path, dtype):  # noqa: F811 (the fixture)
    """Values and gradients of the full, fused and pruned losses agree between the two
    implementations, on a batch with every kind of padding (NaN included)."""
    if loss_path == "device":
        pytest.skip("compares both paths itself")
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-10)
    logits, targets, frames, labels = random_batch((4, 9, 5, 7), [9, 6, 1, 4], [5, 0, 3, 2],
                                                   dtype=dtype, seed=3, pad_value=float("nan"))

    def full():
        x = logits.detach().clone().requires_grad_()
        loss = rnnt_loss(x, targets, frames, labels, reduction="none")
        return loss.detach(), torch.autograd.grad(loss.sum(), x)[0]

    def fused():
        joiner, enc, pred = _joiner_inputs(4, 9, 6, 5, 7, seed=4)
        joiner = joiner.to(dtype)
        enc = enc.detach().to(dtype).requires_grad_()
        pred = pred.detach().to(dtype).requires_grad_()
        loss = rnnt_loss_fused(enc, pred, joiner, targets, frames, labels, reduction="sum")
        return (loss.detach(), *torch.autograd.grad(loss, [enc, pred]))

    def pruned():
        joiner, enc, pred, p_targets, p_frames, p_labels, am, lm = _pruned_inputs(5)
        joiner = joiner.to(dtype)
        enc, pred, am, lm = (t.detach().to(dtype).requires_grad_() for t in (enc, pred, am, lm))
        out = rnnt_loss_pruned(enc, pred, joiner, p_targets, p_frames, p_labels, am=am, lm=lm,
                               s_range=3, reduction="sum")
        return (out.simple.detach(), out.pruned.detach(),
                *torch.autograd.grad(out.simple + out.pruned, [enc, pred, am, lm]))

    for compute in (full, fused, pruned):
        numba = compute()
        with device_code():
            device = compute()
        for a, b in zip(numba, device):
            assert a.dtype == b.dtype
            torch.testing.assert_close(b, a, **tol)


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16])
def test_half_precision_logits_are_upcast_and_the_loss_is_float32(half):
    """What autocast hands the loss: its value and gradient are those of the same numbers in
    float32."""
    logits, targets, frames, labels = random_batch((2, 5, 3, 6), [5, 3], [3, 1],
                                                   dtype=torch.float32, seed=8)
    low = logits.to(half).requires_grad_()
    loss = rnnt_loss(low, targets, frames, labels)
    assert loss.dtype == torch.float32
    (grad,) = torch.autograd.grad(loss, low)
    assert grad.dtype == half
    ref = low.detach().float().requires_grad_()
    expected = rnnt_loss(ref, targets, frames, labels)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(grad, torch.autograd.grad(expected, ref)[0].to(half))
