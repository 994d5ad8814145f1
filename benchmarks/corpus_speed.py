"""How fast the embedded corpus is generated, as a multiple of real time.

Builds a corpus of ``--minutes`` of audio per language (end to end: planning, espeak-ng
synthesis in worker processes, resampling, noise, WAV and manifest writing) into a temporary
directory and prints audio seconds / wall seconds. The harvested-text cache is filled first and
not timed (it is built once per machine). The design target is >= 100x real time on 2 cores.

    python benchmarks/corpus_speed.py --minutes 5 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from speechlab.data.corpus import CorpusConfig, make_asr_corpus  # noqa: E402
from speechlab.data.text_harvest import LANGUAGES, harvest_sentences  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=5.0, help="minutes of audio per language")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = p.parse_args(argv)

    harvest_sentences(LANGUAGES)  # fill the cache outside the timed region
    cfg = CorpusConfig(minutes={lang: args.minutes for lang in LANGUAGES}, seed=args.seed,
                       workers=args.workers)
    with tempfile.TemporaryDirectory(prefix="corpus-speed-") as tmp:
        t0 = time.perf_counter()
        out = make_asr_corpus(cfg, Path(tmp) / "corpus", progress=False)
        wall = time.perf_counter() - t0
        info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    audio_s = sum(s["hours"] for s in info["splits"].values()) * 3600
    utts = sum(s["utterances"] for s in info["splits"].values())
    result = {"audio_seconds": round(audio_s, 1), "wall_seconds": round(wall, 2),
              "x_real_time": round(audio_s / wall, 1), "utterances": utts,
              "workers": args.workers, "cpus": os.cpu_count()}
    print(f"{audio_s:.0f} s of audio ({utts} utterances) in {wall:.1f} s with {args.workers} "
          f"workers: {audio_s / wall:.0f}x real time")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if audio_s / wall >= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
