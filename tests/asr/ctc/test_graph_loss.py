"""Tests of ``graph_loss`` against answers computed independently in this file.

* values: a brute-force sum over every token sequence (``speechlab.testing.graphs``), every
  topology, with and without the denominator;
* S1-T1 against ``torch.nn.functional.ctc_loss``, values and gradients (float64);
* gradients: ``torch.autograd.gradcheck`` of the hand-written backward, every topology;
* infeasible utterances, padding, threads, dtypes and every kind of bad input.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from speechlab.asr.ctc import loss_graphs, topology
from speechlab.asr.ctc._graph_numba import log_total_score, scaled_total_score
from speechlab.asr.ctc.loss import graph_loss
from speechlab.devices import device_code
from speechlab.errors import ConfigError, DataError
from speechlab.testing.devices import loss_path  # noqa: F401 (a fixture)
from speechlab.testing.graphs import brute_force_nll

# Every test runs on the numba kernels (the CPU's path) and on the PyTorch code a GPU runs.
pytestmark = pytest.mark.usefixtures("loss_path")

F64 = torch.float64
NAMES = list(topology.TOPOLOGIES)


def random_batch(name, num_phones, frames, labels, seed=0, dtype=F64, normalised=True,
                 max_frames=None, max_labels=None):
    """log_probs (B, T, 1 + P x), targets (B, U) phone ids with -1 padding, lengths."""
    gen = torch.Generator().manual_seed(seed)
    batch = len(frames)
    max_frames = max_frames or max(frames)
    max_labels = max_labels if max_labels is not None else max(labels)
    vocab = topology.num_tokens(name, num_phones)
    logits = torch.randn(batch, max_frames, vocab, generator=gen, dtype=dtype) * 1.5
    log_probs = logits.log_softmax(-1) if normalised else logits
    targets = torch.randint(1, num_phones + 1, (batch, max_labels), generator=gen)
    for b in range(batch):
        targets[b, labels[b]:] = -1
    return log_probs, targets, torch.tensor(frames), torch.tensor(labels)


def phones_of(targets, lengths, b):
    return targets[b, : int(lengths[b])].tolist()


# ------------------------------------------------------------------------------------------
# Values: brute force over all token sequences


@pytest.mark.parametrize("denominator", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_values_equal_brute_force_sum_over_token_sequences(name, denominator):
    x = topology.get(name).states
    num_phones = 2 if x < 3 else 1  # V^T sequences: at most 5^5
    frames, labels = [5, 4, 3, 2, 1], [2, 2, 1, 0, 1]
    for normalised in (True, False):
        log_probs, targets, t_len, u_len = random_batch(
            name, num_phones, frames, labels, seed=x, normalised=normalised)
        loss = graph_loss(log_probs, t_len, targets, u_len, name, denominator=denominator)
        assert loss.shape == (5,) and loss.dtype == F64
        for b in range(5):
            expected = brute_force_nll(name, log_probs[b, : frames[b]].numpy(),
                                       phones_of(targets, u_len, b), denominator)
            if expected == math.inf:
                assert loss[b].item() == math.inf
            else:
                assert loss[b].item() == pytest.approx(expected, rel=1e-10, abs=1e-10)


def test_brute_force_with_two_phones_under_three_states():
    """P = 2 for x = 3 (V = 7): a repeated phone and a skip in four frames."""
    for name in ("S3-T2", "S3-T2★★"):
        log_probs, _, t_len, u_len = random_batch(name, 2, [4, 4], [2, 2], seed=3)
        targets = torch.tensor([[2, 2], [1, 2]])
        loss = graph_loss(log_probs, t_len, targets, u_len, name)
        for b in range(2):
            expected = brute_force_nll(name, log_probs[b].numpy(), targets[b].tolist())
            assert loss[b].item() == pytest.approx(expected, rel=1e-10)


# ------------------------------------------------------------------------------------------
# S1-T1 is CTC (eq. 6)


def ctc_batch(seed, batch=6, max_frames=30, vocab=8, max_labels=10):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, max_frames, vocab, generator=gen, dtype=F64) * 2
    frames = torch.randint(max_labels * 2 + 1, max_frames + 1, (batch,), generator=gen)
    labels = torch.randint(0, max_labels + 1, (batch,), generator=gen)
    frames[0], labels[0] = max_frames, max_labels
    targets = torch.randint(1, vocab, (batch, max_labels), generator=gen)
    targets[1, :3] = torch.tensor([4, 4, 4])  # repeats need blanks between them
    return logits, targets, frames, labels


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_s1_t1_equals_torch_ctc_loss_values_and_gradients(seed):
    """With normalised log_probs: the same values, and with the denominator the same gradient
    w.r.t. log_probs -- ctc_loss's exp(log_probs) - occupancy is our -numerator + denominator
    occupancy, as the denominator occupancy of S1-T1 is exp(log_probs)."""
    logits, targets, t_len, u_len = ctc_batch(seed)
    log_probs = logits.log_softmax(-1).detach().requires_grad_(True)
    ours = graph_loss(log_probs, t_len, targets, u_len, "S1-T1")
    ref = F.ctc_loss(log_probs.transpose(0, 1), targets, t_len, u_len, reduction="none")
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)
    weights = torch.linspace(0.5, 2.0, len(t_len), dtype=F64)
    (g_ours,) = torch.autograd.grad((ours * weights).sum(), log_probs)
    (g_ref,) = torch.autograd.grad((ref * weights).sum(), log_probs)
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-9, atol=1e-10)
    for b in range(len(t_len)):  # padded frames: zero in both
        assert torch.all(g_ours[b, int(t_len[b]):] == 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_s1_t1_without_denominator_gives_ctc_gradient_through_log_softmax(seed):
    """Without the denominator the gradient w.r.t. log_probs is -occupancy (differs from
    ctc_loss's by exp(log_probs)), but through log_softmax both give softmax - occupancy."""
    logits, targets, t_len, u_len = ctc_batch(seed)
    logits.requires_grad_(True)
    ours = graph_loss(logits.log_softmax(-1), t_len, targets, u_len, denominator=False)
    ref = F.ctc_loss(logits.log_softmax(-1).transpose(0, 1), targets, t_len, u_len,
                     reduction="none")
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)
    (g_ours,) = torch.autograd.grad(ours.sum(), logits)
    (g_ref,) = torch.autograd.grad(ref.sum(), logits)
    torch.testing.assert_close(g_ours, g_ref, rtol=1e-9, atol=1e-10)

    log_probs = logits.detach().log_softmax(-1).requires_grad_(True)
    (g_lp,) = torch.autograd.grad(
        graph_loss(log_probs, t_len, targets, u_len, denominator=False).sum(), log_probs)
    occupancy = -g_lp
    torch.testing.assert_close(occupancy.sum(-1)[0], torch.ones(t_len[0], dtype=F64))


