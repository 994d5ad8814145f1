"""Kaldi-compatible 80-dim log-mel filter banks, computed once per corpus and cached on disk.

The extractor is kaldi-native-fbank (Kaldi's ``compute-fbank-feats`` ported to C++ without Kaldi),
so features match what Kaldi/icefall recipes compute: 25 ms povey window, 10 ms shift, 0.97
pre-emphasis, power spectrum, 80 triangular mel bins, natural log. Samples are floats in
``[-1, 1]`` (lhotse's convention); Kaldi's binaries read int16 values, which only adds the
constant ``2 ln 32768`` to every log energy -- CMVN removes it.

Cache layout, one directory per (config, cut list)::

    OUT/fbank-<hash>/cuts.jsonl.gz      the cuts with lhotse ``Features`` attached
    OUT/fbank-<hash>/ab/ab12...ef.npy   one float32 (T, D) array per cut ("numpy_files" storage)

``<hash>`` covers the config, a format version and every cut's id, recording, start, duration,
channel and audio sources, so changing any of them computes a new cache rather than serving
stale features. The directory is built under a temporary name and renamed when complete:
a crash leaves no cache that looks finished, and the next run removes what a killed one left.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from speechlab.audio.io import check_finite
from speechlab.config import check_fields, ranged, to_dict
from speechlab.errors import ConfigError, DataError, SpeechlabError
from speechlab.files import make_temp_dir, naming

log = logging.getLogger(__name__)

# Bump when the stored arrays would change for the same config (e.g. a different extractor).
CACHE_VERSION = 1
MANIFEST = "cuts.jsonl.gz"


@dataclass(frozen=True)
class FbankConfig:
    """Filter-bank settings (Kaldi option names in parentheses).

    Attributes:
        sampling_rate: expected audio rate; other rates are an error, not resampled silently.
        num_mel_bins: ``D`` (``--num-mel-bins``); 80 in the multi-softmax paper.
        frame_length_ms / frame_shift_ms: window and hop (25 / 10 ms).
        dither: Kaldi's default is 1.0 (on int16 scale); 0 keeps features deterministic so
            the cache and the tests are reproducible.
        snip_edges: False (lhotse/icefall convention) gives ``round(duration / shift)`` frames,
            which is what lhotse expects a cut of that duration to have.
        low_freq / high_freq: mel range in Hz; ``high_freq <= 0`` is an offset from Nyquist.
        preemph_coeff, remove_dc_offset, window_type, round_to_power_of_two: as in Kaldi.
    """

    sampling_rate: int = ranged(16000, ge=1, le=384_000, why="the highest rate audio is made at")
    num_mel_bins: int = ranged(80, ge=1, le=1024, why="speech features use 40-128")
    frame_length_ms: float = ranged(25.0, gt=0, le=1000, why="speech frames last 20-50 ms")
    frame_shift_ms: float = ranged(10.0, gt=0, le=1000, why="speech frames move 10-20 ms")
    dither: float = ranged(0.0, ge=0)
    snip_edges: bool = False
    low_freq: float = ranged(20.0, ge=0)
    high_freq: float = ranged(0.0)  # <= 0: an offset from Nyquist
    preemph_coeff: float = ranged(0.97, ge=0, le=1)
    remove_dc_offset: bool = True
    window_type: Literal["povey", "hamming", "hanning", "rectangular", "blackman"] = "povey"
    round_to_power_of_two: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        nyquist = self.sampling_rate / 2
        high = self.high_freq if self.high_freq > 0 else nyquist + self.high_freq
        if not 0 <= self.low_freq < high <= nyquist:
            raise ConfigError(f"fbank mel range low_freq={self.low_freq:g} Hz, high_freq="
                              f"{self.high_freq:g} Hz (i.e. {high:g} Hz) must satisfy 0 <= low "
                              f"< high <= Nyquist ({nyquist:g} Hz); high_freq <= 0 is an offset "
                              "from Nyquist")

    @property
    def frame_shift(self) -> float:
        """Seconds."""
        return self.frame_shift_ms / 1000.0


def knf_options(cfg: FbankConfig):
    import kaldi_native_fbank as knf

    opts = knf.FbankOptions()
    f = opts.frame_opts
    f.samp_freq = float(cfg.sampling_rate)
    f.frame_length_ms = cfg.frame_length_ms
    f.frame_shift_ms = cfg.frame_shift_ms
    f.dither = cfg.dither
    f.snip_edges = cfg.snip_edges
    f.preemph_coeff = cfg.preemph_coeff
    f.remove_dc_offset = cfg.remove_dc_offset
    f.window_type = cfg.window_type
    f.round_to_power_of_two = cfg.round_to_power_of_two
    m = opts.mel_opts
    m.num_bins = cfg.num_mel_bins
    m.low_freq = cfg.low_freq
    m.high_freq = cfg.high_freq
    return opts


def num_frames(num_samples: int, cfg: FbankConfig) -> int:
    """Frames Kaldi produces for ``num_samples`` samples."""
    shift = int(cfg.sampling_rate * cfg.frame_shift_ms / 1000)
    length = int(cfg.sampling_rate * cfg.frame_length_ms / 1000)
    if cfg.snip_edges:
        return 0 if num_samples < length else 1 + (num_samples - length) // shift
    return (num_samples + shift // 2) // shift


def fbank(samples: np.ndarray, cfg: FbankConfig = FbankConfig()) -> np.ndarray:
    """Log-mel filter banks of one mono signal.

    Args:
        samples: ``(N,)`` float samples in ``[-1, 1]`` at ``cfg.sampling_rate``.
    Returns:
        ``(T, D)`` float32, ``T = num_frames(N, cfg)``.
    """
    import kaldi_native_fbank as knf

    samples = np.ascontiguousarray(samples, dtype=np.float32)
    if samples.ndim != 1:
        raise DataError(f"fbank expects mono samples of shape (N,), got {samples.shape}")
    check_finite(samples, "fbank input", cfg.sampling_rate)
    extractor = knf.OnlineFbank(knf_options(cfg))
    extractor.accept_waveform(float(cfg.sampling_rate), samples)
    extractor.input_finished()
    n = extractor.num_frames_ready
    if n == 0:
        return np.zeros((0, cfg.num_mel_bins), dtype=np.float32)
    feats = np.stack([extractor.get_frame(i) for i in range(n)]).astype(np.float32, copy=False)
    if not np.isfinite(feats).all():
        raise DataError("fbank output holds non-finite values; check the audio")
    return feats


def _mel(f: np.ndarray) -> np.ndarray:
    return 1127.0 * np.log1p(np.asarray(f, dtype=np.float64) / 700.0)


def vtln_frequency(f: np.ndarray, warp: float, low: float, high: float,
                   cutoffs: tuple[float, float] = (100.0, -500.0)) -> np.ndarray:
    """Kaldi's piecewise-linear VTLN map: the frequency whose content a filter at ``f`` Hz
    hears when formants are scaled by ``warp`` -- ``f / warp`` between the two cutoffs (the
    upper one an offset from ``high`` when <= 0), straight lines to ``low`` and ``high`` beyond
    them, so the band's ends stay put."""
    f = np.asarray(f, dtype=np.float64)
    lo_cut = cutoffs[0] * max(1.0, warp)
    hi_cut = (cutoffs[1] if cutoffs[1] > 0 else high + cutoffs[1]) * min(1.0, warp)
    out = f / warp
    left = f < lo_cut
    out[left] = low + (lo_cut / warp - low) / (lo_cut - low) * (f[left] - low)
    right = f >= hi_cut
    out[right] = high + (high - hi_cut / warp) / (high - hi_cut) * (f[right] - high)
    return np.clip(out, low, high)


