"""Voice activity detection: the Silero VAD network run by onnxruntime, or WebRTC's detector.

``engine="silero"`` (the default): the ONNX file the ``silero-vad`` package ships (nothing is
downloaded; its own Python code is not used). It reads 16 kHz audio in windows of 512 samples
(32 ms), each with the 64 samples before it as context and a recurrent state carried from
window to window, and gives the probability that the window holds speech.

``engine="webrtc"``: the Gaussian-mixture detector of WebRTC (``webrtcvad-wheels``) on 30 ms
frames, each a yes or a no (probability 1 or 0), at ``aggressiveness`` 0-3. Tens of times
cheaper than the network (``benchmarks/endpoint_cost.py``), and coarser: it hears noise and
breathing as speech more often.

- :class:`Vad`: the network over a stream, window by window (:meth:`Vad.accept` gives the
  probabilities of the windows completed so far);
- :func:`speech_segments`: a whole recording's speech as (start, end) seconds: speech starts
  at a window of probability ``threshold`` or more and ends after ``min_silence`` seconds below
  ``threshold - 0.15``; segments shorter than ``min_speech`` are dropped, each is padded by
  ``pad`` seconds, and one longer than ``max_segment`` is cut at its least speech-like window.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError

SAMPLE_RATE = 16000
WINDOW = 512  # samples per decision (32 ms)
WEBRTC_WINDOW = 480  # samples per WebRTC decision (30 ms; it takes 10, 20 or 30 ms)
ENGINES = ("silero", "webrtc")
CONTEXT = 64  # samples of the window before, given with each window
STATE = (2, 1, 128)


def model_path() -> Path:
    """The Silero VAD ONNX file of the installed ``silero-vad`` package."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("voice activity detection needs the silero-vad package (pip install "
                          "silero-vad; it ships the network, nothing is downloaded)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "silero_vad.onnx"
    if not path.is_file():
        raise ConfigError(f"the silero-vad package has no {path.name}; reinstall it")
    return path


@dataclass(frozen=True)
class VadConfig:
    """How probabilities become segments (module doc)."""

    engine: Literal["silero", "webrtc"] = "silero"
    # WebRTC's: 0 (least) to 3 (most eager to call a frame non-speech)
    aggressiveness: int = ranged(2, ge=0, le=3)
    threshold: float = ranged(0.5, gt=0.15, lt=1, why="a speech probability")
    min_silence: float = ranged(0.3, ge=0, why="seconds")
    min_speech: float = ranged(0.25, ge=0, why="seconds")
    pad: float = ranged(0.1, ge=0, le=1, why="seconds")
    max_segment: float = ranged(30.0, gt=1, allow_inf=True, why="seconds")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.engine not in ENGINES:
            raise ConfigError(f"VAD engine {self.engine!r}: choose one of {', '.join(ENGINES)}")


class Vad:
    """A detector over one stream of 16 kHz samples (module doc): ``window`` samples per
    decision."""

    def __init__(self, threads: int = 1, *, engine: str = "silero",
                 aggressiveness: int = 2) -> None:
        self.engine = engine
        if engine == "webrtc":
            import webrtcvad

            self._webrtc = webrtcvad.Vad(int(aggressiveness))
            self.window = WEBRTC_WINDOW
        elif engine == "silero":
            from speechlab.nn.onnx_graph import runner, session

            self.session = session(model_path(), threads)
            self._run = runner(self.session, ["output", "stateN"])  # one call per window
            self.window = WINDOW
        else:
            raise ConfigError(f"VAD engine {engine!r}: choose one of {', '.join(ENGINES)}")
        self.reset()

    @classmethod
    def of(cls, cfg: VadConfig, threads: int = 1) -> Vad:
        """The detector ``cfg`` names."""
        return cls(threads, engine=cfg.engine, aggressiveness=cfg.aggressiveness)

    @property
    def seconds(self) -> float:
        """Seconds per decision."""
        return self.window / SAMPLE_RATE

    def reset(self) -> None:
        self.state = np.zeros(STATE, dtype=np.float32)
        self.context = np.zeros(CONTEXT, dtype=np.float32)
        self.pending = np.zeros(0, dtype=np.float32)
        self.windows = 0  # windows decided so far

    def accept(self, samples: np.ndarray) -> np.ndarray:
        """The speech probability of each window ``samples`` completes (16 kHz mono)."""
        x = np.concatenate([self.pending, np.asarray(samples, dtype=np.float32)])
        if self.engine == "webrtc":
            return self._accept_webrtc(x)
        n = len(x) // WINDOW
        out = np.empty(n, dtype=np.float32)
        rate = np.array(SAMPLE_RATE, dtype=np.int64)
        frame = np.empty((1, CONTEXT + WINDOW), dtype=np.float32)
        for i in range(n):
            frame[0, :CONTEXT] = self.context
            frame[0, CONTEXT:] = x[i * WINDOW:(i + 1) * WINDOW]
            prob, self.state = self._run({"input": frame, "state": self.state, "sr": rate})
            out[i] = prob[0, 0]
            self.context = frame[0, -CONTEXT:].copy()
        self.pending = x[n * WINDOW:]
        self.windows += n
        return out

    def _accept_webrtc(self, x: np.ndarray) -> np.ndarray:
        n = len(x) // WEBRTC_WINDOW
        pcm = (np.clip(x[:n * WEBRTC_WINDOW], -1.0, 1.0) * 32767).astype("<i2")
        out = np.fromiter(
            (self._webrtc.is_speech(pcm[i * WEBRTC_WINDOW:(i + 1) * WEBRTC_WINDOW].tobytes(),
                                    SAMPLE_RATE) for i in range(n)), dtype=np.float32, count=n)
        self.pending = x[n * WEBRTC_WINDOW:]
        self.windows += n
        return out


def segments_of(probs: np.ndarray, seconds: float, cfg: VadConfig = VadConfig(),
                step: float = WINDOW / SAMPLE_RATE) -> list[tuple[float, float]]:
    """Speech segments (start, end) in seconds from per-window probabilities (module doc);
    ``seconds`` is the recording's length, ``step`` the seconds per window."""
    low = cfg.threshold - 0.15
    raw: list[tuple[int, int]] = []
    start: int | None = None
    quiet = 0
    for i, p in enumerate(probs):
        if start is None:
            if p >= cfg.threshold:
                start, quiet = i, 0
        elif p < low:
            quiet += 1
            if quiet * step >= cfg.min_silence:
                raw.append((start, i - quiet + 1))
                start = None
        else:
            quiet = 0
    if start is not None:
        raw.append((start, len(probs) - quiet))
    out: list[tuple[float, float]] = []
    for a, b in raw:
        if (b - a) * step < cfg.min_speech:
            continue
        for k, (x, y) in enumerate(_split(probs, a, b, cfg.max_segment / step)):
            # a long segment's pieces meet at their cut, unpadded
            s = x * step if k else max(0.0, x * step - cfg.pad)
            e = min(seconds, y * step + cfg.pad) if y == b else y * step
            if k == 0 and out and s <= out[-1][1]:  # padding made neighbours touch: join
                s = out.pop()[0]
            out.append((round(s, 3), round(e, 3)))
    return out


def _split(probs: np.ndarray, a: int, b: int, most: float) -> list[tuple[int, int]]:
    """[a, b) cut at its least speech-like window until no piece exceeds ``most`` windows."""
    if b - a <= most:
        return [(a, b)]
    lo, hi = a + int(most / 4), a + int(most)  # a cut within the allowed length, not too early
    cut = lo + int(np.argmin(probs[lo:hi]))
    return [(a, cut), *_split(probs, cut, b, most)]


def speech_segments(samples: np.ndarray, cfg: VadConfig = VadConfig(), vad: Vad | None = None
                    ) -> list[tuple[float, float]]:
    """The speech of 16 kHz ``samples`` as (start, end) seconds (module doc)."""
    vad = vad or Vad.of(cfg)
    vad.reset()
    return segments_of(vad.accept(samples), len(samples) / SAMPLE_RATE, cfg, vad.seconds)
