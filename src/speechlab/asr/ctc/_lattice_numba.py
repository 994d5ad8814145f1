"""Numba kernels for lattice generation and the exact lattice sums (``lattice.py``,
``lattice_metrics.py`` hold the Python API; this file holds only the loops).

Conventions. Costs are OpenFst/Kaldi costs (``-log`` weights, smaller is better) in the search
and the pruning; the sums over a finished lattice work on log weights (larger is better).
A lattice handed to the ``*_sorted`` kernels is topologically sorted: states are numbered so
that every arc goes from a lower to a higher state, and arcs are sorted by source state. One
pass over the arcs in order is then a complete forward recursion, because every arc into a
state comes before every arc out of it.

Shapes: S states (of a graph or a lattice), A arcs, T frames, V tokens, N hypothesis words.
"""

from __future__ import annotations


import numba
import numpy as np
from speechlab.nn.logmath import log_add as _log_add

INF = np.inf
NEG_INF = -np.inf




@numba.njit(cache=True)
def _reserve(a: np.ndarray, need: int) -> np.ndarray:
    """``a`` if it holds ``need`` items, else a copy at least twice as long (growth stays
    amortised O(1) per item). The new tail is left uninitialised: the search reserves far
    more than it fills (bounds per frame), and zeroing it all was measured 15% slower."""
    if need <= a.shape[0]:
        return a
    out = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    out[: a.shape[0]] = a
    return out


@numba.njit(cache=True)
def _reserve_false(flags: np.ndarray, need: int) -> np.ndarray:
    """:func:`_reserve` for a flag array: its new entries start False."""
    n = flags.shape[0]
    out = _reserve(flags, need)
    out[n:] = False
    return out


@numba.njit(cache=True, inline="always")
def _token(tok_of_state, tok_state, tok_cost, ntok, d, nc):
    """The token of graph state ``d`` on the frame being expanded, reached at cost ``nc``: a
    new token (id ``ntok``) if ``d`` has none yet, else the existing one, its cost lowered to
    ``nc`` if that is better. Returns (token id, token count, whether its cost improved).
    Inlined: it runs once per arc in the search's innermost loops."""
    j = tok_of_state[d]
    if j < 0:
        tok_state[ntok] = d
        tok_cost[ntok] = nc
        tok_of_state[d] = ntok
        return ntok, ntok + 1, True
    if nc < tok_cost[j]:
        tok_cost[j] = nc
        return j, ntok, True
    return j, ntok, False


