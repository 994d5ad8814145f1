"""The CTC-topologies paper's two lattice metrics (Sec. 2.3) and full-sum decoding over a
lattice (eq. 9), all exact sums in the log semiring over a :class:`~.lattice.Lattice`.

With ``W*`` the Viterbi hypothesis (eq. 8) and ``Pi(W; L)`` the paths of lattice ``L`` that
carry words ``W`` (one per alignment when the lattice was made with ``unique_paths``, the
default, as the equations mean; every graph path otherwise):

- Best Path Proportion (eq. 10): ``max_{pi in Pi(W*; L)} p(pi|X) / sum_{pi in Pi(W*; L)} p(pi|X)``;
- Best Hypothesis Proportion (eq. 11):
  ``sum_{pi in Pi(W*; L)} p(pi|X) / sum_W sum_{pi in Pi(W; L)} p(pi|X)``.

The sums over ``Pi(W*; L)`` run over the lattice composed with ``W*``'s linear acceptor on word
labels (epsilons pass through), one forward pass; the denominators are one forward pass over
the whole lattice. ``score`` picks what a path weighs (:data:`~.lattice.SCORES`):
``"acoustic"``, ``p(pi|X)`` as eqs. 10-11 are written (the default), or ``"total"``, the
decoder's ``p(W) p(pi|X)^alpha`` with the graph (LM) weights.

Full-sum decoding (eq. 9, sums limited to the lattice as in Sec. 3.3.2): the hypothesis with the
largest ``sum_{pi in Pi(W; L)}`` of the same path weights, so that ``BHP > 0.5`` implies it is
``W*`` (:func:`fullsum_best`). Exact by a best-first search over word prefixes: a prefix's
priority is the summed weight of every path whose words start with it, an upper bound on every
hypothesis below it, so the first complete hypothesis popped is the exact argmax. Each
expansion is two passes over the arcs; the number of expansions is small when probability
mass is concentrated on few hypotheses (a few per word of the answer) and is capped.

Eq. 9 prints ``alpha sum_pi log p(pi|X)``; we read it as ``alpha log sum_pi p(pi|X)`` (a sum of
logs would favour the hypotheses with the fewest alignments). With ``score="total"`` and
a graph weight that is the same on every path of ``W`` (an n-gram G with one path per word
sequence) the sum is ``log p(W) + log sum_pi p(pi|X)^alpha``, eq. 9 exactly when alpha = 1.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from itertools import count
from typing import Sequence

import numpy as np

from speechlab.asr.ctc import _lattice_numba as K
from speechlab.asr.ctc.lattice import Lattice
from speechlab.errors import DataError


@dataclass(frozen=True)
class PathProportions:
    """BPP and BHP of one utterance (eqs. 10-11) with the log sums they come from."""

    utt: str
    hypothesis: tuple[int, ...]  #: W*, word labels
    score: str  #: "acoustic" or "total"
    log_best_path: float  #: log max_{pi in Pi(W*)} of the path weight
    log_hypothesis: float  #: log sum_{pi in Pi(W*)}
    log_total: float  #: log sum over every path of the lattice

    @property
    def bpp(self) -> float:
        """Best Path Proportion, eq. (10)."""
        return math.exp(self.log_best_path - self.log_hypothesis)

    @property
    def bhp(self) -> float:
        """Best Hypothesis Proportion, eq. (11)."""
        return math.exp(min(0.0, self.log_hypothesis - self.log_total))


def _weights(lat: Lattice, score: str) -> tuple[np.ndarray, np.ndarray]:
    if lat.num_arcs == 0:
        raise DataError(f"utterance {lat.utt!r}: the lattice is empty (no arcs); nothing to "
                        "measure (did the decoder find any path?)")
    return lat.log_weights(score)


def path_proportions(lat: Lattice, hypothesis: Sequence[int] | None = None,
                     score: str = "acoustic") -> PathProportions:
    """BPP (eq. 10) and BHP (eq. 11) of ``hypothesis`` in ``lat``.

    Args:
        lat: the utterance's lattice.
        hypothesis: W* as word labels; ``None`` takes the lattice's own Viterbi path
            (:meth:`Lattice.best_path`), which is the Viterbi decoder's W* when the lattice
            came from the same search (the paper: "the lattice inherently includes the best
            path identified by the Viterbi decoder").
        score: ``"acoustic"`` (p(pi|X), the paper's) or ``"total"``.

    Raises:
        DataError: naming the utterance, if the lattice is empty or has no path for W*.
    """
    w, fw = _weights(lat, score)
    words = lat.best_path().words if hypothesis is None else tuple(int(x) for x in hypothesis)
    log_total, _ = K.forward_sorted(lat.num_states, lat.src, lat.dst, w, fw)
    hyp = np.asarray(words, dtype=np.int64)
    log_hyp, log_best = K.restricted_sorted(lat.num_states, lat.src, lat.dst, lat.word, w, fw, hyp)
    if not np.isfinite(log_hyp):
        raise DataError(f"utterance {lat.utt!r}: hypothesis {list(words)} has no path in the "
                        "lattice (was it decoded with the same graph, log-probs and beams?)")
    return PathProportions(lat.utt, words, score, float(log_best), float(log_hyp),
                           float(log_total))


@dataclass(frozen=True)
class FullSumResult:
    """Full-sum decoding over a lattice (eq. 9) next to Viterbi (eq. 8)."""

    utt: str
    words: tuple[int, ...]  #: argmax_W sum_{pi in Pi(W; L)} of the path weight
    log_prob: float  #: that sum, log
    viterbi_words: tuple[int, ...]  #: W* of eq. 8
    log_prob_viterbi: float  #: the same sum for W*
    log_total: float  #: the sum over every path
    expansions: int  #: prefixes expanded by the search

    @property
    def agrees(self) -> bool:
        """Whether full-sum and Viterbi decoding give the same words."""
        return self.words == self.viterbi_words


def fullsum_nbest(lat: Lattice, n: int = 1, score: str = "acoustic",
                  max_expansions: int = 100_000) -> list[tuple[tuple[int, ...], float]]:
    """The ``n`` hypotheses with the largest summed path weight, best first, as
    ``(words, log sum)``; exact (best-first search over word prefixes, module doc).

    Raises:
        DataError: naming the utterance, if the lattice is empty or the search needs more
            than ``max_expansions`` prefix expansions (mass spread over very many hypotheses).
    """
    return _prefix_search(lat, n, score, max_expansions)[0]


def fullsum_best(lat: Lattice, score: str = "acoustic", viterbi: Sequence[int] | None = None,
                 max_expansions: int = 100_000) -> FullSumResult:
    """Full-sum decoding over the lattice (eq. 9) and whether it agrees with Viterbi (eq. 8).

    ``viterbi``: W* as word labels (default: the lattice's best path). Same ``score`` and
    errors as :func:`fullsum_nbest`.
    """
    best, expansions = _prefix_search(lat, 1, score, max_expansions)
    (words, log_prob), = best
    props = path_proportions(lat, viterbi, score)
    if props.log_hypothesis >= log_prob - 1e-9 * max(1.0, abs(log_prob)):
        words = props.hypothesis  # a tie (homophones under p(pi|X) alone): W* is an argmax too
    return FullSumResult(lat.utt, words, log_prob, props.hypothesis, props.log_hypothesis,
                         props.log_total, expansions)


@dataclass(frozen=True)
class RankedHypothesis:
    """One hypothesis of a lattice: its words, its share of the lattice's summed path weight
    (for W*, its BHP, eq. 11) and whether it is W*."""

    words: tuple[int, ...]
    share: float
    viterbi: bool


@dataclass(frozen=True)
class LatticeSummary:
    """A lattice next to its Viterbi hypothesis W*: the ``n`` hypotheses with the largest
    summed path weight, best first (W* appended when it is not among them), W*'s BPP and
    BHP (:class:`PathProportions`; None when W* has no path in the lattice: the Viterbi decoder
    and the lattice search prune differently), and whether full-sum decoding (eq. 9) over the
    lattice gives W* (a tie counts, as :func:`fullsum_best` decides)."""

    viterbi: tuple[int, ...]
    hypotheses: tuple[RankedHypothesis, ...]
    proportions: PathProportions | None
    fullsum_agrees: bool


def summarize(lat: Lattice, viterbi: Sequence[int], n: int = 5, score: str = "acoustic",
              max_expansions: int = 20_000) -> LatticeSummary:
    """:class:`LatticeSummary` of ``lat`` for the Viterbi hypothesis ``viterbi`` (word
    labels); errors as :func:`fullsum_nbest`."""
    words = tuple(int(x) for x in viterbi)
    ranked = fullsum_nbest(lat, n, score, max_expansions)
    try:
        props: PathProportions | None = path_proportions(lat, words, score)
    except DataError:  # W* pruned away by the lattice search
        props = None
    log_total = (props or path_proportions(lat, ranked[0][0], score)).log_total
    hyps = [RankedHypothesis(tuple(w), math.exp(min(0.0, s - log_total)), tuple(w) == words)
            for w, s in ranked]
    if props is not None and not any(h.viterbi for h in hyps):
        hyps.append(RankedHypothesis(words, props.bhp, True))  # below the n best
    top = ranked[0][1]
    agrees = props is not None and props.log_hypothesis >= top - 1e-9 * max(1.0, abs(top))
    return LatticeSummary(words, tuple(hyps), props, agrees)


def _prefix_search(lat: Lattice, n: int, score: str, max_expansions: int):
    w, fw = _weights(lat, score)
    S = lat.num_states
    beta = K.backward_sorted(S, lat.src, lat.dst, w, fw)
    num_words = int(lat.word.max()) + 1
    start = np.full(S, -np.inf)
    start[0] = 0.0
    alpha0 = K.prefix_alpha(S, lat.src, lat.dst, lat.word, w, start, 0)
    tie = count()
    # Entries: (-log mass, is_node, tiebreak, words, parent alpha, last word). A leaf (is_node
    # 0: exactly these words) pops before a node of equal mass; a node's alpha is made from
    # its parent's when it is popped, so only expanded prefixes hold an (S,) array.
    heap = [(-float(beta[0]), 1, next(tie), (), alpha0, 0)]
    out: list[tuple[tuple[int, ...], float]] = []
    expansions = 0
    while heap and len(out) < n:
        neg, is_node, _, words, parent, last = heapq.heappop(heap)
        if not is_node:
            out.append((words, -neg))
            continue
        expansions += 1
        if expansions > max_expansions:
            raise DataError(f"utterance {lat.utt!r}: full-sum search over the lattice needed more "
                            f"than {max_expansions} prefix expansions; raise max_expansions or "
                            "prune the lattice harder")
        alpha = parent if last == 0 else K.prefix_alpha(S, lat.src, lat.dst, lat.word, w,
                                                        parent, last)
        done, child = K.prefix_step(S, lat.src, lat.dst, lat.word, w, fw, beta, alpha, num_words)
        if np.isfinite(done):
            heapq.heappush(heap, (-float(done), 0, next(tie), words, None, 0))
        for word in np.flatnonzero(np.isfinite(child)).tolist():
            heapq.heappush(heap, (-float(child[word]), 1, next(tie), words + (word,), alpha, word))
    if not out:
        raise DataError(f"utterance {lat.utt!r}: the lattice has no complete path")
    return out, expansions
