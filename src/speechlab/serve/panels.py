"""What the page's analysis panels show, computed from one loaded model and one input, as
plain JSON-ready dicts. Nothing here knows HTTP; :mod:`.app` runs these off the event loop.

- :func:`speech_view`: synthesized speech as the TTS panel plots it (F0 track, spectrogram).
- :func:`attention_view`: per-block attention maps of a wav2vec 2.0 encoder for one utterance,
  each with its pattern label (Sec. 3 of the local-attention paper,
  :mod:`speechlab.ssl.wav2vec2.diagnose`).
- :func:`lattice_view`: Viterbi decoding of one utterance over a CTC-topology model's graph
  (eq. 8 of the topologies paper), its lattice, and the lattice's best hypotheses by summed
  path probability with their share of the lattice's mass (BHP, eq. 11, for the Viterbi one):
  :meth:`speechlab.asr.ctc.recognizer.CtcRecognizer.analyse_lattice` as JSON.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from speechlab.errors import DataError

#: Spectrogram of the TTS panel: window and hop (samples at 16 kHz), frequency rows kept.
SPECTROGRAM_WINDOW = 512
SPECTROGRAM_HOP = 80  # 5 ms, the acoustic model's frame period
SPECTROGRAM_ROWS = 128
#: Longest plots sent to the page (frames); longer speech is averaged down to this.
MAX_PLOT_FRAMES = 800


def _downsample(x: np.ndarray, frames: int) -> tuple[np.ndarray, int]:
    """Average runs of ``factor`` frames (axis 0) so that at most ``frames`` remain."""
    factor = max(1, math.ceil(len(x) / frames))
    if factor == 1:
        return x, 1
    n = len(x) // factor * factor
    return x[:n].reshape(n // factor, factor, *x.shape[1:]).mean(axis=1), factor


def spectrogram_db(waveform: np.ndarray) -> np.ndarray:
    """(frames, SPECTROGRAM_ROWS) log power in dB (max 0) of 16 kHz ``waveform``."""
    x = np.asarray(waveform, dtype=np.float64)
    if len(x) < SPECTROGRAM_WINDOW:
        x = np.pad(x, (0, SPECTROGRAM_WINDOW - len(x)))
    frames = 1 + (len(x) - SPECTROGRAM_WINDOW) // SPECTROGRAM_HOP
    idx = np.arange(SPECTROGRAM_WINDOW)[None, :] + SPECTROGRAM_HOP * np.arange(frames)[:, None]
    power = np.abs(np.fft.rfft(x[idx] * np.hanning(SPECTROGRAM_WINDOW), axis=1)) ** 2
    bins = power.shape[1] - 1  # drop Nyquist: 256 bins, averaged in pairs to 128 rows
    power = power[:, :bins].reshape(frames, SPECTROGRAM_ROWS, bins // SPECTROGRAM_ROWS).mean(2)
    db = 10 * np.log10(power + 1e-10)
    return np.maximum(db - db.max(), -80.0)


def speech_view(speech: Any) -> dict[str, Any]:
    """The TTS panel's plots of a :class:`speechlab.tts.synthesis.Speech`: F0 in Hz per 5 ms
    frame (0 where unvoiced) and the spectrogram in dB, both at most :data:`MAX_PLOT_FRAMES`
    long."""
    from speechlab.tts.acoustic import FRAME_PERIOD_MS

    f0, f0_factor = _downsample(np.asarray(speech.f0, dtype=np.float64), MAX_PLOT_FRAMES)
    spec, spec_factor = _downsample(spectrogram_db(speech.waveform), MAX_PLOT_FRAMES)
    seconds = len(speech.waveform) / speech.sample_rate
    voiced = np.asarray(speech.f0)[np.asarray(speech.f0) > 0]
    return {
        "sample_rate": speech.sample_rate,
        "seconds": round(seconds, 3),
        "f0": {"frame_seconds": FRAME_PERIOD_MS / 1000 * f0_factor,
               "hz": [round(float(v), 1) for v in f0],
               "median_hz": round(float(np.median(voiced)), 1) if len(voiced) else None},
        "spectrogram": {"frame_seconds": SPECTROGRAM_HOP / speech.sample_rate * spec_factor,
                        "max_hz": speech.sample_rate / 2,
                        "db": np.round(spec, 1).tolist()},
    }


def attention_view(encoder: Any, samples: np.ndarray) -> dict[str, Any]:
    """Every block's mean-over-heads attention map (64 x 64 thumbnail, rows are queries) for
    one 16 kHz utterance, its statistics and pattern label, and the blocks the diagnosis
    would make local. ``encoder``: a wav2vec 2.0 encoder as ``speechlab.load`` gives one
    (``.model``, ``.waveform`` normalizing as the model's feature extractor does)."""
    from speechlab.ssl.wav2vec2.config import format_blocks
    from speechlab.ssl.wav2vec2.diagnose import block_maps, suggested_blocks

    model = encoder.model
    field = model.config.receptive_field
    if len(samples) < field:
        raise DataError(f"the recording has {len(samples)} samples, shorter than the model's "
                        f"receptive field ({field} samples, {field / 16000:.3f} s)")
    diagnosis = block_maps(model, [encoder.waveform(samples, 16000)])
    blocks = []
    for d in diagnosis:
        s = d.stats[0]
        m = d.thumbnails[0]
        span = float(m.max() - m.min()) or 1.0
        blocks.append({"block": d.block, "label": d.label, "band": round(s.band, 4),
                       "vertical": round(s.vertical, 4), "entropy": round(s.entropy, 4),
                       "frames": s.length,
                       # each map scaled to [0, 1] over its own range, as an image shows it
                       "map": np.round((m - m.min()) / span, 3).tolist()})
    return {"blocks": blocks, "suggested": format_blocks(suggested_blocks(diagnosis)),
            "frames": blocks[0]["frames"] if blocks else 0}


def lattice_view(recognizer: Any, samples: np.ndarray) -> dict[str, Any]:
    """The topology panel's view of one 16 kHz utterance decoded by a
    :class:`~speechlab.asr.ctc.recognizer.CtcRecognizer`
    (:meth:`~speechlab.asr.ctc.recognizer.CtcRecognizer.analyse_lattice`): the Viterbi words,
    the lattice's best hypotheses by summed path probability with their share of the lattice
    (the Viterbi one's is its BHP, eq. 11), its BPP (eq. 10), whether full-sum and Viterbi
    decoding agree, and the lattice's size and beam."""
    a = recognizer.analyse_lattice(samples)
    props = a.summary.proportions
    return {"text": a.text, "topology": recognizer.topology,
            "acoustic_weight": recognizer.viterbi.acoustic_weight, "frames": a.frames,
            "bhp": None if props is None else props.bhp,
            "bpp": None if props is None else props.bpp,
            "fullsum_agrees": a.summary.fullsum_agrees,
            "hypotheses": [{"text": " ".join(recognizer.graph.words(h.words)), "share": h.share,
                            "viterbi": h.viterbi} for h in a.summary.hypotheses],
            "lattice": {"states": a.lattice.num_states, "arcs": a.lattice.num_arcs,
                        "beam": a.lattice_beam}}
