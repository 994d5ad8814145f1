"""The dependency scheduler and the worker pool every reproduction's jobs run through.

:func:`run_jobs` takes :class:`Work` items (a key, the keys it needs finished first, and a
payload) and a top-level function ``execute(payload)``; it starts each item as soon as what it
needs has finished, the first ready one in the order given (a plan lists the longest jobs
first, so short ones fill the workers while the long ones run), and returns every item's
result by key. With ``workers == 1`` everything runs here, in this process, in that order;
with more, in a :class:`WorkerPool` of processes that each run ``setup`` once (e.g. load the
data) and then one item at a time.

A failing item stops the whole run at once: the pool's processes are terminated and the
item's own exception is raised here, after its key has been logged.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from speechlab.errors import ConfigError, SpeechlabError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Work:
    """One schedulable item: ``key`` names it (and its result), ``needs`` are the keys that
    must finish before it starts, ``payload`` is what ``execute`` receives."""

    key: Hashable
    payload: Any
    needs: tuple[Hashable, ...] = ()


class WorkerDied(SpeechlabError):
    """A worker process ended without reporting a result (killed, out of memory, crashed)."""


def _worker_main(conn, execute: Callable[[Any], Any], setup: Callable[..., None] | None,
                 setup_args: tuple, parent: int) -> None:
    """The loop of one worker process: set up once, then run the items sent on ``conn`` until
    told to stop, answering each with ``(ok, result or exception)``.

    A worker started from a forkserver is not a child of the process that submits its work;
    it exits when that process dies (a killed run), so that a restarted run never finds a
    model still being trained by an orphan."""
    from speechlab.processes import exit_with_parent

    exit_with_parent(parent)
    try:
        if setup is not None:
            setup(*setup_args)
    except BaseException as e:
        conn.send(("setup", False, _portable(e)))
        return
    while True:
        try:
            item = conn.recv()
        except EOFError:
            return
        if item is None:
            return
        try:
            value = execute(item)
        except BaseException as e:
            log.debug("item failed:\n%s", traceback.format_exc())
            answer = ("done", False, _portable(e))
        else:
            answer = ("done", True, value)
        try:
            conn.send(answer)
        except (BrokenPipeError, ConnectionResetError):
            # The run's process has gone (killed or stopped; exit_with_parent then stopped
            # this item, a training at a checkpoint): nobody is left to answer.
            return


def _portable(e: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RuntimeError carrying its text."""
    import pickle

    try:
        pickle.loads(pickle.dumps(e))
        return e
    except Exception:
        return RuntimeError(f"{type(e).__name__}: {e}")


class WorkerPool:
    """``workers`` processes (forkserver) running ``execute`` on submitted payloads, each over
    its own pipe, so the pool always knows which item each worker holds.

    Unlike ``concurrent.futures``' pool it can be stopped at once (:meth:`terminate`) and it
    names the item of a worker that died without a word (:class:`WorkerDied`).
    """

    def __init__(self, workers: int, execute: Callable[[Any], Any],
                 setup: Callable[..., None] | None = None, setup_args: tuple = (),
                 context: str = "forkserver") -> None:
        ctx = multiprocessing.get_context(context)
        self._procs = []
        self._conns = []
        self._holding: dict[int, Hashable] = {}  # worker index -> key of the item it runs
        for _ in range(workers):
            here, there = ctx.Pipe()
            p = ctx.Process(target=_worker_main, daemon=True,
                            args=(there, execute, setup, setup_args, os.getpid()))
            p.start()
            there.close()
            self._procs.append(p)
            self._conns.append(here)

    @property
    def idle(self) -> int:
        return len(self._procs) - len(self._holding)

    def submit(self, key: Hashable, payload: Any) -> None:
        i = next(i for i in range(len(self._procs)) if i not in self._holding)
        self._conns[i].send(payload)
        self._holding[i] = key

    def next_result(self) -> tuple[Hashable, bool, Any]:
        """Block until an item finishes: ``(key, ok, value or exception)``."""
        while True:
            watched = {**{c: i for i, c in enumerate(self._conns)},
                       **{p.sentinel: i for i, p in enumerate(self._procs)}}
            for ready in wait(list(watched)):
                i = watched[ready]
                if ready is self._conns[i]:
                    try:
                        kind, ok, value = self._conns[i].recv()
                    except EOFError:
                        self._died(i)
                    if kind == "setup":
                        raise value
                    return self._holding.pop(i), ok, value
                self._died(i)

    def _died(self, i: int) -> None:
        p = self._procs[i]
        p.join(timeout=5)
        item = self._holding.get(i)
        raise WorkerDied(f"a worker process (pid {p.pid}) ended with exit code {p.exitcode} "
                         f"while running {item if item is not None else 'no item'}; rerun the "
                         "command: finished work is kept and the rest resumes")

    def terminate(self) -> None:
        for p in self._procs:
            if p.is_alive():
                p.terminate()
        for p in self._procs:
            p.join(timeout=5)

    def close(self) -> None:
        """Let the workers finish what they hold and exit."""
        for c in self._conns:
            try:
                c.send(None)
            except OSError:
                pass
        for p in self._procs:
            p.join(timeout=30)
        self.terminate()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.terminate()


