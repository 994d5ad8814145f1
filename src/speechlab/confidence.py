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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from speechlab.errors import DataError

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


def label_confidence(log_probs: Sequence[float]) -> float:
    """A word's confidence from its labels' log probabilities where each was emitted (a
    transducer's best path): their geometric mean, in [0, 1]; 1 for a word of no label."""
    if not len(log_probs):
        return 1.0
    return min(1.0, math.exp(sum(log_probs) / len(log_probs)))


def frame_confidence(probs: np.ndarray) -> float:
    """A word's confidence from its frames' probabilities of the labels emitted there (CTC
    greedy decoding): their geometric mean."""
    if len(probs) == 0:
        return 0.0
    return round(float(math.exp(np.mean(np.log(np.clip(probs, 1e-12, 1.0))))), 4)


# ---------------------------------------------------------------------------------------------
# Calibration: a map from a recognizer's own confidence to the probability that the word is
# right, fitted on a dev set (``speechlab calibrate PKG --cuts DEV --fit``) and kept in the
# package's card.

#: Confidences are clipped into [CLIP, 1 - CLIP] before their logit is taken.
CLIP = 1e-6
MAP_METHODS = ("platt",)
#: The least slope :func:`fit_platt` gives: a map never makes words of different confidence
#: equally probable, so that their order (what AUROC measures) survives a small dev set.
MIN_SLOPE = 1e-3
#: The ridge on (a, b) in :func:`fit_platt`: too faint to move a fit the words determine,
#: enough to keep one they do not (every confidence the same) finite.
RIDGE = 1e-6


def _logit(c: np.ndarray) -> np.ndarray:
    c = np.clip(c, CLIP, 1.0 - CLIP)
    return np.log(c) - np.log1p(-c)


@dataclass(frozen=True)
class ConfidenceMap:
    """Platt scaling: a word of raw confidence c is right with probability
    ``sigmoid(a * logit(c) + b)`` (c clipped into [:data:`CLIP`, 1 - CLIP]), with ``a >= 0``
    so that the map keeps the words' order. ``fitted_on`` says on what (words, the cuts' file,
    the ECE before and after on them); it changes nothing."""

    a: float
    b: float
    fitted_on: dict[str, Any] = field(default_factory=dict)
    method: str = "platt"

    def __call__(self, confidence: float) -> float:
        z = float(_logit(np.asarray(confidence, dtype=np.float64)))
        return 0.5 * (1.0 + math.tanh(0.5 * (self.a * z + self.b)))  # the sigmoid, no overflow

    def apply(self, confidences: Sequence[float | None]) -> list[float | None]:
        return [None if c is None else self(c) for c in confidences]

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "a": self.a, "b": self.b, "fitted_on": self.fitted_on}

    @classmethod
    def from_json(cls, d: Any, source: object) -> ConfidenceMap:
        if not isinstance(d, dict) or d.get("method") not in MAP_METHODS:
            raise DataError(f"{source}: the confidence map must be an object with \"method\" "
                            f"one of {list(MAP_METHODS)}")
        try:
            a, b = float(d["a"]), float(d["b"])
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{source}: the confidence map needs numbers \"a\" and \"b\"") from None
        if not (math.isfinite(a) and math.isfinite(b)) or a < 0:
            raise DataError(f"{source}: the confidence map's a ({a}) must be finite and >= 0, "
                            f"its b ({b}) finite")
        fitted = d.get("fitted_on") or {}
        if not isinstance(fitted, dict):
            raise DataError(f"{source}: the confidence map's \"fitted_on\" must be an object")
        return cls(a, b, fitted)


def fit_platt(confidences: Sequence[float], correct: Sequence[bool], *, iterations: int = 100
              ) -> ConfidenceMap:
    """The :class:`ConfidenceMap` that maximises the likelihood of ``correct`` given
    ``confidences`` (Newton's method), with Platt's targets ((N+ + 1) / (N+ + 2) for a right
    word, 1 / (N- + 2) for a wrong one), which keep the fit finite when every word is right (or
    wrong) or a confidence separates them perfectly. A fit with a below :data:`MIN_SLOPE`
    (confidence against correctness on these words, or unrelated) keeps that least slope and
    fits b alone: every word about the same probability, their order kept."""
    z = _logit(np.asarray(confidences, dtype=np.float64))
    y = np.asarray(correct, dtype=bool)
    if len(z) != len(y):
        raise ValueError("one correctness per confidence")
    if not len(z):
        raise ValueError("no words to fit a confidence map on")
    pos, neg = int(y.sum()), int((~y).sum())
    t = np.where(y, (pos + 1) / (pos + 2), 1 / (neg + 2))

    def loss(w: np.ndarray, x: np.ndarray, offset: np.ndarray) -> float:
        s = x @ w + offset  # -log-likelihood of the targets, stable for any s; a faint ridge
        return float(np.sum(np.logaddexp(0, s) - t * s) + 0.5 * RIDGE * w @ w)

    def fit(x: np.ndarray, offset: np.ndarray) -> np.ndarray:
        # Newton's method, each step halved until the loss does not grow: confidences that
        # hardly vary (a lattice giving every word the same) make the Hessian near singular,
        # and a full step there overshoots without end.
        w = np.zeros(x.shape[1])
        w[-1] = math.log((pos + 1) / (neg + 1))
        current = loss(w, x, offset)
        for _ in range(iterations):
            p = 0.5 * (1 + np.tanh(0.5 * (x @ w + offset)))
            grad = x.T @ (p - t) + RIDGE * w
            hess = (x * (p * (1 - p))[:, None]).T @ x + RIDGE * np.eye(x.shape[1])
            step = np.linalg.solve(hess, grad)
            for _ in range(60):
                trial = loss(w - step, x, offset)
                if trial <= current:
                    break
                step = step / 2
            else:
                break
            w, current = w - step, trial
            if float(np.abs(step).max()) < 1e-10:
                break
        return w

    a, b = fit(np.stack([z, np.ones_like(z)], axis=1), np.zeros_like(z))
    if a < MIN_SLOPE:
        a, (b,) = MIN_SLOPE, fit(np.ones((len(z), 1)), MIN_SLOPE * z)
    return ConfidenceMap(float(a), float(b))