@numba.njit(cache=True, nogil=True)
def search(start, final, e_off, e_tok, e_word, e_w, e_dst, n_off, n_word, n_w, n_dst,
           loglik, scale, beam, max_active):
    """Frame-synchronous Viterbi beam search that records every arc between surviving tokens.

    A token is a (frame, graph state) pair; its cost is the best cost of a partial path reaching
    it (graph cost + ``scale`` x acoustic cost). Per frame, after the epsilon closure, tokens
    costlier than ``best + beam`` or than the ``max_active``-th best (``max_active <= 0``: no
    limit) are dropped, as in Kaldi's decoders (Povey et al. 2012, ref. [22] of the paper).
    Emitting arcs are recorded when their end cost is within ``beam`` of the best end cost
    seen so far on the next frame; epsilon arcs when both ends survived.

    Args:
        start: graph start state; final (S,) float64 final costs (inf: not final).
        e_off (S+1,), e_tok, e_word, e_w, e_dst (E,): emitting arcs in CSR form by source;
            ``e_tok`` is the token (column of ``loglik``) the arc consumes.
        n_off (S+1,), n_word, n_w, n_dst (N,): input-epsilon arcs in CSR form.
        loglik: (T, V) float64 log-probabilities.

    Returns:
        tok_state (K,), tok_cost (K,), frame_lo (T+2,) (tokens of frame t are
        ``frame_lo[t]:frame_lo[t+1]``), cutoff (T+1,), and the recorded arcs a_src, a_dst
        (token ids), a_tok (-1: epsilon), a_word, a_w (graph cost), a_ac (log-likelihood).
    """
    # Storage grows only between the loops, by bounds computed per frame: an array
    # reassigned inside a hot loop makes numba count references on every iteration there
    # (measured: 4x slower).
    num_frames = loglik.shape[0]
    num_eps = n_dst.shape[0]
    max_eps = 0
    for s in range(final.shape[0]):
        max_eps = max(max_eps, n_off[s + 1] - n_off[s])
    tok_of_state = np.full(final.shape[0], -1, np.int64)
    tok_state = np.empty(4096, np.int64)
    tok_cost = np.empty(4096, np.float64)
    in_queue = np.zeros(4096, np.bool_)
    stack = np.empty(4096, np.int64)
    a_src = np.empty(16384, np.int64)
    a_dst = np.empty(16384, np.int64)
    a_tok = np.empty(16384, np.int64)
    a_word = np.empty(16384, np.int64)
    a_w = np.empty(16384, np.float64)
    a_ac = np.empty(16384, np.float64)
    na = 0
    frame_lo = np.zeros(num_frames + 2, np.int64)
    cutoff_of = np.full(num_frames + 1, INF)

    tok_state[0] = start
    tok_cost[0] = 0.0
    tok_of_state[start] = 0
    ntok = 1
    for f in range(num_frames + 1):
        lo = frame_lo[f]
        best = INF
        for i in range(lo, ntok):
            if tok_cost[i] < best:
                best = tok_cost[i]
        # Epsilon closure: relax until no cost improves (no negative epsilon cycles assumed).
        # It creates at most one token per epsilon arc's destination.
        need = ntok + num_eps + 1
        tok_state = _reserve(tok_state, need)
        tok_cost = _reserve(tok_cost, need)
        in_queue = _reserve_false(in_queue, need)
        stack = _reserve(stack, need - lo)
        top = 0
        for i in range(lo, ntok):
            stack[top] = i
            top += 1
            in_queue[i] = True
        while top > 0:
            top -= 1
            i = stack[top]
            in_queue[i] = False
            c = tok_cost[i]
            if c > best + beam:
                continue
            s = tok_state[i]
            for k in range(n_off[s], n_off[s + 1]):
                nc = c + n_w[k]
                if nc > best + beam:
                    continue
                j, ntok, improved = _token(tok_of_state, tok_state, tok_cost, ntok, n_dst[k], nc)
                if not improved:
                    continue
                if nc < best:
                    best = nc
                if not in_queue[j]:
                    stack[top] = j
                    top += 1
                    in_queue[j] = True
        hi = ntok
        cutoff = best + beam
        if max_active > 0 and hi - lo > max_active:
            kth = np.partition(tok_cost[lo:hi].copy(), max_active - 1)[max_active - 1]
            if kth < cutoff:
                cutoff = kth
        cutoff_of[f] = cutoff
        # Emitting arcs into frame f+1 (none after the last frame). The best token goes first
        # so that the next frame's cutoff is tight from the start (fewer tokens and arcs
        # recorded only to be pruned).
        next_cut = INF
        bi = -1
        out_arcs = 0
        for i in range(lo, hi):
            if tok_cost[i] <= cutoff:
                s = tok_state[i]
                out_arcs += e_off[s + 1] - e_off[s]
                if bi < 0 or tok_cost[i] < tok_cost[bi]:
                    bi = i
        if bi >= 0 and f < num_frames:
            s = tok_state[bi]
            for k in range(e_off[s], e_off[s + 1]):
                nc = tok_cost[bi] + e_w[k] - scale * loglik[f, e_tok[k]]
                if nc + beam < next_cut:
                    next_cut = nc + beam
        # Room for every arc this frame may record: the epsilon arcs between its surviving
        # tokens, then the emitting arcs out of them.
        need = na + (hi - lo) * max_eps + out_arcs
        a_src = _reserve(a_src, need)
        a_dst = _reserve(a_dst, need)
        a_tok = _reserve(a_tok, need)
        a_word = _reserve(a_word, need)
        a_w = _reserve(a_w, need)
        a_ac = _reserve(a_ac, need)
        # Record the epsilon arcs between surviving tokens of this frame.
        for i in range(lo, hi):
            if tok_cost[i] > cutoff:
                continue
            s = tok_state[i]
            for k in range(n_off[s], n_off[s + 1]):
                j = tok_of_state[n_dst[k]]
                if j < 0 or tok_cost[j] > cutoff:
                    continue
                a_src[na] = i
                a_dst[na] = j
                a_tok[na] = -1
                a_word[na] = n_word[k]
                a_w[na] = n_w[k]
                a_ac[na] = 0.0
                na += 1
        for i in range(lo, hi):
            tok_of_state[tok_state[i]] = -1
        frame_lo[f + 1] = hi
        if f == num_frames:
            break
        need = ntok + out_arcs + 1
        tok_state = _reserve(tok_state, need)
        tok_cost = _reserve(tok_cost, need)
        in_queue = _reserve_false(in_queue, need)
        for i in range(lo, hi):
            c = tok_cost[i]
            if c > cutoff:
                continue
            s = tok_state[i]
            for k in range(e_off[s], e_off[s + 1]):
                ac = loglik[f, e_tok[k]]
                nc = c + e_w[k] - scale * ac
                if nc > next_cut:
                    continue
                if nc + beam < next_cut:
                    next_cut = nc + beam
                j, ntok, _ = _token(tok_of_state, tok_state, tok_cost, ntok, e_dst[k], nc)
                a_src[na] = i
                a_dst[na] = j
                a_tok[na] = e_tok[k]
                a_word[na] = e_word[k]
                a_w[na] = e_w[k]
                a_ac[na] = ac
                na += 1
    frame_lo[num_frames + 1] = ntok
    return (tok_state[:ntok], tok_cost[:ntok], frame_lo, cutoff_of,
            a_src[:na], a_dst[:na], a_tok[:na], a_word[:na], a_w[:na], a_ac[:na])


