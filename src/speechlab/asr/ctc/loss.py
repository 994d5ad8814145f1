"""The graph loss of the CTC-topologies paper (plain CTC, used by other families too, is
:func:`speechlab.nn.ctc.ctc_loss`).

* :func:`graph_loss` is the training objective of the CTC-topologies paper (Zhao et al.,
  Sec. 2.1, eqs. 1-6) for any of its eight topologies: the log-ratio of the total scores of
  the emissions composed with the numerator graph ``T o W(y)`` and with the token graph ``T``.
  For S1-T1 it is CTC (eq. 6).

Shapes: B batch, T frames, U labels (phones), V vocabulary / tokens (id ``blank`` is the
blank), P phones, S graph nodes (states), A graph arcs.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from speechlab.asr.ctc import _graph_cuda, _graph_torch, loss_graphs
from speechlab.asr.ctc._graph_numba import log_total_score, scaled_total_score
from speechlab.asr.ctc.topology import Arcs, Topology, get
from speechlab.devices import HALF, cuda_kernels_failed, use_cuda_kernels, use_device_code
from speechlab.devices import full_precision as _full
from speechlab.errors import ConfigError, DataError
from speechlab.nn.mask import checked_lengths


# --------------------------------------------------------------------------------------------
# The graph loss of the CTC-topologies paper


#: Topologies whose T accepts every token sequence by exactly one path (S1-T1, i.e. CTC; the
#: tests check it by brute force).  Eq. (5) then factorises over frames: log TotalScore(E o T)
#: = sum_t logsumexp_v log_probs[t, v], with occupancy softmax(log_probs[t]) -- a few
#: vectorised numpy operations instead of a pass over T (measured at (16, 600, 80, 100): the
#: denominator's share of the S1-T1 loss fell from 12% to 6%).
FACTORISED_DENOMINATORS = frozenset({"S1-T1"})


def graph_loss(
    log_probs: Tensor,
    log_prob_lengths: Tensor,
    targets: Tensor,
    target_lengths: Tensor,
    topology: str = "S1-T1",
    blank: int = 0,
    denominator: bool = True,
) -> Tensor:
    """Per-utterance negative log-likelihood of the CTC-topologies paper (eqs. 1-5).

    ``-log p(Y|X) = -(log TotalScore(E o S^trn) - log TotalScore(E o T))``: the emissions E
    composed with the numerator graph ``S^trn = T o W(Y)`` (eqs. 3-4, all paths of the
    topology that output the phone sequence Y) against the token graph T alone (eq. 5, all
    paths of the topology).

    How: the numerator graphs are built as arrays for the batch on every call (one kernel
    call, 0.07 ms for 16 x 100 phones), the denominator once per (topology, P, blank)
    (:mod:`speechlab.asr.ctc.loss_graphs`).  The forward-backward (:mod:`._graph_numba`) runs one
    utterance at a time on the calling thread and ``torch.get_num_threads() - 1`` helper
    threads kept between calls (:func:`_run_batch`): the numerator with mantissa-exponent
    arithmetic, exact for any scores; the denominator in the probability domain with
    per-frame scaling, which is exact unless a frame's log-probs spread over ~200 nats or
    hold -inf, and then with the numerator's kernel (for S1-T1 it is a closed form,
    :data:`FACTORISED_DENOMINATORS`).  Occupancies are computed in the forward call (only
    if log_probs requires grad) and kept for the backward.

    Args:
        log_probs: (B, T, V) float32/float64 log-probabilities over the topology's tokens,
            ``V = 1 + P x`` for x states per phone (P is inferred).  Layout (TOPOLOGIES.md):
            token 0 is blank and phone p's state s is ``1 + (p-1) x + s``; a ``blank`` other
            than 0 moves the blank to that column and keeps the others in order around it.
        log_prob_lengths: (B,) valid frames T_b, 0 <= T_b <= T.
        targets: (B, U) phone ids 1..P (not token ids, whatever the topology); entries at or
            past ``target_lengths[b]`` may hold anything.
        target_lengths: (B,) U_b, 0 <= U_b <= U.
        topology: a topology name (``speechlab.asr.ctc.topology.TOPOLOGIES``; ``*`` for ★).
        blank: the blank's column in V.
        denominator: subtract ``log TotalScore(E o T)`` (eq. 5); off, the loss is the
            numerator's ``-log TotalScore(E o S^trn)`` alone.

    Returns:
        (B,) in log_probs' dtype.  ``+inf`` for an utterance no path of whose numerator has a
        non-zero score: too few frames for its phones (``min frames`` per phone, plus one
        blank between repeated phones under S1-T1), or -inf log-probs on every path.  Such a
        row gets exactly zero gradient, so it cannot poison the batch; drop it from the
        reduction (``loss[loss.isfinite()]``) or the sum is inf too.

    Gradients (w.r.t. ``log_probs`` as free variables, exact): ``-(numerator occupancy) +
    (denominator occupancy)``, per frame and token; zero on padded frames.  For S1-T1 the
    denominator is ``sum_v exp(log_probs[b, t, v])`` per frame (T accepts every token
    sequence exactly once), so for normalised log_probs it is 1 -- the loss equals
    ``torch.nn.functional.ctc_loss`` (eq. 6) -- and its occupancy is ``exp(log_probs)``: with
    ``denominator=True`` the gradient equals ctc_loss's, which is ``exp(log_probs) -
    occupancy`` (torch returns the gradient w.r.t. the logits of a log_softmax).  With
    ``denominator=False`` the gradient is ``-occupancy``; after a log_softmax both give the
    same gradient w.r.t. the logits.

    Raises:
        ConfigError: unknown topology; V not ``1 + P x``; blank outside 0..V-1.
        DataError: shapes or dtypes wrong, lengths outside their ranges, a target outside
            1..P (naming the utterance and position), or NaN/+inf log_probs on a path.
    """
    topo = get(topology)
    frames, labels, phones, num_phones = _check_graph_inputs(
        log_probs, log_prob_lengths, targets, target_lengths, topo, blank
    )
    log_probs = _full(log_probs)
    den = loss_graphs.denominator(topo.name, num_phones, blank) if denominator else None
    factorises = topo.name in FACTORISED_DENOMINATORS
    if factorises and use_device_code(log_probs):
        # S1-T1 is CTC (eq. 6): on a device its numerator is torch's ctc_loss, the one kernel
        # per batch that a GPU has for it, and the denominator is the closed form.
        columns = loss_graphs.columns(topo, num_phones, blank)[np.maximum(phones, 1)]
        ctc = (torch.as_tensor(columns).to(log_probs.device),
               torch.as_tensor(labels).to(log_probs.device))
        return _GraphLoss.apply(log_probs, frames, ctc, den, factorises, blank)
    numerator = loss_graphs.numerator(topo.name, phones, labels, num_phones, blank)
    return _GraphLoss.apply(log_probs, frames, numerator, den, factorises)


def graph_loss_from_arcs(
    log_probs: Tensor,
    log_prob_lengths: Tensor,
    numerators: Sequence[Arcs],
    topology: str = "S1-T1",
    blank: int = 0,
    denominator: bool = True,
) -> Tensor:
    """:func:`graph_loss` with each utterance's numerator given as a graph, e.g. ``T o (L o W)``
    of eq. 4 (:class:`speechlab.asr.ctc.graphs.TrainingGraphCompiler` then
    :func:`~speechlab.asr.ctc.graphs.to_arcs`): every pronunciation of every word of the
    transcript is summed over, where :func:`graph_loss` takes one phone sequence.

    Args:
        log_probs, log_prob_lengths, topology, blank, denominator: as for :func:`graph_loss`.
        numerators: B graphs whose tokens are in the topology's layout (blank 0); an empty
            graph (no token sequence spells the transcript) gives ``+inf``.

    Returns:
        (B,) negative log-likelihoods, ``+inf`` where infeasible (zero gradient), as
        :func:`graph_loss`; with a one-pronunciation lexicon the two are equal.
    """
    topo = get(topology)
    batch = log_probs.shape[0] if isinstance(log_probs, Tensor) and log_probs.dim() == 3 else -1
    none = torch.zeros((max(batch, 0), 0), dtype=torch.int64)
    frames, _, _, num_phones = _check_graph_inputs(
        log_probs, log_prob_lengths, none, torch.zeros(max(batch, 0), dtype=torch.int64), topo,
        blank)
    log_probs = _full(log_probs)
    if len(numerators) != batch:
        raise DataError(f"graph loss: {len(numerators)} numerator graphs for a batch of {batch}")
    try:
        numerator = loss_graphs.from_arcs(list(numerators), topo.name, num_phones, blank)
    except ValueError as e:
        raise DataError(f"graph loss: {e} for {topo.name} with {num_phones} phones") from None
    den = loss_graphs.denominator(topo.name, num_phones, blank) if denominator else None
    return _GraphLoss.apply(log_probs, frames, numerator, den,
                            topo.name in FACTORISED_DENOMINATORS)


class _GraphLoss(torch.autograd.Function):
    """(B, T, V) log-probs -> (B,) ``-(log num - log den)``; occupancies from the forward."""

    @staticmethod
    def forward(ctx, log_probs, frames, numerator, denominator, factorises, blank=0):
        if use_device_code(log_probs):
            cost, ctx.grad = _device_scores(log_probs.detach(), frames, numerator, denominator,
                                            factorises, ctx.needs_input_grad[0], blank)
            return cost
        x = log_probs.detach().cpu().contiguous().numpy()
        need_grad = ctx.needs_input_grad[0]
        grad = np.zeros(x.shape if need_grad else (0, 0, 0), dtype=x.dtype)
        scores = np.zeros((len(frames), 2))
        floor = float(np.log(np.finfo(x.dtype).tiny))
        num = numerator.arrays()
        den = num if denominator is None else denominator.arrays()

        def run(b: int) -> None:
            scores[b] = _utterance_scores(x, b, int(frames[b]), num, den,
                                          denominator is not None, factorises, need_grad,
                                          grad, floor)

        # Longest first: a free thread takes the next utterance.
        sizes = frames * (numerator.hi - numerator.lo)
        _run_batch(run, np.argsort(-sizes, kind="stable").tolist(), torch.get_num_threads())
        bad = np.flatnonzero(np.isnan(scores).any(1))
        if bad.size:
            _raise_unreadable(int(bad[0]))
        ctx.grad = grad
        cost = scores[:, 1] - scores[:, 0]  # +inf where the numerator is -inf
        return torch.from_numpy(cost.astype(x.dtype)).to(log_probs.device)

    @staticmethod
    @once_differentiable  # second derivatives are not implemented: fail loudly
    def backward(ctx, g_cost):
        if isinstance(ctx.grad, Tensor):  # the device path's
            return ctx.grad * g_cost.detach()[:, None, None], None, None, None, None, None
        # In numpy: a torch op this size would wake torch's intra-op threads, which took
        # 6-15 ms on a loaded machine (measured) for a 0.05 ms product.
        g = g_cost.detach().cpu().numpy().astype(ctx.grad.dtype, copy=False)
        grad = torch.from_numpy(ctx.grad * g[:, None, None])
        return grad.to(g_cost.device), None, None, None, None, None


def _raise_unreadable(b: int) -> None:
    raise DataError(
        f"graph loss: utterance {b}: log_probs[{b}] holds NaN or +inf on frames its "
        "graph reads (0..log_prob_lengths-1); check the network output"
    )


#: Denominator graphs expanded for a batch size on a device (the device path's), by the
#: denominator they came from (kept in the value, so that an id is never reused wrongly).
_expanded_denominators: dict[tuple[int, int, str], tuple[object, _graph_torch.Expanded]] = {}


def _expanded_denominator(den: loss_graphs.GraphBatch, batch: int,
                          device: torch.device) -> _graph_torch.Expanded:
    key = (id(den), batch, str(device))
    hit = _expanded_denominators.get(key)
    if hit is None or hit[0] is not den:
        if len(_expanded_denominators) > 64:
            _expanded_denominators.clear()
        hit = _expanded_denominators[key] = (
            den, _graph_torch.expand(den, np.zeros(batch, dtype=np.int64), device))
    return hit[1]


def _ctc_numerator(x: Tensor, lengths: Tensor, targets: Tensor, target_lengths: Tensor,
                   blank: int, need_grad: bool) -> tuple[Tensor, Tensor | None]:
    """S1-T1's numerator by ``ctc_loss``: log TotalScore (B,) float64 and its occupancies.
    torch's CTC gradient w.r.t. the scores is ``exp(scores) - occupancy`` (it assumes a
    log-softmax before it), so the occupancy is read back from it, for any scores."""
    lp = x.detach().requires_grad_(need_grad)
    with torch.enable_grad():  # a Function's forward runs without it
        nll = torch.nn.functional.ctc_loss(lp.transpose(0, 1), targets, lengths, target_lengths,
                                           blank=blank, reduction="none", zero_infinity=False)
        if not need_grad:
            return -nll.detach().double(), None
        feasible = torch.isfinite(nll)
        (g,) = torch.autograd.grad(torch.where(feasible, nll, 0.0).sum(), lp)
    valid = torch.arange(x.shape[1], device=x.device)[None, :] < lengths[:, None]
    occ = torch.where(valid[..., None] & feasible[:, None, None],
                      lp.detach().double().exp() - g.double(), 0.0)
    return -nll.detach().double(), occ


def _graph_scores(x: Tensor, lengths: Tensor, graph: loss_graphs.GraphBatch, which: np.ndarray,
                  need_grad: bool, shared: bool = False) -> tuple[Tensor, Tensor | None]:
    """log TotalScore per utterance over utterance b's graph ``which[b]``, and the occupancies,
    where x is: CUDA kernels on an NVIDIA GPU where numba can build them (:mod:`._graph_cuda`),
    else the PyTorch-ops recursion (:mod:`._graph_torch`). ``shared``: one graph for every
    utterance (the denominator), kept on the device between calls."""
    if use_cuda_kernels(x):
        try:
            return _graph_cuda.total_scores(x, lengths, graph, which, need_grad, shared=shared)
        except Exception as e:  # built or launched nowhere: numba's own errors, of many kinds
            cuda_kernels_failed(e)
    expanded = (_expanded_denominator(graph, len(which), x.device) if shared
                else _graph_torch.expand(graph, which, x.device))
    return _graph_torch.total_scores(x, lengths, expanded, need_grad)


def _device_scores(x: Tensor, frames: np.ndarray,
                   numerator: loss_graphs.GraphBatch | tuple[Tensor, Tensor],
                   denominator: loss_graphs.GraphBatch | None, factorises: bool,
                   need_grad: bool, blank: int = 0) -> tuple[Tensor, Tensor | None]:
    """:class:`_GraphLoss`'s forward where the log-probs are (a GPU): the costs (B,) in x's
    dtype and the gradient (B, T, V) (None unless asked), by :mod:`._graph_torch`, the whole
    batch at once; a numerator given as (targets, lengths) in columns is S1-T1's, by
    :func:`_ctc_numerator`."""
    batch, max_frames, _ = x.shape
    device = x.device
    lengths = torch.as_tensor(frames, dtype=torch.int64).to(device)
    if isinstance(numerator, tuple):
        log_num, occ_num = _ctc_numerator(x, lengths, *numerator, blank, need_grad)
    else:
        log_num, occ_num = _graph_scores(x, lengths, numerator, np.arange(batch), need_grad)
    unreadable = torch.isnan(log_num) | torch.isposinf(log_num)
    feasible = torch.isfinite(log_num)
    log_den = torch.zeros_like(log_num)
    occ_den = None
    if denominator is not None:
        if factorises:
            # T accepts every token sequence once: log TotalScore = sum_t logsumexp_v.
            lp = x.double()
            valid = torch.arange(max_frames, device=device)[None, :] < lengths[:, None]
            log_den = torch.where(valid, torch.logsumexp(lp, -1), 0.0).sum(1)
            if need_grad:
                occ_den = torch.where(valid[..., None], torch.softmax(lp, -1), 0.0)
        else:
            log_den, occ_den = _graph_scores(x, lengths, denominator,
                                             np.zeros(batch, dtype=np.int64), need_grad,
                                             shared=True)
        unreadable |= feasible & (torch.isnan(log_den) | torch.isposinf(log_den))
    if bool(unreadable.any()):
        _raise_unreadable(int(unreadable.nonzero()[0, 0]))
    cost = torch.where(feasible, log_den - log_num, float("inf"))
    grad = None
    if need_grad:
        assert occ_num is not None
        grad = -occ_num if occ_den is None else occ_den - occ_num
        grad = torch.where(feasible[:, None, None], grad, 0.0).to(x.dtype)
    return cost.to(x.dtype), grad


# The helper threads of :func:`_run_batch`, kept between calls: starting a pool per call
# measured 0.3 ms on an idle machine and up to 7 ms on a loaded one.  A forked child (a
# DataLoader worker) inherits the pool object but not its threads: it starts afresh.
_helpers: ThreadPoolExecutor | None = None
_helpers_size = 0
_helpers_lock = threading.Lock()


def _forget_helpers() -> None:
    global _helpers, _helpers_size, _helpers_lock
    _helpers, _helpers_size, _helpers_lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_forget_helpers)


def _helper_pool(size: int) -> ThreadPoolExecutor:
    """A pool of at least ``size`` threads, made once and kept."""
    global _helpers, _helpers_size
    with _helpers_lock:
        if _helpers is None or _helpers_size < size:
            if _helpers is not None:
                _helpers.shutdown(wait=False)
            _helpers = ThreadPoolExecutor(size, thread_name_prefix="graph-loss")
            _helpers_size = size
        return _helpers


def _run_batch(work: Callable[[int], None], order: list[int], threads: int) -> None:
    """``work(b)`` for every b in ``order``, on the calling thread and up to ``threads - 1``
    helper threads, each taking the next b when it is free (the kernels release the GIL).
    An error in any thread is raised here once every thread has stopped."""
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for b in order:
        todo.put(b)

    def drain() -> None:
        while True:
            try:
                b = todo.get_nowait()
            except queue.Empty:
                return
            work(b)

    helpers = min(threads, len(order)) - 1
    if helpers <= 0:
        drain()
        return
    pool = _helper_pool(helpers)
    futures = [pool.submit(drain) for _ in range(helpers)]
    try:
        drain()
    finally:
        while not todo.empty():  # after an error: the helpers stop at their next take
            try:
                todo.get_nowait()
            except queue.Empty:
                break
        # A helper not yet running has nothing left to do: on a busy machine it could be
        # milliseconds until it is scheduled just to find that out.
        for future in futures:
            future.cancel()
        wait(futures)
    for future in futures:
        if not future.cancelled():
            future.result()


def _utterance_scores(x, b, num_frames, num, den, use_den, den_factorises, need_grad, grad,
                      floor) -> tuple[float, float]:
    """log TotalScore of utterance b's numerator and denominator graphs (kernel tuples);
    occupancies go into ``grad[b]`` signed for ``-(num - den)``.

    An infeasible (-inf) or NaN numerator skips the denominator and leaves ``grad[b]`` zero.
    The denominator is a closed form if ``den_factorises`` (:data:`FACTORISED_DENOMINATORS`),
    else it runs in the probability domain when that is exact (:func:`scaled_total_score`),
    else with the numerator's kernel (:func:`log_total_score`).
    """
    log_num = log_total_score(x, b, num_frames, num, b, -1.0, need_grad, grad, floor)
    if not use_den or not log_num > -np.inf:
        return log_num, 0.0
    lp = x[b, :num_frames].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf: the kernel gives up
        shift = lp.max(1) if num_frames else np.zeros(0)
        emit = np.exp(lp - shift[:, None])
        if den_factorises and np.isfinite(shift).all():
            sums = emit.sum(1)
            if need_grad:
                grad[b, :num_frames] += emit / sums[:, None]
            return log_num, float((shift + np.log(sums)).sum())
    ok, log_den = scaled_total_score(emit, shift, b, den, 0, 1.0, need_grad, grad, floor)
    if not ok:
        log_den = log_total_score(x, b, num_frames, den, 0, 1.0, need_grad, grad, floor)
    return log_num, log_den


def _check_graph_inputs(
    log_probs: Tensor,
    log_prob_lengths: Tensor,
    targets: Tensor,
    target_lengths: Tensor,
    topo: Topology,
    blank: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Check every argument of :func:`graph_loss`; returns T_b (B,), U_b (B,), targets (B, U)
    as int64 numpy, and P."""
    if not isinstance(log_probs, Tensor) or log_probs.dim() != 3:
        shape = tuple(log_probs.shape) if isinstance(log_probs, Tensor) else type(log_probs)
        raise DataError(f"graph loss: log_probs must be a (B, T, V) tensor, got {shape}")
    if log_probs.dtype not in (torch.float32, torch.float64, *HALF):
        raise DataError(
            f"graph loss: log_probs must be a float tensor (float32 or float64; half precision "
            f"is upcast to float32), got {log_probs.dtype}"
        )
    batch, max_frames, vocab = log_probs.shape
    x = topo.states
    if vocab < 1 + x or (vocab - 1) % x:
        raise ConfigError(
            f"graph loss: log_probs has V = {vocab} outputs, but topology {topo.name} needs "
            f"1 + P * {x} (blank + {x} tokens per phone) for some P >= 1; check the output "
            "layer's size against the topology"
        )
    num_phones = (vocab - 1) // x
    if not 0 <= blank < vocab:
        raise ConfigError(f"graph loss: blank = {blank} is outside the columns 0..{vocab - 1}")

    def lengths(name: str, value: object, most: int, axis: str) -> np.ndarray:
        return checked_lengths(value, batch, 0, most, owner="graph loss", name=name,
                               item="utterance", span=f"{axis} of the padded input")

    frames = lengths("log_prob_lengths", log_prob_lengths, max_frames, "T")
    if not isinstance(targets, Tensor) or targets.dim() != 2 or targets.shape[0] != batch:
        shape = tuple(targets.shape) if isinstance(targets, Tensor) else type(targets)
        raise DataError(f"graph loss: targets must be a ({batch}, U) tensor, got {shape}")
    if targets.is_floating_point() or targets.is_complex():
        raise DataError(f"graph loss: targets must hold integer phone ids, got {targets.dtype}")
    labels = lengths("target_lengths", target_lengths, targets.shape[1], "U")
    phones = targets.detach().cpu().to(torch.int64).numpy()
    inside = np.arange(phones.shape[1])[None, :] < labels[:, None]
    bad = np.argwhere(inside & ((phones < 1) | (phones > num_phones)))
    if bad.size:
        b, u = (int(i) for i in bad[0])
        raise DataError(
            f"graph loss: utterance {b}: targets[{b}, {u}] = {phones[b, u]} is not a phone id "
            f"1..{num_phones} (P from V = {vocab} under {topo.name}); targets are phone ids, "
            "not token ids"
        )
    return frames, labels, phones, num_phones
