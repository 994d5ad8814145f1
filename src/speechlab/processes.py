"""This process among others: children that die with it, pool workers that end with their
parent, seeds, and the machine's load (what timings were taken beside)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sys
import threading
import time

import numpy as np


def dies_with_parent(command: list[str]) -> list[str]:
    """``command`` run so that it is killed when this process dies, even by SIGKILL (Linux's
    parent-death signal, through util-linux's ``setpriv``; as it is where that is missing): a
    killed server or corpus build leaves no festival running."""
    if sys.platform.startswith("linux") and shutil.which("setpriv"):
        return ["setpriv", "--pdeathsig", "KILL", *command]
    return list(command)


_WATCHED: set[int] = set()


def exit_with_parent(parent: int, period: float = 2.0, grace: float = 30.0) -> None:
    """End this process within ``period`` seconds of process ``parent`` ending: first with
    SIGTERM to itself (a training finishes its update, writes a checkpoint and stops; anything
    else ends at once), then, if it still runs ``grace`` seconds later, with exit status 1.

    For pool workers: started from a forkserver, they are not the children of the process that
    submits their tasks, and would otherwise outlive it when it is killed. Call it once per
    worker (later calls for the same parent do nothing).
    """
    if parent in _WATCHED:
        return
    _WATCHED.add(parent)

    def watch() -> None:
        while True:
            time.sleep(period)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(grace)
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def load_average() -> float | None:
    """The machine's load average over the last minute (None where the system gives none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def machine_load(loads: list[float | None] | None = None) -> str:
    """What a caption says of the load timings were taken under (timings taken beside other
    work are longer, and a reader should know by how much): the 1-minute load average now, or
    the range of ``loads`` taken when each timing ended, against the machine's CPUs."""
    got = [x for x in ([load_average()] if loads is None else loads) if x is not None]
    if not got:
        return "the machine's load was not recorded"
    low, high = f"{min(got):.2f}", f"{max(got):.2f}"
    span = low if low == high else f"{low}-{high}"
    return f"1-minute load average {span} on {os.cpu_count()} CPUs when timed"
