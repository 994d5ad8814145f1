"""``speechlab report RUN_DIR... [--out DIR]``: one HTML page (and report.md) for finished runs.

Prints the path of the HTML page it wrote. The command has no tunable options beyond its
inputs and output, so it takes no config dataclass.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from speechlab.report.html import write_report


def run(args: argparse.Namespace) -> int:
    print(write_report(args.run_dirs, args.out, title=args.title))
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("report", help="HTML report of finished run directories",
                              description="One self-contained HTML page (and "
                              "report.md) for finished run directories.")
    p.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                   help="directories holding a results.json")
    p.add_argument("--out", type=Path, default=Path("report"), metavar="DIR",
                   help="where report.html and report.md go (default: ./report)")
    p.add_argument("--title", default="speechlab report", help="page title")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing (non-empty) --out directory")
    p.set_defaults(func=run, outputs={"out": "dir"})
