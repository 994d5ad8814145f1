"""How fast the embedded corpus is made, as a multiple of real time, per voice and in all.

Three measurements in one run, on ``--workers`` worker processes:

1. each festival voice alone (the voices the varied corpus adds), clean: planned utterances of
   one speaker family, no effects, through the corpus builder's own batches and workers;
2. espeak-ng alone, the same way (the peer the festival voices are compared with);
3. the whole varied corpus end to end (planning, both synthesizers, WORLD voices, rooms,
   noise, lines, codecs, WAV and manifest writing) against the espeak-only corpus of the same
   minutes (:meth:`CorpusConfig.espeak_only`).

The harvested-text cache is filled first and not timed. Targets: every festival voice and the
varied corpus at least 100x real time on 2 cores.

    python benchmarks/corpus_speed.py --minutes 3 --workers 2 [--json out.json]
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

from speechlab.audio.augment import AugmentPlan  # noqa: E402
from speechlab.data.corpus import BASE_VOICES, CorpusConfig, make_asr_corpus  # noqa: E402
from speechlab.data.text_harvest import LANGUAGES, harvest_sentences  # noqa: E402

TARGET = 100.0
# family -> its language (the festival voices the varied corpus adds, SLT through its 16 kHz
# conversion, and espeak-ng's peers)
FAMILIES = {"en-kal": "en", "en-ked": "en", "en-slt": "en", "en-slt16": "en", "hi-nsk": "hi",
            "gu-nsk": "gu", "en-us": "en", "hi": "hi"}
# festival's speakers of other languages reading respelt English (in no default corpus)
ACCENTED = {f: "en" for f in ("en-dita", "en-machac", "en-ph", "en-lj", "en-mv", "en-lp",
                              "en-pc")}
NO_EFFECTS = dict(effects=AugmentPlan(), babble_prob=0.0, noise_prob=0.0)


def _build(cfg: CorpusConfig) -> tuple[float, float, int]:
    """(audio seconds, wall seconds, utterances) of building ``cfg`` into a temporary dir."""
    with tempfile.TemporaryDirectory(prefix="corpus-speed-") as tmp:
        t0 = time.perf_counter()
        out = make_asr_corpus(cfg, Path(tmp) / "corpus", progress=False)
        wall = time.perf_counter() - t0
        info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    audio = sum(s["hours"] for s in info["splits"].values()) * 3600
    return audio, wall, sum(s["utterances"] for s in info["splits"].values())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=3.0, help="minutes of audio per language")
    p.add_argument("--voice-minutes", type=float, default=2.0,
                   help="minutes of audio per single-voice measurement")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--accented", action="store_true", help="also each accented English voice "
                   "alone (en-dita ... en-pc)")
    args = p.parse_args(argv)

    harvest_sentences(LANGUAGES)  # fill the cache outside the timed region
    # ...and start every library and worker server once, so the first row pays no warm-up
    _build(CorpusConfig(minutes={"en": 0.3, "hi": 0.3}, seed=args.seed, workers=args.workers))
    results: dict[str, dict] = {}
    failed = []
    print(f"{'what':<34}{'audio s':>9}{'wall s':>8}{'x real time':>13}")
    for family, lang in {**FAMILIES, **(ACCENTED if args.accented else {})}.items():
        cfg = CorpusConfig(minutes={lang: args.voice_minutes}, voices={lang: {family: 1.0}},
                           unseen_voices={}, seed=args.seed, workers=args.workers, **NO_EFFECTS)
        audio, wall, n = _build(cfg)
        results[family] = {"audio_seconds": round(audio, 1), "wall_seconds": round(wall, 2),
                           "x_real_time": round(audio / wall, 1), "utterances": n}
        festival = BASE_VOICES[family].engine == "festival"
        print(f"{family + (' (festival)' if festival else ' (espeak-ng)'):<34}{audio:>9.0f}"
              f"{wall:>8.1f}{audio / wall:>12.0f}x")
        if festival and audio / wall < TARGET:
            failed.append(family)
    minutes = {lang: args.minutes for lang in LANGUAGES}
    for name, cfg in (("varied corpus (all effects)", CorpusConfig(minutes=minutes,
                                                                   seed=args.seed,
                                                                   workers=args.workers)),
                      ("espeak-only corpus", CorpusConfig.espeak_only(minutes=minutes,
                                                                      seed=args.seed,
                                                                      workers=args.workers))):
        audio, wall, n = _build(cfg)
        results[name] = {"audio_seconds": round(audio, 1), "wall_seconds": round(wall, 2),
                         "x_real_time": round(audio / wall, 1), "utterances": n}
        print(f"{name:<34}{audio:>9.0f}{wall:>8.1f}{audio / wall:>12.0f}x")
    varied = results["varied corpus (all effects)"]["x_real_time"]
    ratio = varied / results["espeak-only corpus"]["x_real_time"]
    print(f"varied / espeak-only speed: {ratio:.2f}; target: festival voices and the varied "
          f"corpus >= {TARGET:.0f}x real time with {args.workers} workers on "
          f"{os.cpu_count()} CPUs")
    if varied < TARGET:
        failed.append("varied corpus")
    if failed:
        print("below target:", ", ".join(failed))
    if args.json:
        args.json.write_text(json.dumps({"workers": args.workers, "cpus": os.cpu_count(),
                                         "results": results, "below_target": failed},
                                        indent=2) + "\n", encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