def warp_mel(feats: np.ndarray, warp: float, cfg: FbankConfig = FbankConfig()) -> np.ndarray:
    """Vocal tract length perturbation of log-mel frames ``(T, D)`` made with ``cfg``: each
    bin takes the value the unwarped frames have where :func:`vtln_frequency` maps its centre
    (linear interpolation between bins on the mel scale), so ``warp`` > 1 moves the formants up,
    as a shorter vocal tract does. An approximation of filter banks warped in Kaldi's VTLN way
    (close for warps within 10-20%) that costs an interpolation, not a new analysis."""
    feats = np.asarray(feats)
    if feats.ndim != 2 or feats.shape[1] != cfg.num_mel_bins:
        raise DataError(f"warp_mel expects (T, {cfg.num_mel_bins}) log-mel frames, got "
                        f"{feats.shape}")
    if not 0.5 < warp < 2.0:
        raise ConfigError(f"vocal tract warp must be in (0.5, 2), got {warp}")
    nyquist = cfg.sampling_rate / 2
    high = cfg.high_freq if cfg.high_freq > 0 else nyquist + cfg.high_freq
    d = cfg.num_mel_bins
    lo_mel, hi_mel = _mel(cfg.low_freq), _mel(high)
    step = (hi_mel - lo_mel) / (d + 1)
    centres_mel = lo_mel + step * np.arange(1, d + 1)
    centres = 700.0 * np.expm1(centres_mel / 1127.0)
    src = (_mel(vtln_frequency(centres, warp, cfg.low_freq, high)) - lo_mel) / step - 1.0
    src = np.clip(src, 0.0, d - 1.0)
    i = np.minimum(np.floor(src).astype(np.int64), d - 2) if d > 1 else np.zeros(d, np.int64)
    frac = (src - i).astype(feats.dtype)
    j = np.minimum(i + 1, d - 1)
    return feats[:, i] * (1 - frac) + feats[:, j] * frac


