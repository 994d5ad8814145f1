"""Numba kernels of the graph loss: forward-backward over a :class:`~.graph.GraphBatch`.

The torch glue lives in :mod:`speechlab.asr.ctc.loss`, the graphs in
:mod:`speechlab.asr.ctc.graph`; this file holds only the loops.  One call handles one graph of
one utterance and releases the GIL, so the caller runs a batch on plain Python threads
(numba's own ``parallel=True`` needs a threading layer that misbehaves here; see
``speechlab.asr.rnnt._loss_numba``).

Why a kernel: each frame depends on the previous one, so a torch version is T small ops per
graph.  Measured at (B, T, V, U) = (8, 300, 50, 40), one thread: a vectorised torch forward
(gather + logsumexp per frame over all utterances' arcs, autograd backward) took 96 ms for
the S1-T1 numerator alone, ``torch.nn.functional.ctc_loss`` 11.5 ms, this kernel 12 ms.

Two kernels:

* :func:`log_total_score`, the log semiring, exact for any scores.  Scores sit on nodes
  (graph.py): ``alpha_t(n) = lp_{t-1}(n) + logsumexp_{src -> n} alpha_{t-1}(src)``, an
  epsilon node summing its (emitting) sources within the frame.  A frame costs one ``exp``
  per arc and one ``log`` per node with more than one arc in -- torch's CTC kernel does the
  same per state.  The backward pass pulls ``beta_t(src) = logsumexp_{src -> d} [lp_t(d) +
  beta_{t+1}(d)]`` along the outgoing lists, one row of beta at a time.  (Pushing along the
  incoming lists instead, with running sums in memory, measured 3x slower than the forward:
  every arc was a read-modify-write.)  The numerator graphs use it.
* :func:`scaled_total_score`, the probability domain with per-frame scaling: no exp or log
  per arc or node, but it needs every relevant number within float64's range and says when
  it is not.  The denominator graph uses it and falls back to the log domain.

Either way the occupancy of an emitting node, ``exp(alpha_t(n) + beta_t(n) - log Z)``, is
``d log Z / d log_probs[t-1, column(n)]``: scores depend on the node only, so the gradient
needs no per-arc term.  Arithmetic is float64 whatever the input dtype.
"""

from __future__ import annotations

import math

import numba
import numpy as np

NEG_INF = -np.inf
POS_INF = np.inf
#: A term more than this many nats below the running maximum of a log-sum-exp adds less than
#: exp(-50) ~ 2e-22 relative to it, far below float64's resolution (2e-16): it is skipped.
#: Besides saving its exp, this keeps exp() from producing subnormal numbers, whose
#: arithmetic is many times slower.
NEGLIGIBLE = 50.0
#: The smallest value :func:`scaled_total_score` trusts, relative to its row's largest
#: (float64 normal numbers go down to 2e-308; the margin covers a few more products).
TINY = 1e-290


@numba.njit(cache=True, inline="always")
def _finish(m: float, s: float) -> float:
    """log(s) + m for a running sum ``s * exp(m)``; -inf for an empty sum."""
    if m == NEG_INF:
        return NEG_INF
    if s == 1.0:
        return m
    return m + math.log(s)


@numba.njit(cache=True, inline="always")
def _pull(row: np.ndarray, in_ptr: np.ndarray, in_src: np.ndarray, node: int, lo: int) -> float:
    """logsumexp of ``row`` over the sources of ``node``: one exp per finite term."""
    m = NEG_INF
    s = 0.0
    for a in range(in_ptr[node], in_ptr[node + 1]):
        v = row[in_src[a] - lo]
        if v > m:
            s = 1.0 if v - m > NEGLIGIBLE else s * math.exp(m - v) + 1.0
            m = v
        elif v - m > -NEGLIGIBLE:
            s += math.exp(v - m)
    return _finish(m, s)


