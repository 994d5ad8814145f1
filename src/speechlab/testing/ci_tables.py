"""Every paper's ``ci``-scale tables, as a fingerprint that a refactoring must not change.

:func:`fingerprint` runs the four reproductions at the ``ci`` scale (two workers, one thread
each, so a run is bit-for-bit repeatable on one machine) on the tiny embedded corpus and keeps
each table as its reader sees it: the formatted cells of ``results.md``, minus the columns
that are measured times (they differ on every run). ``tests/experiment/ci_tables.json`` holds
the fingerprint of the code before the experiment layer's restructuring; the test compares.

    python -m speechlab.testing.ci_tables OUT.json [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

#: Column headers that are measured times or speeds, not results.
TIMING = re.compile(r"(minutes|min\b|CPU|RTF|seconds|\bs\b|ms/utt|latency|speed-up|time)",
                    re.IGNORECASE)

#: The papers and whether their ci recipe takes the tiny ASR corpus (``--corpus``).
PAPERS = {"multisoftmax": False, "topologies": True, "local-attention": True, "salad": False}


def stable_tables(run_dir: Path) -> dict[str, dict]:
    """``{table name: {"columns", "rows"}}`` of a run's results, formatted, timing columns out."""
    from speechlab.report import Results

    out = {}
    for table in Results.load(run_dir).tables:
        keep = [i for i, c in enumerate(table.columns) if not TIMING.search(c)]
        rows = table.formatted_rows()
        out[table.name] = {"columns": [table.columns[i] for i in keep],
                           "rows": [[row[i] for i in keep] for row in rows]}
    return out


def fingerprint(work: Path, papers: list[str] | None = None) -> dict[str, dict]:
    """Run each paper at ``ci`` scale under ``work`` and return its stable tables."""
    from speechlab.cli import main
    from speechlab.testing.corpus import tiny_corpus

    corpus = tiny_corpus(work)
    result = {}
    for paper in papers or list(PAPERS):
        out = work / paper
        argv = ["reproduce", paper, "--scale", "ci", "--out", str(out), "--jobs", "2"]
        if PAPERS[paper]:
            argv += ["--corpus", str(corpus)]
        if main(argv) != 0:
            raise RuntimeError(f"speechlab {' '.join(argv)} failed")
        result[paper] = stable_tables(out)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="JSON file to write")
    p.add_argument("--work", type=Path, default=None, help="run directory (default: a temp dir)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tables = fingerprint(args.work or Path(tmp))
    args.out.write_text(json.dumps(tables, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