@numba.njit(cache=True, nogil=True)
def topo_order(num_states, src, dst):
    """Kahn's algorithm: (S,) states in a topological order, or fewer than S on a cycle."""
    indeg = np.zeros(num_states, np.int64)
    for a in range(src.shape[0]):
        indeg[dst[a]] += 1
    off, arcs = csr(num_states, src)
    order = np.empty(num_states, np.int64)
    head = 0
    tail = 0
    for s in range(num_states):
        if indeg[s] == 0:
            order[tail] = s
            tail += 1
    while head < tail:
        s = order[head]
        head += 1
        for k in range(off[s], off[s + 1]):
            d = dst[arcs[k]]
            indeg[d] -= 1
            if indeg[d] == 0:
                order[tail] = d
                tail += 1
    return order[:tail]


@numba.njit(cache=True, nogil=True)
def csr(num_states, src):
    """Counting sort of arcs by source: offsets (S+1,) and arc ids (A,) grouped by source,
    each group in the arcs' original order."""
    off = np.zeros(num_states + 1, np.int64)
    for a in range(src.shape[0]):
        off[src[a] + 1] += 1
    for s in range(num_states):
        off[s + 1] += off[s]
    fill = off[:-1].copy()
    arcs = np.empty(src.shape[0], np.int64)
    for a in range(src.shape[0]):
        arcs[fill[src[a]]] = a
        fill[src[a]] += 1
    return off, arcs


@numba.njit(cache=True, nogil=True)
def prune_sort(num_states, start, final_cost, src, dst, cost, lattice_beam):
    """Keep the arcs on some start-to-final path within ``lattice_beam`` of the best path, drop
    the states they do not touch, and renumber the rest topologically.

    Args:
        final_cost: (S,) cost of ending in a state (inf: cannot end there).
        cost: (A,) arc costs (graph + scale x acoustic).

    Returns:
        new_id (S,) (-1: dropped), kept_arcs (A',) old arc ids sorted by new source state,
        best cost, and ``ok`` (False if the arcs have a cycle).
    """
    order = topo_order(num_states, src, dst)
    if order.shape[0] < num_states:
        return np.full(num_states, -1, np.int64), np.empty(0, np.int64), INF, False
    off, arcs = csr(num_states, src)
    alpha = np.full(num_states, INF)
    alpha[start] = 0.0
    for s in order:
        if alpha[s] == INF:
            continue
        for k in range(off[s], off[s + 1]):
            a = arcs[k]
            c = alpha[s] + cost[a]
            if c < alpha[dst[a]]:
                alpha[dst[a]] = c
    beta = final_cost.copy()
    for r in range(num_states - 1, -1, -1):
        s = order[r]
        for k in range(off[s], off[s + 1]):
            a = arcs[k]
            c = cost[a] + beta[dst[a]]
            if c < beta[s]:
                beta[s] = c
    best = alpha[start] + beta[start]
    new_id = np.full(num_states, -1, np.int64)
    if best == INF:
        return new_id, np.empty(0, np.int64), best, True
    # a little slack so that the best path itself survives rounding (sums in other orders)
    limit = best + lattice_beam + 1e-9 * (1.0 + abs(best))
    keep_arc = np.zeros(src.shape[0], np.bool_)
    keep_state = np.zeros(num_states, np.bool_)
    for a in range(src.shape[0]):
        if alpha[src[a]] + cost[a] + beta[dst[a]] <= limit:
            keep_arc[a] = True
            keep_state[src[a]] = True
            keep_state[dst[a]] = True
    keep_state[start] = True
    n = 0
    for s in order:
        if keep_state[s]:
            new_id[s] = n
            n += 1
    kept = np.empty(src.shape[0], np.int64)
    m = 0
    for s in order:
        if not keep_state[s]:
            continue
        for k in range(off[s], off[s + 1]):
            if keep_arc[arcs[k]]:
                kept[m] = arcs[k]
                m += 1
    return new_id, kept[:m], best, True


