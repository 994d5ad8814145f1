"""Restructuring must not change results: every paper's ci-scale tables, as a reader sees
them (formatted cells, measured-time columns left out), equal the fingerprint recorded before
the experiment layer was restructured (``ci_tables.json``, made by
``python -m speechlab.testing.ci_tables tests/experiment/ci_tables.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speechlab.testing.ci_tables import PAPERS, fingerprint

pytestmark = [pytest.mark.slow, pytest.mark.needs_espeak]

RECORDED = json.loads((Path(__file__).parent / "ci_tables.json").read_text(encoding="utf-8"))


def test_the_fingerprint_covers_every_paper():
    from speechlab.papers import PAPERS as REGISTERED

    assert sorted(RECORDED) == sorted(PAPERS) == sorted(REGISTERED)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_ci_tables_are_unchanged(paper, tmp_path):
    tables = fingerprint(tmp_path, [paper])[paper]
    assert sorted(tables) == sorted(RECORDED[paper])
    for name, table in RECORDED[paper].items():
        assert tables[name] == table, f"{paper} {name} changed"
