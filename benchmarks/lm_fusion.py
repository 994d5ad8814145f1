"""Shallow fusion of a token n-gram LM into an RNN-T package: WER without and with it.

For each language of the package, a token LM (``speechlab rnnt lm``'s estimate) of the corpus's
``train`` texts; the LM weight and per-label bonus chosen on the ``dev`` split from a grid;
then WER[%] on the ``test`` split (and ``unseen`` where the corpus has it) without the LM and
with the chosen pair, the language given, through the package as a user loads it::

    python benchmarks/lm_fusion.py PKG --corpus exp/shipped-multisoftmax/corpus \\
        [--order 4] [--grid 0.2:0.5,0.2:1,0.3:1,0.3:1.5,0.4:1.5] [--utterances 0]
        [--languages en,hi] [--json OUT]

It says how many test sentences the LM's texts hold (none, for a corpus whose splits keep
sentences apart), so that a gain is not a memorised sentence.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

GRID = "0.2:0.5,0.2:1,0.3:1,0.3:1.5,0.4:1.5"


def _cuts(corpus: Path, split: str, language: str, n: int) -> list:
    from lhotse import CutSet

    path = corpus / f"{split}_cuts.jsonl.gz"
    if not path.is_file():
        return []
    cuts = [c for c in CutSet.from_file(path) if c.supervisions[0].language == language]
    return cuts[:n] if n else cuts


def _wer(model, cuts: list, language: str) -> float:
    from speechlab.metrics import wer
    from speechlab.text.normalize import normalize_text

    refs, hyps = [], []
    for cut in cuts:
        refs.append(normalize_text(cut.supervisions[0].text, language))
        hyps.append(model.transcribe(cut.load_audio()[0], cut.sampling_rate,
                                     language=language).text)
    return 100 * wer(refs, hyps).wer


def _grid(text: str) -> list[tuple[float, float]]:
    try:
        pairs = [tuple(float(x) for x in item.split(":")) for item in text.split(",")]
    except ValueError:
        raise SystemExit(f"--grid {text!r}: give WEIGHT:BONUS pairs, e.g. {GRID}") from None
    if not pairs or any(len(p) != 2 or not 0 < p[0] <= 10 or abs(p[1]) > 10 for p in pairs):
        raise SystemExit(f"--grid {text!r}: weights in (0, 10], bonuses in [-10, 10]")
    return [(p[0], p[1]) for p in pairs]


def main(argv: list[str] | None = None) -> int:
    import torch

    from speechlab.asr.rnnt.commands import token_lm
    from speechlab.contract import as_recognizer
    from speechlab.inference import load
    from speechlab.text.normalize import normalize_text

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an RNN-T package (or a shipped model's name)")
    ap.add_argument("--corpus", type=Path, required=True,
                    help="corpus with {train,dev,test}_cuts.jsonl.gz (and unseen_cuts)")
    ap.add_argument("--order", type=int, default=4, help="the token LM's order (default 4)")
    ap.add_argument("--grid", default=GRID, help=f"WEIGHT:BONUS pairs tried on dev ({GRID})")
    ap.add_argument("--utterances", type=int, default=0,
                    help="per language and split (0: all)")
    ap.add_argument("--languages", default="",
                    help="comma-separated: only these of the model's languages (default: all)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    grid = _grid(args.grid)
    if not (args.corpus / "train_cuts.jsonl.gz").is_file():
        print(f"{args.corpus}: no train_cuts.jsonl.gz to estimate the LM from", file=sys.stderr)
        return 2
    model = as_recognizer(load(args.model), args.model)
    if "lm_fusion" not in model.capabilities:
        print(f"{args.model}: {model.title} takes no token LM", file=sys.stderr)
        return 2
    wanted = [x for x in args.languages.split(",") if x] or list(model.languages)
    unknown = sorted(set(wanted) - set(model.languages))
    if unknown:
        print(f"--languages: {args.model} has no {', '.join(unknown)} (it has "
              f"{', '.join(model.languages)})", file=sys.stderr)
        return 2
    results: dict[str, dict] = {}
    print(f"{args.model}: shallow fusion of a {args.order}-gram token LM of the train texts; "
          f"weight and bonus chosen on dev from {args.grid}; WER[%], the language given")
    for lang in wanted:
        train = _cuts(args.corpus, "train", lang, 0)
        texts = [c.supervisions[0].text for c in train]
        lm, skipped = token_lm(model.tokenizers[lang], texts, args.order)
        test = _cuts(args.corpus, "test", lang, args.utterances)
        seen = {normalize_text(t, lang) for t in texts}
        overlap = sum(normalize_text(c.supervisions[0].text, lang) in seen for c in test)
        dev = _cuts(args.corpus, "dev", lang, args.utterances)
        model.lms.pop(lang, None)
        plain_dev = _wer(model, dev, lang)
        tried = {}
        for weight, bonus in grid:
            model.use_lm(lang, lm, weight, bonus)
            tried[(weight, bonus)] = _wer(model, dev, lang)
        weight, bonus = min(tried, key=lambda k: (tried[k], k))
        row: dict = {"train_lines": len(texts) - skipped, "test_sentences_in_lm_text": overlap,
                     "dev_no_lm": round(plain_dev, 1),
                     "dev_grid": {f"{w}:{b}": round(v, 1) for (w, b), v in tried.items()},
                     "weight": weight, "bonus": bonus}
        for split in ("test", "unseen"):
            cuts = test if split == "test" else _cuts(args.corpus, split, lang, args.utterances)
            if not cuts:
                continue
            model.lms.pop(lang, None)
            plain = _wer(model, cuts, lang)
            model.use_lm(lang, lm, weight, bonus)
            fused = _wer(model, cuts, lang)
            row[split] = {"utterances": len(cuts), "no_lm": round(plain, 1),
                          "lm": round(fused, 1)}
            change = (fused - plain) / plain * 100 if plain else 0.0
            print(f"  {lang} {split:<6} ({len(cuts)} utts): no LM {plain:5.1f}, LM {fused:5.1f} "
                  f"({change:+.1f}% relative; weight {weight}, bonus {bonus} chosen on dev: "
                  f"{tried[(weight, bonus)]:.1f} against {plain_dev:.1f} without)")
        model.lms.pop(lang, None)
        print(f"  {lang}: LM of {row['train_lines']} train lines; {overlap} of {len(test)} test "
              "sentences among them")
        results[lang] = row
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