@numba.njit(cache=True, nogil=True)
def forward_sorted(num_states, src, dst, w, final_w):
    """Log-sum and max over all paths of a sorted lattice: returns (log_total, log_best)."""
    a_sum = np.full(num_states, NEG_INF)
    a_max = np.full(num_states, NEG_INF)
    a_sum[0] = 0.0
    a_max[0] = 0.0
    for a in range(src.shape[0]):
        s = src[a]
        if a_max[s] == NEG_INF:
            continue
        d = dst[a]
        a_sum[d] = _log_add(a_sum[d], a_sum[s] + w[a])
        if a_max[s] + w[a] > a_max[d]:
            a_max[d] = a_max[s] + w[a]
    total = NEG_INF
    best = NEG_INF
    for s in range(num_states):
        if final_w[s] == NEG_INF:
            continue
        total = _log_add(total, a_sum[s] + final_w[s])
        if a_max[s] + final_w[s] > best:
            best = a_max[s] + final_w[s]
    return total, best


@numba.njit(cache=True, nogil=True)
def backward_sorted(num_states, src, dst, w, final_w):
    """(S,) log-sum over the paths from each state to the end (final weight included)."""
    beta = final_w.copy()
    for a in range(src.shape[0] - 1, -1, -1):
        beta[src[a]] = _log_add(beta[src[a]], w[a] + beta[dst[a]])
    return beta


@numba.njit(cache=True, nogil=True)
def restricted_sorted(num_states, src, dst, word, w, final_w, hyp):
    """Log-sum and max over the paths whose word sequence is ``hyp`` (N,): the lattice composed
    with ``hyp``'s linear acceptor on word labels (word 0 is epsilon), state (s, i) meaning "in
    lattice state s having read hyp[:i]". Returns (log_sum, log_max)."""
    n = hyp.shape[0]
    a_sum = np.full((num_states, n + 1), NEG_INF)
    a_max = np.full((num_states, n + 1), NEG_INF)
    a_sum[0, 0] = 0.0
    a_max[0, 0] = 0.0
    for a in range(src.shape[0]):
        s = src[a]
        d = dst[a]
        lab = word[a]
        for i in range(n + 1):
            if a_max[s, i] == NEG_INF:
                continue
            if lab == 0:
                j = i
            elif i < n and lab == hyp[i]:
                j = i + 1
            else:
                continue
            a_sum[d, j] = _log_add(a_sum[d, j], a_sum[s, i] + w[a])
            if a_max[s, i] + w[a] > a_max[d, j]:
                a_max[d, j] = a_max[s, i] + w[a]
    total = NEG_INF
    best = NEG_INF
    for s in range(num_states):
        if final_w[s] == NEG_INF:
            continue
        total = _log_add(total, a_sum[s, n] + final_w[s])
        if a_max[s, n] + final_w[s] > best:
            best = a_max[s, n] + final_w[s]
    return total, best


@numba.njit(cache=True, nogil=True)
def viterbi_sorted(num_states, src, dst, w, final_w):
    """The best path of a sorted lattice: (log weight, arc ids along it (L,))."""
    a_max = np.full(num_states, NEG_INF)
    back = np.full(num_states, -1, np.int64)
    a_max[0] = 0.0
    for a in range(src.shape[0]):
        s = src[a]
        if a_max[s] == NEG_INF:
            continue
        c = a_max[s] + w[a]
        if c > a_max[dst[a]]:
            a_max[dst[a]] = c
            back[dst[a]] = a
    best = NEG_INF
    end = -1
    for s in range(num_states):
        if final_w[s] != NEG_INF and a_max[s] + final_w[s] > best:
            best = a_max[s] + final_w[s]
            end = s
    if end < 0:
        return best, np.empty(0, np.int64)
    path = []
    s = end
    while s != 0:
        a = back[s]
        path.append(a)
        s = src[a]
    out = np.empty(len(path), np.int64)
    for i in range(len(path)):
        out[i] = path[len(path) - 1 - i]
    return best, out


