"""Restructuring must not change results: every paper's ci-scale tables, as a reader sees them
(formatted cells, measured-time columns left out), against the fingerprint in
``ci_tables.json`` (made by ``python -m speechlab.testing.ci_tables
tests/experiment/ci_tables.json``, or ``make fingerprint``).

The reproductions run under :data:`~speechlab.testing.ci_tables.PINNED_KERNELS`, so neither the
CPU's best SIMD kernels nor the machine's load change a number. Every machine checks the
tables' layout; their numbers are compared exactly where the machine signature (the CPU and the
numerical libraries' versions, what the pins cannot reach) is the recording's, and elsewhere a
difference is reported as a warning, not a failure: numbers that come out of training are only
comparable on one kernel path."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from speechlab.testing.ci_tables import PAPERS, fingerprint, layout, machine_signature

pytestmark = [pytest.mark.slow, pytest.mark.needs_espeak, pytest.mark.numerics]

RECORD = json.loads((Path(__file__).parent / "ci_tables.json").read_text(encoding="utf-8"))
RECORDED = RECORD["tables"]


def test_the_fingerprint_covers_every_paper():
    from speechlab.papers import PAPERS as REGISTERED

    assert sorted(RECORDED) == sorted(PAPERS) == sorted(REGISTERED)


def test_cell_kinds():
    from speechlab.testing.ci_tables import cell_kind

    assert [cell_kind(c) for c in ["9.85", "10,027", "-0.64", "+0.68", "72.3%", "inf", "nan",
                                   "n/a"]] == ["number"] * 8
    assert [cell_kind(c) for c in ["[-0.95, -0.90]", "-", "", "heterogeneous", "1-2"]] \
        == ["interval", "none", "none", "text", "text"]


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_ci_tables_are_unchanged(paper, tmp_path):
    tables = fingerprint(tmp_path, [paper])[paper]
    assert sorted(tables) == sorted(RECORDED[paper])
    assert layout(tables) == layout(RECORDED[paper]), f"{paper}: a table's layout changed"
    changed = [name for name, table in RECORDED[paper].items() if tables[name] != table]
    if not changed:
        return
    here = machine_signature()
    if here == RECORD["recorded_on"]:
        for name in changed:
            assert tables[name] == RECORDED[paper][name], f"{paper} {name} changed"
    differs = {k: (v, here.get(k)) for k, v in RECORD["recorded_on"].items() if here.get(k) != v}
    warnings.warn(f"{paper}: {', '.join(changed)} differ from the fingerprint recorded on another "
                  f"machine ({differs}); the layout is the same. Record this machine's with "
                  "`make fingerprint` before a restructuring, and compare after it.")
