"""Numba kernels of the graph loss: forward-backward over a :class:`~.graph.GraphBatch`.

The torch glue lives in :mod:`speechlab.asr.ctc.loss`, the graphs in
:mod:`speechlab.asr.ctc.loss_graphs`; this file holds only the loops.  One call handles one graph of
one utterance and releases the GIL, so the caller runs a batch on plain Python threads
(numba's own ``parallel=True`` needs a threading layer that misbehaves here; see
``speechlab.asr.rnnt._loss_numba``).

Why a kernel: each frame depends on the previous one, so a torch version is T small ops per
graph.  Measured at (B, T, V, U) = (8, 300, 50, 40), one thread: a vectorised torch forward
(gather + logsumexp per frame over all utterances' arcs, autograd backward) took 96 ms for
the S1-T1 numerator alone, ``torch.nn.functional.ctc_loss`` 11.5 ms, a log-semiring kernel 12 ms.

Two kernels:

* :func:`log_total_score`, exact for any scores, -inf and scores thousands of nats apart
  included.  Scores sit on nodes (graph.py): ``alpha_t(n) = E_{t-1}(n) * sum_{src -> n}
  alpha_{t-1}(src)``, an epsilon node summing its (emitting) sources within the frame.
  Each value is held as a float64 mantissa and its own power of two, ``m * 2**e``: sums
  align their terms by exact powers of two, so a frame costs no exp or log (the scores are
  split into that form once, up front, in a vectorised loop).  The forward pass keeps each
  arc's share of its destination's sum; the backward pass pushes occupancies back through
  those shares, again without exp or log.  (The log semiring it replaces spent an exp per
  arc and a log per node in each direction: measured at (8, 300, 50, 40), one thread, the
  S1-T1 numerators took 8.2 ms that way and 3.4 ms this way; ``ctc_loss`` takes 7 ms.)
  The numerator graphs use it.
* :func:`scaled_total_score`, the probability domain with one scale per frame: cheaper
  still, but it needs every relevant number within float64's range and says when it is
  not.  The denominator graph uses it and falls back to :func:`log_total_score`.

Either way the occupancy of an emitting node, ``alpha_t(n) beta_t(n) / Z``, is
``d log Z / d log_probs[t-1, column(n)]``: scores depend on the node only, so the gradient
needs no per-arc term.  Arithmetic is float64 whatever the input dtype.
"""

from __future__ import annotations

import math

import numba
import numpy as np

NEG_INF = -np.inf
POS_INF = np.inf
#: A term more than this many nats below the largest of a sum adds less than exp(-50) ~ 2e-22
#: relative to it, far below float64's resolution (2e-16): without gradients it is skipped.
NEGLIGIBLE = 50.0
#: The smallest value :func:`scaled_total_score` trusts, relative to its row's largest
#: (float64 normal numbers go down to 2e-308; the margin covers a few more products).
TINY = 1e-290
LN2 = math.log(2.0)
INV_LN2 = 1.0 / LN2
#: ln 2 in two parts (fdlibm's): ``e * LN2_HI`` is exact for integers |e| < 2**21, so
#: ``x - e * LN2_HI - e * LN2_LO`` is the remainder of x by e ln 2 to float64 rounding.
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
#: 1 / k!, k = 0..17: the Taylor series of exp (:func:`_split_emissions`).
EXP_TAYLOR = np.array([1.0 / math.factorial(k) for k in range(18)])
#: ``POW2[d] = 2**-d``, d = 0..1074 (float64's smallest subnormal): scales a term down by d
#: binary orders of magnitude exactly, in place of an exp.
POW2 = np.ldexp(1.0, -np.arange(1075))
#: :func:`log_total_score` keeps each value as ``m * 2**e`` with the mantissa m in
#: [1, 2**RESCALE): m >= 1 by construction, and is scaled down by 2**-RESCALE on reaching
#: the top.
RESCALE = 32
TOP = 2.0**RESCALE
UNTOP = 2.0**-RESCALE
#: Frames to or from a node no path joins to the start or a final node.
NEVER = np.int64(1) << 40