def test_s1_t1_denominator_normalises_unnormalised_scores():
    """On unnormalised scores the S1-T1 loss is CTC on their log_softmax: the denominator
    is prod_t sum_v exp(score), exactly the per-frame normaliser."""
    logits, targets, t_len, u_len = ctc_batch(4)
    ours = graph_loss(logits, t_len, targets, u_len)
    ref = F.ctc_loss(logits.log_softmax(-1).transpose(0, 1), targets, t_len, u_len,
                     reduction="none")
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)


def test_s1_t1_closed_form_denominator_equals_the_graph_pass(monkeypatch):
    """FACTORISED_DENOMINATORS: the closed form (per-frame logsumexp, softmax occupancy)
    against the same loss with the denominator run over the graph T."""
    import speechlab.asr.ctc.loss as loss_module

    logits, targets, t_len, u_len = ctc_batch(6)  # unnormalised: the denominator is not 1
    results = []
    for factorised in (frozenset({"S1-T1"}), frozenset()):
        monkeypatch.setattr(loss_module, "FACTORISED_DENOMINATORS", factorised)
        x = logits.clone().requires_grad_(True)
        loss = graph_loss(x, t_len, targets, u_len)
        results.append((loss, *torch.autograd.grad(loss.sum(), x)))
    torch.testing.assert_close(results[0], results[1], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("blank", [7, 3])
def test_s1_t1_with_another_blank_column_equals_ctc_loss(blank):
    """Phone p is column p-1 below the blank and p above it, like ctc_loss's label ids."""
    logits, targets, t_len, u_len = ctc_batch(5)
    log_probs = logits.log_softmax(-1)
    columns = targets - 1 + (targets - 1 >= blank).long()
    ours = graph_loss(log_probs, t_len, targets, u_len, blank=blank)
    ref = F.ctc_loss(log_probs.transpose(0, 1), columns, t_len, u_len, blank=blank,
                     reduction="none")
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-10)


