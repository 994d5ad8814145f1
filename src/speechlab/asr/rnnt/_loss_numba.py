"""Numba kernels for the RNN-T forward-backward recursion over the (T, U+1) lattice.

The torch glue lives in :mod:`speechlab.asr.rnnt.loss`; this file holds only the loops that
torch cannot vectorise well (each lattice cell depends on its left and lower neighbours).
The kernel releases the GIL and works on a given list of utterances, so the caller runs parts
of a batch on plain Python threads.  (Numba's own ``parallel=True`` would need a threading
layer: here that is GNU OpenMP, which hangs a forked child -- DataLoader workers -- or the
workqueue layer, which aborts the process when two threads launch kernels at once.)

Lattice conventions (Graves 2012, "Sequence transduction with recurrent neural networks"):
node ``(t, u)`` means "``t`` frames consumed ... at frame ``t``, ``u`` labels emitted".
``blank_lp[b, t, u]`` is log P(blank | t, u) and moves ``(t, u) -> (t+1, u)``;
``label_lp[b, t, u]`` is log P(y_{u+1} | t, u) and moves ``(t, u) -> (t, u+1)``.
The blank at ``(T-1, U)`` terminates; every other blank at ``t = T-1`` would leave the lattice
with labels still unread, so it has no successor.

Arithmetic is float64 whatever the input dtype: the lattice is small next to the logits, and
float32 log-add-exp chains over T+U steps lose digits that the loss's gradient check would see.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from speechlab.nn.logmath import log_add as _log_add

NEG_INF = -np.inf




@numba.njit(cache=True, nogil=True)
def forward_backward(
    blank_lp: np.ndarray,
    label_lp: np.ndarray,
    frames: np.ndarray,
    labels: np.ndarray,
    utterances: np.ndarray,
    need_occupancy: bool,
    cost: np.ndarray,
    occ_blank: np.ndarray,
    occ_label: np.ndarray,
) -> None:
    """Negative log-likelihood per utterance and, optionally, transition occupancies.

    Args:
        blank_lp: (B, T, U+1) float64 log-probs of blank.
        label_lp: (B, T, U+1) float64 log-probs of the next label (column U unused).
        frames: (B,) int64 valid frames T_b, 1 <= T_b <= T.
        labels: (B,) int64 valid labels U_b, 0 <= U_b <= U.
        utterances: int64 batch indices to process (the others are left untouched).
        need_occupancy: fill ``occ_blank``/``occ_label`` (else they may be empty arrays).
        cost: (B,) float64 output, -log P(y_b | x_b); +inf when no path has probability > 0.
        occ_blank: (B, T, U+1) float64 output, zero-initialised by the caller: posterior
            probability that the alignment takes the blank transition out of (t, u).
        occ_label: (B, T, U+1) float64 output, zero-initialised: same for the label transition.

    The occupancies are -d cost / d blank_lp and -d cost / d label_lp (Graves 2012, Eq. 20):
    occ = exp(alpha(t,u) + lp(t,u) + beta(successor) - log P).  Cells outside the valid
    (T_b, U_b+1) region are never read and their occupancies stay zero.
    """
    for i in range(utterances.shape[0]):
        b = utterances[i]
        n_t = frames[b]
        n_u = labels[b]
        alpha = np.empty((n_t, n_u + 1))
        alpha[0, 0] = 0.0
        for u in range(1, n_u + 1):
            alpha[0, u] = alpha[0, u - 1] + label_lp[b, 0, u - 1]
        for t in range(1, n_t):
            alpha[t, 0] = alpha[t - 1, 0] + blank_lp[b, t - 1, 0]
            for u in range(1, n_u + 1):
                alpha[t, u] = _log_add(
                    alpha[t - 1, u] + blank_lp[b, t - 1, u],
                    alpha[t, u - 1] + label_lp[b, t, u - 1],
                )
        log_p = alpha[n_t - 1, n_u] + blank_lp[b, n_t - 1, n_u]
        cost[b] = -log_p
        if not need_occupancy or log_p == NEG_INF or math.isnan(log_p):
            continue

        # beta(t, u) = log P(rest of the sequence | at node (t, u)), terminal blank included.
        beta = np.empty((n_t, n_u + 1))
        beta[n_t - 1, n_u] = blank_lp[b, n_t - 1, n_u]
        for u in range(n_u - 1, -1, -1):
            beta[n_t - 1, u] = beta[n_t - 1, u + 1] + label_lp[b, n_t - 1, u]
        for t in range(n_t - 2, -1, -1):
            beta[t, n_u] = beta[t + 1, n_u] + blank_lp[b, t, n_u]
            for u in range(n_u - 1, -1, -1):
                beta[t, u] = _log_add(
                    beta[t + 1, u] + blank_lp[b, t, u],
                    beta[t, u + 1] + label_lp[b, t, u],
                )

        for t in range(n_t):
            for u in range(n_u + 1):
                a = alpha[t, u] - log_p
                if t < n_t - 1:
                    occ_blank[b, t, u] = math.exp(a + blank_lp[b, t, u] + beta[t + 1, u])
                elif u == n_u:
                    occ_blank[b, t, u] = math.exp(a + blank_lp[b, t, u])
                if u < n_u:
                    occ_label[b, t, u] = math.exp(a + label_lp[b, t, u] + beta[t, u + 1])