@numba.njit(cache=True, nogil=True)
def prefix_step(num_states, src, dst, word, w, final_w, beta, alpha, num_words):
    """One expansion of the best-first search over word prefixes (``lattice_metrics``).

    ``alpha`` (S,) is the log-sum of the partial paths that have read exactly the prefix and
    no later word. Returns the log-sum of the complete paths whose words are exactly the prefix,
    and (num_words,) the log-sum of the complete paths whose words start with the prefix
    followed by each word (``-inf``: none).
    """
    done = NEG_INF
    for s in range(num_states):
        if final_w[s] != NEG_INF and alpha[s] != NEG_INF:
            done = _log_add(done, alpha[s] + final_w[s])
    child = np.full(num_words, NEG_INF)
    for a in range(src.shape[0]):
        lab = word[a]
        if lab == 0 or alpha[src[a]] == NEG_INF:
            continue
        child[lab] = _log_add(child[lab], alpha[src[a]] + w[a] + beta[dst[a]])
    return done, child


@numba.njit(cache=True, nogil=True)
def prefix_alpha(num_states, src, dst, word, w, alpha, next_word):
    """The ``alpha`` of prefix + ``next_word`` from the prefix's ``alpha`` (see prefix_step);
    ``next_word`` 0 gives the alpha of the empty prefix from ``alpha`` = start indicator."""
    out = np.full(num_states, NEG_INF)
    if next_word == 0:
        out[:] = alpha
    for a in range(src.shape[0]):
        s = src[a]
        d = dst[a]
        lab = word[a]
        if lab == next_word and next_word != 0 and alpha[s] != NEG_INF:
            out[d] = _log_add(out[d], alpha[s] + w[a])
        if lab == 0 and out[s] != NEG_INF:
            out[d] = _log_add(out[d], out[s] + w[a])
    return out


@numba.njit(cache=True, nogil=True)
def frames_sorted(num_states, src, dst, token):
    """(S,) frames consumed on reaching each state of a sorted lattice (0 for the start)."""
    frame = np.zeros(num_states, np.int64)
    for a in range(src.shape[0]):
        frame[dst[a]] = frame[src[a]] + (1 if token[a] >= 0 else 0)
    return frame


@numba.njit(cache=True, nogil=True)
def remove_epsilons_sorted(num_states, src, dst, label, w, final):
    """Tropical epsilon removal on a sorted acyclic acceptor (label 0 is epsilon).

    Each state takes the non-epsilon arcs and the final cost of the states its epsilon arcs
    reach, at the cheapest epsilon distance. Returns CSR offsets (S+1,), dst, label, w of the
    new arcs (grouped by source) and the new final costs (S,).
    """
    off, ids = csr(num_states, src)
    dist = np.full(num_states, INF)
    mark = np.full(num_states, -1, np.int64)
    touched = np.empty(num_states, np.int64)
    o_src = np.empty(src.shape[0] + 16, np.int64)
    o_dst = np.empty(src.shape[0] + 16, np.int64)
    o_lab = np.empty(src.shape[0] + 16, np.int64)
    o_w = np.empty(src.shape[0] + 16, np.float64)
    n = 0
    new_final = final.copy()
    for s in range(num_states):
        # the epsilon closure of s ...
        touched[0] = s
        mark[s] = s
        nt = 1
        i = 0
        out_arcs = 0
        while i < nt:
            q = touched[i]
            i += 1
            out_arcs += off[q + 1] - off[q]
            for k in range(off[q], off[q + 1]):
                a = ids[k]
                if label[a] == 0 and mark[dst[a]] != s:
                    mark[dst[a]] = s
                    touched[nt] = dst[a]
                    nt += 1
        members = np.sort(touched[:nt])
        # ... with its distances: states are sorted, so relaxing in state order is exact
        for q in members:
            dist[q] = INF
        dist[s] = 0.0
        for q in members:
            for k in range(off[q], off[q + 1]):
                a = ids[k]
                if label[a] == 0 and dist[q] + w[a] < dist[dst[a]]:
                    dist[dst[a]] = dist[q] + w[a]
        # storage grows here, outside the loops that fill it (see ``search``)
        o_src = _reserve(o_src, n + out_arcs)
        o_dst = _reserve(o_dst, n + out_arcs)
        o_lab = _reserve(o_lab, n + out_arcs)
        o_w = _reserve(o_w, n + out_arcs)
        for q in members:
            c = dist[q]
            if final[q] + c < new_final[s]:
                new_final[s] = final[q] + c
            for k in range(off[q], off[q + 1]):
                a = ids[k]
                if label[a] == 0:
                    continue
                o_src[n] = s
                o_dst[n] = dst[a]
                o_lab[n] = label[a]
                o_w[n] = c + w[a]
                n += 1
    new_off, order = csr(num_states, o_src[:n])
    return new_off, o_dst[:n][order], o_lab[:n][order], o_w[:n][order], new_final