def test_float32_agrees_with_float64():
    for name in ("S1-T1", "S3-T2★"):
        log_probs, targets, t_len, u_len = random_batch(name, 9, [60, 41, 17], [12, 7, 5])
        x64 = log_probs.clone().requires_grad_(True)
        x32 = log_probs.float().requires_grad_(True)
        c64 = graph_loss(x64, t_len, targets, u_len, name)
        c32 = graph_loss(x32, t_len, targets, u_len, name)
        assert c32.dtype == torch.float32
        torch.testing.assert_close(c32.double(), c64, rtol=1e-5, atol=1e-4)
        (g64,) = torch.autograd.grad(c64.sum(), x64)
        (g32,) = torch.autograd.grad(c32.sum(), x32)
        assert g32.dtype == torch.float32
        torch.testing.assert_close(g32.double(), g64, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------
# Gradients


@pytest.mark.parametrize("name", NAMES)
def test_gradcheck(name):
    log_probs, targets, t_len, u_len = random_batch(
        name, 2, [5, 4, 3], [2, 1, 0], seed=11, normalised=False)
    log_probs.requires_grad_(True)
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=F64)
    for denominator in (True, False):
        def loss(x, denominator=denominator):
            return graph_loss(x, t_len, targets, u_len, name, denominator=denominator) * weights

        assert torch.autograd.gradcheck(loss, (log_probs,), eps=1e-6, atol=1e-8, rtol=1e-6)


def test_gradient_rows_are_minus_numerator_plus_denominator_occupancy():
    """Every path crosses every frame once: numerator and denominator occupancies each sum to
    1 per frame, so a gradient row sums to 0 with the denominator and to -1 without."""
    for name in NAMES:
        log_probs, targets, t_len, u_len = random_batch(name, 4, [20, 13], [5, 3], seed=2)
        log_probs.requires_grad_(True)
        for denominator, row_sum in ((True, 0.0), (False, -1.0)):
            loss = graph_loss(log_probs, t_len, targets, u_len, name, denominator=denominator)
            (grad,) = torch.autograd.grad(loss.sum(), log_probs)
            for b in range(2):
                sums = grad[b, : int(t_len[b])].sum(-1)
                torch.testing.assert_close(sums, torch.full_like(sums, row_sum))
                assert torch.all(grad[b, int(t_len[b]):] == 0)


# ------------------------------------------------------------------------------------------
# The denominator in the probability domain (scaled_total_score) and its way out