@numba.njit(cache=True, nogil=True)
def _split_emissions(log_probs, b, num_frames):
    """Utterance b's scores as ``exp(log_probs[b, t, v]) = mant[t, v] * 2**expo[t, v]``.

    Returns mant, expo: (T_b, V) float64.  ``expo`` is an integer (held in a float64, which
    takes any magnitude a score can have) and ``mant = exp(r)`` for the remainder r in
    [0, ln 2): mant is in [1, 2] for a finite score, 0 for -inf (``expo`` -inf), NaN for
    NaN or +inf.  ``mant * 2**expo`` is within an ulp of ``exp(score)`` wherever that is a
    float64, and beyond that as exact as the score itself.

    ``exp(r)`` is its Taylor series to degree 17 (truncation below 1e-18 relative on
    [0, ln 2], within 1 ulp of ``math.exp`` in the tests): a loop without calls or
    branches, which LLVM vectorises -- 3x faster than calling ``math.exp`` per entry.
    """
    vocab = log_probs.shape[2]
    mant = np.empty((num_frames, vocab))
    expo = np.empty((num_frames, vocab))
    for t in range(num_frames):
        lp = log_probs[b, t]
        m_t = mant[t]
        e_t = expo[t]
        for v in range(vocab):
            x = float(lp[v])
            e = np.floor(x * INV_LN2)
            r = (x - e * LN2_HI) - e * LN2_LO
            # Rounding (or a score past 2**52 nats, where r is noise) may step out of
            # [0, ln 2]; NaN (from NaN or +-inf) passes through.
            r = 0.0 if r < 0.0 else r  # noqa: FURB136 (min/max would not keep NaN)
            r = LN2 if r > LN2 else r  # noqa: FURB136
            p = EXP_TAYLOR[17]
            for k in range(16, -1, -1):
                p = p * r + EXP_TAYLOR[k]
            m_t[v] = 0.0 if x == NEG_INF else p
            e_t[v] = e
    return mant, expo


@numba.njit(cache=True, nogil=True)
def _fewest_frames(dist, ptr, nbr, lo, eps, hi, backward) -> np.ndarray:
    """Relax ``dist`` (hi - lo,) int64 in place to a fixed point and return it: the fewest
    frames between each node and the seeds (given at 0, every other node at a large number).

    Forward, ``ptr``/``nbr`` list each node's sources (its in arcs) and the arc enters the
    node; ``backward``, its destinations (its out arcs) and the arc enters the destination.
    Entering an emitting node (id < ``eps``) takes a frame.  Nodes are visited in id order
    (reversed backward), so where arcs go forward, as in a numerator, one pass (plus a
    check) reaches the fixed point.
    """
    changed = True
    while changed:
        changed = False
        for k in range(hi - lo):
            i = hi - 1 - k if backward else lo + k
            best = dist[i - lo]
            for a in range(ptr[i], ptr[i + 1]):
                j = nbr[a]
                entered = j if backward else i
                cost = dist[j - lo] + (1 if entered < eps else 0)
                if cost < best:
                    best = cost
            if best < dist[i - lo]:
                dist[i - lo] = best
                changed = True
    return dist


