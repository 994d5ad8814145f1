"""Timing and peak-memory helpers shared by the benchmarks.

Every measurement runs in a fresh, spawned Python process, so one method's allocator state,
JIT caches or leaked tensors cannot flatter or penalise the next one.

What "peak extra memory" means here (CPU, Linux):
    the high-water mark of the process's *resident set* during one call of the measured step,
    minus the resident set just before the call (inputs already allocated and touched).  The
    kernel tracks the high-water mark (``VmHWM``); writing ``5`` to ``/proc/self/clear_refs``
    resets it to the current RSS, so the peak belongs to that call alone.  This counts every
    allocator at once -- torch, numpy, numba, Python objects -- and only pages actually
    touched.  Two corrections make it the memory the step *needs*:

    * the memory child runs with ``MALLOC_MMAP_THRESHOLD_`` = 1 MB, so glibc serves every block
      of 1 MB or more with its own mapping and unmaps it on free.  With glibc's default dynamic
      threshold, freed blocks of up to 32 MB stay in the heap, and a step that allocates many
      mid-sized chunks shows a resident set that is mostly free heap (a chunked loss measured
      650 MB resident for 40 MB live).  That figure is reported too, as ``rss_default_mb``;
    * code pages of shared libraries that the call touches for the first time (libtorch is
      large) are file-backed, not memory the step needs: their growth (``RssFile``) is
      subtracted, and the benchmark setups warm up on small inputs first.

    MB are 2**20 bytes.

Timing runs in a second child with the default allocator: wall-clock time of the whole step
(forward + backward + freeing), median of ``repeats`` calls after one untimed call; the minimum
is kept too because other people share the machine and the minimum is the least disturbed
figure.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import resource
import statistics
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

MIB = float(1 << 20)
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


@dataclass(frozen=True)
class Measurement:
    """Result of :func:`measure`: per-call wall times and peak extra resident memory."""

    times_ms: tuple[float, ...]
    peak_extra_mb: float  #: live memory: resident peak with 1 MB+ blocks unmapped on free
    rss_default_mb: float  #: resident peak of the first call with glibc's default settings
    exact_peak: bool  #: False when the kernel's peak counter could not be reset

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def min_ms(self) -> float:
        return min(self.times_ms)


def _status_kb(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} missing from {_STATUS}")


def file_rss_mb() -> float:
    """File-backed part of the resident set (mapped code and data of libraries), in MB."""
    try:
        return _status_kb("RssFile") * 1024 / MIB
    except RuntimeError:
        return 0.0


def rss_mb() -> float:
    """Current resident set size of this process in MB."""
    return _status_kb("VmRSS") * 1024 / MIB


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter to the current RSS; False if not supported."""
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    """Peak resident set size since start or the last :func:`reset_peak_rss`, in MB."""
    try:
        return _status_kb("VmHWM") * 1024 / MIB
    except (OSError, RuntimeError):
        # ru_maxrss is in kB on Linux and covers the whole process lifetime.
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MIB


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    try:
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    except ImportError:
        pass


def _peak_of_one_call(step: Callable[[], object]) -> tuple[float, bool]:
    gc.collect()
    exact = reset_peak_rss()
    before, files_before = rss_mb(), file_rss_mb()
    step()
    return peak_rss_mb() - before - (file_rss_mb() - files_before), exact


def _child(conn, setup, args, repeats: int, threads: int) -> None:
    """Peak memory of the first call, then ``repeats`` timed calls (if repeats > 0)."""
    try:
        _set_threads(threads)
        step = setup(*args)
        peak, exact = _peak_of_one_call(step)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            step()
            times.append((time.perf_counter() - start) * 1000.0)
        conn.send(("ok", (tuple(times), peak, exact)))
    except BaseException:  # report any failure to the parent instead of hanging it
        conn.send(("error", traceback.format_exc()))
    finally:
        conn.close()


def _run_child(setup, args, repeats: int, threads: int, env: dict[str, str]):
    return call_in_child(_child, (setup, args, repeats, threads), env)


def call_in_child(target, args: tuple, env: dict[str, str] | None = None):
    """Run ``target(conn, *args)`` in a fresh spawned interpreter (with ``env`` set) and
    return what it sends as ``("ok", payload)``; its traceback if it sends ``("error", tb)``."""
    env = env or {}
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(child, *args))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # a spawned child starts a new interpreter with this environment
    try:
        proc.start()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    child.close()
    try:
        status, payload = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(f"benchmark child died (exit code {proc.exitcode})") from None
    proc.join()
    if status != "ok":
        raise RuntimeError(f"benchmark child failed:\n{payload}")
    return payload


def measure(
    setup: Callable[..., Callable[[], object]],
    *args: object,
    repeats: int = 5,
    threads: int = 2,
) -> Measurement:
    """Measure ``setup(*args)()`` in two fresh processes (memory, then timing).

    Args:
        setup: a module-level (picklable) function that allocates the inputs, warms up on small
            inputs if it needs to (JIT, code pages), and returns the zero-argument step to
            measure.  The step must leave no state that grows between calls (clear ``.grad``).
        args: picklable arguments for ``setup``.
        repeats: timed calls after the untimed first one.
        threads: torch and numba threads in the children.
    """
    _, live, exact = _run_child(setup, args, 0, threads, {"MALLOC_MMAP_THRESHOLD_": str(1 << 20)})
    times, rss_default, _ = _run_child(setup, args, repeats, threads, {})
    return Measurement(times, live, rss_default, exact)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Plain-text table with right-aligned columns (first column left-aligned)."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(row[1:], widths[1:]))
        return "  ".join([first, *rest])

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 10 else f"{value:.0f}"
    return str(value)
