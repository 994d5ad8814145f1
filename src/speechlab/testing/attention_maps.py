"""Planted attention maps of the four patterns, for tests of the diagnosis.

Each function returns a (T, T) row-stochastic numpy map (rows: queries) drawn with ``rng``;
``pad`` appends that many padded frames (keys with no attention; padded queries attend to the
valid keys like any other, as in a padded batch).
"""

from __future__ import annotations

import numpy as np


def _rows(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _noise(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.dirichlet(np.ones(n), size=n)


def diagonal(n: int, rng: np.random.Generator, width: float = 1.5, shift: int = 0,
             noise: float = 0.1) -> np.ndarray:
    """Each query attends to keys around ``i + shift`` (Gaussian of ``width`` frames)."""
    i = np.arange(n)
    d = _rows(-((i[None, :] - i[:, None] - shift) ** 2) / (2 * width ** 2))
    return (1 - noise) * d + noise * _noise(n, rng)


def vertical(n: int, rng: np.random.Generator, columns: int = 3, mass: float = 0.8) -> np.ndarray:
    """Every query puts ``mass`` on the same few keys, split by per-query random weights."""
    keys = rng.choice(n, size=columns, replace=False)
    a = (1 - mass) * _noise(n, rng)
    a[:, keys] += mass * rng.dirichlet(np.ones(columns) * 2, size=n)
    return a


def vertical_diagonal(n: int, rng: np.random.Generator, columns: int = 3,
                      diagonal_mass: float = 0.4, vertical_mass: float = 0.45) -> np.ndarray:
    keys = rng.choice(n, size=columns, replace=False)
    a = diagonal_mass * diagonal(n, rng, noise=0.0)
    a[:, keys] += vertical_mass * rng.dirichlet(np.ones(columns) * 2, size=n)
    return a + (1 - diagonal_mass - vertical_mass) * _noise(n, rng)


def heterogeneous(n: int, rng: np.random.Generator, kind: str = "uniform+diagonal") -> np.ndarray:
    """``uniform+diagonal``: a faint diagonal over near-uniform attention (the paper's Block 1);
    ``random``: each query its own random keys; ``segments``: queries attend within their own
    quarter of the utterance."""
    if kind == "uniform+diagonal":
        return 0.25 * diagonal(n, rng, noise=0.0) + 0.75 * np.full((n, n), 1.0 / n)
    if kind == "random":
        return _rows(rng.normal(0, 2.0, size=(n, n)))
    if kind == "segments":
        seg = np.arange(n) * 4 // n
        return _rows(np.where(seg[:, None] == seg[None, :], 0.0, -6.0))
    raise ValueError(f"unknown heterogeneous kind {kind!r}")


def padded(attn: np.ndarray, pad: int) -> np.ndarray:
    """The map of a padded batch: ``pad`` more keys with no attention and ``pad`` more queries
    (attending to the valid keys)."""
    n = attn.shape[0]
    out = np.zeros((n + pad, n + pad))
    out[:n, :n] = attn / attn.sum(1, keepdims=True)
    out[n:, :n] = attn[np.arange(pad) % n] / attn[np.arange(pad) % n].sum(1, keepdims=True)
    return out