@numba.njit(cache=True, nogil=True)
def _frames_to_final(out_ptr, out_dst, final, lo, eps, hi) -> np.ndarray:
    """(hi - lo,) int64: fewest frames from each node to a final node (a large number if
    none)."""
    togo = np.full(hi - lo, NEVER, dtype=np.int64)
    for i in range(lo, hi):
        if final[i]:
            togo[i - lo] = 0
    return _fewest_frames(togo, out_ptr, out_dst, lo, eps, hi, True)


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
        floor: the log of the smallest normal number of grad's dtype.  Occupancies below
            ``exp(floor)`` are not added, and terms are left out of sums where all they
            could carry, over the whole graph and all frames, stays below it: each entry
            of ``grad[b]`` is within a few ``exp(floor)`` of the exact occupancy.  (Adding
            subnormals instead is tens of times slower -- measured: 40% of the kernel's
            time on random float32 inputs.)

    Returns:
        log Z; -inf when no path has non-zero score; NaN when a path meets a NaN or +inf
        score (nothing is added to ``grad`` then).

    Forward: each alpha is kept as ``m * 2**e`` (:func:`_split_emissions`, :data:`POW2`),
    so a frame costs no exp or log, only float64 products and sums.  For every arc a from
    ``src`` into ``n`` at frame t the forward keeps the share ``w_t(a)`` of n's sum that came
    by a.  Backward: the occupancy of a node is its successors' occupancies times those
    shares, ``gamma_t(src) = sum_a gamma_{t+1}(n) w_{t+1}(a)``, pushed one row at a time
    from the final nodes of the last frame (``gamma_T(n) = alpha_T(n) / Z``); an epsilon node
    passes its own to its sources in the same frame.  Every number in it is a probability,
    so nothing can overflow.  Memory: (T_b + 1) x arcs float64 of shares.
    """
    column, in_ptr, in_src, out_ptr, out_dst, final, start, lo_a, eps_a, hi_a = graph
    lo, eps, hi = lo_a[g], eps_a[g], hi_a[g]
    n = hi - lo
    arc0 = in_ptr[lo]
    num_arcs = in_ptr[hi] - arc0
    # A node that cannot reach a final node in the frames left is skipped (zero): in a
    # numerator that is the triangle of the (t, node) grid past the last possible alignment.
    togo = _frames_to_final(out_ptr, out_dst, final, lo, eps, hi)
    mant, expo = _split_emissions(log_probs, b, num_frames)
    if need_grad:
        # A term below exp(cutoff) of its sum, over every arc, node and frame, carries
        # less than exp(floor) of occupancy in all.
        cutoff = floor - math.log((num_frames + 1.0) * (num_arcs + n + 1.0))
        shares = np.empty((num_frames + 1, num_arcs))
    else:
        cutoff = -NEGLIGIBLE  # the value alone: leave out what float64 cannot resolve
        shares = np.empty((1, num_arcs))
    # A sum's largest-exponent term has mantissa >= 1 and any term < 2**RESCALE, so a term
    # d binary orders below it is at most 2**(RESCALE - d) of the sum.
    drop = float(min(RESCALE + math.ceil(-cutoff / LN2), len(POW2)))
    m_prev = np.zeros(n)
    e_prev = np.full(n, NEG_INF)
    m_row = np.zeros(n)
    e_row = np.full(n, NEG_INF)
    bad = False
    for t in range(num_frames + 1):
        m_prev, m_row = m_row, m_prev
        e_prev, e_row = e_row, e_prev
        share = shares[t] if need_grad else shares[0]
        left = num_frames - t
        # Row 0 is the start node and the epsilon nodes it reaches; in row t >= 1, an
        # emitting node sums the previous row and scores frame t-1, an epsilon node sums
        # this row.  Written out in one loop: as a called function, even an inlined one,
        # the sum measured 1.5x slower.
        for epsilon in (False, True):
            first, last = (eps, hi) if epsilon else (lo, eps)
            m_src = m_row if epsilon else m_prev
            e_src = e_row if epsilon else e_prev
            for i in range(first, last):
                top = NEG_INF  # the largest exponent of a term
                p0, p1 = in_ptr[i], in_ptr[i + 1]
                if t == 0 and not epsilon:
                    top = 0.0 if i == start[g] else NEG_INF
                elif togo[i - lo] <= left:
                    for a in range(p0, p1):
                        e = e_src[in_src[a] - lo]
                        if e > top:
                            top = e
                if top == NEG_INF:
                    m_row[i - lo] = 0.0
                    e_row[i - lo] = NEG_INF
                    continue
                if t == 0 and not epsilon:  # the start node
                    m_row[i - lo] = 1.0
                    e_row[i - lo] = 0.0
                    continue
                total = 0.0
                for a in range(p0, p1):
                    src = in_src[a] - lo
                    d = top - e_src[src]
                    x = m_src[src] * POW2[int(d)] if d < drop else 0.0
                    share[a - arc0] = x
                    total += x
                inv = 1.0 / total
                for a in range(p0, p1):
                    share[a - arc0] *= inv
                if not epsilon:
                    f = mant[t - 1, column[i]]
                    if not f >= 0.0:  # NaN or +inf
                        bad = True
                    total *= f
                    top += expo[t - 1, column[i]]
                if total >= TOP:
                    total *= UNTOP
                    top += RESCALE
                elif not total > 0.0:  # a -inf score
                    total = 0.0
                    top = NEG_INF
                m_row[i - lo] = total
                e_row[i - lo] = top
    if bad:
        return np.nan
    top = NEG_INF
    for i in range(lo, hi):
        if final[i] and e_row[i - lo] > top:
            top = e_row[i - lo]
    if top == NEG_INF:
        return NEG_INF
    z = 0.0  # Z / 2**top
    for i in range(lo, hi):
        d = top - e_row[i - lo]
        if final[i] and d < len(POW2):
            z += m_row[i - lo] * POW2[int(d)]
    log_z = math.log(z) + top * LN2_HI + top * LN2_LO
    if not need_grad:
        return log_z

    # Backward: ``occ`` holds gamma_t, ``below`` collects gamma_{t-1}.  A node with less
    # than exp(cutoff) passes nothing on (inside the error budget above); a node the
    # forward skipped has gamma 0, so its unwritten shares are never read.
    least = math.exp(cutoff)
    tiny = math.exp(floor)
    occ = np.zeros(n)
    below = np.empty(n)
    for i in range(lo, hi):
        d = top - e_row[i - lo]
        if final[i] and d < len(POW2):
            occ[i - lo] = m_row[i - lo] * POW2[int(d)] / z
    for t in range(num_frames, 0, -1):
        share = shares[t]
        for i in range(eps, hi):  # epsilon nodes pass theirs to their sources in frame t
            o = occ[i - lo]
            if o > least:
                for a in range(in_ptr[i], in_ptr[i + 1]):
                    occ[in_src[a] - lo] += o * share[a - arc0]
        out = grad[b, t - 1]
        for i in range(lo, eps):
            o = occ[i - lo]
            if o > tiny:
                out[column[i]] += sign * o
        if t == 1:
            break
        below[:] = 0.0
        for i in range(lo, eps):  # emitting nodes pass theirs to their sources in frame t-1
            o = occ[i - lo]
            if o > least:
                for a in range(in_ptr[i], in_ptr[i + 1]):
                    below[in_src[a] - lo] += o * share[a - arc0]
        occ, below = below, occ
    return log_z


@numba.njit(cache=True, nogil=True)
def _frames_from_start(in_ptr, in_src, start, lo, eps, hi) -> np.ndarray:
    """(hi - lo,) int64: fewest frames from the start to each node (a large number if none)."""
    first = np.full(hi - lo, NEVER, dtype=np.int64)
    first[start - lo] = 0
    return _fewest_frames(first, in_ptr, in_src, lo, eps, hi, False)


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
    into log Z.  No exp or log per arc or node, one log per frame, and no per-arc shares:
    on the denominator graph 1.7x faster than :func:`log_total_score` (measured at
    (8, 300, 50, 40), S3-T2**).  Its limit is the range of float64: a node whose value falls
    below ``TINY`` (1e-290) times its row's largest would lose digits or underflow.  That never happens silently: any node that a path reaches,
    and that can still reach a final node, is checked, and the first one below ``TINY``
    gives up (the caller then runs :func:`log_total_score`).  Until then every number is a
    sum or product of positive numbers above ``TINY``, exact to float64 rounding.

    For the denominator graph T every node is within a few frames of every other through
    its epsilon node, so the spread of a row is a few times the spread of a frame's
    log-probs: it gives up only when those exceed ~200 nats, or hold -inf or NaN.
    (A numerator's rows span all alignments -- early in training, blank-only paths against
    ones that have emitted every phone -- so it runs in :func:`log_total_score`.)

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

    tiny = math.exp(floor)
    for t in range(1, num_frames + 1):
        a_row = alpha[t]
        b_row = beta[t]
        total = 0.0
        for i in range(lo, eps):
            total += a_row[i - lo] * b_row[i - lo]
        out = grad[b, t - 1]
        scale = sign / total
        least = tiny * total
        for i in range(lo, eps):
            x = a_row[i - lo] * b_row[i - lo]
            if x > least:
                out[column[i]] += x * scale
    return True, log_z


# --------------------------------------------------------------------------------------------
# Building the numerator graphs


@numba.njit(cache=True)
def build_numerators(phones, lengths, cols, x, ctc_rule, exits, t_ptr, t_offset, t_condition):
    """The arrays of ``graph.numerator``'s :class:`~.graph.GraphBatch` for a batch.

    Args:
        phones: (B, U) int64 phone ids 1..P, read up to ``lengths[b]``.
        lengths: (B,) int64 U_b.
        cols: (1 + P x,) int64 log_probs column of each token (``graph.columns``).
        x: states per phone; ``ctc_rule``: a phone cannot follow itself without a blank.
        exits: the states a phone may end in (``Topology.exit_states``).
        t_ptr, t_offset, t_condition: the numerator template (``graph._template_arrays``):
            the arcs into slot s of a block are ``t_ptr[s]:t_ptr[s+1]``, each from the node
            ``t_offset`` away, present under ``t_condition`` (0 always, 1 after a phone,
            2 after a phone that is not a CTC-rule repeat).

    Returns:
        column, in_ptr, in_src, out_ptr, out_dst, final, lo, hi (the shapes of GraphBatch;
        arcs into a node in template order, out lists by source then destination).
    """
    batch = len(lengths)
    lo = np.empty(batch, dtype=np.int64)
    hi = np.empty(batch, dtype=np.int64)
    total = 0
    for b in range(batch):
        lo[b] = total
        total += lengths[b] * (x + 1) + 1
        hi[b] = total
    column = np.empty(total, dtype=np.int64)
    final = np.zeros(total, dtype=np.bool_)
    in_ptr = np.zeros(total + 1, dtype=np.int64)
    in_src = np.empty(total * (t_ptr[-1] - t_ptr[0]), dtype=np.int64)  # trimmed below
    arcs = 0
    for b in range(batch):
        num = lengths[b]
        for k in range(num + 1):
            base = lo[b] + k * (x + 1)
            slots = x + 1 if k < num else 1  # block U holds hub_U only
            repeat = ctc_rule and 1 <= k < num and phones[b, k] == phones[b, k - 1]
            for slot in range(slots):
                node = base + slot
                if slot == 0:
                    column[node] = cols[0]
                else:
                    column[node] = cols[1 + (phones[b, k] - 1) * x + slot - 1]
                for j in range(t_ptr[slot], t_ptr[slot + 1]):
                    cond = t_condition[j]
                    if cond == 0 or (k >= 1 and (cond == 1 or not repeat)):
                        in_src[arcs] = node + t_offset[j]
                        arcs += 1
                in_ptr[node + 1] = arcs
        final[hi[b] - 1] = True  # hub_U
        if num > 0:
            for s in exits:  # y_U's exit states, slots 1+s of block U-1
                final[hi[b] - 1 - (x + 1) + 1 + s] = True
    in_src = in_src[:arcs].copy()

    # The same arcs by source: a counting sort, stable in the destination.
    out_ptr = np.zeros(total + 1, dtype=np.int64)
    for a in range(arcs):
        out_ptr[in_src[a] + 1] += 1
    for i in range(total):
        out_ptr[i + 1] += out_ptr[i]
    fill = out_ptr[:-1].copy()
    out_dst = np.empty(arcs, dtype=np.int64)
    for node in range(total):
        for a in range(in_ptr[node], in_ptr[node + 1]):
            out_dst[fill[in_src[a]]] = node
            fill[in_src[a]] += 1
    return column, in_ptr, in_src, out_ptr, out_dst, final, lo, hi
