"""Speaker and channel variety for waveforms: what turns a few synthetic voices into many
speakers heard through many rooms and lines.

An augmentation is a chain of :class:`Effect` values applied in order by :func:`apply_effects`;
every random choice is drawn beforehand (by the corpus planner or :func:`draw_effects`), so an
effect is a pure function of its input and parameters, and a chain drawn from a seed gives the
same samples in any process.

Effects, in the order :func:`draw_effects` chains them:

* ``world`` -- a new voice from the same speech: WORLD analysis (pyworld), the F0 contour
  scaled by ``f0_scale`` and the spectral envelope and aperiodicity warped along frequency by
  ``warp`` (> 1 moves formants up, as a shorter vocal tract does), then resynthesis;
* ``speed`` -- speed perturbation by resampling (tempo and pitch together, as in Kaldi's
  3-way speed perturbation);
* ``reverb`` -- a simulated room: exponentially decaying noise with reverberation time
  ``rt60`` after a direct path (``drr_db`` above the tail), convolved with the speech;
* ``noise`` -- white, pink or brown noise at ``snr_db``;
* ``babble`` -- ``talkers`` other utterances summed at ``snr_db`` (the caller passes them);
* ``bandpass`` -- band limiting between ``low`` and ``high`` Hz;
* ``telephone`` -- 300-3400 Hz, 8 kHz, 8-bit mu-law, as a telephone line carries speech;
* ``codec`` -- a lossy codec through sox: ``gsm`` (13 kbit/s, 8 kHz), ``amr-nb`` (8 kHz) or
  ``vorbis`` (16 kHz, low quality);
* ``gain`` -- ``db`` louder or quieter, clipped as a real input stage would;
* ``vtlp`` -- vocal tract length perturbation by ``warp`` (> 1 moves formants up), applied
  to the log-mel features, not the samples (:func:`speechlab.audio.features.warp_mel`): a
  new vocal tract on every draw for the cost of an interpolation, where ``world`` costs more
  than a training step. :func:`apply_effects` refuses it; the on-the-fly augmenter
  (:class:`speechlab.asr.data.WaveAugment`) applies it after the filter banks.

Waveforms are float64 mono in [-1, 1] at :data:`SAMPLE_RATE`.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError, DataError, MissingToolError

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class Effect:
    """One step of an augmentation chain: ``name`` (a key of :data:`EFFECTS`) and its
    parameters as ``(key, value)`` pairs (a tuple, so chains are hashable and comparable)."""

    name: str
    params: tuple[tuple[str, float | str], ...] = ()

    @classmethod
    def of(cls, name: str, /, **params: float | str) -> Effect:
        return cls(name, tuple(sorted(params.items())))

    def describe(self) -> str:
        args = ",".join(f"{k}={v:g}" if isinstance(v, float) and k != "seed" else
                        f"{k}={int(v)}" if k == "seed" else f"{k}={v}" for k, v in self.params)
        return f"{self.name}({args})"


# --------------------------------------------------------------------------------------------
# Speaker


def speed(x: np.ndarray, factor: float) -> np.ndarray:
    """Play ``x`` ``factor`` times faster (and higher): ``len(x) / factor`` samples."""
    from scipy.signal import resample_poly

    ratio = Fraction(factor).limit_denominator(100)
    return resample_poly(x, ratio.denominator, ratio.numerator)


def _warp_axis(m: np.ndarray, warp: float) -> np.ndarray:
    """Each frame's spectrum (F bins) with frequency f taking the value at f / warp."""
    bins = m.shape[1]
    src = np.arange(bins) / warp
    lo = np.clip(np.floor(src).astype(int), 0, bins - 1)
    hi = np.clip(lo + 1, 0, bins - 1)
    frac = np.clip(src - lo, 0.0, 1.0)
    return m[:, lo] * (1 - frac) + m[:, hi] * frac


