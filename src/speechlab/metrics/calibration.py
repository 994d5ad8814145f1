"""How far a recognizer's word confidences can be taken at their word: calibration.

Each recognized word has a confidence c (:attr:`speechlab.contract.Word.confidence`) and is
right or wrong against the reference (aligned by edit distance: right when aligned to the same
word). Sorted into ``bins`` equal-width confidence bins, a calibrated recognizer's words of
confidence about c are right about a fraction c of the time. The expected calibration error is
the words' average gap, ``ECE = sum_b (n_b / N) |accuracy_b - mean confidence_b|``.

Calibration is about the level of the confidences; how well they tell right words from wrong
ones is another figure, the area under the ROC curve (:func:`auroc`: the probability that a
right word has a higher confidence than a wrong one, ties counted half). A map that keeps the
words' order (:class:`speechlab.confidence.ConfidenceMap`) changes the ECE and leaves the AUROC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EPS = "\u0000"


def correct_words(reference: Sequence[str], hypothesis: Sequence[str]) -> list[bool]:
    """For each hypothesis word, whether the edit-distance alignment pairs it with the same
    reference word."""
    import kaldialign

    out = []
    for ref, hyp in kaldialign.align(list(reference), list(hypothesis), EPS):
        if hyp != EPS:
            out.append(hyp == ref)
    return out


@dataclass(frozen=True)
class Calibration:
    """Words per bin, their mean confidence and accuracy per bin, and the summary figures."""

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    confidence: tuple[float, ...]
    accuracy: tuple[float, ...]
    ece: float
    words: int
    mean_confidence: float
    mean_accuracy: float
    auroc: float = float("nan")


def auroc(confidences: Sequence[float], correct: Sequence[bool]) -> float:
    """The probability that a right word's confidence is above a wrong one's (ties count
    half); NaN without both kinds of word."""
    c = np.asarray(confidences, dtype=np.float64)
    y = np.asarray(correct, dtype=bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if not pos or not neg:
        return float("nan")
    order = np.argsort(c, kind="stable")
    ranks = np.empty(len(c))
    sorted_c = c[order]
    i = 0
    while i < len(c):  # the mean rank (1-based) of each run of equal confidences
        j = i
        while j + 1 < len(c) and sorted_c[j + 1] == sorted_c[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def calibration(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10
                ) -> Calibration:
    c = np.clip(np.asarray(confidences, dtype=np.float64), 0.0, 1.0)
    y = np.asarray(correct, dtype=np.float64)
    if len(c) != len(y):
        raise ValueError("one correctness per confidence")
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.minimum(np.digitize(c, edges[1:-1], right=True), bins - 1)
    counts, conf, acc = [], [], []
    ece = 0.0
    for b in range(bins):
        mask = which == b
        n = int(mask.sum())
        counts.append(n)
        conf.append(float(c[mask].mean()) if n else float("nan"))
        acc.append(float(y[mask].mean()) if n else float("nan"))
        if n:
            ece += n / len(c) * abs(acc[-1] - conf[-1])
    return Calibration(tuple(float(e) for e in edges), tuple(counts), tuple(conf), tuple(acc),
                       float(ece), int(len(c)), float(c.mean()) if len(c) else float("nan"),
                       float(y.mean()) if len(y) else float("nan"), auroc(c, y.astype(bool)))
