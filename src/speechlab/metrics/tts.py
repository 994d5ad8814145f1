"""Objective measures of synthesized speech (SALAD paper, Sec. 4 and Table 2).

- :func:`mcd`: mel-cepstral distortion in dB over frame-aligned mel-cepstra, c0 excluded;
- :func:`f0_rmse`: root mean squared F0 error in Hz over the frames voiced in both;
- :func:`vuv_accuracy`: share of frames whose voiced/unvoiced decision agrees.

F0 arrays are in Hz with 0 on unvoiced frames (WORLD's convention). Shapes: T frames, D
cepstral order + 1.
"""

from __future__ import annotations

import math

import numpy as np

# 10 / ln 10 * sqrt(2): the usual MCD constant (dB per unit of Euclidean cepstral distance).
MCD_CONSTANT = 10.0 * math.sqrt(2.0) / math.log(10.0)


def _same_frames(ref: np.ndarray, hyp: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    ref, hyp = np.asarray(ref, dtype=np.float64), np.asarray(hyp, dtype=np.float64)
    if ref.shape != hyp.shape:
        raise ValueError(f"{what}: reference {ref.shape} and hypothesis {hyp.shape} must have "
                         "the same shape (frame-aligned)")
    return ref, hyp


def mcd_per_frame(ref_mcep: np.ndarray, hyp_mcep: np.ndarray) -> np.ndarray:
    """(T,) MCD in dB of each frame; ``ref_mcep``/``hyp_mcep`` (T, D) with c0 in column 0,
    which is left out (it is the frame's energy, not its spectral shape)."""
    ref, hyp = _same_frames(ref_mcep, hyp_mcep, "mcd")
    if ref.ndim != 2 or ref.shape[1] < 2:
        raise ValueError(f"mcd: expected (T, D) mel-cepstra with D >= 2, got {ref.shape}")
    diff = ref[:, 1:] - hyp[:, 1:]
    return MCD_CONSTANT * np.sqrt((diff * diff).sum(axis=1))


def mcd(ref_mcep: np.ndarray, hyp_mcep: np.ndarray) -> float:
    """Mean per-frame MCD in dB: ``10 sqrt(2) / ln 10 * mean_t ||c_t[1:] - ĉ_t[1:]||``;
    NaN for zero frames."""
    per_frame = mcd_per_frame(ref_mcep, hyp_mcep)
    return float(per_frame.mean()) if len(per_frame) else math.nan


def f0_rmse(ref_f0: np.ndarray, hyp_f0: np.ndarray) -> float:
    """RMSE in Hz over the frames voiced (F0 > 0) in both; NaN when there is none."""
    ref, hyp = _same_frames(ref_f0, hyp_f0, "f0_rmse")
    both = (ref > 0) & (hyp > 0)
    if not both.any():
        return math.nan
    return float(np.sqrt(np.mean((ref[both] - hyp[both]) ** 2)))


def vuv_accuracy(ref_f0: np.ndarray, hyp_f0: np.ndarray) -> float:
    """Share in [0, 1] of frames where both agree on voiced (F0 > 0) vs. unvoiced; NaN for
    zero frames."""
    ref, hyp = _same_frames(ref_f0, hyp_f0, "vuv_accuracy")
    if ref.size == 0:
        return math.nan
    return float(np.mean((ref > 0) == (hyp > 0)))