@numba.njit(cache=True, nogil=True)
def determinize_acyclic(start, off, dst, label, w, final, delta):
    """Tropical determinisation of an epsilon-free acyclic acceptor in CSR form.

    Subset construction: a result state is a set of (state, residual cost) pairs, residuals
    compared after quantisation by ``delta``. Every label string keeps one path, with the
    lowest cost over the input's paths for it. Returns src, dst, label, w (arcs of the
    result; state 0 is its start) and final (S',).
    """
    # result states: members in flat arrays, m_off (S'+1)
    m_q = np.empty(1024, np.int64)
    m_rq = np.empty(1024, np.int64)
    m_r = np.empty(1024, np.float64)
    m_off = np.zeros(1024, np.int64)
    chain = np.full(1024, -1, np.int64)  # next result state with the same hash
    table = numba.typed.Dict.empty(numba.types.int64, numba.types.int64)
    m_q[0] = start
    m_rq[0] = 0
    m_r[0] = 0.0
    m_off[1] = 1
    ns = 1
    nm = 1
    o_src = np.empty(1024, np.int64)
    o_dst = np.empty(1024, np.int64)
    o_lab = np.empty(1024, np.int64)
    o_w = np.empty(1024, np.float64)
    na = 0
    out_final = np.full(1024, INF)
    cand_key = np.empty(64, np.int64)
    cand_dst = np.empty(64, np.int64)
    cand_lab = np.empty(64, np.int64)
    cand_c = np.empty(64, np.float64)
    num_in = final.shape[0]
    h0 = np.int64(1469598103934665603)
    mul = np.int64(1099511628211)
    table[(((h0 ^ np.int64(start)) * mul) ^ np.int64(0)) * mul] = 0
    d = 0
    while d < ns:
        # final cost and candidate arcs of result state d; storage grows here, outside the
        # loops that fill it (see ``search``)
        out_arcs = 0
        for i in range(m_off[d], m_off[d + 1]):
            out_arcs += off[m_q[i] + 1] - off[m_q[i]]
        cand_key = _reserve(cand_key, out_arcs)
        cand_dst = _reserve(cand_dst, out_arcs)
        cand_lab = _reserve(cand_lab, out_arcs)
        cand_c = _reserve(cand_c, out_arcs)
        m_q = _reserve(m_q, nm + out_arcs + 1)
        m_rq = _reserve(m_rq, nm + out_arcs + 1)
        m_r = _reserve(m_r, nm + out_arcs + 1)
        m_off = _reserve(m_off, ns + out_arcs + 2)
        chain = _reserve(chain, ns + out_arcs + 2)
        o_src = _reserve(o_src, na + out_arcs)
        o_dst = _reserve(o_dst, na + out_arcs)
        o_lab = _reserve(o_lab, na + out_arcs)
        o_w = _reserve(o_w, na + out_arcs)
        out_final = _reserve(out_final, d + 1)
        fin = INF
        nc = 0
        for i in range(m_off[d], m_off[d + 1]):
            q = m_q[i]
            r = m_r[i]
            if final[q] + r < fin:
                fin = final[q] + r
            for k in range(off[q], off[q + 1]):
                cand_key[nc] = label[k] * num_in + dst[k]
                cand_dst[nc] = dst[k]
                cand_lab[nc] = label[k]
                cand_c[nc] = r + w[k]
                nc += 1
        out_final[d] = fin
        order = np.argsort(cand_key[:nc], kind="mergesort")
        g = 0
        while g < nc:
            lab = cand_lab[order[g]]
            e = g
            best = INF
            while e < nc and cand_lab[order[e]] == lab:
                if cand_c[order[e]] < best:
                    best = cand_c[order[e]]
                e += 1
            # members of the target: distinct dst (sorted), min residual each
            start_m = nm
            h = h0
            j = g
            while j < e:
                q = cand_dst[order[j]]
                c = cand_c[order[j]]
                j2 = j + 1
                while j2 < e and cand_dst[order[j2]] == q:
                    if cand_c[order[j2]] < c:
                        c = cand_c[order[j2]]
                    j2 += 1
                r = c - best
                rq = np.int64(np.round(r / delta))
                m_q[nm] = q
                m_rq[nm] = rq
                m_r[nm] = r
                nm += 1
                h = (h ^ q) * mul
                h = (h ^ rq) * mul
                j = j2
            size = nm - start_m
            # look the subset up
            target = -1
            if h in table:
                cand = table[h]
                while cand >= 0:
                    lo = m_off[cand]
                    if m_off[cand + 1] - lo == size:
                        same = True
                        for t in range(size):
                            if m_q[lo + t] != m_q[start_m + t] or m_rq[lo + t] != m_rq[start_m + t]:
                                same = False
                                break
                        if same:
                            target = cand
                            break
                    cand = chain[cand]
            if target >= 0:
                nm = start_m  # drop the tentative copy
            else:
                target = ns
                ns += 1
                m_off[ns] = nm
                chain[target] = table[h] if h in table else -1
                table[h] = target
            o_src[na] = d
            o_dst[na] = target
            o_lab[na] = lab
            o_w[na] = best
            na += 1
            g = e
        d += 1
    return o_src[:na], o_dst[:na], o_lab[:na], o_w[:na], out_final[:ns]


