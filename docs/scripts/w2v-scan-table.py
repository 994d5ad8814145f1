"""The pre-training scan's results table (docs/local-attention.md, "Pre-training scan").

One row per finished point of ``OUT`` (a directory of ``docs/scripts/w2v-scan.sh``): the dev
contrastive accuracy at its first and last kept checkpoint, and over every block of every
checkpoint the lowest row entropy (over log T), the largest vertical mass, the range of band
mass and the pattern labels, from ``OUT/POINT/over-training/attention_over_training.json``
(``speechlab diagnose attention-over-training``).

    python docs/scripts/w2v-scan-table.py OUT
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def row(name: str, checkpoints: list[dict]) -> str:
    blocks = [b for c in checkpoints for b in c["blocks"]]
    first, last = checkpoints[0], checkpoints[-1]
    labels = sorted({b["label"] for b in blocks})
    label = f"all {labels[0]}" if len(labels) == 1 else ", ".join(labels)
    return (f"| {name} | {100 * first['accuracy']:.1f}% (update {first['step']:,}) -> "
            f"{100 * last['accuracy']:.1f}% (update {last['step']:,}) | "
            f">= {min(b['entropy'] for b in blocks):.3f} | "
            f"{max(b['vertical'] for b in blocks):.3f} | "
            f"{min(b['band'] for b in blocks):.3f}-{max(b['band'] for b in blocks):.3f} | "
            f"{label} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path, help="the scan's output directory (OUT)")
    a = p.parse_args(argv)
    found = sorted(a.out.glob("*/over-training/attention_over_training.json"),
                   key=lambda f: f.stat().st_mtime)  # in the order they finished
    if not found:
        print(f"{a.out}: no finished point (no */over-training/attention_over_training.json)",
              file=sys.stderr)
        return 2
    print("| point | dev contrastive accuracy, first -> last checkpoint | row entropy / log T "
          "| vertical mass | band mass | labels |")
    print("|---|---|---|---|---|---|")
    for f in found:
        print(row(f.parent.parent.name, json.loads(f.read_text())["checkpoints"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
