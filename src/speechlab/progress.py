"""Feedback on long work: a progress bar on a terminal, a log line every so often otherwise.

Whatever the command (decoding a long recording, scoring a large test set), a user must never
stare at a silent terminal for minutes: on an interactive terminal a rich bar shows the work
done, its rate and the time left; in a log (stderr not a terminal, or ``SPEECHLAB_PROGRESS=0``)
one INFO line every ``log_every`` seconds of wall time says the same.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from speechlab.train.log import PROGRESS_ENV

log = logging.getLogger("speechlab.progress")

LOG_EVERY_SECONDS = 15.0


def _bar_wanted() -> bool:
    return sys.stderr.isatty() and os.environ.get(PROGRESS_ENV, "1") not in ("0", "false", "no")


class WorkProgress:
    """Progress over ``total`` units of work, e.g. seconds of audio (``unit="s audio"``).

    ``update(done)`` after each piece; the log lines also give the real-time factor (wall
    seconds per unit: for audio the usual RTF) and a final line the total. ``bar`` forces the
    terminal bar on or off (default: on when stderr is a terminal), ``console`` is the rich
    console it draws on (default: stderr's); ``enabled=False`` shows nothing. Use as a context
    manager, or call ``close()``.
    """

    def __init__(self, what: str, total: float, *, unit: str = "s audio", enabled: bool = True,
                 log_every: float | None = None, bar: bool | None = None,
                 console: object = None) -> None:
        self.what, self.total, self.unit = what, float(total), unit
        self.enabled = enabled
        self.log_every = LOG_EVERY_SECONDS if log_every is None else log_every
        self.start = self._last_log = time.monotonic()
        self.done = 0.0
        self._bar = None
        if enabled and (_bar_wanted() if bar is None else bar):
            from rich.console import Console
            from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self._bar = Progress(TextColumn(f"[bold]{what}"), BarColumn(),
                                 TextColumn(f"{{task.completed:.0f}}/{{task.total:.0f}} {unit}"),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 console=console or Console(stderr=True), transient=True)
            self._task = self._bar.add_task(what, total=self.total)
            self._bar.start()

    @property
    def rtf(self) -> float:
        """Wall-clock seconds per unit done so far."""
        return (time.monotonic() - self.start) / self.done if self.done else float("nan")

    def update(self, done: float) -> None:
        self.done = float(done)
        if not self.enabled:
            return
        if self._bar is not None:
            # Drawn now, not only on the bar's next timed refresh: a chunk of work just ended.
            self._bar.update(self._task, completed=self.done, refresh=True)
            return
        now = time.monotonic()
        if now - self._last_log >= self.log_every and self.done < self.total:
            self._last_log = now
            left = (self.total - self.done) * self.rtf
            log.info("%s: %.1f/%.1f %s (%.0f%%), real-time factor %.2f, about %s left",
                     self.what, self.done, self.total, self.unit,
                     100 * self.done / max(self.total, 1e-9), self.rtf, _duration(left))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if self.enabled and self.done:
            log.info("%s: %.1f %s in %s (real-time factor %.2f)", self.what, self.done,
                     self.unit, _duration(time.monotonic() - self.start), self.rtf)
        self.enabled = False

    def __enter__(self) -> WorkProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _duration(seconds: float) -> str:
    if seconds != seconds:  # NaN: nothing done yet
        return "?"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
