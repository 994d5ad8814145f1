"""The models speechlab ships: packages under the repository's ``models/``, reached by name.

Each ``models/NAME/`` is a package (:mod:`speechlab.package`) written by ``speechlab export``
from a run of one of the repository's recipes, with a ``README.md`` (its model card: what it
is, the command and commit that made it, its in-domain and unseen-voice test figures).
``speechlab.load("NAME")``, ``speechlab transcribe NAME ...`` and ``speechlab serve`` (with no
PATH) take these names; :mod:`speechlab.shipping` lists them (``speechlab models``) and makes
them (``speechlab models ship``).

Where they are: ``$SPEECHLAB_MODELS`` if set, else the ``models/`` folder of the checkout this
speechlab is installed from (``make setup`` installs it in place).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


MODELS_ENV = "SPEECHLAB_MODELS"


def models_dir() -> Path:
    """Where the shipped packages are (it may not exist: an install without the checkout)."""
    given = os.environ.get(MODELS_ENV)
    if given:
        return Path(given)
    return Path(__file__).resolve().parents[2] / "models"


def shipped() -> dict[str, Path]:
    """``{name: package dir}`` of every shipped model, by name."""
    from speechlab.package import is_package

    root = models_dir()
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if p.is_dir() and is_package(p)}


ORDER_FILE = "serve-order.txt"


def serve_order() -> list[Path]:
    """The shipped models in the order ``speechlab serve`` (with no PATH) lists them, the first
    being its page's default: the names in ``models/serve-order.txt`` (one per line; ``#``
    starts a comment) that are shipped, in that order, then the others by name. A name listed
    but not shipped is skipped with a note on stderr."""
    import sys

    ships = shipped()
    order_file = models_dir() / ORDER_FILE
    listed: list[str] = []
    if order_file.is_file():
        for line in order_file.read_text(encoding="utf-8").splitlines():
            name = line.split("#", 1)[0].strip()
            if not name or name in listed:
                continue
            if name in ships:
                listed.append(name)
            else:
                print(f"note: {order_file} names {name!r}, which is not a shipped model; "
                      "skipped", file=sys.stderr, flush=True)
    return [ships[n] for n in listed] + [p for n, p in ships.items() if n not in listed]


def resolve(model: str | Path) -> Path:
    """``model`` as a path: the shipped model of that name if it names one and is not a path
    that exists, else ``model`` itself (whose absence the loader reports)."""
    path = Path(model)
    if path.exists() or "/" in str(model):
        return path
    return shipped().get(str(model), path)


def _figures(card: Any) -> dict[str, Any]:
    """The card's headline test figures: ``results["shipped"]`` as the shipping run wrote it."""
    return dict((card.results or {}).get("shipped") or {})


TABLE_FIGURES = 8  # figures per model in the table; the card's README has them all


def _headline(figures: dict[str, Any]) -> str:
    """The table's cell: the default search's figures (keys without a qualifier in brackets)
    first, then the others, at most :data:`TABLE_FIGURES`, and how many more the README has."""
    keys = sorted(figures, key=lambda k: "(" in k)  # stable: the card's order within each
    shown = [f"{k}: {figures[k]}" for k in keys[:TABLE_FIGURES]]
    more = len(keys) - len(shown)
    return "; ".join(shown + ([f"{more} more in its README"] if more else [])) or "-"


def table_rows() -> list[list[str]]:
    """One row per shipped model: name, family, kind, languages, figures, size in MB."""
    from speechlab.package import read_card

    rows = []
    for name, path in shipped().items():
        card = read_card(path)
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20
        figures = _headline(_figures(card))
        rows.append([name, card.family, card.kind, ", ".join(card.languages) or "-", figures,
                     f"{size:.1f}"])
    return rows
