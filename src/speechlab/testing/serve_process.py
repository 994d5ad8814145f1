"""``speechlab serve`` started as a user starts it, in its own process, for tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager


@contextmanager
def serve_process(args: Sequence[str], env: Mapping[str, str] | None = None
                  ) -> Iterator[tuple[str, str]]:
    """Run ``python -m speechlab serve ARGS`` until it prints its address; yields (its URL,
    everything it printed up to then), and stops it afterwards."""
    proc = subprocess.Popen([sys.executable, "-m", "speechlab", "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    try:
        lines = []
        url = ""
        for line in proc.stdout:
            lines.append(line)
            if "http://" in line:
                url = line.split()[2]
                break
        if not url:
            raise RuntimeError("speechlab serve stopped before it listened:\n" + "".join(lines))
        yield url, "".join(lines)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