def world(x: np.ndarray, f0_scale: float, warp: float) -> np.ndarray:
    """Resynthesize ``x`` with its F0 times ``f0_scale`` and its spectral envelope (and
    aperiodicity) warped along frequency by ``warp``; same length."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyworld imports the deprecated pkg_resources
        import pyworld

    if len(x) < SAMPLE_RATE // 20:
        return x
    period = 10.0  # ms; 5 ms costs 1.6x as much and a new voice needs no finer contour
    # speed=4: dio decimates before its search (5x faster, the same contour for this use)
    f0, t = pyworld.dio(x, SAMPLE_RATE, frame_period=period, speed=4)
    f0 = pyworld.stonemask(x, f0, t, SAMPLE_RATE)
    sp = pyworld.cheaptrick(x, f0, t, SAMPLE_RATE)
    ap = pyworld.d4c(x, f0, t, SAMPLE_RATE)
    y = pyworld.synthesize(f0 * f0_scale, np.ascontiguousarray(_warp_axis(sp, warp)),
                           np.ascontiguousarray(_warp_axis(ap, warp)), SAMPLE_RATE, period)
    out = np.zeros_like(x)
    n = min(len(x), len(y))
    out[:n] = y[:n]
    peak = np.max(np.abs(out)) or 1.0
    # WORLD's output level differs from its input's; keep the input's peak.
    return out * (np.max(np.abs(x)) / peak)


# --------------------------------------------------------------------------------------------
# Room and noise


def room_impulse_response(rt60: float, drr_db: float, rng: np.random.Generator) -> np.ndarray:
    """A synthetic room impulse response: a unit direct path, a few early reflections, then
    Gaussian noise decaying by 60 dB in ``rt60`` seconds, scaled so the direct path is
    ``drr_db`` above the reverberant energy."""
    n = max(2, int(rt60 * SAMPLE_RATE))
    t = np.arange(n) / SAMPLE_RATE
    tail = rng.standard_normal(n) * np.exp(-6.9078 * t / rt60)
    # The first 2.5 ms are the direct path's: the tail starts after it.
    tail[: int(0.0025 * SAMPLE_RATE)] = 0.0
    for delay_ms in rng.uniform(3.0, 25.0, size=4):
        tail[int(delay_ms * SAMPLE_RATE / 1000)] += rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 0.6)
    tail *= np.sqrt(10 ** (-drr_db / 10) / max(float(np.sum(tail**2)), 1e-12))
    tail[0] = 1.0
    return tail


def reverb(x: np.ndarray, rt60: float, drr_db: float, seed: float) -> np.ndarray:
    """``x`` in a simulated room (:func:`room_impulse_response`), same length and peak."""
    from scipy.signal import fftconvolve

    rir = room_impulse_response(rt60, drr_db, np.random.default_rng(int(seed)))
    y = fftconvolve(x, rir)[: len(x)]
    peak = np.max(np.abs(y)) or 1.0
    return y * (np.max(np.abs(x)) / peak)


def _speech_power(x: np.ndarray) -> float:
    # Power over samples above -40 dB of the peak: synthesizers pad with silence, which would
    # otherwise make the effective SNR depend on pause lengths.
    if not np.any(x):
        return 0.0
    active = x[np.abs(x) > 0.01 * np.max(np.abs(x))]
    return float(np.mean(active**2)) if len(active) else 0.0


def _white(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal(n)


def _spectral(n: int, rng: np.random.Generator, exponent: float) -> np.ndarray:
    """Noise with power spectrum ~ 1/f**exponent (1 = pink, 2 = brown), by shaping white noise."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.arange(len(spec), dtype=np.float64)
    f[0] = 1.0
    return np.fft.irfft(spec / f ** (exponent / 2), n)


NOISE_COLORS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "white": _white,
    "pink": lambda n, rng: _spectral(n, rng, 1.0),
    "brown": lambda n, rng: _spectral(n, rng, 2.0),
}


