"""An HTS voice file (``.htsvoice``, format 1.0) rewritten to speak at 16 kHz.

festival's SLT voice (``festvox-us-slt-hts``) models speech at 32 kHz: 45 mel-cepstral
coefficients per 5 ms frame at all-pass constant 0.45, which festival's HTS engine turns into
samples with an MLSA filter at 32 kHz. The corpus wants 16 kHz, so half of that work was thrown
away by the resampler, and the voice was the slowest of the corpus's voices. festival reads the
sampling rate, the frame period and the all-pass constant from the voice file (its
``hts_engine_params`` take only the file), so the way to a faster voice is a file that models
the same speech at 16 kHz:

- **Spectra.** A mel-cepstrum ``c`` (all-pass constant ``alpha``, rate ``fs``) describes the log
  amplitude ``sum_m c[m] cos(m theta(w))`` with ``theta`` the all-pass warp of the frequency
  ``w``. The 0-8 kHz part of the 32 kHz description is a linear function of ``c``, and so is a
  16 kHz description (25 coefficients at 0.42). One matrix ``A`` (25 x 45), fitted by least
  squares over a grid of 0-8 kHz frequencies, maps one to the other; every Gaussian of the
  mel-cepstral stream (static, delta and delta-delta windows: the windows are linear too) gets
  mean ``A m`` and variance ``diag(A diag(v) A^T)``.
- **Level.** The engine excites its filter with unit power per sample (pulses or noise). At half
  the rate that is twice the power in each hertz of the band, so the gain coefficient (``c[0]``,
  the log amplitude) loses ``log(2) / 2``.
- **Global variance** (the variance of each coefficient over an utterance, which the engine
  restores after generating parameters). The variance of ``(A c)[n]`` needs the coefficients'
  covariance, which the file does not keep; their correlation is taken from the state means of
  the mel-cepstral stream, their variances from the file's GV means.
- The frame period stays 5 ms (80 samples), so durations, F0 and the state sequence are the
  voice's own: the two files speak every sentence in the same number of samples per second.

What is not converted: the F0 and duration streams are copied as they are; only a
mel-cepstral stream with gamma 0 (``OPTION[MCP]:ALPHA=...``) is understood.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speechlab.errors import DataError
from speechlab.files import atomic_path, cache_dir, file_lock

# Bump when the conversion changes: the cache keeps a converted file under this version.
CONVERSION_VERSION = 1
TARGET_RATE = 16000
TARGET_ORDER = 25  # coefficients (c[0]..c[24])
TARGET_ALPHA = 0.42  # the all-pass constant that approximates the mel scale at 16 kHz
_FREQUENCIES = 2000  # the least-squares grid over 0..fs/2 of the target


@dataclass
class HtsVoice:
    """An HTS voice file: its header lines (``[GLOBAL]`` to ``[POSITION]``) and its data."""

    header: str
    data: bytes

    def field(self, key: str) -> str:
        m = re.search(rf"^{re.escape(key)}:(.*)$", self.header, re.M)
        if m is None:
            raise DataError(f"HTS voice file has no {key}")
        return m.group(1).strip()

    def blocks(self, key: str) -> list[bytes]:
        """The data of ``[POSITION]``'s ``key`` (a window stream has one block per window)."""
        out = []
        for span in self.field(key).split(","):
            a, b = (int(v) for v in span.split("-"))
            out.append(self.data[a:b + 1])
        return out


def read_htsvoice(path: str | Path) -> HtsVoice:
    return read_htsvoice_bytes(Path(path).read_bytes(), str(path))


def read_htsvoice_bytes(raw: bytes, name: str = "voice") -> HtsVoice:
    marker = b"[DATA]\n"
    i = raw.find(marker)
    if not raw.startswith(b"[GLOBAL]") or i < 0:
        raise DataError(f"{name}: not an HTS voice file (format 1.0)")
    return HtsVoice(raw[:i + len(marker)].decode("ascii"), raw[i + len(marker):])


def _warp(w: np.ndarray, alpha: float) -> np.ndarray:
    """The frequency ``w`` (radians per sample) through the first-order all-pass warp."""
    return w + 2 * np.arctan(alpha * np.sin(w) / (1 - alpha * np.cos(w)))


def cepstral_map(rate: int, order: int, alpha: float, target_rate: int = TARGET_RATE,
                 target_order: int = TARGET_ORDER, target_alpha: float = TARGET_ALPHA
                 ) -> np.ndarray:
    """(target_order, order): mel-cepstra at (``rate``, ``alpha``) to mel-cepstra at
    (``target_rate``, ``target_alpha``) describing the same log amplitude over 0 to
    ``target_rate / 2`` Hz, by least squares."""
    f = np.linspace(0.0, target_rate / 2, _FREQUENCIES, endpoint=False)
    src = np.cos(np.outer(_warp(2 * np.pi * f / rate, alpha), np.arange(order)))
    dst = np.cos(np.outer(_warp(2 * np.pi * f / target_rate, target_alpha),
                          np.arange(target_order)))
    # rounded, so that linear algebra libraries that differ in the last bits give one file
    return np.round(np.linalg.lstsq(dst, src, rcond=None)[0], 9)


