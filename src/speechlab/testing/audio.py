"""Tiny audio for tests: espeak-ng speech and numpy tones as 16 kHz mono lhotse cuts.

Shipped in the package (like ``lhotse.testing``) so every area's tests can make their own
audio without depending on the corpus builder or on any download.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
from pathlib import Path

import numpy as np

from speechlab.errors import DataError, MissingToolError
from speechlab.files import atomic_path

# espeak-ng voice per language code of the multilingual corpus.
ESPEAK_VOICES: dict[str, str] = {"en": "en-us", "hi": "hi", "ta": "ta", "gu": "gu"}


def have_espeak() -> bool:
    return shutil.which("espeak-ng") is not None


def _write_wav(path: Path, samples: np.ndarray, sampling_rate: int) -> None:
    import soundfile as sf

    with atomic_path(path) as tmp:
        sf.write(str(tmp), samples, sampling_rate, subtype="PCM_16", format="WAV")


def _cut_for(path: Path, text: str | None, language: str | None, cut_id: str | None):
    from lhotse import Recording, SupervisionSegment
    from lhotse.cut import MonoCut

    cut_id = cut_id or path.stem
    rec = Recording.from_file(path, recording_id=cut_id)
    sups = []
    if text is not None:
        sups.append(SupervisionSegment(id=cut_id, recording_id=cut_id, start=0.0,
                                       duration=rec.duration, channel=0, text=text,
                                       language=language))
    return MonoCut(id=cut_id, start=0.0, duration=rec.duration, channel=0, recording=rec,
                   supervisions=sups)


def tone_samples(duration: float = 1.0, freq: float = 440.0, sampling_rate: int = 16000,
                 amplitude: float = 0.3, seed: int = 0, noise: float = 0.01) -> np.ndarray:
    """A sine of ``freq`` Hz plus a little seeded white noise (so no filter bank bin is silent)."""
    n = int(round(duration * sampling_rate))
    t = np.arange(n) / sampling_rate
    rng = np.random.default_rng(seed)
    x = amplitude * np.sin(2 * np.pi * freq * t) + noise * rng.standard_normal(n)
    return x.astype(np.float32)


def tone_cut(path: str | Path, duration: float = 1.0, freq: float = 440.0,
             sampling_rate: int = 16000, text: str | None = None, language: str | None = None,
             cut_id: str | None = None, seed: int = 0):
    """Write a tone wav to ``path`` and return it as a ``MonoCut`` (with a supervision if
    ``text`` is given)."""
    path = Path(path)
    _write_wav(path, tone_samples(duration, freq, sampling_rate, seed=seed), sampling_rate)
    return _cut_for(path, text, language, cut_id)


def synth_samples(text: str, language: str, sampling_rate: int = 16000) -> np.ndarray:
    """espeak-ng speech for ``text`` in ``language``, resampled to ``sampling_rate``."""
    import soundfile as sf
    from scipy.signal import resample_poly

    exe = shutil.which("espeak-ng")
    if exe is None:
        raise MissingToolError("espeak-ng is not installed; run: apt-get install espeak-ng")
    voice = ESPEAK_VOICES.get(language, language)
    proc = subprocess.run([exe, "-v", voice, "--stdout", text], capture_output=True)
    if proc.returncode != 0 or not proc.stdout:
        raise DataError(f"espeak-ng could not speak {text!r} with voice {voice!r}: "
                        f"{proc.stderr.decode(errors='replace').strip()}")
    x, sr = sf.read(io.BytesIO(proc.stdout), dtype="float32")
    if x.ndim > 1:
        x = x.mean(axis=1)
    if sr != sampling_rate:
        g = np.gcd(sr, sampling_rate)
        x = resample_poly(x, sampling_rate // g, sr // g).astype(np.float32)
    return np.clip(x, -1.0, 1.0)


def synth_cut(text: str, language: str, path: str | Path, cut_id: str | None = None,
              sampling_rate: int = 16000):
    """Speak ``text`` with espeak-ng into a 16 kHz mono wav at ``path``; return a ``MonoCut``
    whose supervision carries ``text`` and ``language``."""
    path = Path(path)
    _write_wav(path, synth_samples(text, language, sampling_rate), sampling_rate)
    if cut_id is None:
        cut_id = f"{language}-{hashlib.md5(text.encode()).hexdigest()[:8]}"
    return _cut_for(path, text, language, cut_id)


def nonfinite_wav(path: str | Path, duration: float = 1.0, value: float = float("nan"),
                  at: float = 0.5, count: int = 100, sampling_rate: int = 16000) -> Path:
    """A 32-bit float WAV whose samples from ``at`` seconds on (``count`` of them) are ``value``
    (NaN or inf): what a broken resampler or a division by zero upstream writes. Only float
    formats can hold such samples, so this is the bad input every audio check must refuse."""
    import soundfile as sf

    path = Path(path)
    x = tone_samples(duration, sampling_rate=sampling_rate)
    start = int(at * sampling_rate)
    x[start:start + count] = value
    with atomic_path(path) as tmp:
        sf.write(str(tmp), x, sampling_rate, subtype="FLOAT", format="WAV")
    return path


def nonfinite_cut(path: str | Path, cut_id: str = "nonfinite", text: str | None = "hello",
                  language: str | None = "en", value: float = float("nan")):
    """:func:`nonfinite_wav` as a ``MonoCut`` (with a supervision if ``text`` is given)."""
    return _cut_for(nonfinite_wav(path, value=value), text, language, cut_id)


#: Sentences for recordings with pauses (the tests' own).
SENTENCES = ("The weather is fine today.", "Please open the window.", "We will meet at noon.")


def spoken_with_pauses(sentences: tuple[str, ...] = SENTENCES, pause: float = 1.5,
                       lead: float = 1.0, language: str = "en"
                       ) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """espeak-ng reading ``sentences`` at 16 kHz with ``pause`` seconds of silence after each
    (``lead`` before the first), and where each sentence's voice lies (first to last sample
    above 0.01), in seconds."""
    parts = [np.zeros(int(lead * 16000), np.float32)]
    spans, at = [], len(parts[0])
    gap = np.zeros(int(pause * 16000), np.float32)
    for text in sentences:
        x = synth_samples(text, language).astype(np.float32)
        voiced = np.flatnonzero(np.abs(x) > 0.01)
        spans.append(((at + voiced[0]) / 16000, (at + voiced[-1]) / 16000))
        parts += [x, gap]
        at += len(x) + len(gap)
    return np.concatenate(parts), spans
