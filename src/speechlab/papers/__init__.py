"""The papers speechlab reproduces, and the commands that run them: ``speechlab reproduce
PAPER``, ``speechlab train PAPER MODEL``, ``speechlab demo`` and ``speechlab papers``.

Each paper's reproduction is a package here (``multisoftmax``, ``topologies``,
``local_attention``, ``salad``: its recipe, plan, decoding of test sets and tables), apart from
the model families it runs, which are library code (``speechlab.asr``, ``speechlab.ssl``,
``speechlab.tts``) and import nothing from here. This module stands above every paper: a new
paper plugs in with one line in :data:`PAPERS` (a function returning its
:class:`~speechlab.experiment.reproduction.Reproduction`, imported on use so that one paper's
imports do not slow every command). The shared experiment layer below knows no paper.

- ``reproduce``: one paper's experiments at a scale, written to ``--out``;
- ``train``: one model of a paper's plan, alone or under torchrun, into the same layout
  (``--out/models/MODEL``), so ``reproduce`` and ``transcribe`` can use it;
- ``demo``: every paper at demo scale through one scheduler, one HTML report, and each
  paper's elapsed time against its budget;
- ``papers``: the papers, their scales, models and switches.

A paper may declare switches of its own (``Reproduction.switches``, e.g. salad's
``--no-stateful``): ``reproduce`` and ``train`` take them after the paper's name.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from speechlab.config import bounded
from speechlab.devices import add_device_options
from speechlab.errors import ConfigError

log = logging.getLogger(__name__)


def _multisoftmax() -> Any:
    from speechlab.papers.multisoftmax.reproduce import MultiSoftmaxPaper

    return MultiSoftmaxPaper()


def _topologies() -> Any:
    from speechlab.papers.topologies.reproduce import TopologiesPaper

    return TopologiesPaper()


def _local_attention() -> Any:
    from speechlab.papers.local_attention.reproduce import LocalAttentionPaper

    return LocalAttentionPaper()


def _salad() -> Any:
    from speechlab.papers.salad.reproduce import SaladPaper

    return SaladPaper()


#: The reproductions by the name the CLI uses.
PAPERS: dict[str, Callable[[], Any]] = {
    "multisoftmax": _multisoftmax,
    "topologies": _topologies,
    "local-attention": _local_attention,
    "salad": _salad,
}


def get_paper(name: str) -> Any:
    try:
        return PAPERS[name]()
    except KeyError:
        raise ConfigError(f"unknown paper {name!r}; papers: {', '.join(PAPERS)}") from None


def switch_overrides(paper: Any, given: Sequence[str]) -> list[str]:
    """The recipe overrides the switches ``given`` on the command line stand for; a switch the
    paper does not declare is refused, naming the ones it has."""
    own = {s.flag: s for s in paper.switches}
    out: list[str] = []
    for flag in given:
        if flag not in own:
            have = ", ".join(own) or "none"
            raise ConfigError(f"{flag}: not an option of `{paper.name}` (its own switches: "
                              f"{have}); recipe values are set with --set KEY=VALUE")
        out += own[flag].overrides
    return out


def precision_overrides(paper: Any, precision: str | None) -> list[str]:
    """``--precision``: the override that sets it in each of the recipe's training configs."""
    import typing

    from speechlab.train.config import TrainConfig

    if precision is None:
        return []
    hints = typing.get_type_hints(paper.config_class)
    return [f"{name}.precision={precision}" for name, kind in hints.items()
            if kind is TrainConfig]


def _load(args: argparse.Namespace):
    from speechlab.experiment.runner import load_run

    paper = get_paper(args.paper)
    overrides = [*args.set, *switch_overrides(paper, args.switches),
                 *precision_overrides(paper, args.precision)]
    return load_run(paper, args.scale, args.out, args.corpus, args.config, overrides)


def _run_reproduce(args: argparse.Namespace) -> int:
    from speechlab.experiment.runner import run_reproductions

    run = _load(args)
    run_reproductions([run], jobs=args.jobs)
    print(run.out)
    return 0


def _run_train(args: argparse.Namespace) -> int:
    from speechlab.experiment.runner import train_one

    model_dir = train_one(_load(args), args.model)
    if model_dir is not None:
        print(model_dir)
    return 0


def _run_decode(args: argparse.Namespace) -> int:
    from speechlab.experiment.runner import decode_one

    run = _load(args)
    for name, _value, summary in decode_one(run, args.model):
        print(f"{run.paper.name}/{name}: {summary}")
    print(run.models_dir / args.model)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from speechlab.experiment.runner import load_run, run_reproductions
    from speechlab.report import write_report

    start = time.time()
    out: Path = args.out
    print(f"speechlab demo: the report will be written to {out / 'report' / 'report.html'}", flush=True)
    papers = [get_paper(name) for name in (args.papers or list(PAPERS))]
    runs = [load_run(p, "demo", out / p.name, overrides=precision_overrides(p, args.precision))
            for p in papers]
    summaries = run_reproductions(runs, jobs=args.jobs)
    report = write_report([s.out for s in summaries], out / "report")
    total = (time.time() - start) / 60
    budget = sum(p.demo_minutes for p in papers)
    for line in demo_summary(summaries, total, budget, args.setup_seconds):
        print(line)
    print(f"report: {report}")
    return 0