def _pdfs(block: bytes, trees: int, windows: int, order: int) -> tuple[np.ndarray, np.ndarray]:
    """A non-MSD stream's PDF block: its per-tree counts and its (pdfs, 2, windows, order)
    means and variances."""
    counts = np.frombuffer(block[:4 * trees], "<i4")
    values = np.frombuffer(block[4 * trees:], "<f4")
    if values.size != int(counts.sum()) * 2 * windows * order:
        raise DataError("HTS voice file: the mel-cepstral PDFs are not the size the header says")
    return counts, values.reshape(-1, 2, windows, order).astype(np.float64)


def convert(voice: HtsVoice) -> bytes:
    """``voice`` as a 16 kHz voice file (module docstring)."""
    rate = int(voice.field("SAMPLING_FREQUENCY"))
    period = int(voice.field("FRAME_PERIOD"))
    if rate <= TARGET_RATE or (period * TARGET_RATE) % rate:
        raise DataError(f"HTS voice at {rate} Hz, frame period {period}: only a voice above "
                        f"{TARGET_RATE} Hz whose frame period divides is converted")
    option = voice.field("OPTION[MCP]")
    m = re.fullmatch(r"ALPHA=([0-9.]+)", option)
    if m is None:
        raise DataError(f"HTS voice's mel-cepstral stream has options {option!r}; only "
                        "ALPHA=... (gamma 0) is converted")
    alpha, order = float(m.group(1)), int(voice.field("VECTOR_LENGTH[MCP]"))
    trees, windows = int(voice.field("NUM_STATES")), int(voice.field("NUM_WINDOWS[MCP]"))
    if voice.field("IS_MSD[MCP]") != "0":
        raise DataError("HTS voice's mel-cepstral stream is multi-space: not converted")
    a = cepstral_map(rate, order, alpha)

    counts, pdfs = _pdfs(voice.blocks("STREAM_PDF[MCP]")[0], trees, windows, order)
    mean = np.einsum("nk,pwk->pwn", a, pdfs[:, 0])
    var = np.einsum("nk,pwk->pwn", a ** 2, pdfs[:, 1])
    mean[:, 0, 0] -= 0.5 * np.log(rate / TARGET_RATE)
    new = {"STREAM_PDF[MCP]": [counts.astype("<i4").tobytes()
                               + np.stack([mean, var], 1).astype("<f4").tobytes()]}

    if voice.field("USE_GV[MCP]") == "1":
        gv_block = voice.blocks("GV_PDF[MCP]")[0]
        gv_counts = np.frombuffer(gv_block[:4], "<i4")
        gv = np.frombuffer(gv_block[4:], "<f4").reshape(-1, 2, order).astype(np.float64)
        statics = pdfs[:, 0, 0]
        sd = statics.std(0)
        corr = np.round(np.corrcoef(statics.T), 9) if (sd > 0).all() else np.eye(order)
        gv_mean, gv_var = [], []
        for mu, v in zip(gv[:, 0], gv[:, 1]):
            cov = np.sqrt(np.outer(mu, mu)) * corr
            m16 = np.einsum("nk,kl,nl->n", a, cov, a)
            # the GV's spread, relative to its mean, as the independent-coefficient map gives it
            scale = m16 / ((a ** 2) @ mu)
            gv_mean.append(m16)
            gv_var.append(((a ** 4) @ v) * scale ** 2)
        new["GV_PDF[MCP]"] = [gv_counts.astype("<i4").tobytes() + np.stack(
            [np.array(gv_mean), np.array(gv_var)], 1).astype("<f4").tobytes()]

    keys = re.findall(r"^(\S+):\d+-\d+(?:,\d+-\d+)*$",
                      voice.header.split("[POSITION]")[1], re.M)
    data, header = b"", voice.header
    for key in keys:
        spans = []
        for block in new.get(key) or voice.blocks(key):
            spans.append(f"{len(data)}-{len(data) + len(block) - 1}")
            data += block
        header = re.sub(rf"^{re.escape(key)}:.*$", f"{key}:{','.join(spans)}", header,
                        flags=re.M)
    for key, value in (("SAMPLING_FREQUENCY", TARGET_RATE),
                       ("FRAME_PERIOD", period * TARGET_RATE // rate),
                       ("VECTOR_LENGTH[MCP]", TARGET_ORDER),
                       ("OPTION[MCP]", f"ALPHA={TARGET_ALPHA}")):
        header = re.sub(rf"^{re.escape(key)}:.*$", f"{key}:{value}", header, flags=re.M)
    return header.encode("ascii") + data


def converted_voice(path: str | Path) -> Path:
    """The 16 kHz version of the voice file ``path``, made once per user
    (``cache_dir("festival")``, keyed by the file's bytes and :data:`CONVERSION_VERSION`)."""
    raw = Path(path).read_bytes()
    digest = hashlib.sha256(raw).hexdigest()[:16]
    out = cache_dir("festival") / f"{Path(path).stem}-16k-v{CONVERSION_VERSION}-{digest}.htsvoice"
    if out.exists():
        return out
    with file_lock(out.with_suffix(".lock")):
        if not out.exists():
            body = convert(read_htsvoice(path))
            with atomic_path(out) as tmp:
                tmp.write_bytes(body)
    return out
