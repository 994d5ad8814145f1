"""What the weights' moving average (``TrainConfig.ema_decay``) costs a training update.

Run:  python benchmarks/weight_average.py [--papers ...] [--steps N] [--repeats N] [--json F]

For each paper's ``small`` model (the models of ``benchmarks/train_throughput.py``, trained by
the shared trainer on synthetic batches of the recipe's shape): the median time of one update
of the average (``WeightAverage.update``, over every floating-point weight) against the median
time of a training update measured in the same run, and the memory it holds (one copy of those
weights). Target: at most 2% of an update's time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from train_throughput import throughput

from speechlab.testing.synthetic_training import PAPERS
from speechlab.train.average import WeightAverage

TARGET = 0.02


def average_cost(name: str, repeats: int) -> tuple[float, float]:
    """(median seconds of one update of the average, megabytes it holds)."""
    model, _, _ = PAPERS[name]()
    average = WeightAverage(model, 0.999)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        average.update()
        times.append(time.perf_counter() - start)
    held = sum(v.numel() * v.element_size() for v in average.state_dict().values())
    return statistics.median(times), held / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--papers", nargs="*", default=list(PAPERS), choices=list(PAPERS))
    parser.add_argument("--steps", type=int, default=3, help="timed training updates")
    parser.add_argument("--repeats", type=int, default=50, help="timed updates of the average")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = []
    print(f"{'paper':<16} {'params':>8} {'update ms':>10} {'average ms':>11} {'share':>7} "
          f"{'held MB':>8}")
    for name in args.papers:
        step = throughput(name, args.steps, "cpu", "fp32")
        seconds, held = average_cost(name, args.repeats)
        share = seconds / step["steady_s_per_step"]
        rows.append({"paper": name, "params_m": step["params_m"],
                     "update_s": step["steady_s_per_step"], "average_s": round(seconds, 6),
                     "share": round(share, 5), "held_mb": round(held, 2)})
        print(f"{name:<16} {step['params_m']:>7.2f}M {1000 * step['steady_s_per_step']:>10.1f} "
              f"{1000 * seconds:>11.3f} {100 * share:>6.2f}% {held:>8.1f}", flush=True)
    worst = max(r["share"] for r in rows)
    print(f"largest share of an update: {100 * worst:.2f}% (target: at most "
          f"{100 * TARGET:.0f}%) {'met' if worst <= TARGET else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