@numba.njit(cache=True, nogil=True)
def _key_lookup(d, key):
    if key in d:
        return d[key]
    return -1


@numba.njit(cache=True, nogil=True)
def expand_histories(num_states, src, dst, word, max_states):
    """Split each state of a sorted lattice by the word history that reaches it.

    State (s, h) means "in state s having read the words of history h"; histories are
    interned as (parent history, word) -> id, 0 the empty one. Afterwards a path's words are
    known from its end state alone, wherever its arcs carried them.

    Returns (new arcs' src, dst and the original arc id (A',)), per new state its original
    state and history (S',), the histories' parent and word (H,), and ``ok`` (False: more
    than ``max_states`` new states).
    """
    n_word = 1
    for a in range(word.shape[0]):
        if word[a] + 1 > n_word:
            n_word = word[a] + 1
    states = numba.typed.Dict.empty(numba.types.int64, numba.types.int64)
    hists = numba.typed.Dict.empty(numba.types.int64, numba.types.int64)
    h_parent = [np.int64(-1)]
    h_word = [np.int64(0)]
    st_orig = [np.int64(0)]
    st_hist = [np.int64(0)]
    # per original state, its new states as a linked list (head, next)
    head = np.full(num_states, -1, np.int64)
    nxt = [np.int64(-1)]
    head[0] = 0
    states[0] = 0
    o_src = []
    o_dst = []
    o_arc = []
    off, ids = csr(num_states, src)
    for s in range(num_states):
        j = head[s]
        while j >= 0:
            h = st_hist[j]
            for k in range(off[s], off[s + 1]):
                a = ids[k]
                h2 = h
                if word[a] != 0:
                    hk = h * n_word + word[a]
                    h2 = _key_lookup(hists, hk)
                    if h2 < 0:
                        h2 = len(h_parent)
                        hists[hk] = h2
                        h_parent.append(h)
                        h_word.append(word[a])
                d = dst[a]
                sk = d * (1 << 31) + h2
                t = _key_lookup(states, sk)
                if t < 0:
                    t = len(st_orig)
                    if t >= max_states:
                        return (np.empty(0, np.int64), np.empty(0, np.int64),
                                np.empty(0, np.int64), np.empty(0, np.int64),
                                np.empty(0, np.int64), np.empty(0, np.int64),
                                np.empty(0, np.int64), False)
                    states[sk] = t
                    st_orig.append(d)
                    st_hist.append(h2)
                    nxt.append(head[d])
                    head[d] = t
                o_src.append(j)
                o_dst.append(t)
                o_arc.append(a)
            j = nxt[j]
    return (np.array(o_src), np.array(o_dst), np.array(o_arc), np.array(st_orig),
            np.array(st_hist), np.array(h_parent), np.array(h_word), True)


