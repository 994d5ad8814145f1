"""``speechlab reproduce PAPER``, ``speechlab train PAPER MODEL`` and ``speechlab demo``.

Every paper is a :class:`~speechlab.experiment.reproduction.Reproduction` listed in
:data:`speechlab.experiment.papers.PAPERS`; these commands treat them all alike:

- ``reproduce``: one paper's experiments at a scale, written to ``--out``;
- ``train``: one model of a paper's plan, alone or under torchrun, into the same layout
  (``--out/models/MODEL``), so ``reproduce`` and ``rnnt decode`` can use it;
- ``demo``: every paper at demo scale through one scheduler, one HTML report, and each
  paper's elapsed time against its budget.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from speechlab.config import bounded
from speechlab.experiment.papers import PAPERS, get_paper

log = logging.getLogger(__name__)


def _overrides(args: argparse.Namespace) -> list[str]:
    """``--set`` values, plus what the named switches stand for."""
    from speechlab.errors import ConfigError

    if not args.no_stateful:
        return list(args.set)
    if args.paper != "salad":
        raise ConfigError(f"--no-stateful is a switch of the salad paper's batches; "
                          f"{args.paper} has no stateful batches")
    return [*args.set, "task.stateful=false"]


def _run_reproduce(args: argparse.Namespace) -> int:
    from speechlab.experiment.runner import load_run, reproduce

    run = load_run(get_paper(args.paper), args.scale, args.out, args.corpus, args.config,
                   _overrides(args))
    reproduce([run], jobs=args.jobs)
    print(run.out)
    return 0


def _run_train(args: argparse.Namespace) -> int:
    from speechlab.experiment.runner import load_run, train_one

    run = load_run(get_paper(args.paper), args.scale, args.out, args.corpus, args.config,
                   _overrides(args))
    model_dir = train_one(run, args.model)
    if model_dir is not None:
        print(model_dir)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from speechlab.experiment.runner import budget_lines, load_run, reproduce
    from speechlab.report import write_report

    start = time.time()
    out: Path = args.out
    print(f"speechlab demo: the report will be written to {out / 'report' / 'report.html'}", flush=True)
    papers = [get_paper(name) for name in (args.papers or list(PAPERS))]
    runs = [load_run(p, "demo", out / p.name) for p in papers]
    summaries = reproduce(runs, jobs=args.jobs)
    report = write_report([s.out for s in summaries], out / "report")
    total = (time.time() - start) / 60
    budget = sum(p.demo_minutes for p in papers)
    print("time per paper (its preparation and report plus its jobs' time over the workers; "
          "its budget):")
    for line in budget_lines(summaries):
        print("  " + line)
    print(f"  {'all':<14} {'demo':<8} {total:6.1f} min of {budget:.1f}")
    print(f"report: {report}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", default="demo", help="a recipe scale of the paper (ci, demo, small, ...)")
    p.add_argument("--out", type=Path, required=True, help="run directory")
    p.add_argument("--corpus", type=Path, default=None,
                   help="corpus dir with {train,dev,test}_cuts.jsonl.gz (default: build the embedded one)")
    p.add_argument("--config", type=Path, default=None,
                   help="a recipe YAML to use instead of the scale's (speechlab/recipes/<paper>/<scale>.yaml)")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="override recipe values, e.g. --set train.max_steps=500 task.ctc_weight=0")
    p.add_argument("--no-stateful", action="store_true",
                   help="salad: shuffle the training windows instead of the paper's stateful "
                   "streams (state and position carried between batches); the same as "
                   "--set task.stateful=false")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's tables at a chosen scale")
    p.add_argument("paper", choices=sorted(PAPERS))
    _common(p)
    p.add_argument("--jobs", default=1, type=bounded(int, ge=1, le=256, why="each job is a process running at once"),
                   help="jobs run at a time, one process and one thread each")
    p.set_defaults(func=_run_reproduce, outputs={"out": "run"})

    t = sub.add_parser(
        "train", help="train one model of a paper's plan (also under torchrun)",
        description="Train one model of a paper's plan into OUT/models/MODEL, the layout "
        "`speechlab reproduce` writes. Under torchrun each rank trains on its own shard and "
        "rank 0 alone writes, e.g. `python -m torch.distributed.run --standalone "
        "--nproc_per_node 2 -m speechlab train multisoftmax multisoftmax --scale ci --out DIR`; "
        "across machines use --nnodes N --node_rank I --rdzv_backend c10d --rdzv_endpoint "
        "HOST:PORT on each (docs/training.md).")
    t.add_argument("paper", choices=sorted(PAPERS))
    t.add_argument("model", help="a model of the paper's plan, e.g. multisoftmax, mono_hi, ft_ms_hi")
    _common(t)
    t.set_defaults(func=_run_train, outputs={"out": "run"})

    d = sub.add_parser("demo", help="every paper at demo scale through one scheduler, then one report")
    d.add_argument("--out", type=Path, default=Path("exp/demo"))
    d.add_argument("--jobs", default=2, type=bounded(int, ge=1, le=256, why="each job is a process running at once"),
                   help="jobs run at a time, one process and one thread each (default: 2)")
    d.add_argument("--papers", nargs="*", choices=sorted(PAPERS), default=None,
                   help="only these papers (default: all)")
    d.set_defaults(func=_run_demo, outputs={"out": "run"})
