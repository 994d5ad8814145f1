"""The toolkit's one beam-search core: hypotheses, merging by key, pruning.

Model-agnostic on purpose: RNN-T search (``speechlab.asr.rnnt.search``) keys hypotheses by their
label sequence and log-adds the scores of different alignments of the same labels; a CTC prefix
search (``speechlab.search.prefix``) keys them by prefix and merges the blank- and
label-ending sums separately; a WFST Viterbi search would key them by graph state and merge
with max. Nothing here knows about tensors: a hypothesis carries whatever ``state`` its search
needs.

One pruning rule for every search, :func:`select`: the ``k`` best, ties broken by position
(insertion order), optionally only those within a threshold of the best. :class:`Beam` uses it
on its hypotheses; a search that keeps its scores in arrays (the CTC prefix search updates
every hypothesis of a frame in one numpy operation) calls it on the array directly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np


def log_add(a: float, b: float) -> float:
    """``log(exp(a) + exp(b))`` without overflow; ``-inf`` is the additive identity."""
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    hi, lo = (a, b) if a >= b else (b, a)
    return hi + math.log1p(math.exp(lo - hi))


@dataclass(frozen=True)
class Hypothesis:
    """One partial result of a search.

    ``tokens`` are the labels emitted so far, ``score`` the log probability (or any
    larger-is-better log score), ``state`` whatever the model needs to extend it (decoder state,
    cached outputs, graph state). ``key`` decides which hypotheses are "the same" and get merged;
    by default the label sequence. ``times`` is, for searches that track it, the frame each
    token was emitted on (the alignment that word times come from); merging keeps the more
    probable path's.
    """

    tokens: tuple[int, ...]
    score: float
    state: Any = None
    key: Hashable | None = None
    times: tuple[int, ...] = ()

    @property
    def merge_key(self) -> Hashable:
        return self.tokens if self.key is None else self.key

    def extend(self, token: int, log_prob: float, state: Any = None,
               time: int | None = None) -> Hypothesis:
        """A new hypothesis with ``token`` appended (emitted on frame ``time``, if the search
        tracks it); its key is reset to the default."""
        times = self.times if time is None else self.times + (time,)
        return Hypothesis(self.tokens + (token,), self.score + log_prob, state, times=times)

    def rescore(self, log_prob: float) -> Hypothesis:
        """The same hypothesis with ``log_prob`` added (e.g. an RNN-T blank or a CTC repeat)."""
        return dataclasses.replace(self, score=self.score + log_prob)


Merge = Callable[[Hypothesis, Hypothesis], Hypothesis]


def select(scores: Sequence[float] | np.ndarray, k: int,
           threshold: float | None = None) -> np.ndarray:
    """Indices of the ``k`` best scores, best first, ties by position; with ``threshold``
    only those within it (log units) of the best. scores (N,) -> (<= k,) int64.

    Compiled searches call :func:`select_kernel`, the same rule as a numba function."""
    if k < 1:
        raise ValueError(f"beam width must be >= 1, got {k}")
    x = np.ascontiguousarray(scores, dtype=np.float64)
    return select_kernel(x, k, math.inf if threshold is None else float(threshold))


@numba.njit(cache=True, nogil=True)
def select_kernel(scores: np.ndarray, k: int, threshold: float) -> np.ndarray:
    """:func:`select` for numba code: scores (N,) float64, ``threshold`` inf for none."""
    if scores.shape[0] == 0:
        return np.zeros(0, np.int64)
    order = np.argsort(-scores, kind="mergesort")[:k]  # mergesort: stable, ties by position
    if threshold == math.inf:
        return order
    floor = scores[order[0]] - threshold
    n = 0
    while n < order.shape[0] and scores[order[n]] >= floor:
        n += 1
    return order[:n]


def merge_logadd(old: Hypothesis, new: Hypothesis) -> Hypothesis:
    """Sum the probabilities of two paths to the same key (e.g. two alignments of one label
    sequence); keep the state of the more probable one."""
    best = new if new.score > old.score else old
    return dataclasses.replace(best, score=log_add(old.score, new.score))


def merge_max(old: Hypothesis, new: Hypothesis) -> Hypothesis:
    """Viterbi recombination: keep the better path only."""
    return new if new.score > old.score else old


MERGES: dict[str, Merge] = {"logadd": merge_logadd, "max": merge_max}


class Beam:
    """A set of hypotheses with at most one per merge key.

    Adding a hypothesis whose key is present merges the two with ``merge``. Iteration order is
    insertion order, and every sort below breaks score ties by that order, so a search driven by
    a Beam is deterministic.
    """

    def __init__(self, hyps: Iterable[Hypothesis] = (), merge: Merge = merge_logadd) -> None:
        self.merge = merge
        self._hyps: dict[Hashable, Hypothesis] = {}
        for h in hyps:
            self.add(h)

    def add(self, hyp: Hypothesis) -> None:
        key = hyp.merge_key
        old = self._hyps.get(key)
        self._hyps[key] = hyp if old is None else self.merge(old, hyp)

    def __len__(self) -> int:
        return len(self._hyps)

    def __iter__(self) -> Iterator[Hypothesis]:
        return iter(list(self._hyps.values()))

    def __contains__(self, key: Hashable) -> bool:
        return key in self._hyps

    def get(self, key: Hashable) -> Hypothesis | None:
        return self._hyps.get(key)

    def empty_like(self) -> Beam:
        return Beam(merge=self.merge)

    def sorted(self) -> list[Hypothesis]:
        """Hypotheses best first (ties: insertion order)."""
        return sorted(self._hyps.values(), key=lambda h: -h.score)

    def best(self) -> Hypothesis:
        if not self._hyps:
            raise ValueError("best() of an empty beam")
        return max(self._hyps.values(), key=lambda h: h.score)  # first of equals wins

    def topk(self, k: int) -> Beam:
        """The ``k`` best hypotheses as a new Beam (same merge rule): all of them, in
        insertion order, if there are at most ``k``; else best first (:func:`select`)."""
        if k < 1:
            raise ValueError(f"beam width must be >= 1, got {k}")
        hyps = list(self._hyps.values())
        if len(hyps) <= k:
            return Beam(hyps, merge=self.merge)
        return Beam((hyps[i] for i in select([h.score for h in hyps], k)), merge=self.merge)

    def prune(self, threshold: float) -> Beam:
        """Keep hypotheses within ``threshold`` (log units) of the best, in insertion order."""
        if not self._hyps:
            return self.empty_like()
        floor = self.best().score - threshold
        return Beam((h for h in self._hyps.values() if h.score >= floor), merge=self.merge)


def topk_together(beams: Sequence[Beam], k: int) -> list[Beam]:
    """Keep the ``k`` best hypotheses across several beams, each staying in its own beam.

    For searches that hold hypotheses in different phases at once (RNN-T: those that have
    consumed the current frame and those still emitting on it) but give them one budget.
    Ties go to the earlier beam, then to insertion order.
    """
    if k < 1:
        raise ValueError(f"beam width must be >= 1, got {k}")
    tagged = [(-h.score, i, j, h) for i, b in enumerate(beams) for j, h in enumerate(b)]
    tagged.sort(key=lambda x: x[:3])
    out = [b.empty_like() for b in beams]
    for _neg, i, _j, h in tagged[:k]:
        out[i].add(h)
    return out