# --------------------------------------------------------------------------------------------
# OpenFst's text form, read


_EXACT_TENS = np.array([10.0 ** k for k in range(23)])  # every one exact in float64


@numba.njit(cache=True, inline="always")
def _space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(cache=True)
def _number(data, i, tens):
    """The number written at ``data[i:]`` (ASCII) and the index after it, or ok False. A
    decimal of at most 15 digits times a power of ten within 1e±22 is one exact integer
    multiplied or divided by another, so one IEEE operation rounds it correctly: the value
    Python's ``float`` gives (Clinger's fast path). ``inf``/``Infinity`` are read too;
    anything else is not ok (the caller falls back to Python)."""
    n = data.shape[0]
    neg = False
    if data[i] == 45 or data[i] == 43:  # - +
        neg = data[i] == 45
        i += 1
    if i < n and (data[i] == 105 or data[i] == 73):  # i I: inf, Infinity
        j = i
        while j < n and not _space(data[j]) and data[j] != 10:
            j += 1
        word = data[i:j]
        ok = word.shape[0] in (3, 8) and (word[0] | 32) == 105 and (word[1] | 32) == 110 \
            and (word[2] | 32) == 102
        return (-np.inf if neg else np.inf), j, ok
    mant = 0
    digits = 0
    decimals = 0
    seen_point = False
    any_digit = False
    while i < n:
        c = data[i]
        if 48 <= c <= 57:
            any_digit = True
            if mant > 0 or c != 48:
                digits += 1
            mant = mant * 10 + (c - 48) if digits <= 18 else mant
            if seen_point:
                decimals += 1
        elif c == 46 and not seen_point:  # .
            seen_point = True
        else:
            break
        i += 1
    exp = 0
    if i < n and (data[i] == 101 or data[i] == 69):  # e E
        i += 1
        eneg = False
        if i < n and (data[i] == 45 or data[i] == 43):
            eneg = data[i] == 45
            i += 1
        any_exp = False
        while i < n and 48 <= data[i] <= 57:
            exp = exp * 10 + (data[i] - 48)
            any_exp = True
            i += 1
            if exp > 1000:
                return 0.0, i, False
        if not any_exp:
            return 0.0, i, False
        if eneg:
            exp = -exp
    if not any_digit or (i < n and not _space(data[i]) and data[i] != 10) or digits > 15:
        return 0.0, i, False
    e10 = exp - decimals
    if mant == 0:
        return (-0.0 if neg else 0.0), i, True
    if e10 < -22 or e10 > 22:
        return 0.0, i, False
    v = float(mant)
    v = v * tens[e10] if e10 >= 0 else v / tens[-e10]
    return (-v if neg else v), i, True


@numba.njit(cache=True, nogil=True)
def fst_text(data, tens):
    """OpenFst's text form (ASCII bytes) as arcs ``(src, dst, ilabel, olabel, weight)``
    (E, 5) and final states ``(state, weight)`` (F, 2), float64, and whether every field was
    read (``lattice.fst_lines`` says what a line is)."""
    n = data.shape[0]
    lines = 1
    for i in range(n):
        if data[i] == 10:
            lines += 1
    arcs = np.zeros((lines, 5))
    fins = np.zeros((lines, 2))
    vals = np.zeros(5)
    na = 0
    nf = 0
    i = 0
    while i < n:
        k = 0
        while i < n and data[i] != 10:
            if _space(data[i]):
                i += 1
                continue
            v, i, ok = _number(data, i, tens)
            if not ok:
                return arcs[:0], fins[:0], False
            if k < 5:
                vals[k] = v
            k += 1
        i += 1
        if k >= 4:
            for j in range(4):
                arcs[na, j] = vals[j]
            arcs[na, 4] = vals[4] if k > 4 else 0.0
            na += 1
        elif k >= 1:
            fins[nf, 0] = vals[0]
            fins[nf, 1] = vals[1] if k > 1 else 0.0
            nf += 1
    return arcs[:na].copy(), fins[:nf].copy(), True