@numba.njit(cache=True, inline="always")
def _log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b))."""
    if a < b:
        a, b = b, a
    if b == NEG_INF:
        return a
    return a + math.log1p(math.exp(b - a))


@numba.njit(cache=True, nogil=True)
def _frames_to_final(out_ptr, out_dst, final, lo, eps, hi) -> np.ndarray:
    """(hi - lo,) int64: fewest frames from each node to a final node (a large number if
    none).  Relaxation to a fixed point; one pass (plus a check) when arcs go forward, as in
    a numerator, which the downward sweep visits in reverse topological order."""
    n = hi - lo
    never = np.int64(1) << 40
    togo = np.full(n, never, dtype=np.int64)
    for i in range(lo, hi):
        if final[i]:
            togo[i - lo] = 0
    changed = True
    while changed:
        changed = False
        for i in range(hi - 1, lo - 1, -1):
            best = togo[i - lo]
            for a in range(out_ptr[i], out_ptr[i + 1]):
                d = out_dst[a]
                cost = togo[d - lo] + (1 if d < eps else 0)  # entering an emitting node
                if cost < best:
                    best = cost
            if best < togo[i - lo]:
                togo[i - lo] = best
                changed = True
    return togo


@numba.njit(cache=True, nogil=True)
def log_total_score(log_probs, b, num_frames, graph, g, sign, need_grad, grad, floor) -> float:
    """log TotalScore(E o graph) for utterance b (eqs. 3 and 5), and its gradient.

    Args:
        log_probs: (B, T, V) float32/float64, the emission scores E.
        b: the utterance; it has ``num_frames`` valid frames.
        graph: ``GraphBatch.arrays()`` (column, in_ptr, in_src, out_ptr, out_dst, final,
            start, lo, eps, hi); ``g`` picks the graph in it (``b`` for numerators, 0 for
            the shared denominator).
        sign: +1 or -1, the factor of the occupancies added into ``grad``.
        need_grad: compute occupancies (skipped when the score is -inf).
        grad: (B, T, V) output, log_probs' dtype: ``grad[b, t, v] += sign * d logZ /
            d log_probs[b, t, v]``.
        floor: occupancies below ``exp(floor)`` are not added: pass the log of the smallest
            normal number of grad's dtype, so the absolute error is below that number.
            Adding subnormals instead is tens of times slower (measured: 40% of the
            kernel's time on random float32 inputs).

    Returns:
        log Z; -inf when no path has non-zero score; NaN when a path meets a NaN or +inf
        score (nothing is added to ``grad`` then).
    """
    column, in_ptr, in_src, out_ptr, out_dst, final, start, lo_a, eps_a, hi_a = graph
    lo, eps, hi = lo_a[g], eps_a[g], hi_a[g]
    n = hi - lo
    # A node that cannot reach a final node in the frames left is skipped (-inf): in a
    # numerator that is the triangle of the (t, node) grid past the last possible alignment.
    togo = _frames_to_final(out_ptr, out_dst, final, lo, eps, hi)
    alpha = np.empty((num_frames + 1, n))
    row = alpha[0]
    row[:] = NEG_INF
    row[start[g] - lo] = 0.0
    for i in range(eps, hi):
        row[i - lo] = _pull(row, in_ptr, in_src, i, lo)
    bad = False
    for t in range(1, num_frames + 1):
        prev = alpha[t - 1]
        row = alpha[t]
        lp = log_probs[b, t - 1]
        left = num_frames - t
        for i in range(lo, eps):
            v = NEG_INF
            if togo[i - lo] <= left:
                v = _pull(prev, in_ptr, in_src, i, lo)
                if v > NEG_INF:
                    e = lp[column[i]]
                    if not e < POS_INF:  # NaN or +inf
                        bad = True
                    v += e
            row[i - lo] = v
        for i in range(eps, hi):
            row[i - lo] = _pull(row, in_ptr, in_src, i, lo) if togo[i - lo] <= left else NEG_INF
    if bad:
        return np.nan
    m = NEG_INF
    s = 0.0
    for i in range(lo, hi):
        v = row[i - lo]
        if final[i] and v > NEG_INF:
            if v > m:
                s = 1.0 if m == NEG_INF else s * math.exp(m - v) + 1.0
                m = v
            else:
                s += math.exp(v - m)
    log_z = _finish(m, s)
    if not need_grad or log_z == NEG_INF:
        return log_z

    # Backward, one row of beta at a time, t = T_b .. 1 (row 0 enters no frame).  ``value``
    # holds what an arc into each node is worth from row t: lp_t(d) + beta_{t+1}(d) for an
    # emitting d, beta_t(g) for an epsilon g (computed first: its arcs go to row t+1).
    beta = np.empty(n)
    value = np.empty(n)
    for t in range(num_frames, 0, -1):
        if t == num_frames:  # no row t+1: paths end here, in a final node
            for i in range(lo, eps):
                value[i - lo] = NEG_INF
            for i in range(eps, hi):
                value[i - lo] = 0.0 if final[i] else NEG_INF
        else:
            lp = log_probs[b, t]  # entering row t+1 scores frame t
            for i in range(lo, eps):
                v = beta[i - lo]
                value[i - lo] = lp[column[i]] + v if v > NEG_INF else NEG_INF
            row = alpha[t]
            for i in range(eps, hi):
                if row[i - lo] > NEG_INF:
                    value[i - lo] = _pull(value, out_ptr, out_dst, i, lo)
                else:
                    value[i - lo] = NEG_INF
        out = grad[b, t - 1]
        row = alpha[t]
        for i in range(lo, eps):
            if row[i - lo] == NEG_INF:
                # No path reaches this node: no occupancy, and its beta is never needed
                # (a predecessor with a path would give it one, unless the emission is -inf,
                # which also zeroes the term that would read it).
                beta[i - lo] = NEG_INF
                continue
            v = _pull(value, out_ptr, out_dst, i, lo)
            if t == num_frames and final[i]:
                v = _log_add(v, 0.0)
            beta[i - lo] = v
            occ = row[i - lo] + v - log_z
            if occ > floor:
                out[column[i]] += sign * math.exp(occ)
    return log_z


@numba.njit(cache=True, nogil=True)
def _frames_from_start(in_ptr, in_src, start, lo, eps, hi) -> np.ndarray:
    """(hi - lo,) int64: fewest frames from the start to each node (a large number if none)."""
    n = hi - lo
    never = np.int64(1) << 40
    first = np.full(n, never, dtype=np.int64)
    first[start - lo] = 0
    changed = True
    while changed:
        changed = False
        for i in range(lo, hi):
            best = first[i - lo]
            step = 1 if i < eps else 0  # entering an emitting node takes a frame
            for a in range(in_ptr[i], in_ptr[i + 1]):
                cost = first[in_src[a] - lo] + step
                if cost < best:
                    best = cost
            if best < first[i - lo]:
                first[i - lo] = best
                changed = True
    return first


@numba.njit(cache=True, inline="always")
def _sum(row: np.ndarray, ptr: np.ndarray, idx: np.ndarray, node: int, lo: int) -> float:
    s = 0.0
    for a in range(ptr[node], ptr[node + 1]):
        s += row[idx[a] - lo]
    return s


@numba.njit(cache=True, nogil=True)
def scaled_total_score(emit, shift, b, graph, g, sign, need_grad, grad, floor):
    """:func:`log_total_score` in the probability domain, or ``(False, 0)`` if it may be
    imprecise; returns ``(True, log Z)`` otherwise.

    Args:
        emit: (T_b, V) float64 ``exp(log_probs[b, t] - shift[t])``, computed by the caller
            (numpy's vectorised exp is several times faster than a scalar one here).
        shift: (T_b,) float64 per-frame shifts, e.g. the frame's largest log-prob; must be
            finite (else this gives up).
        b, graph, g, sign, need_grad, grad, floor: as :func:`log_total_score`.

    Rabiner's scaling: the emissions of frame t are scaled by ``exp(-shift[t])`` and each
    row of alpha (and beta) is divided by its largest entry, the logs of both factors summed
    into log Z.  No exp or log per arc or node, one log per frame: about three times faster
    than the log domain.  Its limit is the range of
    float64: a node whose value falls below ``TINY`` (1e-290) times its row's largest would
    lose digits or underflow.  That never happens silently: any node that a path reaches,
    and that can still reach a final node, is checked, and the first one below ``TINY``
    gives up (the caller then runs :func:`log_total_score`).  Until then every number is a
    sum or product of positive numbers above ``TINY``, exact to float64 rounding.

    For the denominator graph T every node is within a few frames of every other through
    its epsilon node, so the spread of a row is a few times the spread of a frame's
    log-probs: it gives up only when those exceed ~200 nats, or hold -inf or NaN.
    (A numerator's rows span all alignments -- early in training, blank-only paths against
    ones that have emitted every phone -- so it stays in the log domain.)

    The occupancy ``alpha_t(n) beta_t(n) / Z`` is ``a_t(n) b_t(n) / sum_m a_t(m) b_t(m)``
    over the emitting nodes m (every path is at exactly one of them after t frames), so the
    scale factors cancel; it is written into ``grad`` only once all checks have passed.
    """
    column, in_ptr, in_src, out_ptr, out_dst, final, start, lo_a, eps_a, hi_a = graph
    lo, eps, hi = lo_a[g], eps_a[g], hi_a[g]
    n = hi - lo
    num_frames = emit.shape[0]
    togo = _frames_to_final(out_ptr, out_dst, final, lo, eps, hi)
    first = _frames_from_start(in_ptr, in_src, start[g], lo, eps, hi)
    alpha = np.zeros((num_frames + 1, n))
    row = alpha[0]
    row[start[g] - lo] = 1.0
    for i in range(eps, hi):
        row[i - lo] = _sum(row, in_ptr, in_src, i, lo)
    log_z = 0.0
    for t in range(1, num_frames + 1):
        top = shift[t - 1]
        if not (top > NEG_INF and top < POS_INF):
            return False, 0.0
        e = emit[t - 1]  # NaN fails the checks below
        prev = alpha[t - 1]
        row = alpha[t]
        left = num_frames - t
        biggest = 0.0
        for i in range(lo, eps):
            if togo[i - lo] <= left:
                x = _sum(prev, in_ptr, in_src, i, lo) * e[column[i]]
                if first[i - lo] <= t and not x >= TINY:
                    return False, 0.0
                row[i - lo] = x
                if x > biggest:
                    biggest = x
        if biggest == 0.0:
            return False, 0.0
        scale = 1.0 / biggest
        for i in range(lo, eps):
            row[i - lo] *= scale
        for i in range(eps, hi):
            if togo[i - lo] <= left:
                row[i - lo] = _sum(row, in_ptr, in_src, i, lo)
        log_z += top + math.log(biggest)
    total = 0.0
    for i in range(lo, hi):
        if final[i]:
            total += row[i - lo]
    log_z += math.log(total)
    if not need_grad:
        return True, log_z

    beta = np.zeros((num_frames + 1, n))
    value = np.empty(n)
    for t in range(num_frames, 0, -1):
        if t == num_frames:
            for i in range(lo, eps):
                value[i - lo] = 0.0
            for i in range(eps, hi):
                value[i - lo] = 1.0 if final[i] else 0.0
        else:
            e = emit[t]
            nxt = beta[t + 1]
            for i in range(lo, eps):
                value[i - lo] = e[column[i]] * nxt[i - lo]
            for i in range(eps, hi):
                value[i - lo] = _sum(value, out_ptr, out_dst, i, lo)
        reached = alpha[t]
        row = beta[t]
        biggest = 0.0
        for i in range(lo, eps):
            if reached[i - lo] > 0.0:
                x = _sum(value, out_ptr, out_dst, i, lo)
                if t == num_frames and final[i]:
                    x += 1.0
                if not x >= TINY:
                    return False, 0.0
                row[i - lo] = x
                if x > biggest:
                    biggest = x
        scale = 1.0 / biggest
        for i in range(lo, eps):
            row[i - lo] *= scale

    for t in range(1, num_frames + 1):
        a_row = alpha[t]
        b_row = beta[t]
        total = 0.0
        for i in range(lo, eps):
            total += a_row[i - lo] * b_row[i - lo]
        out = grad[b, t - 1]
        least = math.exp(floor) * total
        for i in range(lo, eps):
            x = a_row[i - lo] * b_row[i - lo]
            if x > least:
                out[column[i]] += sign * (x / total)
    return True, log_z
