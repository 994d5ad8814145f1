"""The RNN-T lattice recursion in PyTorch ops, for inputs on a GPU (or any device).

The same forward-backward as :mod:`speechlab.asr.rnnt._loss_numba` (its docstring has the
lattice conventions), computed for the whole batch at once over the lattice's anti-diagonals:
every node ``(t, u)`` with ``t + u = d`` depends only on nodes of diagonal ``d - 1`` (forward)
or ``d + 1`` (backward). Stored skewed, ``S[b, d, u] = X[b, d - u, u]``, a diagonal is one row
and its neighbours are the previous row at ``u`` (the blank from ``(t - 1, u)``) and at
``u - 1`` (the label from ``(t, u - 1)``): each step is a few elementwise ops on (B, U+1)
rows, T + U steps in all, nothing copied back to the host.

Float64 throughout, like the numba kernel. Padding is masked to -inf before the recursion, so
it may hold anything (NaN included) and gets zero occupancy.

Shape legend: B batch, T frames, U labels, D = T + U diagonals.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor
NEG_INF = float("-inf")


def _skew(x: Tensor, fill: float) -> tuple[Tensor, Tensor]:
    """(B, T, U+1) -> (B, T+U, U+1) with ``out[b, d, u] = x[b, d - u, u]`` (``fill`` where
    ``d - u`` is outside 0..T-1), and the (T+U, U+1) frame index ``d - u``."""
    batch, frames, positions = x.shape
    d = torch.arange(frames + positions - 1, device=x.device)[:, None]
    u = torch.arange(positions, device=x.device)[None, :]
    t = d - u
    inside = (t >= 0) & (t < frames)
    gathered = x[:, t.clamp(0, frames - 1), u.expand_as(t)]
    return torch.where(inside, gathered, fill), t


def _unskew(s: Tensor, frames: int) -> Tensor:
    """The inverse of :func:`_skew`: (B, T+U, U+1) -> (B, T, U+1)."""
    positions = s.shape[2]
    t = torch.arange(frames, device=s.device)[:, None]
    u = torch.arange(positions, device=s.device)[None, :]
    return s[:, t + u, u.expand(frames, positions)]


def lattice(blank_lp: Tensor, label_lp: Tensor, frames: Tensor, labels: Tensor,
            need_occupancy: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """Negative log-likelihood per utterance and, optionally, transition occupancies.

    Args:
        blank_lp, label_lp: (B, T, U+1) log-probs of the blank and of the next label, any
            float dtype, on any device.
        frames, labels: (B,) int64 T_b and U_b on the same device.
        need_occupancy: also return the occupancies.

    Returns:
        cost (B,) float64 (+inf where no path has probability > 0, NaN where a path meets
        NaN), and occ_blank, occ_label (B, T, U+1) float64 (None unless asked), equal to the
        numba kernel's: ``-d cost / d blank_lp`` and ``-d cost / d label_lp``.
    """
    batch, max_frames, positions = blank_lp.shape
    device = blank_lp.device
    t = torch.arange(max_frames, device=device)[None, :, None]
    u = torch.arange(positions, device=device)[None, None, :]
    n_t, n_u = frames[:, None, None], labels[:, None, None]
    blank64, label64 = blank_lp.double(), label_lp.double()
    # A blank moves (t, u) -> (t+1, u) inside the utterance; the one at (T_b-1, U_b) ends it.
    moves_blank = (t < n_t - 1) & (u <= n_u)
    moves_label = (t < n_t) & (u < n_u)
    ends = (t == n_t - 1) & (u == n_u)
    blank_m = torch.where(moves_blank, blank64, NEG_INF)
    label_m = torch.where(moves_label, label64, NEG_INF)
    final = torch.where(ends, blank64, NEG_INF)

    sb, _ = _skew(blank_m, NEG_INF)
    sl, _ = _skew(label_m, NEG_INF)
    diagonals = sb.shape[1]
    alpha = torch.full((batch, diagonals, positions), NEG_INF, dtype=torch.float64,
                       device=device)
    alpha[:, 0, 0] = 0.0
    for d in range(1, diagonals):
        prev = alpha[:, d - 1]
        by_blank = prev + sb[:, d - 1]
        by_label = torch.cat([alpha.new_full((batch, 1), NEG_INF),
                              prev[:, :-1] + sl[:, d - 1, :-1]], dim=1)
        alpha[:, d] = torch.logaddexp(by_blank, by_label)
    a = _unskew(alpha, max_frames)  # (B, T, U+1)
    b_idx = torch.arange(batch, device=device)
    log_p = a[b_idx, frames - 1, labels] + blank64[b_idx, frames - 1, labels]
    cost = -log_p
    if not need_occupancy:
        return cost, None, None

    sf, _ = _skew(final, NEG_INF)
    beta = torch.full((batch, diagonals + 1, positions), NEG_INF, dtype=torch.float64,
                      device=device)
    for d in range(diagonals - 1, -1, -1):
        nxt = beta[:, d + 1]
        by_blank = nxt + sb[:, d]
        by_label = torch.cat([nxt[:, 1:] + sl[:, d, :-1],
                              beta.new_full((batch, 1), NEG_INF)], dim=1)
        beta[:, d] = torch.logaddexp(torch.logaddexp(by_blank, by_label), sf[:, d])
    # occupancy of the blank out of (t, u): alpha + blank + beta(t+1, u), or the final blank;
    # of the label: alpha + label + beta(t, u+1). beta(t+1, u) sits on diagonal d+1 at u, and
    # beta(t, u+1) on diagonal d+1 at u+1.
    below = beta[:, 1:]  # (B, T+U, U+1): row d holds diagonal d+1
    after_blank = torch.logaddexp(sb + below, sf)
    after_label = torch.cat([sl[:, :, :-1] + below[:, :, 1:],
                             sl.new_full((batch, diagonals, 1), NEG_INF)], dim=2)
    finite = torch.isfinite(log_p)
    ok = finite[:, None, None]
    scale = torch.where(finite, log_p, 0.0)[:, None, None]
    occ_blank = torch.where(ok, torch.exp(alpha + after_blank - scale), 0.0)
    occ_label = torch.where(ok, torch.exp(alpha + after_label - scale), 0.0)
    return cost, _unskew(occ_blank, max_frames), _unskew(occ_label, max_frames)
