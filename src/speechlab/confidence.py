"""Confidence and alternatives from a recognizer's competing hypotheses.

Every family ends its search with several hypotheses and a score for each: the beam of a
transducer (log probabilities), the best paths of a CTC lattice (their share of its summed
path weight). :func:`alternatives` turns them into an n-best list of distinct texts with
posterior probabilities (hypotheses that spell the same text are one alternative); a word of
the best text is as probable as the alternatives that agree with it there
(:func:`word_confidences`: each alternative aligned word by word to the best, by edit
distance, so an insertion elsewhere does not shift the comparison).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

EPS = "\u0000"  # the alignment's gap: no word is this


def alternatives(texts: Sequence[str], scores: Sequence[float], *, log: bool = True
                 ) -> list[tuple[str, float]]:
    """Distinct texts with their posterior probabilities, most probable first. ``scores``:
    log probabilities (``log=True``, normalised here over the hypotheses given) or shares that
    already sum to at most 1."""
    if not texts:
        return []
    s = np.asarray(scores, dtype=np.float64)
    if log:
        finite = np.isfinite(s)
        if not finite.any():
            p = np.full(len(s), 1 / len(s))
        else:
            top = s[finite].max()
            p = np.where(finite, np.exp(np.where(finite, s - top, -np.inf)), 0.0)
            p /= p.sum()
    else:
        p = np.clip(s, 0.0, 1.0)
    merged: dict[str, float] = {}
    for text, q in zip(texts, p):
        merged[text] = merged.get(text, 0.0) + float(q)
    return sorted(merged.items(), key=lambda kv: -kv[1])


def word_confidences(best: Sequence[str], alts: Sequence[tuple[str, float]]) -> list[float]:
    """For each word of ``best``, the summed probability of the alternatives that have the
    same word aligned to it, over the probability of all of them (module doc: an n-best
    approximation of the word's posterior); each in [0, 1]."""
    import kaldialign

    conf = [0.0] * len(best)
    if not best:
        return conf
    total = sum(p for _, p in alts)
    for text, p in alts:
        words = text.split()
        i = 0
        for ref, hyp in kaldialign.align(list(best), words, EPS):
            if ref == EPS:
                continue
            if hyp == ref:
                conf[i] += p
            i += 1
    scale = 1.0 / total if total > 0 else 1.0  # over the alternatives given
    return [min(1.0, round(c * scale, 4)) for c in conf]


def frame_confidence(probs: np.ndarray) -> float:
    """A word's confidence from its frames' probabilities of the labels emitted there (CTC
    greedy decoding): their geometric mean."""
    if len(probs) == 0:
        return 0.0
    return round(float(math.exp(np.mean(np.log(np.clip(probs, 1e-12, 1.0))))), 4)