def mix_at_snr(x: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """``x`` plus ``noise`` (same length) scaled to ``snr_db`` below ``x``'s speech power."""
    p_noise = float(np.mean(noise**2)) or 1.0
    scale = np.sqrt(_speech_power(x) / (p_noise * 10 ** (snr_db / 10)))
    return x + scale * noise


def add_noise(x: np.ndarray, snr_db: float, color: str, rng: np.random.Generator) -> np.ndarray:
    """Add ``color`` noise (a key of :data:`NOISE_COLORS`) at ``snr_db``."""
    if color not in NOISE_COLORS:
        raise DataError(f"unknown noise colour {color!r}; choose one of {list(NOISE_COLORS)}")
    if len(x) == 0:
        return x
    return mix_at_snr(x, NOISE_COLORS[color](len(x), rng), snr_db)


def noise(x: np.ndarray, snr_db: float, color: str, seed: float) -> np.ndarray:
    return add_noise(x, snr_db, color, np.random.default_rng(int(seed)))


def babble(x: np.ndarray, snr_db: float, others: Sequence[np.ndarray], seed: float) -> np.ndarray:
    """``x`` with the sum of ``others`` (other utterances, each looped or cut to ``x``'s
    length from a random offset) at ``snr_db``; unchanged if there are none."""
    if not others or len(x) == 0:
        return x
    rng = np.random.default_rng(int(seed))
    total = np.zeros_like(x)
    for o in others:
        if len(o) == 0:
            continue
        reps = int(np.ceil(len(x) / len(o))) + 1
        start = int(rng.integers(len(o)))
        total += np.tile(o, reps)[start:start + len(x)] / (np.sqrt(_speech_power(o)) or 1.0)
    return mix_at_snr(x, total, snr_db) if np.any(total) else x


# --------------------------------------------------------------------------------------------
# Channel


def bandpass(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``x`` limited to ``low``..``high`` Hz (4th-order Butterworth, zero phase)."""
    from scipy.signal import butter, sosfiltfilt

    nyq = SAMPLE_RATE / 2
    if low <= 0:
        sos = butter(4, min(high, nyq * 0.99) / nyq, btype="lowpass", output="sos")
    else:
        sos = butter(4, [low / nyq, min(high, nyq * 0.99) / nyq], btype="bandpass", output="sos")
    return sosfiltfilt(sos, x) if len(x) > 27 else x


def mu_law(x: np.ndarray, bits: int = 8) -> np.ndarray:
    """``x`` through a ``bits``-bit mu-law quantizer (G.711's companding for 8 bits)."""
    mu = 2.0**bits - 1
    y = np.sign(x) * np.log1p(mu * np.abs(np.clip(x, -1, 1))) / np.log1p(mu)
    q = np.round((y + 1) / 2 * mu) / mu * 2 - 1
    return np.sign(q) * ((1 + mu) ** np.abs(q) - 1) / mu


def telephone(x: np.ndarray) -> np.ndarray:
    """A narrowband telephone line: 300-3400 Hz, 8 kHz sampling, 8-bit mu-law."""
    from scipy.signal import resample_poly

    narrow = resample_poly(bandpass(x, 300.0, 3400.0), 1, 2)
    return resample_poly(mu_law(narrow), 2, 1)[: len(x)]


# sox format -> (sample rate it codes at, extra sox output options)
CODECS: dict[str, tuple[int, tuple[str, ...]]] = {
    "gsm": (8000, ()),
    "amr-nb": (8000, ("-C", "0")),
    "vorbis": (16000, ("-C", "-1")),
}
_CODEC_TYPE = {"gsm": "gsm", "amr-nb": "amr-nb", "vorbis": "vorbis"}


@functools.lru_cache(maxsize=None)
def sox_codecs() -> frozenset[str]:
    """The :data:`CODECS` this machine's sox writes."""
    if shutil.which("sox") is None:
        return frozenset()
    r = subprocess.run(["sox", "-h"], capture_output=True, text=True)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("AUDIO FILE FORMATS")), "")
    formats = set(line.split(":", 1)[-1].split())
    return frozenset(c for c in CODECS if _CODEC_TYPE[c] in formats)


def codec(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` encoded and decoded by sox's ``name`` codec (a key of :data:`CODECS`)."""
    if name not in CODECS:
        raise DataError(f"unknown codec {name!r}; choose one of {list(CODECS)}")
    if name not in sox_codecs():
        raise MissingToolError(f"sox cannot write {name!r} here; install the Debian packages "
                               "'sox' and 'libsox-fmt-base'")
    rate, opts = CODECS[name]
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2").tobytes()
    raw_in = ["-t", "raw", "-r", str(SAMPLE_RATE), "-e", "signed", "-b", "16", "-c", "1"]
    # -D -R: no dither, repeatable: sox otherwise dithers with fresh random noise per run.
    enc = subprocess.run(["sox", "-D", "-R", *raw_in, "-", *opts, "-t", _CODEC_TYPE[name], "-r", str(rate),
                          "-c", "1", "-"], input=pcm, capture_output=True)
    dec = subprocess.run(["sox", "-D", "-R", "-t", _CODEC_TYPE[name], "-", *raw_in, "-"], input=enc.stdout,
                         capture_output=True) if enc.returncode == 0 else enc
    if enc.returncode != 0 or dec.returncode != 0:
        err = (enc if enc.returncode else dec).stderr.decode(errors="replace").strip()
        raise DataError(f"sox {name} codec failed: {err}")
    y = np.frombuffer(dec.stdout, dtype="<i2").astype(np.float64) / 32768.0
    out = np.zeros_like(x)
    n = min(len(x), len(y))
    out[:n] = y[:n]
    return out


def gain(x: np.ndarray, db: float) -> np.ndarray:
    """``x`` scaled by ``db`` decibels and clipped to [-1, 1]."""
    return np.clip(x * 10 ** (db / 20), -1.0, 1.0)


# name -> function(x, **params); ``babble`` also takes the other utterances.
EFFECTS: dict[str, Callable[..., np.ndarray]] = {
    "world": world,
    "speed": speed,
    "reverb": reverb,
    "noise": noise,
    "babble": babble,
    "bandpass": bandpass,
    "telephone": telephone,
    "codec": codec,
    "gain": gain,
}


def apply_effects(x: np.ndarray, effects: Sequence[Effect],
                  others: Sequence[np.ndarray] = ()) -> np.ndarray:
    """``x`` (float64 (T,)) through ``effects`` in order; ``others`` are the utterances a
    ``babble`` effect mixes in."""
    for e in effects:
        fn = EFFECTS.get(e.name)
        if e.name == FEATURE_EFFECT:
            raise ConfigError("vtlp warps the log-mel features, not the samples: it is an "
                              "on-the-fly effect (task.augment), not a corpus one")
        if fn is None:
            raise DataError(f"unknown effect {e.name!r}; known: {list(EFFECTS)}")
        params = dict(e.params)
        if e.name == "babble":
            x = fn(x, others=others, **params)
        else:
            x = fn(x, **params)
    return x


# --------------------------------------------------------------------------------------------
# Drawing chains


CHANNEL_KINDS = ("telephone", "bandpass", *CODECS)
#: The effect that acts on features, after the filter banks (module doc).
FEATURE_EFFECT = "vtlp"


@dataclass(frozen=True)
class AugmentPlan:
    """How often each effect is drawn, and from what range (each (low, high) uniform).

    Args:
        world_prob: share of utterances given a new voice by WORLD (pitch and vocal tract).
        f0_scale, formant_warp: ranges of ``world``'s F0 factor and frequency warp.
        speed_prob, speed: speed perturbation.
        reverb_prob, rt60, drr_db: simulated rooms.
        noise_prob, snr_db, noise_colors: additive noise; ``"babble"`` among the colours mixes
            other utterances instead.
        channel_prob, channels: one of ``telephone``, ``bandpass`` or a sox codec name.
        gain_prob, gain_db: level changes.
        vtlp_prob, vtlp_warp: vocal tract length perturbation of the features (on the fly
            only; drawn after the others, and only when ``vtlp_prob`` > 0, so a plan without
            it draws what it drew before it existed).
    """

    world_prob: float = ranged(0.0, ge=0, le=1)
    f0_scale: tuple[float, float] = ranged((0.8, 1.25), gt=0.25, lt=4)
    formant_warp: tuple[float, float] = ranged((0.9, 1.1), gt=0.5, lt=2)
    speed_prob: float = ranged(0.0, ge=0, le=1)
    speed: tuple[float, float] = ranged((0.9, 1.1), gt=0.25, lt=4)
    reverb_prob: float = ranged(0.0, ge=0, le=1)
    rt60: tuple[float, float] = ranged((0.2, 0.7), gt=0, le=3)
    drr_db: tuple[float, float] = ranged((0.0, 10.0), ge=-20, le=40)
    noise_prob: float = ranged(0.0, ge=0, le=1)
    snr_db: tuple[float, float] = ranged((10.0, 30.0), ge=-10, le=60)
    noise_colors: tuple[str, ...] = ("white", "pink", "brown", "babble")
    channel_prob: float = ranged(0.0, ge=0, le=1)
    channels: tuple[str, ...] = ("telephone", "bandpass")
    gain_prob: float = ranged(0.0, ge=0, le=1)
    gain_db: tuple[float, float] = ranged((-10.0, 6.0), ge=-40, le=20)
    vtlp_prob: float = ranged(0.0, ge=0, le=1)
    vtlp_warp: tuple[float, float] = ranged((0.9, 1.1), gt=0.5, lt=2)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("f0_scale", "formant_warp", "speed", "rt60", "drr_db", "snr_db", "gain_db",
                     "vtlp_warp"):
            low, high = getattr(self, name)
            if low > high:
                raise ConfigError(f"{name} is a (low, high) range, got low {low} > high {high}")
        bad = sorted(set(self.channels) - set(CHANNEL_KINDS))
        if bad:
            raise ConfigError(f"channels: unknown channel(s) {bad}; known: {list(CHANNEL_KINDS)}")
        bad = sorted(set(self.noise_colors) - {*NOISE_COLORS, "babble"})
        if bad:
            raise ConfigError(f"noise_colors: unknown colour(s) {bad}; known: "
                              f"{[*NOISE_COLORS, 'babble']}")

    @property
    def active(self) -> bool:
        """Whether any effect can be drawn."""
        return any(p > 0 for p in (self.world_prob, self.speed_prob, self.reverb_prob,
                                   self.noise_prob, self.channel_prob, self.gain_prob,
                                   self.vtlp_prob))


def draw_effects(plan: AugmentPlan, rng) -> tuple[Effect, ...]:  # noqa: ANN001 (random.Random)
    """A chain drawn from ``plan`` with ``rng`` (a :class:`random.Random`): the same draws in
    the same order whatever is chosen, so one utterance's choices never shift another's."""
    r = [rng.random() for _ in range(6)]
    u = [rng.random() for _ in range(10)]
    seed = rng.randrange(2**31)
    pick_color = rng.choice(plan.noise_colors) if plan.noise_colors else "white"
    pick_channel = rng.choice(plan.channels) if plan.channels else "telephone"

    def lerp(lo_hi: tuple[float, float], t: float) -> float:
        return round(lo_hi[0] + (lo_hi[1] - lo_hi[0]) * t, 3)

    out: list[Effect] = []
    if r[0] < plan.world_prob:
        out.append(Effect.of("world", f0_scale=lerp(plan.f0_scale, u[0]),
                             warp=lerp(plan.formant_warp, u[1])))
    if r[1] < plan.speed_prob:
        out.append(Effect.of("speed", factor=lerp(plan.speed, u[2])))
    if r[2] < plan.reverb_prob:
        out.append(Effect.of("reverb", rt60=lerp(plan.rt60, u[3]), drr_db=lerp(plan.drr_db, u[4]),
                             seed=float(seed)))
    if r[3] < plan.noise_prob:
        snr = lerp(plan.snr_db, u[5])
        if pick_color == "babble":
            out.append(Effect.of("babble", snr_db=snr, seed=float(seed + 1)))
        else:
            out.append(Effect.of("noise", snr_db=snr, color=pick_color, seed=float(seed + 1)))
    if r[4] < plan.channel_prob:
        if pick_channel == "telephone":
            out.append(Effect.of("telephone"))
        elif pick_channel == "bandpass":
            out.append(Effect.of("bandpass", low=lerp((0.0, 300.0), u[6]),
                                 high=lerp((3500.0, 7500.0), u[7])))
        else:
            out.append(Effect.of("codec", name=pick_channel))
    if r[5] < plan.gain_prob:
        out.append(Effect.of("gain", db=lerp(plan.gain_db, u[8])))
    if plan.vtlp_prob > 0:  # drawn last, and only then: older plans keep their draws
        on, t = rng.random(), rng.random()
        if on < plan.vtlp_prob:
            out.append(Effect.of(FEATURE_EFFECT, warp=lerp(plan.vtlp_warp, t)))
    return tuple(out)
