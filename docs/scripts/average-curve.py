"""Dev loss against updates for runs that gained the weights' moving average (``ema_decay``)
on resume: the validations of training's own weights before, of the average after, one panel
per model.

    python docs/scripts/average-curve.py exp/shipped-topologies/models/en_S3-T2s:11523 \\
        exp/shipped-multisoftmax/models/multisoftmax_lid:6586 \\
        --out docs/figures/weights-average.svg [--from-update 4000]

Each MODEL_DIR:STEP names the update from which the run validated the average (the log's
``averaged: true`` marks it too, in runs resumed by a speechlab that writes it; the step is
for logs written before)."""

from __future__ import annotations

import argparse
from pathlib import Path

from speechlab.report.plots import panel_plot
from speechlab.train.log import read_log


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="MODEL_DIR:STEP")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--from-update", type=int, default=0,
                   help="leave out the validations before this update (the first ones dwarf "
                        "the rest)")
    p.add_argument("--metric", default="loss")
    args = p.parse_args()
    panels = {}
    for spec in args.runs:
        where, _, start = spec.rpartition(":")
        model_dir, first_averaged = Path(where), int(start)
        valid = [r for r in read_log(model_dir / "log.jsonl")
                 if r.get("kind") == "valid" and args.metric in r
                 and r["step"] >= args.from_update]
        own = [r for r in valid if not r.get("averaged") and r["step"] <= first_averaged]
        avg = [r for r in valid if r.get("averaged") or r["step"] > first_averaged]
        xs = {"training's own weights": [r["step"] for r in own],
              "moving average (ema_decay)": [r["step"] for r in avg]}
        ys = {"training's own weights": [r[args.metric] for r in own],
              "moving average (ema_decay)": [r[args.metric] for r in avg]}
        best_own = min(ys["training's own weights"], default=float("nan"))
        best_avg = min(ys["moving average (ema_decay)"], default=float("nan"))
        panels[f"{model_dir.name}: best {best_own:.2f} -> {best_avg:.2f}"] = (xs, ys)
        print(f"{model_dir.name}: {len(own)} validations of its own weights (best "
              f"{best_own:.3f}), {len(avg)} of the average (best {best_avg:.3f})")
    panel_plot(panels, path=args.out, xlabel="update", ylabel=f"dev {args.metric}",
               title="Validating the weights' moving average instead of the weights")
    print(args.out)


if __name__ == "__main__":
    main()
