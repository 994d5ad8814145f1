"""What the page's analysis panels show, computed from one loaded model and one input, as
plain JSON-ready dicts. Nothing here knows HTTP; :mod:`.app` runs these off the event loop.

- :func:`speech_view`: synthesized speech as the TTS panel plots it (F0 track, spectrogram).
- :func:`attention_view`: per-block attention maps of a wav2vec 2.0 encoder for one utterance,
  each with its pattern label (Sec. 3 of the local-attention paper,
  :mod:`speechlab.ssl.wav2vec2.diagnose`).
- :class:`LatticeView`: Viterbi decoding of one utterance over a CTC-topology model's graph
  (eq. 8 of the topologies paper), its lattice, and the lattice's best hypotheses by summed
  path probability with their share of the lattice's mass (BHP, eq. 11, for the Viterbi one),
  as :func:`speechlab.asr.ctc.transcribe.viterbi_with_lattices` measures a test set.
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
#: Lattices analysed for the topology panel: at most this many (state, word history) pairs
#: (:func:`speechlab.asr.ctc.lattice.unique_paths`) and full-sum prefix expansions.
MAX_LATTICE_STATES = 200_000
MAX_EXPANSIONS = 20_000


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


class LatticeView:
    """Viterbi decoding and lattice analysis of single utterances for one
    :class:`~speechlab.asr.ctc.recognizer.CtcRecognizer`, at the acoustic weight, beam and
    max-active it decodes with. The decoder and the lattice search's graph arrays are built
    on first use and kept. Not thread-safe (the Kaldi decoder holds state): one call at a
    time per recognizer."""

    def __init__(self, recognizer: Any, lattice_beam: float = 8.0, nbest: int = 5) -> None:
        self.rec = recognizer
        self.lattice_beam = lattice_beam
        self.nbest = nbest
        self._parts: tuple[Any, Any] | None = None

    def _build(self) -> tuple[Any, Any]:
        from speechlab.asr.ctc import lattice
        from speechlab.asr.ctc.decode import ViterbiDecoder

        if self._parts is None:
            graph = self.rec.graph
            self._parts = (ViterbiDecoder(graph.fst, graph.num_tokens, self.rec.viterbi),
                           lattice.DecodingGraph.from_fst(graph.fst))
        return self._parts

    def __call__(self, samples: np.ndarray) -> dict[str, Any]:
        """``samples``: 16 kHz mono. The Viterbi words, the lattice's ``nbest`` hypotheses by
        summed acoustic path probability (eq. 9 restricted to the lattice) with their share of
        the lattice (the Viterbi hypothesis's share is its BHP, eq. 11), its BPP (eq. 10) and
        whether full-sum and Viterbi decoding agree. A lattice too large to analyse is pruned
        with half the lattice beam until it fits (the beam used is reported)."""
        from speechlab.asr.ctc.lattice_metrics import fullsum_nbest, path_proportions

        decoder, _ = self._build()
        rec = self.rec
        lp = rec.log_probs(samples)
        if not len(lp):
            raise DataError("the recording is too short to give one output frame")
        best = decoder.decode(lp)
        words = " ".join(rec.graph.words(best.words))
        lat, beam = self._lattice(lp)
        ranked = fullsum_nbest(lat, self.nbest, max_expansions=MAX_EXPANSIONS)
        try:
            props = path_proportions(lat, best.words)
        except DataError:  # pruned away (the two searches prune differently): say so
            props = None
        log_total = (props or path_proportions(lat, ranked[0][0])).log_total
        hyps = [{"text": " ".join(rec.graph.words(w)),
                 "share": math.exp(min(0.0, s - log_total)),
                 "viterbi": tuple(w) == tuple(best.words)} for w, s in ranked]
        if props is not None and not any(h["viterbi"] for h in hyps):
            hyps.append({"text": words, "share": props.bhp, "viterbi": True})  # below the n best
        top = ranked[0][1]
        # A tie with the Viterbi words (homophones under p(pi|X)) counts as agreement, as
        # lattice_metrics.fullsum_best decides.
        agrees = props is not None and props.log_hypothesis >= top - 1e-9 * max(1.0, abs(top))
        return {"text": words, "topology": rec.topology,
                "acoustic_weight": rec.viterbi.acoustic_weight, "frames": int(lp.shape[0]),
                "bhp": None if props is None else props.bhp,
                "bpp": None if props is None else props.bpp,
                "fullsum_agrees": bool(agrees), "hypotheses": hyps,
                "lattice": {"states": lat.num_states, "arcs": lat.num_arcs, "beam": beam}}

    def _lattice(self, lp: np.ndarray) -> tuple[Any, float]:
        from speechlab.asr.ctc import lattice

        _, graph = self._build()
        v = self.rec.viterbi
        beam = self.lattice_beam
        while True:
            cfg = lattice.LatticeConfig(beam=v.beam, max_active=v.max_active, lattice_beam=beam,
                                        acoustic_scale=v.acoustic_weight, unique_paths=False)
            raw = lattice.generate(graph, lp, cfg, utt="upload")
            try:
                return lattice.unique_paths(raw, max_states=MAX_LATTICE_STATES), beam
            except DataError:
                if beam < 1.0:
                    raise DataError("the lattice of this recording is too large to analyse, "
                                    "even pruned hard; try a shorter recording") from None
                beam /= 2
