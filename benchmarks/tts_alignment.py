"""How well ``speechlab data align-tts`` times phones, where the true times are known.

Recorded speech has no true phone times, so the readers here are festival's own voices, whose
phone times are known: the same harvested English sentences read by the SLT HTS voice (female)
and the KAL diphone voice (male), each with its labels. Each reading is aligned with the other
voice as the reference (:func:`speechlab.tts.align.align_recording`), once clean and once
through a room and 20 dB of noise, and each estimated phone boundary is compared with the
reader's true one. The two voices' front ends do not always agree on the phones; only boundaries
inside runs of phones both readings share are scored.

The peer in the same run is the alignment without a warp: the reference's boundaries stretched



The aligner's features were chosen on the first 40 sentences; the benchmark scores the next
``--sentences`` (``--offset 0`` to see the tuning set).

    python benchmarks/tts_alignment.py [--sentences 60] [--offset 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

RATIO_TARGET = 0.25
MEDIAN_TARGET_MS = 20.0


def _boundaries(reader, reference):  # noqa: ANN001, ANN202 (Labels)
    """Pairs of (index in reader, index in reference) of boundaries after a phone both share
    with the next one too."""
    sm = difflib.SequenceMatcher(a=reader.phones, b=reference.phones, autojunk=False)
    pairs = []
    for a, b, n in sm.get_matching_blocks():
        pairs += [(a + k, b + k) for k in range(n - 1)]
    return pairs


def main(argv: list[str] | None = None) -> int:
    from speechlab.audio.augment import add_noise, reverb
    from speechlab.tts.align import align_recording
    from speechlab.tts.corpus import TtsCorpusConfig, english_sentences, festival_synthesize
    from speechlab.tts.labels import FRAME_SECONDS, parse_labels

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=60)
    p.add_argument("--offset", type=int, default=40,
                   help="sentences skipped (the first 40 chose the aligner's features)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    sentences = english_sentences(TtsCorpusConfig(min_words=6, max_words=20))[
        args.offset: args.offset + args.sentences]
    voices = {"slt": "cmu_us_slt_arctic_hts", "kal": "kal_diphone"}
    spoken = {}
    with tempfile.TemporaryDirectory(prefix="tts-alignment-") as tmp:
        for name, voice in voices.items():
            got = festival_synthesize([(f"s{i}", s) for i, s in enumerate(sentences)],
                                      Path(tmp) / name, voice)
            spoken[name] = [(a, parse_labels(lines, f"{name} s{i}"))
                            for i, (a, lines) in enumerate(got[f"s{i}"]
                                                          for i in range(len(sentences)))]
    rng = np.random.default_rng(0)
    errors: dict[str, dict[str, list[float]]] = {}
    for reader, reference in (("slt", "kal"), ("kal", "slt")):
        for channel in ("clean", "room+noise"):
            case = f"{reader} read, {reference} reference, {channel}"
            dtw_err, lin_err = [], []
            for (audio, truth), (ref_audio, ref_labels) in zip(spoken[reader], spoken[reference]):
                if channel != "clean":
                    audio = reverb(audio, 0.4, 3.0, float(rng.integers(1 << 30)))
                    audio = add_noise(audio, 20.0, "pink", rng).astype(np.float32)
                got = align_recording(audio, ref_audio, ref_labels).labels
                scale = (len(audio) / len(ref_audio))
                for a, b in _boundaries(truth, ref_labels):
                    true = truth.ends[a] * FRAME_SECONDS
                    dtw_err.append(abs(got.ends[b] * FRAME_SECONDS - true))
                    lin_err.append(abs(ref_labels.ends[b] * scale * FRAME_SECONDS - true))
            errors[case] = {"warp": dtw_err, "linear": lin_err}
    rows, ok = {}, True
    print(f"{len(sentences)} sentences (from sentence {args.offset + 1}); phone boundary error (ms), where both readings share "
          "the phones")
    print(f"{'case':<36}{'boundaries':>11}{'warp mean':>11}{'median':>8}{'<=20ms':>8}"
          f"{'linear mean':>13}{'ratio':>7}")
    for case, e in errors.items():
        w, lin = 1000 * np.array(e["warp"]), 1000 * np.array(e["linear"])
        ratio = w.mean() / lin.mean()
        rows[case] = {"boundaries": len(w), "warp_mean_ms": round(float(w.mean()), 1),
                      "warp_median_ms": round(float(np.median(w)), 1),
                      "warp_within_20ms": round(float(np.mean(w <= 20)), 3),
                      "linear_mean_ms": round(float(lin.mean()), 1), "ratio": round(ratio, 3)}
        ok &= ratio <= RATIO_TARGET and np.median(w) <= MEDIAN_TARGET_MS
        print(f"{case:<36}{len(w):>11}{w.mean():>11.1f}{np.median(w):>8.1f}"
              f"{100 * np.mean(w <= 20):>7.0f}%{lin.mean():>13.1f}{ratio:>7.2f}")
    print(f"targets: warp mean <= {RATIO_TARGET:g} x linear, median <= {MEDIAN_TARGET_MS:g} ms: "
          f"{'met' if ok else 'NOT met'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
