"""What the scripts that print a run's tables so far share: their command line (a directory,
``--markdown FILE``) and where the table goes (standard output, and the file if asked)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def arguments(doc: str, what: str, argv: list[str] | None, *, run: bool = True
              ) -> argparse.Namespace:
    """``DIR [--markdown FILE]``; with ``run``, DIR must be a run directory (its config.yaml),
    else the program exits 2 saying so."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("run" if run else "out", type=Path, help=what)
    p.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    a = p.parse_args(argv)
    if run and not (a.run / "config.yaml").is_file():
        print(f"{a.run}: no config.yaml; not a run directory", file=sys.stderr)
        raise SystemExit(2)
    return a


def emit(text: str, markdown: Path | None) -> int:
    """Print ``text`` and write it to ``markdown`` if given; the exit status (0)."""
    print(text, end="")
    if markdown:
        markdown.write_text(text, encoding="utf-8")
    return 0
