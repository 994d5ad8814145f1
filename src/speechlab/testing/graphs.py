"""Slow, obviously correct references for token graphs and the graph loss (tests only).

Everything here works on :class:`speechlab.asr.ctc.topology.Arcs` -- plain arc lists, each arc
consuming one frame -- and shares no code with :mod:`speechlab.asr.ctc.loss_graphs` or its kernel:

* :func:`count_paths`: for each token sequence, the number of paths of a graph that read it
  (and, optionally, output a given phone sequence), by dynamic programming over arcs;
* :func:`brute_force_nll`: the graph loss of eqs. (1)-(5) of the CTC-topologies paper as an
  explicit sum over every token sequence of length T;
* :func:`log_total_score`: the log-semiring forward over an arc list, one arc at a time;
* :func:`fst_arcs`: a ``kaldifst`` FST (e.g. the output of ``kaldifst.compose``) as arcs.

Shapes: T frames, V tokens, N token sequences, S states, U phones.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from speechlab.asr.ctc import topology
from speechlab.asr.ctc.topology import Arcs


def token_sequences(num_tokens: int, num_frames: int) -> np.ndarray:
    """(V^T, T) int64: every token sequence of length T, in lexicographic order."""
    seqs = list(itertools.product(range(num_tokens), repeat=num_frames))
    return np.array(seqs, dtype=np.int64).reshape(len(seqs), num_frames)


def count_paths(graph: Arcs, sequences: np.ndarray, phones: Sequence[int] | None = None
                ) -> np.ndarray:
    """(N,) int64: paths of ``graph`` from its start to a final state reading each sequence.

    sequences: (N, T) token ids.  With ``phones``, only paths whose non-zero output labels
    spell ``phones`` count (``graph`` then needs ``label``s: T, not a composition).
    """
    phones = list(phones) if phones is not None else None
    positions = 1 if phones is None else len(phones) + 1
    count = np.zeros((len(sequences), graph.num_states, positions), dtype=np.int64)
    count[:, graph.start, 0] = 1
    for t in range(sequences.shape[1]):
        new = np.zeros_like(count)
        for src, dst, tok, label in zip(graph.src, graph.dst, graph.token, graph.label):
            reads = (sequences[:, t] == tok)[:, None]
            if phones is None or label == 0:
                new[:, dst, :] += count[:, src, :] * reads
            else:
                for u in range(len(phones)):
                    if phones[u] == label:
                        new[:, dst, u + 1] += count[:, src, u] * reads[:, 0]
        count = new
    return count[:, graph.final, -1].sum(1)


def log_total_score(graph: Arcs, log_probs: np.ndarray) -> float:
    """log of the sum over paths of ``sum_t log_probs[t, token]`` (T, V), arc by arc."""
    alpha = np.full(graph.num_states, -np.inf)
    alpha[graph.start] = 0.0
    for t in range(log_probs.shape[0]):
        new = np.full(graph.num_states, -np.inf)
        for src, dst, tok in zip(graph.src, graph.dst, graph.token):
            new[dst] = np.logaddexp(new[dst], alpha[src] + log_probs[t, tok])
        alpha = new
    return float(np.logaddexp.reduce(alpha[graph.final])) if graph.final.any() else -np.inf


def brute_force_nll(name: str, log_probs: np.ndarray, phones: Sequence[int],
                    denominator: bool = True) -> float:
    """``-(log num - log den)`` of eqs. (1)-(5), summing over all V^T token sequences.

    log_probs (T, V) over the topology's ``V = 1 + P x`` tokens (blank 0); ``num`` counts the
    paths of T that read a sequence and output ``phones``, ``den`` every path of T.
    """
    num_frames, vocab = log_probs.shape
    x = topology.get(name).states
    graph = topology.arcs(name, (vocab - 1) // x)
    seqs = token_sequences(vocab, num_frames)
    score = log_probs[np.arange(num_frames), seqs].sum(1)  # (N,)

    def log_sum(counts: np.ndarray) -> float:
        keep = counts > 0
        if not keep.any():
            return -np.inf
        return float(np.logaddexp.reduce(np.log(counts[keep]) + score[keep]))

    num = log_sum(count_paths(graph, seqs, phones))
    den = log_sum(count_paths(graph, seqs)) if denominator else 0.0
    return np.inf if num == -np.inf else den - num


def fst_arcs(fst) -> Arcs:
    """A ``kaldifst`` FST with input labels ``token + 1`` (no input epsilons) as :class:`Arcs`
    (labels are the output labels; final weights must be 0 or infinite)."""
    import kaldifst

    rows = []
    final = np.zeros(fst.num_states, dtype=bool)
    for s in range(fst.num_states):
        weight = fst.final(s).value
        if weight != np.inf:
            assert weight == 0.0, "final weights other than 0 are not supported"
            final[s] = True
        for arc in kaldifst.ArcIterator(fst, s):
            assert arc.ilabel > 0 and arc.weight.value == 0.0
            rows.append((s, arc.nextstate, arc.ilabel - 1, arc.olabel))
    table = np.array(rows, dtype=np.int64).reshape(-1, 4)
    return Arcs(fst.num_states, table[:, 0], table[:, 1], table[:, 2], table[:, 3], fst.start,
                final)
