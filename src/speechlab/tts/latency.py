"""CPU inference time of an acoustic model against the duration it generates (the SALAD
paper's Fig. 3 and Table 3), with a RANSAC line through the measurements.

- :func:`time_inference`: seconds to predict one utterance's frames.
- :func:`long_input`: inputs of any length, made of test utterances one after another.
- :func:`latency_curve`: one model timed on a list of inputs, and the fit (:func:`ransac_fit`).
- :func:`torch_threads`: run a block with a given number of intra-op threads.

Shapes: T frames, L input dims.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from speechlab.tts.features import TtsUtteranceData
from speechlab.tts.labels import FRAME_SECONDS


def time_inference(model: nn.Module, x: np.ndarray, window: int | None = None,
                   repeats: int = 1) -> float:
    """Seconds to predict (T, L) inputs ``x`` as one utterance (the best of ``repeats``)."""
    xt = torch.from_numpy(x)[None]
    lens = torch.tensor([len(x)])
    best = math.inf
    with torch.no_grad():
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(xt, lens, window=window)
            best = min(best, time.perf_counter() - t0)
    return best


def long_input(utts: Sequence[TtsUtteranceData], seconds: float) -> np.ndarray:
    """(T, L) inputs of ``seconds`` of speech: the utterances' frames one after another (from
    the first again until there are enough)."""
    frames = round(seconds / FRAME_SECONDS)
    parts, total = [], 0
    while total < frames:
        for u in utts:
            parts.append(u.x())
            total += u.num_frames
            if total >= frames:
                break
    return np.concatenate(parts)[:frames]


@dataclass
class LatencyCurve:
    """Inference seconds against generated seconds, and the RANSAC line through them."""

    label: str
    seconds: list[float]
    latency: list[float]
    slope: float
    intercept: float

    @property
    def max_latency(self) -> float:
        """The fit at the longest generated duration (Table 3)."""
        return self.slope * max(self.seconds) + self.intercept


def ransac_fit(x: Sequence[float], y: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """Slope and intercept of scikit-learn's RANSAC linear fit (robust to outliers).

    RANSAC needs more points than a line has parameters: with two points the line goes through
    both, with one it goes through the origin (no time for no output)."""
    from sklearn.linear_model import RANSACRegressor

    if len(x) != len(y) or not len(x):
        raise ValueError(f"ransac_fit needs equally many x and y, at least one: {len(x)}, {len(y)}")
    if len(x) == 1:
        return float(y[0]) / float(x[0]), 0.0
    if len(x) == 2:
        slope, intercept = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
        return float(slope), float(intercept)
    X = np.asarray(x, dtype=np.float64)[:, None]
    fit = RANSACRegressor(random_state=seed).fit(X, np.asarray(y, dtype=np.float64))
    return float(fit.estimator_.coef_[0]), float(fit.estimator_.intercept_)


def latency_curve(label: str, model: nn.Module, inputs: Sequence[np.ndarray],
                  window: int | None = None, seed: int = 0) -> LatencyCurve:
    """``model`` timed on each (T, L) input (after one warm-up run), and the RANSAC line of
    inference seconds against generated seconds."""
    time_inference(model, inputs[0], window)  # warm-up
    secs = [len(x) * FRAME_SECONDS for x in inputs]
    lat = [time_inference(model, x, window) for x in inputs]
    slope, intercept = ransac_fit(secs, lat, seed)
    return LatencyCurve(label, secs, lat, slope, intercept)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Torch's intra-op threads set to ``n`` inside the block, restored after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
