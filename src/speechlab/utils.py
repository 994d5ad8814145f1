"""Small shared helpers: atomic writes, seeding, logging setup."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from speechlab.errors import SpeechlabError


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only on success.

    Readers never see a half-written file, and a crash leaves at most a ``.tmp`` file behind
    that is removed here when the body raises.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates 0600; give the file the mode a plain open() would (0666 minus umask).
    os.chmod(tmp_path, 0o666 & ~_umask())
    try:
        yield tmp_path
        with open(tmp_path, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


@contextlib.contextmanager
def exclusive_dir(path: str | Path, what: str = "a run") -> Iterator[Path]:
    """Hold an exclusive lock on directory ``path`` (created if missing) while in the block.

    Two processes writing one run directory (say a restarted job while the old one still runs)
    would interleave checkpoints; the second gets a clear error instead. The lock is an
    ``flock`` on ``path/.lock``, so the kernel drops it when its holder dies, however it dies.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / ".lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            raise SpeechlabError(f"{path} is in use by another process (pid {holder}) running "
                                 f"{what}; wait for it or stop it first") from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n")
        f.flush()
        try:
            yield path
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_WATCHED: set[int] = set()


def exit_with_parent(parent: int, period: float = 2.0) -> None:
    """Exit this process (status 1) within ``period`` seconds of process ``parent`` ending.

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
                os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
