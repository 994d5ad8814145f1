"""Operator calls per training update on the device path, counted on the CPU: how launch-bound
a GPU step is, and how much of it the losses' recursions are.

Run:  python benchmarks/launches.py [--papers ...] [--json F]

On a GPU each PyTorch operator call is at least one kernel launch (a few microseconds each, and
the Python around it), so a small model's update costs about its number of calls whatever the
GPU. This counts them without a GPU: one update of each paper's ``small`` recipe on synthetic
utterances (``speechlab.testing.synthetic_training``), forward and backward, with the losses on
their device code path (``speechlab.devices.device_code``), every call seen by a
``TorchDispatchMode``. The calls made inside the PyTorch-ops recursions that the CUDA kernels
replace on an NVIDIA GPU (``speechlab.asr.rnnt._loss_torch.lattice``,
``speechlab.asr.ctc._graph_torch.total_scores``) are counted apart: an update there makes the
rest plus a handful of kernel launches.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from speechlab.testing.synthetic_training import PAPERS

RECURSIONS = {"rnnt lattice": ("speechlab.asr.rnnt._loss_torch", "lattice"),
              "graph recursion": ("speechlab.asr.ctc._graph_torch", "total_scores")}


class _Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.where: collections.Counter[str] = collections.Counter()
        self.tag = "the rest"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.where[self.tag] += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _tagged(mode: _Count) -> Iterator[None]:
    """Calls made inside each recursion are counted under its name."""
    import importlib

    saved = []
    for tag, (module_name, name) in RECURSIONS.items():
        module = importlib.import_module(module_name)
        original = getattr(module, name)

        def wrapped(*a: Any, _original: Any = original, _tag: str = tag, **k: Any) -> Any:
            before, mode.tag = mode.tag, _tag
            try:
                return _original(*a, **k)
            finally:
                mode.tag = before

        setattr(module, name, wrapped)
        saved.append((module, name, original))
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def count(paper: str) -> dict[str, Any]:
    from speechlab.devices import device_code

    torch.manual_seed(0)
    model, task, _ = PAPERS[paper]()
    batch = next(iter(task.batches()))
    mode = _Count()
    with device_code(), _tagged(mode):
        out = task.loss(model, batch)  # warm-up: lazy set-up is not an update's work
        (out[0] if isinstance(out, tuple) else out).backward()
        model.zero_grad(set_to_none=True)
        with mode:
            out = task.loss(model, batch)
            (out[0] if isinstance(out, tuple) else out).backward()
    total = sum(mode.where.values())
    inside = sum(v for k, v in mode.where.items() if k in RECURSIONS)
    return {"paper": paper, "calls_per_update": total, "in_recursions": inside,
            "share_in_recursions": round(inside / max(total, 1), 3),
            "by_part": dict(mode.where)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--papers", nargs="*", default=list(PAPERS), choices=list(PAPERS))
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    rows = []
    print(f"{'paper':<20} {'calls/update':>13} {'in recursions':>14} {'share':>7}")
    for paper in args.papers:
        row = count(paper)
        rows.append(row)
        print(f"{paper:<20} {row['calls_per_update']:>13} {row['in_recursions']:>14} "
              f"{row['share_in_recursions']:>7.1%}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
