"""The kernels of :mod:`speechlab.asr.ctc._graph_cuda`, compiled when first launched.

Imported only where they run: importing it imports numba's CUDA target. ``cuda`` is this
module's global so that numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) can stand in for it.

One thread block per utterance b, on its graph ``which[b]`` of a
:class:`~speechlab.asr.ctc.loss_graphs.GraphBatch` (nodes ``lo..hi-1``: emitting ones first,
then epsilon ones, whose sources are emitting nodes only). Threads take the graph's nodes in
strides, with a barrier between the phases of a frame. Log semiring, float64.
"""

from __future__ import annotations

import math

from numba import cuda

from speechlab.nn.cuda_logmath import log_add

NEG_INF = -math.inf


@cuda.jit(device=True)
def plus(score, emission):
    """score + emission, but -inf wherever score is (an unreached node reads no emission)."""
    if score == NEG_INF:
        return score
    return score + emission


@cuda.jit(device=True)
def node_range(g, lo_a, eps_a, hi_a):
    """Graph g's nodes: the first, the first epsilon one, one past the last."""
    return lo_a[g], eps_a[g], hi_a[g]


@cuda.jit
def forward(log_probs, frames, which, column, in_ptr, in_src, final, start, lo_a, eps_a,
            hi_a, alpha, log_z):
    """alpha[b, t, i] for node lo + i after t frames (t = 0..T_b); log_z[b] over the final
    nodes after the last frame."""
    b = cuda.blockIdx.x
    lo, eps, hi = node_range(which[b], lo_a, eps_a, hi_a)
    n_t = frames[b]
    step = cuda.blockDim.x
    for t in range(n_t + 1):
        # emitting nodes: the start alone at t = 0, else their sources one frame back
        i = lo + cuda.threadIdx.x
        while i < eps:
            if t == 0:
                value = 0.0 if i == start[which[b]] else NEG_INF
            else:
                total = NEG_INF
                for a in range(in_ptr[i], in_ptr[i + 1]):
                    total = log_add(total, alpha[b, t - 1, in_src[a] - lo])
                value = plus(total, log_probs[b, t - 1, column[i]])
            alpha[b, t, i - lo] = value
            i += step
        cuda.syncthreads()
        # epsilon nodes: their (emitting) sources in the same frame
        i = eps + cuda.threadIdx.x
        while i < hi:
            total = NEG_INF
            for a in range(in_ptr[i], in_ptr[i + 1]):
                total = log_add(total, alpha[b, t, in_src[a] - lo])
            alpha[b, t, i - lo] = total
            i += step
        cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        total = NEG_INF
        for i in range(lo, hi):
            if final[i]:
                total = log_add(total, alpha[b, n_t, i - lo])
        log_z[b] = total


@cuda.jit
def backward(log_probs, frames, which, column, out_ptr, out_dst, final, lo_a, eps_a, hi_a,
             alpha, log_z, beta, grad):
    """beta row by row from the last frame (two rows per block, ``beta[b, t % 2]``), and the
    occupancy of each emitting node, exp(alpha + beta - log Z), added into
    ``grad[b, t - 1, column]`` (nothing where log Z is not finite)."""
    b = cuda.blockIdx.x
    lo, eps, hi = node_range(which[b], lo_a, eps_a, hi_a)
    n_t = frames[b]
    z = log_z[b]
    if not (z == z and z != NEG_INF and z != -NEG_INF):
        return  # the whole block leaves together: no barrier is left waiting
    step = cuda.blockDim.x
    for t in range(n_t, -1, -1):
        row = t % 2
        nxt = 1 - row
        # epsilon nodes first: the frame's end, or the emitting nodes of the next frame
        i = eps + cuda.threadIdx.x
        while i < hi:
            value = 0.0 if t == n_t and final[i] else NEG_INF
            if t < n_t:
                for a in range(out_ptr[i], out_ptr[i + 1]):
                    d = out_dst[a]
                    if d < eps:
                        value = log_add(value, plus(beta[b, nxt, d - lo],
                                                    log_probs[b, t, column[d]]))
            beta[b, row, i - lo] = value
            i += step
        cuda.syncthreads()
        # emitting nodes: the frame's end, the next frame, or an epsilon node of this frame
        i = lo + cuda.threadIdx.x
        while i < eps:
            value = 0.0 if t == n_t and final[i] else NEG_INF
            for a in range(out_ptr[i], out_ptr[i + 1]):
                d = out_dst[a]
                if d >= eps:
                    value = log_add(value, beta[b, row, d - lo])
                elif t < n_t:
                    value = log_add(value, plus(beta[b, nxt, d - lo],
                                                log_probs[b, t, column[d]]))
            beta[b, row, i - lo] = value
            if t >= 1:
                occ = math.exp(alpha[b, t, i - lo] + value - z)
                if occ > 0.0:
                    cuda.atomic.add(grad, (b, t - 1, column[i]), occ)
            i += step
        cuda.syncthreads()
