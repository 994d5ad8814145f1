"""Results tables/figures: formatting, markdown shape, save/load round trip, clear load errors."""

from __future__ import annotations

import json
import time

import pytest

from speechlab.errors import DataError
from speechlab.report import Figure, Results, Table, collect_meta

PNG_1x1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


def table2() -> Table:
    return Table(
        name="Table 2",
        caption="WER[%] with the input language known",
        columns=["System", "En-IN", "Hi-IN", "Avg.", "WERR", "Utts"],
        rows=[["Monolingual", 24.67, 16.2, 23.97, 0.0, 120],
              ["Multi-softmax", 23.35, 17.2, 22.86, 4.6308, None],
              ["a|b", 1.0, 2.0, 3.0, -1.0, 7]],
        formats={"WERR": "{:.1f}", "Utts": "{:,d}"},
        notes="WERR against Monolingual.",
    )


def test_cell_formats():
    t = table2()
    assert t.formatted_rows()[0] == ["Monolingual", "24.67", "16.20", "23.97", "0.0", "120"]
    assert t.formatted_rows()[1][4:] == ["4.6", "-"]
    assert t.numeric_columns() == [False, True, True, True, True, True]
    big = Table("t", "", ["n"], [[1234567]], formats={"n": "{:,d}"})
    assert big.formatted_rows() == [["1,234,567"]]


def test_markdown_is_a_paper_table():
    md = table2().to_markdown().splitlines()
    assert md[0] == "**Table 2**: WER[%] with the input language known"
    assert md[2] == "| System | En-IN | Hi-IN | Avg. | WERR | Utts |"
    assert md[3] == "|:---|---:|---:|---:|---:|---:|"
    assert md[4] == "| Monolingual | 24.67 | 16.20 | 23.97 | 0.0 | 120 |"
    assert md[6].startswith("| a\\|b |")  # a pipe inside a cell must not split it
    assert md[-1] == "WERR against Monolingual."


@pytest.mark.parametrize("kwargs, match", [
    (dict(columns=["a", "b"], rows=[[1]]), "row 0 has 1 cells"),
    (dict(columns=["a"], rows=[[True]]), "not a string, number"),
    (dict(columns=["a"], rows=[], formats={"b": "{}"}), "unknown column"),
    (dict(columns=["a"], rows=[], formats={"a": "{:d"}), "bad format"),
    (dict(columns=["a"], rows=[[1.5]], formats={"a": "{:d}"}), "bad format"),
    (dict(columns=[], rows=[]), "no columns"),
])
def test_table_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Table(name="t", caption="c", **kwargs)


@pytest.mark.parametrize("path", ["/abs/fig.png", "../fig.png", "a/../../fig.png", ""])
def test_figure_must_stay_in_run_dir(path):
    with pytest.raises(ValueError):
        Figure(path, "caption")


def _results(run_dir) -> Results:
    (run_dir / "figs").mkdir(parents=True)
    (run_dir / "figs" / "curve.png").write_bytes(PNG_1x1)
    return Results(
        title="Multi-softmax, demo scale",
        tables=[table2()],
        figures=[Figure("figs/curve.png", "Training loss")],
        notes="Trained for **2** epochs.",
        meta={"command": "speechlab reproduce multisoftmax", "wall_time_s": 1.5, "seed": 0},
    )


def test_save_load_round_trip(tmp_path):
    res = _results(tmp_path)
    path = res.save(tmp_path)
    assert path == tmp_path / "results.json"
    loaded = Results.load(tmp_path)
    assert loaded == res
    assert loaded.table("Table 2").rows[1][4] == 4.6308
    md = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert md == res.to_markdown()
    assert md.startswith("# Multi-softmax, demo scale\n")
    assert "| Multi-softmax | 23.35 | 17.20 | 22.86 | 4.6 | - |" in md
    assert "![Training loss](figs/curve.png)" in md
    assert "| wall_time_s | 1.5 |" in md
    # Atomic writes leave no temporary files behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figs", "results.json", "results.md"]
    with pytest.raises(KeyError, match="Table 2"):
        loaded.table("Table 9")


def test_save_refuses_missing_figure_and_unserializable_meta(tmp_path):
    res = Results("r", figures=[Figure("nope.png", "x")])
    with pytest.raises(DataError, match="nope.png"):
        res.save(tmp_path)
    with pytest.raises(ValueError, match="JSON"):
        Results("r", meta={"x": object()}).save(tmp_path)
    assert not (tmp_path / "results.json").exists()


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(DataError, match=r"results\.json: no results file"):
        Results.load(tmp_path)
    (tmp_path / "results.json").write_text('{"format": "speechlab-results",\n "version": ',
                                           encoding="utf-8")
    with pytest.raises(DataError, match=r"results\.json:2: corrupt"):
        Results.load(tmp_path)
    (tmp_path / "results.json").write_text(json.dumps({"a": 1}), encoding="utf-8")
    with pytest.raises(DataError, match="not a valid speechlab results file"):
        Results.load(tmp_path)
    doc = Results("r", tables=[table2()]).to_dict()
    doc["tables"][0]["rows"][0].pop()
    (tmp_path / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(DataError, match="row 0 has 5 cells"):
        Results.load(tmp_path)


def test_collect_meta():
    meta = collect_meta(started=time.time() - 2.0, argv=["speechlab", "score", "--ref", "a b"])
    assert meta["command"] == "speechlab score --ref 'a b'"
    assert 1.9 < meta["wall_time_s"] < 60
    assert meta["python"].startswith("3.")
    assert meta["git_commit"] is None or len(meta["git_commit"]) == 40
    json.dumps(meta)  # must be storable in results.json


def test_the_commit_is_the_one_the_process_started_with(monkeypatch):
    """A run that writes its results hours after it started names the code it runs, not a
    commit checked out meanwhile."""
    from speechlab.report import results

    heads = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(results, "_CHECKOUT", None)
    monkeypatch.setattr(results, "_git", lambda *args: next(heads) if args[0] == "rev-parse"
                        else "")
    assert collect_meta()["git_commit"] == "a" * 40  # the start of the run
    later = collect_meta()
    assert (later["git_commit"], later["git_dirty"]) == ("a" * 40, False)


def test_a_figure_with_nothing_to_measure_reads_n_a_not_nan():
    """F0 error over a test set without voiced frames is NaN: the table says n/a."""
    import math

    from speechlab.report import Table

    t = Table("t", "c", ["Model", "F0 [Hz]", "A [%]"], [["m", math.nan, 50.0]],
              formats={"F0 [Hz]": "{:.2f}"})
    assert t.formatted_rows() == [["m", "n/a", "50.00"]]