def both_domains(name, log_probs):
    """(log Z, occupancies) of the denominator of one (T, V) utterance by the scaled kernel
    (None if it gives up) and by the log-domain kernel."""
    den = loss_graphs.denominator(name, (log_probs.shape[1] - 1) // topology.get(name).states)
    x = log_probs[None].astype(np.float64)
    with np.errstate(invalid="ignore"):
        shift = log_probs.max(1)
        emit = np.exp(log_probs - shift[:, None])
    g_scaled, g_log = np.zeros_like(x), np.zeros_like(x)
    ok, scaled = scaled_total_score(emit, shift, 0, den.arrays(), 0, 1.0, True, g_scaled, -708.0)
    exact = log_total_score(x, 0, len(log_probs), den.arrays(), 0, 1.0, True, g_log, -708.0)
    return ((scaled, g_scaled[0]) if ok else None), (exact, g_log[0])


@pytest.mark.parametrize("name", NAMES)
def test_scaled_denominator_equals_the_log_domain(name):
    """Peaky emissions too: logits of spread 40 put tokens ~100 nats apart in a frame."""
    rng = np.random.default_rng(1)
    vocab = topology.num_tokens(name, 6)
    for spread in (1.0, 10.0, 40.0):
        logits = rng.normal(scale=spread, size=(50, vocab))
        log_probs = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
        scaled, exact = both_domains(name, log_probs)
        assert scaled is not None
        assert scaled[0] == pytest.approx(exact[0], rel=1e-12)
        np.testing.assert_allclose(scaled[1], exact[1], rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("name", ["S1-T1", "S3-T2★"])
def test_scaled_denominator_gives_up_where_it_could_lose_digits(name):
    """-inf log-probs (exact zeros), a frame spread beyond float64's range, or NaN: the
    scaled kernel refuses, and graph_loss's answer still equals the log domain's."""
    rng = np.random.default_rng(2)
    vocab = topology.num_tokens(name, 3)
    log_probs = rng.normal(size=(8, vocab))
    minus_inf = log_probs.copy()
    minus_inf[3, 1] = -np.inf
    extreme = log_probs.copy()
    extreme[2:5, 2:] -= 900.0  # 900 nats below the rest of the frame
    nan = log_probs.copy()
    nan[4, 0] = np.nan
    for bad in (minus_inf, extreme, nan):
        scaled, _ = both_domains(name, bad)
        assert scaled is None
    for bad in (minus_inf, extreme):
        lp = torch.from_numpy(np.stack([bad, log_probs]))
        phones = torch.tensor([[1, 2], [3, 1]])
        loss = graph_loss(lp, torch.tensor([8, 8]), phones, torch.tensor([2, 2]), name)
        numerator = graph_loss(lp, torch.tensor([8, 8]), phones, torch.tensor([2, 2]), name,
                               denominator=False)
        _, (exact, _) = both_domains(name, bad)
        assert (loss[0] - numerator[0]).item() == pytest.approx(exact, rel=1e-12)


# ------------------------------------------------------------------------------------------
# Infeasible utterances: +inf, zero gradient, the rest of the batch untouched


def test_infeasible_utterances_give_inf_and_zero_gradient():
    cases = [  # name, frames, phones of the middle (infeasible) utterance
        ("S2-T2", 5, [1, 2, 1]),  # needs 2 frames per phone: 6 > 5
        ("S3-T2★", 3, [2, 2]),  # 4 > 3
        ("S1-T1", 2, [3, 3]),  # CTC: a blank between repeats, 3 > 2
        ("S1-T1", 0, [1]),  # no frames at all
    ]
    for name, short, phones in cases:
        log_probs, targets, _, _ = random_batch(name, 3, [8, 8, 8], [3, 3, 3], seed=6)
        targets[1, :] = -1
        targets[1, : len(phones)] = torch.tensor(phones)
        t_len = torch.tensor([8, short, 7])
        u_len = torch.tensor([3, len(phones), 2])
        x = log_probs.clone().requires_grad_(True)
        loss = graph_loss(x, t_len, targets, u_len, name)
        assert loss[1].item() == math.inf
        assert torch.isfinite(loss[[0, 2]]).all()
        (grad,) = torch.autograd.grad(loss.sum(), x)
        assert torch.isfinite(grad).all()
        assert torch.all(grad[1] == 0)
        keep = torch.tensor([0, 2])
        alone = log_probs[keep].clone().requires_grad_(True)
        loss_alone = graph_loss(alone, t_len[keep], targets[keep], u_len[keep], name)
        (grad_alone,) = torch.autograd.grad(loss_alone.sum(), alone)
        torch.testing.assert_close(loss[keep], loss_alone, rtol=0, atol=0)
        torch.testing.assert_close(grad[keep], grad_alone, rtol=0, atol=0)
        if name == "S1-T1":  # ctc_loss agrees that it is infeasible
            ref = F.ctc_loss(log_probs.transpose(0, 1), targets.clamp(min=1), t_len, u_len,
                             reduction="none")
            assert ref[1].item() == math.inf


def test_minus_infinity_log_probs_on_every_path_give_inf():
    log_probs, targets, t_len, u_len = random_batch("S2-T1", 2, [4, 4], [1, 1], seed=8)
    targets[:, 0] = 1
    log_probs[0, :, 1] = -math.inf  # phone 1 can never start
    log_probs.requires_grad_(True)
    loss = graph_loss(log_probs, t_len, targets, u_len, "S2-T1")
    assert loss[0].item() == math.inf and math.isfinite(loss[1].item())
    (grad,) = torch.autograd.grad(loss.sum(), log_probs)
    assert torch.all(grad[0] == 0) and torch.isfinite(grad).all()


def test_no_frames_and_no_phones_is_certain():
    log_probs, targets, _, _ = random_batch("S2-T2", 2, [3], [1])
    loss = graph_loss(log_probs, torch.tensor([0]), targets, torch.tensor([0]), "S2-T2")
    assert loss.item() == 0.0


# ------------------------------------------------------------------------------------------
# Padding, threads, evaluation modes


def test_padding_changes_nothing_and_gets_no_gradient():
    frames, labels = [6, 3, 5], [2, 1, 0]
    clean, targets, t_len, u_len = random_batch("S2-T1★", 3, frames, labels, seed=4)
    dirty = clean.clone()
    dirty_targets = targets.clone()
    for b in range(3):
        dirty[b, frames[b]:] = float("nan")
        dirty_targets[b, labels[b]:] = 12345
    for x in (clean, dirty):
        x.requires_grad_(True)
    a = graph_loss(clean, t_len, targets, u_len, "S2-T1★")
    b_ = graph_loss(dirty, t_len, dirty_targets, u_len, "S2-T1★")
    torch.testing.assert_close(a, b_, rtol=0, atol=0)
    (g_clean,) = torch.autograd.grad(a.sum(), clean)
    (g_dirty,) = torch.autograd.grad(b_.sum(), dirty)
    torch.testing.assert_close(g_clean, g_dirty, rtol=0, atol=0)


def test_threaded_run_equals_serial_run_and_restores_thread_count():
    log_probs, targets, t_len, u_len = random_batch(
        "S3-T2", 5, [30, 12, 25, 30, 9, 17], [6, 2, 5, 8, 0, 4], seed=9)
    log_probs.requires_grad_(True)
    before = torch.get_num_threads()
    results = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        try:
            loss = graph_loss(log_probs, t_len, targets, u_len, "S3-T2")
            (grad,) = torch.autograd.grad(loss.sum(), log_probs)
            assert torch.get_num_threads() == threads
        finally:
            torch.set_num_threads(before)
        results.append((loss, grad))
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=0)


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_evaluation_modes(mode):
    log_probs, targets, t_len, u_len = random_batch("S2-T2★", 4, [9, 7], [3, 2], seed=10)
    expected = graph_loss(log_probs, t_len, targets, u_len, "S2-T2★")
    with mode():
        got = graph_loss(log_probs, t_len, targets, u_len, "S2-T2★")
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


# ------------------------------------------------------------------------------------------
# Bad input: one clear error naming the argument and the utterance


def _good():
    return random_batch("S2-T1", 3, [6, 5], [2, 2], seed=12)


@pytest.mark.parametrize("mutate, error, match", [
    (lambda a: a.update(topology="S4-T9"), ConfigError, "unknown topology"),
    (lambda a: a.update(log_probs=a["log_probs"][..., :6]), ConfigError, r"V = 6 .*1 \+ P \* 2"),
    (lambda a: a.update(blank=7), ConfigError, "blank = 7"),
    (lambda a: a.update(log_probs=a["log_probs"][0]), DataError, r"\(B, T, V\)"),
    (lambda a: a.update(log_probs=a["log_probs"].long()), DataError, "must be a float tensor"),
    (lambda a: a.update(log_prob_lengths=torch.tensor([6, 7])), DataError,
     r"utterance 1: log_prob_lengths\[1\] = 7 is outside 0..6"),
    (lambda a: a.update(log_prob_lengths=torch.tensor([6, -1])), DataError, "utterance 1"),
    (lambda a: a.update(log_prob_lengths=torch.tensor([6.0, 5.0])), DataError,
     "log_prob_lengths must be"),
    (lambda a: a.update(log_prob_lengths=torch.tensor([6, 5, 4])), DataError,
     r"log_prob_lengths must be \(2,\)"),
    (lambda a: a.update(target_lengths=torch.tensor([3, 2])), DataError,
     r"utterance 0: target_lengths\[0\] = 3 is outside 0..2"),
    (lambda a: a.update(targets=a["targets"][:1]), DataError, r"targets must be a \(2, U\)"),
    (lambda a: a.update(targets=a["targets"].double()), DataError, "integer phone ids"),
    (lambda a: a["targets"].__setitem__((1, 1), 4), DataError,
     r"utterance 1: targets\[1, 1\] = 4 is not a phone id 1..3"),
    (lambda a: a["targets"].__setitem__((0, 0), 0), DataError,
     r"utterance 0: targets\[0, 0\] = 0 is not a phone id"),
    (lambda a: a["log_probs"].__setitem__((1, 2, 0), float("nan")), DataError,
     r"utterance 1: log_probs\[1\] holds NaN or \+inf"),
])
def test_bad_input_raises_a_clear_error(mutate, error, match):
    log_probs, targets, t_len, u_len = _good()
    args = dict(log_probs=log_probs, log_prob_lengths=t_len, targets=targets,
                target_lengths=u_len, topology="S2-T1")
    mutate(args)
    with pytest.raises(error, match=match):
        graph_loss(**args)


def test_plus_infinity_log_probs_raise_instead_of_nan():
    log_probs, targets, t_len, u_len = _good()
    log_probs[0, 0, 0] = math.inf
    with pytest.raises(DataError, match="utterance 0"):
        graph_loss(log_probs, t_len, targets, u_len, "S2-T1")


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("name", NAMES)
def test_device_path_equals_the_numba_path(loss_path, name, dtype):  # noqa: F811 (the fixture)
    """Values and gradients of the PyTorch code a GPU runs equal the numba kernels', for every
    topology, with and without the denominator, on ragged lengths with NaN padding and an
    infeasible utterance (too few frames for its phones)."""
    if loss_path == "device":
        pytest.skip("compares both paths itself")
    frames, labels = [12, 9, 2, 0], [4, 3, 6, 0]
    log_probs, targets, t_lens, u_lens = random_batch(name, 4, frames, labels, seed=11,
                                                      dtype=dtype)
    for b, n in enumerate(frames):
        log_probs[b, n:] = float("nan")
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-10)
    for denominator in (True, False):
        results = []
        for device in (False, True):
            lp = log_probs.detach().clone().requires_grad_()
            with device_code(device):
                cost = graph_loss(lp, t_lens, targets, u_lens, topology=name,
                                  denominator=denominator)
            ok = torch.isfinite(cost)
            (grad,) = torch.autograd.grad(cost[ok].sum(), lp)
            results.append((cost.detach(), grad))
        (c0, g0), (c1, g1) = results
        assert c0.dtype == c1.dtype == dtype and g1.dtype == dtype
        assert torch.equal(torch.isfinite(c0), torch.isfinite(c1)) and not bool(c0[2].isfinite())
        torch.testing.assert_close(c1, c0, **tol)
        torch.testing.assert_close(g1, g0, **tol)
