"""Run every benchmark in this folder, one after the other, each in its own process.

``make bench`` calls this. Each benchmark prints its own table with ratios against references
measured in the same run; this script only sequences them, so one crashing benchmark does not
hide the others, and exits non-zero if any failed.

    python benchmarks/run_all.py [--only rnnt_loss rnnt_decode]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# name -> extra arguments; run in this order (the quick ones first).
BENCHMARKS: dict[str, list[str]] = {
    "rnnt_loss": [],
    "graph_loss": [],
    # half a minute: operator calls per update on the device path (how launch-bound a GPU is)
    "launches": [],
    # with the same-size comparison against sherpa-onnx (the bench extra; about 2 minutes)
    "rnnt_decode": ["--sherpa"],
    "corpus_speed": [],
    # half a minute: the weights' moving average against a training update, per paper
    "weight_average": [],
    "local_attention": [],
    # about 1-2 minutes: Big SALAD vs. Big RNN latency up to 35 s of speech
    "tts_latency": [],
    # about 2 minutes (plus ~45 s to build the two decoding graphs the first time)
    "ctc_viterbi": [],
    "ctc_lattice": [],
    # under a minute: a new set of hotwords on the shipped en_ctc_t2, against the composed graph
    "hotword_latency": [],
    # about 2 minutes: live WebSocket streams against `speechlab serve` at real-time pace
    "serve_load": [],
    # the slowest (about 10 minutes on 2 cores): two models trained side by side
    "rnnt_convergence": [],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(BENCHMARKS), default=None)
    args = parser.parse_args()
    failed = []
    for name, extra in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        print(f"\n=== {name} ===", flush=True)
        start = time.time()
        rc = subprocess.call([sys.executable, str(HERE / f"{name}.py"), *extra])
        print(f"--- {name}: exit {rc}, {time.time() - start:.0f} s", flush=True)
        if rc != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
