"""The acoustic side (Sec. 3.2): a waveform <-> 43 acoustic dims per 5 ms frame, with WORLD.

The paper vocodes with Ahocoder; WORLD (pyworld) plays its part here, with pysptk for the
mel-cepstrum. Per frame (:data:`DIMS` = 43):

- 40 mel-cepstral coefficients c0..c39 of WORLD's spectral envelope (all-pass constant 0.42);
- log-F0, linearly interpolated through unvoiced frames (held flat before the first and after
  the last voiced frame);
- one aperiodicity dim: WORLD's band aperiodicity, which at 16 kHz is a single band (0-3 kHz
  and up coded as one value), standing for Ahocoder's voicing frequency;
- the voiced/unvoiced flag (1 voiced).

An utterance with no voiced frame at all (whispered, noise, a wrong file) has no F0 to
interpolate: its log-F0 is set to :data:`UNVOICED_LOG_F0` throughout and its U/V flag to 0, so
it never yields NaN and synthesizes as unvoiced. :class:`OutputNormalizer` maps every dim to
[0, 1] with the training minimum and maximum.

Shapes: T frames.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from speechlab.errors import DataError

SAMPLE_RATE = 16000
FRAME_PERIOD_MS = 5.0
MCEP_ORDER = 39  # 40 coefficients with c0
ALPHA = 0.42
DIMS = 43
MCEP = slice(0, 40)
LF0, BAP, VUV = 40, 41, 42
# log(100 Hz): the log-F0 of an utterance without any voiced frame (flag 0 everywhere).
UNVOICED_LOG_F0 = math.log(100.0)


def _quiet_import(name: str):
    """The module ``name`` (pysptk, pyworld), imported without the deprecation notice of their
    ``pkg_resources`` import (the project pins setuptools<81 for them; the notice asks nothing
    of a speechlab user)."""
    import importlib

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated",
                                category=UserWarning)
        return importlib.import_module(name)


def interpolate_log_f0(f0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T,) F0 in Hz (0 unvoiced) -> (log-F0 interpolated through unvoiced frames, U/V flag)."""
    voiced = f0 > 0
    if not voiced.any():
        return np.full(len(f0), UNVOICED_LOG_F0), np.zeros(len(f0))
    idx = np.nonzero(voiced)[0]
    lf0 = np.interp(np.arange(len(f0)), idx, np.log(f0[idx]))
    return lf0, voiced.astype(np.float64)


@functools.lru_cache(maxsize=4)
def _warping(fft_size: int) -> np.ndarray:
    """(fft_size, 40) matrix of pysptk's ``freqt``: the all-pass frequency warping of a
    cepstrum is linear, so warping every frame is one matrix product."""
    pysptk = _quiet_import("pysptk")
    eye = np.eye(fft_size)
    return np.stack([pysptk.freqt(eye[k], MCEP_ORDER, ALPHA) for k in range(fft_size)])


def spectrum_to_mcep(sp: np.ndarray) -> np.ndarray:
    """(T, fft/2+1) power spectra -> (T, 40) mel-cepstra; the same numbers as
    ``pysptk.sp2mc(sp, 39, 0.42)`` (log spectrum -> cepstrum -> warping), 10x faster."""
    c = np.fft.irfft(np.log(sp))
    c[:, 0] /= 2.0
    return c @ _warping(c.shape[1])


def analyse(wav: np.ndarray, sample_rate: int = SAMPLE_RATE,
            num_frames: int | None = None) -> np.ndarray:
    """(samples,) float waveform -> (T, 43) float32 acoustic frames; with ``num_frames`` the
    result is cut or edge-padded to that many frames (the labels' count)."""
    pyworld = _quiet_import("pyworld")
    if sample_rate != SAMPLE_RATE:
        raise DataError(f"WORLD analysis here runs at {SAMPLE_RATE} Hz, got {sample_rate} Hz; "
                        "resample the audio")
    x = np.ascontiguousarray(wav, dtype=np.float64)
    f0, t = pyworld.dio(x, sample_rate, frame_period=FRAME_PERIOD_MS)
    f0 = pyworld.stonemask(x, f0, t, sample_rate)
    sp = pyworld.cheaptrick(x, f0, t, sample_rate)
    ap = pyworld.d4c(x, f0, t, sample_rate)
    mcep = spectrum_to_mcep(sp)
    bap = pyworld.code_aperiodicity(ap, sample_rate)[:, :1]
    lf0, vuv = interpolate_log_f0(f0)
    y = np.concatenate([mcep, lf0[:, None], bap, vuv[:, None]], axis=1).astype(np.float32)
    if num_frames is not None:
        y = y[:num_frames] if len(y) >= num_frames else np.pad(
            y, ((0, num_frames - len(y)), (0, 0)), mode="edge")
    return y


def f0_of(frames: np.ndarray) -> np.ndarray:
    """(T,) F0 in Hz of (T, 43) acoustic frames: exp(log-F0) where the U/V flag is > 0.5."""
    return np.where(frames[:, VUV] > 0.5, np.exp(frames[:, LF0]), 0.0)


def synthesize(frames: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """(T, 43) acoustic frames -> float32 waveform in [-1, 1] (WORLD)."""
    pyworld, pysptk = _quiet_import("pyworld"), _quiet_import("pysptk")

    frames = np.asarray(frames, dtype=np.float64)
    fft_size = pyworld.get_cheaptrick_fft_size(sample_rate)
    sp = pysptk.mc2sp(np.ascontiguousarray(frames[:, MCEP]), alpha=ALPHA, fftlen=fft_size)
    # A predicted aperiodicity above 0 dB means nothing; keep it in WORLD's range.
    bap = np.ascontiguousarray(np.minimum(frames[:, BAP:BAP + 1], 0.0))
    ap = pyworld.decode_aperiodicity(bap, sample_rate, fft_size)
    wav = pyworld.synthesize(np.ascontiguousarray(f0_of(frames)), sp, ap, sample_rate,
                             FRAME_PERIOD_MS)
    return np.clip(wav, -1.0, 1.0).astype(np.float32)


@dataclass(frozen=True)
class OutputNormalizer:
    """Min-max normalization of every acoustic dim to [0, 1] over the training frames."""

    minimum: np.ndarray
    maximum: np.ndarray

    @classmethod
    def fit(cls, frames: list[np.ndarray]) -> OutputNormalizer:
        y = np.concatenate(frames)
        return cls(y.min(axis=0).astype(np.float64), y.max(axis=0).astype(np.float64))

    @property
    def scale(self) -> np.ndarray:
        span = self.maximum - self.minimum
        return np.where(span > 1e-8, span, 1.0)

    def __call__(self, y: np.ndarray) -> np.ndarray:
        return ((y - self.minimum) / self.scale).astype(np.float32)

    def inverse(self, z: np.ndarray) -> np.ndarray:
        return (np.asarray(z, dtype=np.float64) * self.scale + self.minimum).astype(np.float32)

    def to_dict(self) -> dict:
        return {"minimum": self.minimum.tolist(), "maximum": self.maximum.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> OutputNormalizer:
        return cls(np.asarray(d["minimum"]), np.asarray(d["maximum"]))
