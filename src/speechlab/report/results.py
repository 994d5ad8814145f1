"""What a run reports: paper-shaped tables, figures, notes and run metadata.

Every experiment in speechlab ends by building one :class:`Results` and calling
``results.save(run_dir)``, which writes ``results.json`` (the record :func:`Results.load` and
the HTML report read back) and ``results.md`` (the same content for a human or a git diff),
both atomically. Figures are PNG files the run wrote into its directory beforehand (see
:mod:`speechlab.report.plots`); a :class:`Figure` only names them by a path relative to the run
directory, so a run directory can be moved or copied as a whole.

A :class:`Table` is shaped like a table in a paper: the first column names the system (or
language, or setting), the other columns hold numbers, and ``formats`` fixes how each column is
printed (e.g. ``{"WER": "{:.2f}"}``), so every rendering of the same table agrees.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import math
import os
import platform
import shlex
import string
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from speechlab.errors import DataError
from speechlab.files import atomic_write_json, atomic_write_text

Cell = str | float | int | None

RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
_FORMAT = "speechlab-results"
_VERSION = 1

DEFAULT_FLOAT_FORMAT = "{:.2f}"
MISSING_CELL = "-"
NOT_MEASURABLE = "n/a"


@dataclass(frozen=True)
class Table:
    """A results table; ``rows[i][0]`` names the system, the other cells are its numbers.

    ``formats`` maps a column name to a ``str.format`` pattern used for that column's numbers;
    floats without a pattern print with two decimals, ints as they are, ``None`` as ``-``,
    and NaN (a figure that has nothing to be measured on, e.g. F0 error without voiced frames)
    as ``n/a``.
    """

    name: str
    caption: str
    columns: list[str]
    rows: list[list[Cell]]
    notes: str = ""
    formats: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.columns:
            raise ValueError(f"table {self.name!r} has no columns")
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"table {self.name!r} row {i} has {len(row)} cells for "
                                 f"{len(self.columns)} columns {self.columns}")
            for cell in row:
                # bool is an int subclass but "True" is never a table number; refuse it early.
                if isinstance(cell, bool) or not isinstance(cell, (str, int, float, type(None))):
                    raise ValueError(f"table {self.name!r} row {i}: cell {cell!r} is not a "
                                     "string, number or None")
        for col, fmt in self.formats.items():
            if col not in self.columns:
                raise ValueError(f"table {self.name!r}: format given for unknown column {col!r}")
            # Check the pattern itself, then on every number it will print, so a bad pattern
            # fails when the table is built rather than when a report is rendered.
            j = self.columns.index(col)
            try:
                list(string.Formatter().parse(fmt))
                for row in self.rows:
                    if isinstance(row[j], (int, float)):
                        fmt.format(row[j])
            except (ValueError, IndexError, KeyError) as e:
                raise ValueError(f"table {self.name!r}: bad format {fmt!r} for column "
                                 f"{col!r}: {e}") from None

    def format_cell(self, column: str, value: Cell) -> str:
        if value is None:
            return MISSING_CELL
        if isinstance(value, str):
            return value
        if isinstance(value, float) and math.isnan(value):
            return NOT_MEASURABLE
        fmt = self.formats.get(column)
        if fmt is not None:
            return fmt.format(value)
        return DEFAULT_FLOAT_FORMAT.format(value) if isinstance(value, float) else str(value)

    def formatted_rows(self) -> list[list[str]]:
        return [[self.format_cell(c, v) for c, v in zip(self.columns, row)] for row in self.rows]

    def numeric_columns(self) -> list[bool]:
        """Per column: True when every present cell is a number (rendered right-aligned)."""
        out = []
        for j in range(len(self.columns)):
            cells = [row[j] for row in self.rows if row[j] is not None]
            out.append(bool(cells) and all(isinstance(c, (int, float)) for c in cells))
        return out

    def to_markdown(self) -> str:
        def esc(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")

        numeric = self.numeric_columns()
        lines = [f"**{esc(self.name)}**: {esc(self.caption)}" if self.caption
                 else f"**{esc(self.name)}**", ""]
        lines.append("| " + " | ".join(esc(c) for c in self.columns) + " |")
        lines.append("|" + "|".join("---:" if n else ":---" for n in numeric) + "|")
        for row in self.formatted_rows():
            lines.append("| " + " | ".join(esc(c) for c in row) + " |")
        if self.notes:
            lines += ["", self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "caption": self.caption, "columns": list(self.columns),
                "rows": [list(r) for r in self.rows], "notes": self.notes,
                "formats": dict(self.formats)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Table:
        return cls(name=d["name"], caption=d["caption"], columns=list(d["columns"]),
                   rows=[list(r) for r in d["rows"]], notes=d.get("notes", ""),
                   formats=dict(d.get("formats", {})))


@dataclass(frozen=True)
class Figure:
    """A figure file of the run (PNG/JPEG, or a WAV the HTML report embeds as a player), by
    its path relative to the run directory."""

    path: str
    caption: str

    def __post_init__(self) -> None:
        p = PurePosixPath(self.path)
        # A figure outside the run directory would break when the directory is moved or copied.
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise ValueError(f"figure path {self.path!r} must be relative to the run directory "
                             "and stay inside it")

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "caption": self.caption}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Figure:
        return cls(path=d["path"], caption=d["caption"])


@dataclass(frozen=True)
class Results:
    """Everything one run reports. ``notes`` is markdown; ``meta`` is JSON-ready run info
    (see :func:`collect_meta`); ``scale`` names the recipe scale that produced the run (shown
    at the top of its section in every report)."""

    title: str
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    notes: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    scale: str = ""

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"no table {name!r} in results {self.title!r}; "
                       f"tables: {[t.name for t in self.tables]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "version": _VERSION,
            "title": self.title,
            "scale": self.scale,
            "notes": self.notes,
            "tables": [t.to_dict() for t in self.tables],
            "figures": [f.to_dict() for f in self.figures],
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Results:
        if not isinstance(d, dict) or d.get("format") != _FORMAT:
            raise ValueError(f"not a {_FORMAT} document")
        if d.get("version") != _VERSION:
            raise ValueError(f"version {d.get('version')!r}, this speechlab reads version "
                             f"{_VERSION}")
        return cls(title=d["title"], notes=d.get("notes", ""),
                   tables=[Table.from_dict(t) for t in d["tables"]],
                   figures=[Figure.from_dict(f) for f in d["figures"]],
                   meta=dict(d.get("meta", {})), scale=str(d.get("scale", "")))

    def to_markdown(self, heading_level: int = 1, figure_dir: str = "") -> str:
        """Markdown rendering; figure links are prefixed with ``figure_dir`` (relative path of
        the run directory as seen from where the markdown file will live)."""
        h = "#" * heading_level
        parts = [f"{h} {self.title}"]
        if self.scale:
            parts.append(f"*Scale: `{self.scale}`*")
        if self.notes:
            parts.append(self.notes.strip())
        for t in self.tables:
            parts.append(t.to_markdown())
        for f in self.figures:
            link = (PurePosixPath(figure_dir) / f.path).as_posix() if figure_dir else f.path
            if f.path.lower().endswith(".wav"):  # a sound: linked, not shown as an image
                parts.append(f"[{f.caption}]({link})")
                continue
            parts.append(f"![{f.caption}]({link})\n\n*{f.caption}*")
        if self.meta:
            rows = "\n".join(f"| {k} | {_meta_value(v)} |" for k, v in self.meta.items())
            parts.append(f"{h}# Run information\n\n| key | value |\n|:---|:---|\n{rows}")
        return "\n\n".join(parts) + "\n"

    def save(self, run_dir: str | Path) -> Path:
        """Write ``results.json`` and ``results.md`` into ``run_dir``; returns the JSON path."""
        run_dir = Path(run_dir)
        for f in self.figures:
            if not (run_dir / f.path).is_file():
                raise DataError(f"{run_dir / f.path}: figure file does not exist; write the "
                                "figure before saving the results that list it")
        doc = self.to_dict()
        try:
            json.dumps(doc, allow_nan=True)
        except (TypeError, ValueError) as e:
            raise ValueError(f"results {self.title!r} are not JSON-serializable: {e}") from None
        path = run_dir / RESULTS_JSON
        atomic_write_json(path, doc)
        atomic_write_text(run_dir / RESULTS_MD, self.to_markdown())
        return path

    @classmethod
    def load(cls, run_dir: str | Path) -> Results:
        path = Path(run_dir) / RESULTS_JSON
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DataError(f"{path}: no results file; is {run_dir} a finished run directory "
                            "(Results.save writes it)?") from None
        except UnicodeDecodeError:
            raise DataError(f"{path}: corrupt results file (not UTF-8); re-run to rewrite "
                            "it") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}: corrupt results file ({e.msg}); re-run to "
                            "rewrite it") from None
        try:
            return cls.from_dict(doc)
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"{path}: not a valid speechlab results file ({e})") from None


def _meta_value(v: Any) -> str:
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return s.replace("|", "\\|").replace("\n", " ")


def _git(*args: str) -> str | None:
    # Read-only queries; --no-optional-locks keeps `status` from refreshing the index.
    try:
        out = subprocess.run(["git", "--no-optional-locks", *args], capture_output=True,
                             text=True, timeout=10, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# The checkout's commit and state as this process first read them: a long run's results name
# the code it started with (the code it runs), not a commit checked out while it ran.
_CHECKOUT: tuple[str | None, bool | None] | None = None


def _checkout() -> tuple[str | None, bool | None]:
    """(commit, whether tracked files differ from it) of speechlab's checkout, read once per
    process; (None, None) outside a git checkout."""
    global _CHECKOUT
    if _CHECKOUT is None:
        commit = _git("rev-parse", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no") if commit else None
        _CHECKOUT = (commit, None if dirty is None else bool(dirty))
    return _CHECKOUT


def collect_meta(started: float | None = None, argv: list[str] | None = None) -> dict[str, Any]:
    """Run information for ``Results.meta``: command line, git commit, wall time, host.

    ``started`` is a ``time.time()`` taken when the run began; ``argv`` defaults to
    ``sys.argv``.
    """
    commit, dirty = _checkout()
    meta: dict[str, Any] = {
        "command": shlex.join(sys.argv if argv is None else argv),
        "git_commit": commit,
        "git_dirty": dirty,
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "speechlab": _version("speechlab"),
        "cpu_count": os.cpu_count(),
    }
    if started is not None:
        meta["wall_time_s"] = round(time.time() - started, 3)
    return meta


# A run's invocations: every `speechlab reproduce` or `speechlab train` that started or resumed
# a run directory appends its command line and commit here, so that a model taken from a run
# that has not finished (no results.json yet) can still say which command and code trained it.
INVOCATIONS_NAME = "invocations.jsonl"
_INVOCATION_KEYS = ("command", "git_commit", "git_dirty", "date_utc", "model")


def record_invocation(run_dir: str | Path, argv: list[str] | None = None,
                      model: str | None = None) -> None:
    """Append this process's command line, commit and date to ``run_dir``'s
    :data:`INVOCATIONS_NAME` (one JSON line, written whole); ``model``: the one model of the
    run this process trains (None: the whole run)."""
    meta = collect_meta(argv=argv)
    item = {k: meta.get(k) for k in _INVOCATION_KEYS if k != "model"}
    if model is not None:
        item["model"] = model
    line = json.dumps(item, ensure_ascii=False) + "\n"
    with open(Path(run_dir) / INVOCATIONS_NAME, "a", encoding="utf-8") as f:
        f.write(line)


def read_invocations(run_dir: str | Path) -> list[dict[str, Any]]:
    """The invocations :func:`record_invocation` recorded in ``run_dir``, oldest first; lines
    that are not a JSON object (a write cut short) are skipped."""
    path = Path(run_dir) / INVOCATIONS_NAME
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict):  # "model" only where it was written
            out.append({k: item.get(k) for k in _INVOCATION_KEYS
                        if k != "model" or item.get("model")})
    return out


def invocations_for(run_dir: str | Path, model: str) -> list[dict[str, Any]]:
    """The invocations of ``run_dir`` that trained ``model``: those of the whole run
    (``reproduce``) and those of ``train PAPER MODEL`` for it, not another model's. A line
    written before invocations named their model is read from its command."""
    import shlex

    def trained(call: dict[str, Any]) -> str | None:
        if call.get("model"):
            return str(call["model"])
        try:
            words = shlex.split(str(call.get("command") or ""))
        except ValueError:
            return None
        at = words.index("train") if "train" in words else -1
        return words[at + 2] if 0 <= at < len(words) - 2 else None

    out = []
    for call in read_invocations(run_dir):
        named = trained(call)
        if named is None or named == model:
            out.append(call)
    return out
