"""Scoring an acoustic model on a test set with Table 2's measures, and the reference points
next to it.

- :func:`evaluate`: predict every utterance (whole-utterance or windowed attention) and score
  the predictions (:func:`score_predictions`): MCD, F0 RMSE, V/UV accuracy, the F0 spread,
  per-utterance MCD sums (for paired intervals) and the predicted F0 (Fig. 2).
- :func:`phone_mean_baseline`: each test frame predicted as its phone's mean training frame.
- :func:`voiced_std`, :func:`output_conv_width`: the F0 spread of a track, and which output
  stage a SALAD model has.

Shapes: T frames, O output dims (43).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from torch import nn

from speechlab.tts.acoustic import OutputNormalizer, f0_of
from speechlab.tts.features import TtsUtteranceData
from speechlab.tts.task import mcd_sums, predict, score


def voiced_std(f0: np.ndarray) -> float:
    """Standard deviation (Hz) of F0 over voiced frames (F0 > 0); NaN if none is voiced. Over-
    smoothed predictions show as a smaller spread than the recordings' (the paper's Fig. 2)."""
    voiced = f0[f0 > 0]
    return float(np.std(voiced)) if len(voiced) else math.nan


def f0_track(frames: Sequence[np.ndarray], outputs: OutputNormalizer) -> np.ndarray:
    """(sum T,) F0 (Hz, 0 unvoiced) of normalized (T, O) frames, utterance after utterance."""
    return np.concatenate([f0_of(outputs.inverse(y)) for y in frames])


@dataclass
class Evaluation:
    """One model on a test set in one attention mode: the normalized (T, O) ``predictions``,
    Table 2's ``scores`` (``mcd``, ``f0_rmse``, ``vuv``, ``f0_std``), each utterance's summed
    per-frame MCD (``mcd_sums``) and the predicted F0 of every frame (``f0``)."""

    predictions: list[np.ndarray]
    scores: dict[str, float]
    mcd_sums: np.ndarray
    f0: np.ndarray


def score_predictions(utts: Sequence[TtsUtteranceData], preds: list[np.ndarray],
                      outputs: OutputNormalizer) -> Evaluation:
    """Normalized (T, O) predictions of ``utts``, one per utterance, scored against theirs."""
    refs = [u.y for u in utts]
    f0 = f0_track(preds, outputs)
    scores = {**score(refs, preds, outputs).to_dict(), "f0_std": voiced_std(f0)}
    return Evaluation(preds, scores, mcd_sums(refs, preds, outputs), f0)


def evaluate(model: nn.Module, utts: Sequence[TtsUtteranceData], outputs: OutputNormalizer,
             window: int | None = None) -> Evaluation:
    """``model`` on ``utts`` from the zero state; SALAD attends within windows of ``window``
    frames (None: whole utterances)."""
    return score_predictions(utts, predict(model, utts, window=window), outputs)


def phone_mean_baseline(train: Sequence[TtsUtteranceData], test: Sequence[TtsUtteranceData]
                        ) -> list[np.ndarray]:
    """Each test frame predicted as the mean normalized training frame of its phone (the
    central phone of its label; a phone unseen in training gets the global mean)."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for u in train:
        for name in set(u.phones):
            idx = [i for i, p in enumerate(u.phones) if p == name]
            frames = u.y[np.isin(u.frame_phone, idx)]
            sums[name] = sums.get(name, 0) + frames.sum(0)
            counts[name] = counts.get(name, 0) + len(frames)
    overall = np.concatenate([u.y for u in train]).mean(0)
    means = {p: sums[p] / counts[p] for p in sums if counts[p]}
    return [np.stack([means.get(p, overall) for p in u.frame_phones]) for u in test]


def output_conv_width(model: nn.Module) -> int:
    """The kernel width of SALAD's convolutional output stage, 0 for a linear output (or RNN)."""
    out = getattr(model, "output", None)
    return int(out.kernel_size[0]) if isinstance(out, nn.Conv1d) else 0
