"""One of ``make demo``'s training jobs with speechlab's compiled CPU dropout
(``speechlab.nn.dropout``) and with PyTorch's: the CPU seconds each takes, interleaved rounds.

``benchmarks/train_throughput.py --dropout-rounds`` compares the two on every paper's ``small``
model; the demo's models are smaller, where a compiled call's fixed cost weighs more. This
trains a demo job from scratch in a copy of a finished demo run (its corpus, features and
graphs, not its models), one thread, in a fresh process each time, and counts the process's
CPU seconds (user + system), which the machine's other load changes less than the wall clock:

    python benchmarks/demo_dropout.py --demo exp/demo [--paper topologies] [--model en_S1-T1]
        [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# Run in the child: the switch set, then the CLI as `speechlab train` runs it.
CHILD = ("import sys, speechlab.nn.dropout as d; d.COMPILED = sys.argv[1] == '1'; "
         "from speechlab.cli import main; sys.exit(main(sys.argv[2:]))")


def cpu_seconds(run: Path, paper: str, model: str, compiled: bool) -> float:
    """CPU seconds of one ``speechlab train PAPER MODEL --scale demo`` into a copy of
    ``run`` without its models."""
    with tempfile.TemporaryDirectory(prefix="demo-dropout-") as tmp:
        out = Path(tmp) / paper
        shutil.copytree(run, out, ignore=shutil.ignore_patterns("models", "decoded", "hyps",
                                                                "results.*", "report"))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", CHILD, "1" if compiled else "0", "train", paper,
                        model, "--scale", "demo", "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--demo", type=Path, default=Path("exp/demo"), help="a finished demo run")
    p.add_argument("--paper", default="topologies")
    p.add_argument("--model", default="en_S1-T1")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    run = args.demo / args.paper
    if not (run / "corpus").is_dir():
        print(f"{run} holds no demo run (run `make demo` first)", file=sys.stderr)
        return 2
    seconds: dict[str, list[float]] = {"compiled": [], "pytorch": []}
    for _ in range(args.rounds):
        for name in seconds:
            seconds[name].append(round(cpu_seconds(run, args.paper, args.model,
                                                   name == "compiled"), 1))
            print(f"{args.paper}/{args.model} {name:9s} {seconds[name][-1]:7.1f} CPU s",
                  flush=True)
    ratio = statistics.median(seconds["compiled"]) / statistics.median(seconds["pytorch"])
    print(f"compiled / PyTorch's dropout: {ratio:.3f}x CPU time (median of {args.rounds})")
    if args.json:
        args.json.write_text(json.dumps({"paper": args.paper, "model": args.model,
                                         "cpu_seconds": seconds, "ratio": round(ratio, 3)},
                                        indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
