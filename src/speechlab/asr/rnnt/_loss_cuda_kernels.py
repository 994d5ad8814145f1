"""The kernels of :mod:`speechlab.asr.rnnt._loss_cuda`, compiled when first launched.

Imported only where they run: importing it imports numba's CUDA target. ``cuda`` is this
module's global so that numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) can stand in for it.
"""

from __future__ import annotations

import math

from numba import cuda

from speechlab.nn.cuda_logmath import log_add

NEG_INF = -math.inf


@cuda.jit
def forward(blank, label, frames, labels, alpha, cost):
    """alpha(t, u) per block b, diagonal after diagonal; cost[b] = -log P."""
    b = cuda.blockIdx.x
    n_t = frames[b]
    n_u = labels[b]
    for d in range(n_t + n_u):
        u = cuda.threadIdx.x
        while u <= n_u:
            t = d - u
            if t >= 0 and t < n_t:
                if d == 0:
                    a = 0.0
                else:
                    by_blank = NEG_INF
                    if t > 0:
                        by_blank = alpha[b, t - 1, u] + blank[b, t - 1, u]
                    by_label = NEG_INF
                    if u > 0:
                        by_label = alpha[b, t, u - 1] + label[b, t, u - 1]
                    a = log_add(by_blank, by_label)
                alpha[b, t, u] = a
            u += cuda.blockDim.x
        cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cost[b] = -(alpha[b, n_t - 1, n_u] + blank[b, n_t - 1, n_u])

@cuda.jit
def backward(blank, label, frames, labels, beta):
    """beta(t, u) = log P(the rest | at (t, u)), the final blank included."""
    b = cuda.blockIdx.x
    n_t = frames[b]
    n_u = labels[b]
    for d in range(n_t + n_u - 1, -1, -1):
        u = cuda.threadIdx.x
        while u <= n_u:
            t = d - u
            if t >= 0 and t < n_t:
                if t == n_t - 1 and u == n_u:
                    v = blank[b, t, u]
                else:
                    by_blank = NEG_INF
                    if t < n_t - 1:
                        by_blank = blank[b, t, u] + beta[b, t + 1, u]
                    by_label = NEG_INF
                    if u < n_u:
                        by_label = label[b, t, u] + beta[b, t, u + 1]
                    v = log_add(by_blank, by_label)
                beta[b, t, u] = v
            u += cuda.blockDim.x
        cuda.syncthreads()

@cuda.jit
def occupancy(blank, label, frames, labels, alpha, beta, cost, occ_blank, occ_label):
    """exp(alpha + lp + beta(successor) - log P) per transition; 0 outside the lattice
    and where log P is not finite."""
    frames_max = blank.shape[1]
    positions = blank.shape[2]
    total = blank.shape[0] * frames_max * positions
    i = cuda.grid(1)
    while i < total:
        b = i // (frames_max * positions)
        t = (i // positions) % frames_max
        u = i % positions
        n_t = frames[b]
        n_u = labels[b]
        log_p = -cost[b]
        ob = 0.0
        ol = 0.0
        if t < n_t and u <= n_u and log_p == log_p and log_p != NEG_INF \
                and log_p != -NEG_INF:
            a = alpha[b, t, u] - log_p
            if t < n_t - 1:
                ob = math.exp(a + blank[b, t, u] + beta[b, t + 1, u])
            elif u == n_u:
                ob = math.exp(a + blank[b, t, u])
            if u < n_u:
                ol = math.exp(a + label[b, t, u] + beta[b, t, u + 1])
        occ_blank[b, t, u] = ob
        occ_label[b, t, u] = ol
        i += cuda.gridsize(1)
