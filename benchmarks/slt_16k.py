"""festival's SLT voice through its 16 kHz conversion (``speechlab.data.htsvoice``, the corpus's
``en-slt16``) against the voice as Debian ships it (32 kHz, resampled to 16 kHz: ``en-slt``).

The run corpus's first N English test sentences are spoken by both, then:

1. **Speed**: each voice's wall time with 2 workers (one festival process per batch of 10
   sentences, as the corpus builds), in x real time, in the same run.
2. **Samples**: the two lengths of every sentence (the conversion keeps durations, so they must
   be equal) and, per band, the mean level difference over speech frames (16 kHz minus 32 kHz, dB)
   and its frame-by-frame rms.
3. **WER** of each MODEL on both, beside its test and unseen splits. A model trained on the
   32 kHz voice (the shipped ones) measures what the conversion changes for what it learnt; a
   model that never heard SLT (the espeak-only twin, ``exp/shipped-espeak/models/...``), what it
   changes for a listener.

    python benchmarks/slt_16k.py [MODEL ...] [--corpus exp/shipped-topologies/corpus]
        [--utterances 100] [--json out.json] [--wav-dir DIR]

MODEL: shipped names, package paths or runs' ``OUT/models/NAME`` (default: en_ctc_t2).
Exit status 2 when festival's SLT voice is missing.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))
from accented_english import DEFAULT_CORPUS, english_cuts, markdown, measure_voices  # noqa: E402

VOICES = {"slt-32k": "cmu_us_slt_arctic_hts", "slt-16k": "cmu_us_slt_arctic_hts_16k"}
BANDS = ((0, 250), (250, 1000), (1000, 2000), (2000, 4000), (4000, 8000))
DIFF = "16k - 32k"
BATCH = 10


def _speak(texts: list[str], voice: str) -> list:
    from speechlab.data.festival import FestivalItem, synthesize

    return synthesize([FestivalItem(t, voice) for t in texts])


def speak_timed(texts: list[str], voice: str) -> tuple[list, float]:
    """``texts`` spoken by festival's ``voice`` (int16 at 16 kHz each) and the wall time, with
    two worker processes."""
    batches = [texts[i:i + BATCH] for i in range(0, len(texts), BATCH)]
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_speak, [["Warm up."]] * 2, [voice] * 2))  # start both workers
        t0 = time.perf_counter()
        out = [a for batch in pool.map(_speak, batches, [voice] * len(batches)) for a in batch]
        return out, time.perf_counter() - t0


def band_levels(x, rate: int = 16000):
    """(bands, frames) dB of ``x``'s STFT power in :data:`BANDS`, and the speech frames (total
    power within 30 dB of the loudest)."""
    import numpy as np
    from scipy.signal import stft

    f, _, spec = stft(x.astype(np.float64) / 32768.0, rate, nperseg=512, noverlap=384)
    power = np.abs(spec) ** 2
    total = power.sum(0)
    speech = total > 1e-3 * total.max()
    levels = np.stack([10 * np.log10(power[(f >= lo) & (f < hi)].mean(0) + 1e-12)
                       for lo, hi in BANDS])
    return levels, speech


def compare(old: list, new: list) -> dict:
    """Lengths and per-band level differences of ``new`` against ``old`` (module docstring)."""
    import numpy as np

    diffs: list[list[tuple[float, float]]] = [[] for _ in BANDS]
    unequal = 0
    for a, b in zip(old, new):
        unequal += len(a) != len(b)
        n = min(len(a), len(b))
        la, speech = band_levels(a[:n])
        lb, _ = band_levels(b[:n])
        d = (lb - la)[:, speech]
        for k in range(len(BANDS)):
            diffs[k].append((float(d[k].mean()), float(np.sqrt((d[k] ** 2).mean()))))
    return {"unequal_lengths": unequal, "bands": [
        {"band_hz": f"{lo}-{hi}", "mean_db": round(float(np.mean([m for m, _ in v])), 2),
         "frame_rms_db": round(float(np.mean([r for _, r in v])), 2)}
        for (lo, hi), v in zip(BANDS, diffs)]}


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="shipped names, package paths or runs' "
                    "OUT/models/NAME (default: en_ctc_t2)")
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                    help=f"a run corpus with English test cuts (default: {DEFAULT_CORPUS})")
    ap.add_argument("--utterances", type=int, default=100,
                    help="the first N English test sentences (0: all; default 100)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--wav-dir", type=Path, help="also write both voices' audio here")
    args = ap.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"slt_16k: no corpus at {args.corpus}; pass --corpus", file=sys.stderr)
        return 2
    from speechlab.data import festival
    from speechlab.errors import MissingToolError

    try:
        festival.check_voices(list(VOICES.values()))
    except MissingToolError as e:
        print(f"slt_16k: {e}", file=sys.stderr)
        return 2
    festival._script([festival.FestivalItem("x", VOICES["slt-16k"])], Path("."))  # convert
    texts = [c.supervisions[0].text for c in english_cuts(args.corpus, "test", args.utterances)]
    if not texts:
        print(f"slt_16k: no English test cuts in {args.corpus}", file=sys.stderr)
        return 2
    audio, speed = {}, {}
    for key, voice in VOICES.items():
        audio[key], wall = speak_timed(texts, voice)
        seconds = sum(len(a) for a in audio[key]) / 16000
        speed[key] = {"audio_s": round(seconds, 1), "wall_s": round(wall, 2),
                      "x_real_time": round(seconds / wall, 1)}
        print(f"{key}: {seconds:.0f} s of speech in {wall:.1f} s: {seconds / wall:.0f}x real "
              "time (2 workers)", file=sys.stderr)
    samples = compare(audio["slt-32k"], audio["slt-16k"])
    print(json.dumps({"speed": speed, "samples": samples}, indent=1))

    import numpy as np

    readers = {key: (lambda _texts, key=key: [a.astype(np.float32) / 32768.0
                                             for a in audio[key]]) for key in VOICES}
    rows = measure_voices(args.models or ["en_ctc_t2"], args.corpus, args.utterances, readers,
                          DIFF, args.wav_dir, mean_over=[])
    for row in rows:
        if row.get("slt-16k") is not None and row.get("slt-32k") is not None:
            row[DIFF] = round(row["slt-16k"] - row["slt-32k"], 1)
    print(markdown(rows, list(VOICES), DIFF))
    if args.json:
        args.json.write_text(json.dumps({"speed": speed, "samples": samples, "wer": rows},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
