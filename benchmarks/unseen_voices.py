"""The shipped recipe's models against their espeak-only twins: in-domain, unseen-voice and
espeak-ng test speech, through the models as a user loads them (``speechlab.load``).

For each model name found in both runs (``RUN/models/NAME``, e.g. ``en_S1-T1``), this decodes
with ``transcribe`` (Viterbi over the model's T∘L∘G, the weight tuned by its run):

* the varied run's ``test`` split (the voices of training, speaker and channel effects),
* its ``unseen`` split (the same sentences by voices no training utterance has),
* the espeak-only run's ``test`` split (espeak-ng test speech, no effects),
* the espeak-only run's ``unseen`` split,

and prints the WERs side by side with the issue's targets: the varied model's unseen WER at
most 2x its in-domain WER and at most 50%; on espeak-ng speech at most 10% relative worse than
the espeak-only model.

    python benchmarks/unseen_voices.py --varied exp/shipped-topologies \\
        --espeak exp/shipped-espeak [--models en_S1-T1 ...] [--utterances 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _cuts(run: Path, split: str, language: str, n: int) -> list:
    from lhotse import CutSet

    path = run / "corpus" / f"{split}_cuts.jsonl.gz"
    if not path.is_file():
        return []
    cuts = [c for c in CutSet.from_file(path) if c.supervisions[0].language == language]
    return cuts[:n] if n else cuts


def names_in(run: Path) -> set[str]:
    return {d.name for d in (run / "models").iterdir() if d.is_dir()}


def _wer(model, cuts: list) -> float | None:
    from speechlab.metrics import wer
    from speechlab.text.normalize import normalize_text

    if not cuts:
        return None
    refs, hyps = [], []
    for cut in cuts:
        sup = cut.supervisions[0]
        refs.append(normalize_text(sup.text, sup.language))
        hyps.append(model.transcribe(cut.load_audio()[0], 16000).text)
    return 100 * wer(refs, hyps).wer


def main(argv: list[str] | None = None) -> int:
    import torch

    import speechlab

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--varied", type=Path, required=True, help="run of the shipped recipe")
    p.add_argument("--espeak", type=Path, required=True, help="run of its espeak-only twin")
    p.add_argument("--utterances", type=int, default=0, help="per set and language (0: all)")
    p.add_argument("--models", nargs="*", default=None,
                   help="only these models (default: every one trained in both runs)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    names = sorted(names_in(args.varied) & names_in(args.espeak)
                   & set(args.models or names_in(args.varied)))
    if not names:
        print("no model trained in both runs", file=sys.stderr)
        return 2
    sets = {"in-domain test": (args.varied, "test"), "unseen voices": (args.varied, "unseen"),
            "espeak-ng test": (args.espeak, "test"),
            "espeak-ng unseen": (args.espeak, "unseen")}
    results: dict[str, dict[str, dict[str, float | None]]] = {}
    ok = True
    print(f"{'model':<14}{'trained on':<14}" + "".join(f"{s:>18}" for s in sets))
    for name in names:
        language = name.split("_")[0]
        results[name] = {}
        for label, run in (("varied", args.varied), ("espeak-only", args.espeak)):
            model = speechlab.load(run / "models" / name)
            row = {s: _wer(model, _cuts(r, split, language, args.utterances))
                   for s, (r, split) in sets.items()}
            results[name][label] = row
            print(f"{name:<14}{label:<14}" + "".join(
                f"{'-' if v is None else f'{v:.1f}':>18}" for v in row.values()))
        v, e = results[name]["varied"], results[name]["espeak-only"]
        checks = {
            "unseen <= 2x in-domain": v["unseen voices"] is not None
            and v["unseen voices"] <= 2 * v["in-domain test"],
            "unseen <= 50%": v["unseen voices"] is not None and v["unseen voices"] <= 50.0,
            "espeak-ng speech <= 1.1x espeak-only model": v["espeak-ng test"] is not None
            and v["espeak-ng test"] <= 1.1 * e["espeak-ng test"],
        }
        results[name]["targets"] = checks
        print(f"{'':<14}targets: " + "; ".join(f"{k}: {'met' if c else 'MISSED'}"
                                              for k, c in checks.items()))
        ok = ok and all(checks.values())
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
