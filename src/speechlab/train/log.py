"""Where training metrics go: a JSONL file, optional TensorBoard, a progress bar.

``log.jsonl`` holds one JSON object per line, each with ``kind`` ("train", "valid",
"nonfinite") and ``step``. A line with step ``s`` is written while update ``s`` is attempted or
after it, and always before checkpoint ``s`` is saved; on resume from checkpoint ``s``
:meth:`MetricsLog.truncate_after` drops every line with a larger step (and a line cut short by a
kill), so the file lists each step once, as an uninterrupted run would have.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from speechlab.files import atomic_write_text, naming

logger = logging.getLogger("speechlab.train")

PROGRESS_ENV = "SPEECHLAB_PROGRESS"


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``log.jsonl``; a trailing line cut short by a kill is ignored."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class MetricsLog:
    """Append-only JSONL metrics file. Each line is flushed at once: the process may be killed
    right after a checkpoint, and every line of the steps that checkpoint covers must be on
    disk (in the OS page cache is enough for SIGKILL) by then."""

    def __init__(self, path: str | Path, enabled: bool = True) -> None:
        self.path = Path(path)
        self.enabled = enabled
        self._file = None

    def truncate_after(self, step: int) -> None:
        """Keep only records with ``step <= step`` (rewritten atomically)."""
        if not self.enabled or not self.path.exists():
            return
        kept = [r for r in read_log(self.path) if r.get("step", 0) <= step]
        atomic_write_text(self.path, "".join(_dumps(r) + "\n" for r in kept))

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")
            self._file.write(_dumps(record) + "\n")
            self._file.flush()
        except OSError as e:  # a full disk names no file when write() fails: name the log
            raise naming(e, self.path) from None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _dumps(record: dict[str, Any]) -> str:
    # NaN/inf stay as Python's NaN/Infinity tokens: a diverging loss must be visible in the log.
    return json.dumps(record, ensure_ascii=False, allow_nan=True)


class TensorBoardLog:
    """Scalars to TensorBoard when it is installed; silently nothing otherwise (with one
    warning), so no run ever fails for want of a viewer."""

    def __init__(self, log_dir: str | Path, enabled: bool) -> None:
        self._writer = None
        if not enabled:
            return
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            logger.warning("tensorboard=true but the tensorboard package is not installed "
                           "(pip install tensorboard); logging to log.jsonl only")
            return
        self._writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, prefix: str, step: int, values: dict[str, Any]) -> None:
        if self._writer is None:
            return
        for key, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step":
                self._writer.add_scalar(f"{prefix}/{key}", value, step)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def progress_wanted(requested: bool, is_main: bool) -> bool:
    """Show a progress bar only on rank 0 of an interactive run that did not turn it off."""
    return (requested and is_main and sys.stderr.isatty()
            and os.environ.get(PROGRESS_ENV, "1") not in ("0", "false", "no"))


class ProgressBar:
    """A rich progress bar over optimiser updates with elapsed time and ETA."""

    def __init__(self, total: int, start: int, enabled: bool) -> None:
        self._progress = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
            console=Console(stderr=True), transient=False)
        self._task = self._progress.add_task("train", total=total, completed=start, info="")
        self._progress.start()

    def update(self, step: int, info: str = "") -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=step, info=info)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