def _sources(cut) -> str:
    return ", ".join(str(s.source) for s in cut.recording.sources) if cut.has_recording else "-"


@contextlib.contextmanager
def about_cut(cut) -> Iterator[None]:
    """Re-raise what goes wrong while processing ``cut`` as a DataError naming the cut and its
    audio, so a failure deep in an extractor points at the input that caused it. OS errors
    (disk full...) and interrupts pass through unchanged."""
    try:
        yield
    except (OSError, MemoryError):
        raise
    except SpeechlabError as e:
        msg = str(e)
        if repr(cut.id) in msg:
            raise
        raise DataError(f"cut {cut.id!r} ({_sources(cut)}): {msg}") from None
    except Exception as e:  # noqa: BLE001 - extractors and lhotse raise many types
        raise DataError(f"cut {cut.id!r} ({_sources(cut)}): {type(e).__name__}: {e}; fix or "
                        "drop this cut") from None


def _cache_key(cuts, cfg: FbankConfig) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"version": CACHE_VERSION, "config": to_dict(cfg)}, sort_keys=True).encode())
    for c in cuts:
        sources = [s.source for s in c.recording.sources] if c.has_recording else []
        h.update(json.dumps([c.id, c.recording_id if c.has_recording else None, round(c.start, 6),
                             round(c.duration, 6), c.channel, sources]).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def _load_samples(cut, cfg: FbankConfig) -> np.ndarray:
    if not cut.has_recording:
        raise DataError(f"cut {cut.id!r} has no recording to compute features from")
    if cut.sampling_rate != cfg.sampling_rate:
        raise DataError(
            f"cut {cut.id!r} is sampled at {cut.sampling_rate} Hz but the fbank config expects "
            f"{cfg.sampling_rate} Hz; resample the corpus (CutSet.resample) or set sampling_rate"
        )
    try:
        audio = cut.load_audio()
    except Exception as e:  # lhotse wraps soundfile/ffmpeg errors in many types
        src = [s.source for s in cut.recording.sources]
        raise DataError(f"cut {cut.id!r}: could not read audio {src}: {e}") from None
    if audio.ndim == 2:
        if audio.shape[0] != 1:
            raise DataError(f"cut {cut.id!r} has {audio.shape[0]} channels; features need mono")
        audio = audio[0]
    check_finite(audio, f"cut {cut.id!r} ({_sources(cut)})", cfg.sampling_rate)
    return audio


def _storage_key(cut_id: str) -> str:
    # Cut ids may contain "/" or be very long; a digest is a safe file name, and the two-letter
    # subdirectory keeps directories small for corpora of 100k+ cuts.
    d = hashlib.md5(cut_id.encode("utf-8")).hexdigest()
    return f"{d[:2]}/{d}.npy"


def _load_cache(cache_dir: Path):
    from lhotse import CutSet

    # Manifests store storage_path "." so the cache can be moved; it is made absolute here.
    return CutSet.from_file(cache_dir / MANIFEST).with_features_path_prefix(cache_dir).to_eager()


def compute_features(cuts, out_dir: str | Path, cfg: FbankConfig = FbankConfig(),
                     progress: bool = True):
    """Fbank for every cut, cached under ``out_dir``; returns the cuts with features attached.

    A second call with the same config and cuts loads the cached manifest without touching the
    audio. The manifest is also what ``speechlab features compute`` prints.

    Args:
        cuts: a lhotse ``CutSet`` of 16 kHz mono cuts.
        out_dir: cache root; the cache itself is ``out_dir/fbank-<hash>/``.
    Returns:
        ``CutSet`` whose cuts have ``features`` (``(T, D)``, see :func:`load_features`).
    Raises:
        DataError: naming the cut whose audio is unreadable, multi-channel, at another rate,
            or too short for one frame.
    """
    from lhotse import CutSet
    from lhotse.features import Features
    from lhotse.utils import fastcopy
    from rich.progress import track

    cuts = CutSet.from_cuts(cuts) if not isinstance(cuts, CutSet) else cuts
    out_dir = Path(out_dir).resolve()
    key = _cache_key(cuts, cfg)
    cache_dir = out_dir / f"fbank-{key}"
    if (cache_dir / MANIFEST).is_file():
        log.info("reusing cached features %s", cache_dir)
        return _load_cache(cache_dir)

    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = make_temp_dir(out_dir, f"fbank-{key}")
    except OSError as e:
        raise naming(e, out_dir) from None
    try:
        done = []
        try:
            total = len(cuts)
        except TypeError:  # lazy CutSet
            total = None
        console = _stderr()
        for cut in track(cuts, total=total, description="fbank",
                         disable=not progress or not console.is_terminal, transient=True,
                         console=console):
            with about_cut(cut):
                feats = fbank(_load_samples(cut, cfg), cfg)
            if feats.shape[0] == 0:
                raise DataError(
                    f"cut {cut.id!r} ({cut.duration:.3f} s) is too short for one "
                    f"{cfg.frame_length_ms:g} ms frame; drop it from the corpus"
                )
            skey = _storage_key(cut.id)
            (tmp / skey).parent.mkdir(exist_ok=True)
            np.save(tmp / skey, feats, allow_pickle=False)
            features = Features(
                type="kaldi-native-fbank", num_frames=feats.shape[0], num_features=feats.shape[1],
                frame_shift=cfg.frame_shift, sampling_rate=cfg.sampling_rate, start=cut.start,
                duration=cut.duration, storage_type="numpy_files", storage_path=".",
                storage_key=skey, recording_id=cut.recording_id, channels=cut.channel,
            )
            done.append(fastcopy(cut, features=features))
        CutSet.from_cuts(done).to_file(tmp / MANIFEST)
        if (cache_dir / MANIFEST).is_file():  # a concurrent run finished the same cache first
            shutil.rmtree(tmp)
        else:
            if cache_dir.exists():
                # We rename only whole caches, so a directory without a manifest is debris of
                # something else, not a finished cache.
                shutil.rmtree(cache_dir)
            os.rename(tmp, cache_dir)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise naming(e, cache_dir) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("computed features for %d cuts into %s", len(done), cache_dir)
    return _load_cache(cache_dir)


def load_features(cut) -> torch.Tensor:
    """The cached fbank of one cut: ``(T, D)`` float32."""
    if not cut.has_features:
        raise DataError(f"cut {cut.id!r} has no features; run `speechlab features compute` first")
    try:
        arr = cut.load_features()
    except (OSError, ValueError) as e:
        raise DataError(
            f"cut {cut.id!r}: cannot read features {cut.features.storage_path}/"
            f"{cut.features.storage_key}: {e}; delete that cache directory and recompute"
        ) from None
    if not np.isfinite(arr).all():
        raise DataError(f"cut {cut.id!r}: cached features {cut.features.storage_path}/"
                        f"{cut.features.storage_key} hold non-finite values; delete that cache "
                        "directory and recompute")
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))


def _stderr():
    """The console progress bars draw on: stderr, so that a command's output (a path, a
    table) is all its stdout holds. The bars are drawn only when it is a terminal: elsewhere
    (a log file, a pipe) a bar is an empty line before whatever comes next."""
    from rich.console import Console

    return Console(stderr=True)


def fit_cmvn(cuts, dim: int | None = None, progress: bool = True):
    """Global CMVN statistics over the features of ``cuts`` (the training set).

    Returns:
        a finalised :class:`~speechlab.audio.transforms.GlobalCMVN`.
    """
    from rich.progress import track

    from speechlab.audio.transforms import GlobalCMVN

    cmvn = None
    console = _stderr()
    for cut in track(cuts, description="cmvn", disable=not progress or not console.is_terminal,
                     transient=True, console=console):
        with about_cut(cut):
            x = load_features(cut)
            if cmvn is None:
                cmvn = GlobalCMVN(dim=dim or x.shape[1])
            cmvn.accumulate(x)
    if cmvn is None:
        raise DataError("fit_cmvn: the cut set is empty")
    return cmvn.finalize()
