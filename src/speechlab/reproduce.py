"""``speechlab reproduce PAPER`` and ``speechlab demo``.

Each paper's reproduction is a function ``run(scale, out_dir, corpus_dir | None) -> Path`` in its
own package, picked from :data:`REPRODUCTIONS` by name. ``demo`` builds the embedded corpus,
runs every reproduction that exists at demo scale and writes one HTML report over all of them.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Callable


log = logging.getLogger(__name__)

def _multisoftmax(**kw) -> Path:
    from speechlab.asr.rnnt.reproduce import run

    return run(**kw)


# name -> run function; imported on use so one paper's heavy imports don't slow the others.
REPRODUCTIONS: dict[str, Callable[..., Path]] = {
    "multisoftmax": _multisoftmax,
}


def _run_reproduce(args: argparse.Namespace) -> int:
    fn = REPRODUCTIONS[args.paper]
    run_dir = fn(scale=args.scale, out_dir=args.out, corpus_dir=args.corpus, config=args.config,
                 overrides=args.set, jobs=args.jobs)
    print(run_dir)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from speechlab.report import write_report

    start = time.time()
    out: Path = args.out
    print(f"speechlab demo: the report will be written to {out / 'report' / 'report.html'}", flush=True)
    run_dirs = []
    for name, fn in REPRODUCTIONS.items():
        log.info("demo: reproducing %s at demo scale", name)
        run_dirs.append(fn(scale="demo", out_dir=out / name, corpus_dir=None, jobs=args.jobs))
    report = write_report(run_dirs, out / "report")
    log.info("demo finished in %.1f min", (time.time() - start) / 60)
    print(f"report: {report}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's tables at a chosen scale")
    p.add_argument("paper", choices=sorted(REPRODUCTIONS))
    p.add_argument("--scale", default="demo", help="demo | small | paper-shape (per paper)")
    p.add_argument("--out", type=Path, required=True, help="run directory")
    p.add_argument("--corpus", type=Path, default=None,
                   help="corpus dir with {train,dev,test}_cuts.jsonl.gz (default: build the embedded one)")
    p.add_argument("--config", type=Path, default=None,
                   help="a recipe YAML to use instead of the scale's (recipes/<paper>/<scale>.yaml)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="override recipe values, e.g. --set train.max_steps=500 task.ctc_weight=0")
    p.add_argument("--jobs", type=int, default=1,
                   help="models trained at a time, one process and one thread each")
    p.set_defaults(func=_run_reproduce)

    d = sub.add_parser("demo", help="build the embedded corpus, run every reproduction at demo scale, write the report")
    d.add_argument("--out", type=Path, default=Path("exp/demo"))
    d.add_argument("--jobs", type=int, default=2,
                   help="models trained at a time, one process and one thread each (default: 2)")
    d.set_defaults(func=_run_demo)
