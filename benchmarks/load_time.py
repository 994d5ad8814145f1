"""How long ``speechlab.load(NAME)`` takes: the first load on a machine (an empty cache, so a
lean CTC package's T∘L∘G is built from its lexicon and LM), the next one in the same process
(read from the cache), and a load in a new process with that cache (what the next
``speechlab transcribe NAME`` pays, Python's imports included). For a recognizer that reads
whole recordings, also its first request with word confidences (``nbest=1``, what
``speechlab serve``'s page asks for; half a second of silence) after the load, and the next one:
a CTC-topology model turns its graph into the lattice search's arrays there (``speechlab
serve`` does that at start-up) and keeps them beside the graph in the cache, so the same
request in a new process (the last column) reads them instead.

    python benchmarks/load_time.py [NAME ...] [--threads 1] [--json out.json]

Default: every shipped model. Each model gets its own empty cache (a temporary
``SPEECHLAB_CACHE``), and each load runs in a fresh spawned process, so no model's cache or
imports help the next.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _in_process(name: str, cache: str, threads: int, conn) -> None:
    os.environ["SPEECHLAB_CACHE"] = cache
    import torch

    torch.set_num_threads(threads)
    import speechlab

    import numpy as np

    times = []
    for _ in range(2):
        start = time.perf_counter()
        model = speechlab.load(name)
        times.append(time.perf_counter() - start)
    if model.kind == "asr" and "stream" not in model.capabilities:
        silence = np.zeros(model.sample_rate // 2, np.float32)
        for _ in range(2):
            start = time.perf_counter()
            model.transcribe(silence, model.sample_rate, nbest=1)
            times.append(time.perf_counter() - start)
    conn.send(times)


def measure(name: str, threads: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="speechlab-load-") as cache:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_in_process, args=(name, cache, threads, child))
        p.start()
        first, again, *nbest = parent.recv()
        p.join()
        env = dict(os.environ, SPEECHLAB_CACHE=cache, OMP_NUM_THREADS=str(threads))
        start = time.time()
        code = _NEW_PROCESS.format(name=name, nbest=bool(nbest))
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout
        loaded, *requested = (float(x) for x in out.split())
        fresh = loaded - start
    return {"model": name, "first_s": round(first, 1), "same_process_s": round(again, 1),
            "new_process_s": round(fresh, 1),
            **({"first_nbest_s": round(nbest[0], 2), "next_nbest_s": round(nbest[1], 2),
                "new_process_first_nbest_s": round(requested[0], 2)} if nbest else {})}


# A new process with the cache the first one filled: when the model is loaded (the clock
# time, compared with the parent's start), and its first request with confidences.
_NEW_PROCESS = """
import time
import numpy as np
import speechlab
model = speechlab.load({name!r})
print(time.time())
if {nbest}:
    start = time.perf_counter()
    model.transcribe(np.zeros(model.sample_rate // 2, np.float32), model.sample_rate, nbest=1)
    print(time.perf_counter() - start)
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="models (default: every shipped one)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    names = args.names
    if not names:
        from speechlab.shipped import shipped

        names = sorted(shipped())
    rows = []
    print("| model | first load (empty cache) | again, same process | new process, cached | "
          "first request with confidences | the next | the first in a new process |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        r = measure(name, args.threads)
        rows.append(r)
        nb = (f"{r['first_nbest_s']} s | {r['next_nbest_s']} s | "
              f"{r['new_process_first_nbest_s']} s" if "first_nbest_s" in r else "| | ")
        print(f"| {name} | {r['first_s']} s | {r['same_process_s']} s | {r['new_process_s']} s | "
              f"{nb} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
