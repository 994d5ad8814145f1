"""The graph loss's forward-backward in PyTorch ops, for inputs on a GPU (or any device).

The same sums as :mod:`speechlab.asr.ctc._graph_numba` (its docstring and
:mod:`speechlab.asr.ctc.loss_graphs` define the graphs), for the whole batch at once: the
graphs of all utterances become one set of nodes and arcs, and each frame is a gather, a
segment log-sum-exp (``scatter_reduce`` max, ``scatter_add`` of exponentials) into the arcs'
destinations and an emission gather. T frames, a few ops each, forward and backward; nothing
goes back to the host. Log domain, float64 throughout.

Utterances shorter than the batch stop at their own last frame: their rows are frozen past it
in the forward and start from their final nodes there in the backward.

Shape legend: B batch, T frames, V tokens, N nodes of all graphs, A arcs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from speechlab.asr.ctc.loss_graphs import GraphBatch

Tensor = torch.Tensor
NEG_INF = float("-inf")


@dataclass(frozen=True)
class Expanded:
    """B graphs as one node and arc set on a device.

    ``utt``/``column``/``final``/``epsilon`` (N,): each node's utterance, log-probs column
    (0 for epsilon nodes, never read), whether it is final or an epsilon node. ``start`` (B,)
    each utterance's start node. Arcs into emitting nodes (a frame passes) are ``cross_src``
    -> ``cross_dst``; arcs into epsilon nodes (within a frame) ``eps_src`` -> ``eps_dst``.
    """

    utt: Tensor
    column: Tensor
    final: Tensor
    epsilon: Tensor
    start: Tensor
    cross_src: Tensor
    cross_dst: Tensor
    eps_src: Tensor
    eps_dst: Tensor

    @property
    def size(self) -> int:
        return self.utt.shape[0]


def expand(graph: GraphBatch, which: np.ndarray, device: torch.device) -> Expanded:
    """Utterance b's graph is ``graph``'s graph ``which[b]`` (b for numerators, 0 for the
    shared denominator), renumbered into one node set."""
    utt, nodes, eps, src, dst, start = [], [], [], [], [], []
    base = 0
    for b, g in enumerate(which.tolist()):
        lo, hi = int(graph.lo[g]), int(graph.hi[g])
        p0, p1 = int(graph.in_ptr[lo]), int(graph.in_ptr[hi])
        old = np.arange(lo, hi)
        nodes.append(old)
        eps.append(old >= graph.eps[g])
        utt.append(np.full(hi - lo, b))
        dst.append(np.repeat(old, np.diff(graph.in_ptr[lo:hi + 1])) - lo + base)
        src.append(graph.in_src[p0:p1] - lo + base)
        start.append(int(graph.start[g]) - lo + base)
        base += hi - lo
    old_ids = np.concatenate(nodes)
    epsilon = np.concatenate(eps)
    column = np.where(epsilon, 0, graph.column[old_ids])
    src_all, dst_all = np.concatenate(src), np.concatenate(dst)
    into_eps = epsilon[dst_all]

    def t(x: np.ndarray, dtype: torch.dtype = torch.int64) -> Tensor:
        return torch.as_tensor(np.ascontiguousarray(x)).to(device=device, dtype=dtype)

    return Expanded(
        utt=t(np.concatenate(utt)), column=t(column), final=t(graph.final[old_ids], torch.bool),
        epsilon=t(epsilon, torch.bool), start=t(np.array(start)),
        cross_src=t(src_all[~into_eps]), cross_dst=t(dst_all[~into_eps]),
        eps_src=t(src_all[into_eps]), eps_dst=t(dst_all[into_eps]))


def _segment_lse(values: Tensor, index: Tensor, size: int) -> Tensor:
    """``out[n] = log sum exp(values[index == n])``, -inf where there is none."""
    top = torch.full((size,), NEG_INF, dtype=values.dtype, device=values.device)
    top = top.scatter_reduce(0, index, values, "amax", include_self=True)
    shift = torch.where(torch.isfinite(top), top, 0.0)
    sums = torch.zeros(size, dtype=values.dtype, device=values.device)
    sums = sums.scatter_add(0, index, torch.exp(values - shift[index]))
    return torch.log(sums) + shift


def _plus(score: Tensor, emission: Tensor) -> Tensor:
    """``score + emission``, but -inf wherever ``score`` is (an unreached node reads no
    emission, so NaN there is not picked up)."""
    return torch.where(torch.isneginf(score), score, score + emission)


def total_scores(log_probs: Tensor, frames: Tensor, g: Expanded,
                 need_grad: bool) -> tuple[Tensor, Tensor | None]:
    """log TotalScore(E o graph) per utterance and ``d log Z / d log_probs``.

    Args:
        log_probs: (B, T, V) emission scores E, any float dtype.
        frames: (B,) int64 valid frames T_b, on the same device.
        g: the graphs, :func:`expand` ed.
        need_grad: also return the occupancies.

    Returns:
        log Z (B,) float64: -inf where no path has a non-zero score, NaN or +inf where a path
        meets NaN or +inf; and (B, T, V) float64 occupancies (None unless asked), zero for
        utterances whose log Z is not finite.
    """
    batch, max_frames, vocab = log_probs.shape
    device = log_probs.device
    lp = log_probs.double()
    n = g.size
    node_frames = frames[g.utt]  # (N,)
    flat_col = g.utt * vocab + g.column  # (N,) index into a (B*V,) frame row

    def emissions(t: int) -> Tensor:
        return lp[:, t].reshape(-1)[flat_col]

    alpha = torch.full((max_frames + 1, n), NEG_INF, dtype=torch.float64, device=device)
    row = torch.full((n,), NEG_INF, dtype=torch.float64, device=device)
    row[g.start] = 0.0
    row = _with_epsilon(row, g)
    alpha[0] = row
    for t in range(1, max_frames + 1):
        new = _segment_lse(row[g.cross_src], g.cross_dst, n)
        new = torch.where(g.epsilon, NEG_INF, _plus(new, emissions(t - 1)))
        new = _with_epsilon(new, g)
        row = torch.where(t <= node_frames, new, row)  # frozen past each utterance's end
        alpha[t] = row
    final_scores = torch.where(g.final, row, NEG_INF)
    log_z = _segment_lse(final_scores, g.utt, batch)
    if not need_grad:
        return log_z, None

    beta_next = torch.full((n,), NEG_INF, dtype=torch.float64, device=device)
    grad = torch.zeros(max_frames, batch * vocab, dtype=torch.float64, device=device)
    ok = torch.isfinite(log_z)
    norm = torch.where(ok, log_z, 0.0)[g.utt]
    keep = ok[g.utt] & ~g.epsilon
    for t in range(max_frames, -1, -1):
        at_end = torch.where((node_frames == t) & g.final, 0.0, NEG_INF)
        if t < max_frames:
            onward = _plus(beta_next[g.cross_dst], emissions(t)[g.cross_dst])
            through = _segment_lse(onward, g.cross_src, n)
        else:
            through = torch.full((n,), NEG_INF, dtype=torch.float64, device=device)
        eps_beta = torch.where(g.epsilon, torch.logaddexp(at_end, through), NEG_INF)
        via_eps = _segment_lse(eps_beta[g.eps_dst], g.eps_src, n)
        beta = torch.where(g.epsilon, eps_beta,
                           torch.logaddexp(torch.logaddexp(at_end, through), via_eps))
        if t >= 1:
            occ = torch.exp(alpha[t] + beta - norm)
            occ = torch.where(keep & (t <= node_frames), occ, 0.0)
            grad[t - 1].index_add_(0, flat_col, occ)
        beta_next = beta
    return log_z, grad.reshape(max_frames, batch, vocab).transpose(0, 1)


def _with_epsilon(row: Tensor, g: Expanded) -> Tensor:
    """A frame's row with its epsilon nodes summed from the emitting nodes of the same row."""
    if g.eps_src.numel() == 0:
        return row
    eps = _segment_lse(row[g.eps_src], g.eps_dst, row.shape[0])
    return torch.where(g.epsilon, eps, row)
