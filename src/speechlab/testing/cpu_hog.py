"""Run a command while other processes keep every core busy: the test suite must pass on a
loaded machine as it does on an idle one (``make test-loaded``).

    python -m speechlab.testing.cpu_hog [--cores N] -- COMMAND [ARG ...]

Starts ``N`` (default: every core) processes that spin at normal priority, runs the command,
stops them, and exits with the command's status. The spinners also stop by themselves when this
process dies (they watch their parent), so a killed run leaves none behind.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time


def _spin(parent: int) -> None:
    """Busy work until ``parent`` is gone; checks about every 0.2 s."""
    x = 0
    while True:
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        if os.getppid() != parent:
            return


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m speechlab.testing.cpu_hog [--cores N] -- COMMAND [ARG ...]",
              file=sys.stderr)
        return 2
    split = argv.index("--")
    p = argparse.ArgumentParser(prog="python -m speechlab.testing.cpu_hog")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                   help="busy processes to run beside the command (default: every core)")
    args = p.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command or args.cores < 0:
        p.error("give a command after -- and --cores >= 0")
    ctx = multiprocessing.get_context("fork")
    spinners = [ctx.Process(target=_spin, args=(os.getpid(),), daemon=True)
                for _ in range(args.cores)]
    for s in spinners:
        s.start()
    print(f"cpu_hog: {args.cores} busy process(es) beside: {' '.join(command)}", file=sys.stderr,
          flush=True)
    try:
        return subprocess.call(command)
    finally:
        for s in spinners:
            s.terminate()
        for s in spinners:
            s.join(timeout=5)


if __name__ == "__main__":
    raise SystemExit(main())
