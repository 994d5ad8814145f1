"""Every paper's ``ci``-scale tables, as a fingerprint that a refactoring must not change.

:func:`fingerprint` runs the four reproductions at the ``ci`` scale on the tiny embedded corpus
and keeps each table as its reader sees it: the formatted cells of ``results.md``, minus the
columns that are measured times (they differ on every run).

The numbers come out of short training runs, and training amplifies the last bit of every sum:
the same code gives SALAD's Table 2 a 9.85 on one CPU and 9.92 on another, because PyTorch
picks its SIMD kernels (AVX-512, AVX2 or plain) by the CPU it runs on, and MKL, oneDNN, numba
and numpy choose theirs the same way. So a fingerprint is only comparable when it is taken on
one kernel path: :data:`PINNED_KERNELS` is the environment that pins each of those libraries to
its plainest kernels, and :func:`fingerprint` runs the reproductions in a child process under
it (the variables must be set before the libraries load). With the pins, the fingerprint does
not depend on which kernels the parent would have used (``ATEN_CPU_CAPABILITY=default``,
``avx2`` or the CPU's best give the same tables), nor on the load of the machine.

What the pins cannot reach is recorded beside the tables (:func:`machine_signature`): OpenBLAS,
under numpy, still picks its kernels by CPU, and so may compiled libraries that dispatch on their
own. ``tests/experiment/test_ci_tables.py`` therefore checks every table's layout everywhere
(names, columns, row labels and the kind of every cell) and its numbers exactly where the
signature matches the recording; on other machines it says what differs instead of failing.

    python -m speechlab.testing.ci_tables OUT.json [--work DIR] [--papers P ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: Column headers that are measured times or speeds, not results.
TIMING = re.compile(r"(minutes|min\b|CPU|RTF|seconds|\bs\b|ms/utt|latency|speed-up|time)",
                    re.IGNORECASE)

#: The papers and whether their ci recipe takes the tiny ASR corpus (``--corpus``).
PAPERS = {"multisoftmax": False, "topologies": True, "local-attention": True, "salad": False}

#: Each library's plainest kernels, the same on every x86-64 CPU: PyTorch's ATen without SIMD
#: beyond SSE2, MKL in its conditional-numerical-reproducibility mode for any x86 CPU,
#: oneDNN's JIT at SSE4.1, numba compiling for a generic x86-64, numpy's dispatch at its
#: baseline, one thread each (sums in one order).
PINNED_KERNELS = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "DNNL_MAX_CPU_ISA": "SSE41",
    "NUMBA_CPU_NAME": "generic",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}

_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+|inf|nan|n/a)%?", re.IGNORECASE)
_INTERVAL = re.compile(r"\[\s*\S+,\s*\S+\]")


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


def cell_kind(cell: str) -> str:
    """What a formatted cell is, whatever its value: ``number``, ``interval``, ``none`` (``-``
    or empty) or ``text``."""
    cell = cell.strip()
    if cell in ("", "-"):
        return "none"
    if _NUMBER.fullmatch(cell):
        return "number"
    if _INTERVAL.fullmatch(cell):
        return "interval"
    return "text"


def layout(tables: dict[str, dict]) -> dict[str, dict]:
    """The part of the tables that no kernel path changes: their names and columns, each row's
    label (its first cell) and the kind of every other cell. Numbers and the labels a
    measurement decides (e.g. an attention pattern's name) are left out."""
    return {name: {"columns": t["columns"],
                   "rows": [[row[0], *(cell_kind(c) for c in row[1:])] for row in t["rows"]]}
            for name, t in tables.items()}


def machine_signature() -> dict[str, str]:
    """What still decides the last bits under :data:`PINNED_KERNELS`: the CPU (its model and
    SIMD extensions, which OpenBLAS and self-dispatching compiled code look at) and the versions
    of the numerical libraries."""
    import numpy
    import torch

    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                simd = sorted(f for f in value.split() if f.startswith(("avx", "fma", "sse", "amx")))
                flags = " ".join(simd)
    except OSError:
        pass
    return {"cpu": model or platform.processor() or "unknown", "simd": flags, "torch": torch.__version__, "numpy": numpy.__version__,
            "python": platform.python_version()}


def fingerprint_here(work: Path, papers: list[str] | None = None) -> dict[str, dict]:
    """Run each paper at ``ci`` scale under ``work`` in this process, on whatever kernels it
    has loaded, and return its stable tables."""
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


def fingerprint(work: Path, papers: list[str] | None = None) -> dict[str, dict]:
    """Each paper's stable ``ci`` tables, run in a child process under :data:`PINNED_KERNELS`."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / "fingerprint.json"
    cmd = [sys.executable, "-m", "speechlab.testing.ci_tables", str(out), "--here",
           "--work", str(work), "--papers", *(papers or list(PAPERS))]
    done = subprocess.run(cmd, env={**os.environ, **PINNED_KERNELS}, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")
    return json.loads(out.read_text(encoding="utf-8"))["tables"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="JSON file to write")
    p.add_argument("--work", type=Path, default=None, help="run directory (default: a temp dir)")
    p.add_argument("--papers", nargs="*", choices=sorted(PAPERS), default=None)
    p.add_argument("--here", action="store_true",
                   help="run in this process on its own kernels (the pinned child's side)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        if args.here:
            tables = fingerprint_here(work, args.papers)
        else:
            tables = fingerprint(work, args.papers)
    record = {"kernels": PINNED_KERNELS, "recorded_on": machine_signature(), "tables": tables}
    tmp_out = args.out.with_name(args.out.name + ".partial")
    tmp_out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp_out.replace(args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