def demo_summary(summaries: Sequence[Any], minutes: float, budget: float,
                 setup_seconds: float | None = None) -> list[str]:
    """The lines ``speechlab demo`` ends with: each paper's share of the time against its
    budget, the demo's own minutes against the sum of the budgets, and, when the set-up was
    timed (``make demo`` passes it), the set-up and the time from ``make demo`` to the report."""
    from speechlab.experiment.runner import budget_lines

    lines = ["time per paper (its preparation and report plus its jobs' time over the workers; "
             "its budget):"]
    lines += ["  " + line for line in budget_lines(summaries)]
    verdict = "within budget" if minutes <= budget else "OVER BUDGET"
    lines.append(f"  {'all':<14} {'demo':<8} {minutes:6.1f} min of {budget:.1f} ({verdict})")
    if setup_seconds is not None:
        setup = setup_seconds / 60
        lines.append(f"  {'set-up':<14} {'':<8} {setup:6.1f} min (`make setup`: Debian and "
                     "Python packages; nothing when already done)")
        lines.append(f"  {'in all':<14} {'':<8} {setup + minutes:6.1f} min from `make demo` to "
                     "the report")
    return lines


def _run_papers(args: argparse.Namespace) -> int:
    from speechlab.experiment.jobs import trained_models
    from speechlab.experiment.recipes import load_recipe

    for name in PAPERS:
        paper = get_paper(name)
        print(f"{name}: {paper.title}")
        print(f"  scales: {', '.join(paper.scales)}; demo budget {paper.demo_minutes:g} min")
        models = trained_models(paper.plan(load_recipe(paper.config_class, name, "demo")))
        print(f"  models (demo plan): {', '.join(models)}")
        for s in paper.switches:
            print(f"  switch {s.flag}: {s.help} (= --set {' '.join(s.overrides)})")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", default="demo", help="a recipe scale of the paper (ci, demo, small, ...)")
    p.add_argument("--out", type=Path, required=True, help="run directory")
    p.add_argument("--corpus", type=Path, default=None,
                   help="corpus dir with {train,dev,test}_cuts.jsonl.gz (default: build the embedded one)")
    p.add_argument("--config", type=Path, default=None,
                   help="a recipe YAML to use instead of the scale's (speechlab/recipes/<paper>/<scale>.yaml)")
    # extend: a second --set adds to the first instead of silently replacing it
    p.add_argument("--set", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                   help="override recipe values, e.g. --set train.max_steps=500 task.ctc_weight=0"
                        " (repeatable)")
    add_device_options(p)
    p.set_defaults(accepts_switches=True)


JOBS = bounded(int, ge=1, le=256, why="each job is a process running at once")

SWITCHES_EPILOG = ("A paper may declare switches of its own, given like any option (e.g. "
                   "`speechlab reproduce salad --no-stateful ...`); `speechlab papers` lists "
                   "them.")


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="reproduce a paper's tables at a chosen scale",
                       epilog=SWITCHES_EPILOG)
    p.add_argument("paper", choices=sorted(PAPERS))
    _common(p)
    p.add_argument("--jobs", default=1, type=JOBS,
                   help="jobs run at a time, one process and one thread each")
    p.set_defaults(func=_run_reproduce, outputs={"out": "run"})

    t = sub.add_parser(
        "train", help="train one model of a paper's plan (also under torchrun)",
        description="Train one model of a paper's plan into OUT/models/MODEL, the layout "
        "`speechlab reproduce` writes. Under torchrun each rank trains on its own shard and "
        "rank 0 alone writes, e.g. `python -m torch.distributed.run --standalone "
        "--nproc_per_node 2 -m speechlab train multisoftmax multisoftmax --scale ci --out DIR`; "
        "across machines use --nnodes N --node_rank I --rdzv_backend c10d --rdzv_endpoint "
        "HOST:PORT on each (docs/training.md).", epilog=SWITCHES_EPILOG)
    t.add_argument("paper", choices=sorted(PAPERS))
    t.add_argument("model", help="a model of the paper's plan, e.g. multisoftmax, mono_hi, ft_ms_hi")
    _common(t)
    t.set_defaults(func=_run_train, outputs={"out": "run"})

    c = sub.add_parser(
        "decode", help="decode one model of a paper's plan now, on the checkpoint it has",
        description="Run the decode jobs of MODEL as `speechlab reproduce` would, on the best "
        "checkpoint OUT/models/MODEL holds now (its training may still be running or have "
        "stopped): decoding settings tuned on the dev set (a CTC model's acoustic weight) are "
        "written beside the model, so `speechlab export` / `speechlab models ship` of a run "
        "that has not finished decodes as the finished run would, and the result is kept in "
        "OUT/decoded for `reproduce` to reuse while the model is unchanged.",
        epilog=SWITCHES_EPILOG)
    c.add_argument("paper", choices=sorted(PAPERS))
    c.add_argument("model", help="a trained model of the paper's plan, e.g. en_S3-T2s")
    _common(c)
    c.set_defaults(func=_run_decode, outputs={"out": "run"})

    d = sub.add_parser("demo", help="every paper at demo scale through one scheduler, then one report")
    d.add_argument("--out", type=Path, default=Path("exp/demo"))
    d.add_argument("--jobs", default=2, type=JOBS,
                   help="jobs run at a time, one process and one thread each (default: 2)")
    d.add_argument("--papers", nargs="*", choices=sorted(PAPERS), default=None,
                   help="only these papers (default: all)")
    d.add_argument("--setup-seconds", type=bounded(float, ge=0, why="a duration"), default=None,
                   help="seconds the set-up took before the demo (`make demo` passes it), shown "
                   "in the summary beside the demo's own time")
    add_device_options(d)
    d.set_defaults(func=_run_demo, outputs={"out": "run"})

    q = sub.add_parser("papers", help="the papers: scales, models of the demo plan, switches")
    q.set_defaults(func=_run_papers)