def check_dependencies(items: Sequence[Work]) -> None:
    """Every ``needs`` names an item of the plan, keys are unique, and there is no cycle."""
    keys = [w.key for w in items]
    dupes = sorted({str(k) for k in keys if keys.count(k) > 1})
    if dupes:
        raise ConfigError(f"the plan names these jobs twice: {', '.join(dupes)}")
    known = set(keys)
    for w in items:
        missing = [n for n in w.needs if n not in known]
        if missing:
            raise ConfigError(f"job {w.key} needs {missing}, which the plan never runs")
    done: set[Hashable] = set()
    left = list(items)
    while left:
        ready = [w for w in left if all(n in done for n in w.needs)]
        if not ready:
            raise ConfigError(f"jobs wait for each other in a cycle: {[w.key for w in left]}")
        done.update(w.key for w in ready)
        left = [w for w in left if w.key not in done]


def _say_why(key: Hashable, e: BaseException) -> None:
    """Log why job ``key`` ended early: stopped (an interrupt: a signal or Ctrl-C, after which
    a training has checkpointed and resumes) is not failed."""
    if isinstance(e, KeyboardInterrupt):
        log.warning("job %s stopped: %s", key, e or "interrupted")
    else:
        log.error("job %s failed: %s", key, e)


def run_jobs(items: Sequence[Work], execute: Callable[[Any], Any], *, workers: int = 1,
             setup: Callable[..., None] | None = None, setup_args: tuple = (),
             on_done: Callable[[Hashable, Any, float], None] | None = None) -> dict[Hashable, Any]:
    """Run every item once its ``needs`` are done; return ``{key: execute(payload)}``.

    ``setup(*setup_args)`` runs once in each worker process (not in this one: with
    ``workers == 1`` the caller has set up already). ``on_done(key, result, seconds)`` is
    called here as each item finishes.
    """
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    check_dependencies(items)
    pending = list(items)
    done: dict[Hashable, Any] = {}
    started: dict[Hashable, float] = {}

    def next_ready() -> Work | None:
        return next((w for w in pending if all(n in done for n in w.needs)), None)

    def finished(key: Hashable, value: Any) -> None:
        done[key] = value
        if on_done is not None:
            on_done(key, value, time.monotonic() - started[key])

    if workers == 1:
        while pending:
            work = next_ready()
            assert work is not None  # check_dependencies ruled out waiting forever
            pending.remove(work)
            started[work.key] = time.monotonic()
            try:
                value = execute(work.payload)
            except BaseException as e:
                _say_why(work.key, e)
                raise
            finished(work.key, value)
        return done

    with WorkerPool(workers, execute, setup, setup_args) as pool:
        while pending or pool.idle < workers:
            while pool.idle and (work := next_ready()) is not None:
                pending.remove(work)
                started[work.key] = time.monotonic()
                pool.submit(work.key, work.payload)
            key, ok, value = pool.next_result()
            if not ok:
                # Say so at once and stop the others instead of waiting for them.
                _say_why(key, value)
                pool.terminate()
                raise value
            finished(key, value)
    return done
