"""The HTML report: self-contained (embedded images, no external links), complete, navigable."""

from __future__ import annotations

import argparse
import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from speechlab.errors import DataError
from speechlab.report import Figure, Results, Table, write_report
from speechlab.report.commands import add_commands
from speechlab.report.plots import bar_plot


class _Collect(HTMLParser):
    """Every id, href and src in the page, and the tag nesting checked as it goes."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.tags: list[str] = []
        self.stack: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        if "href" in a:
            self.hrefs.append(a["href"])
        if "src" in a:
            self.srcs.append(a["src"])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()


def _make_run(run_dir: Path, title: str, wer_value: float, notes: str = "") -> Results:
    fig = bar_plot(["En-IN", "Hi-IN"], {"system": [wer_value, wer_value / 2]},
                   path=run_dir / "figs" / "wer.png", ylabel="WER [%]")
    res = Results(
        title=title,
        tables=[Table("Table 2", "WER[%] per language", ["System", "En-IN", "Avg."],
                      [["Multi-softmax", wer_value, 22.86], ["Monolingual", 24.67, None]],
                      formats={"Avg.": "{:.3f}"})],
        figures=[Figure(str(fig.relative_to(run_dir)), f"WER of {title}")],
        notes=notes,
        meta={"command": "speechlab reproduce x", "git_commit": "0" * 40},
    )
    res.save(run_dir)
    return res


def test_report_is_self_contained_and_complete(tmp_path):
    run_a, run_b, out = tmp_path / "runs" / "a", tmp_path / "runs" / "b", tmp_path / "out"
    _make_run(run_a, "Multi-softmax RNN-T", 23.35,
              notes="Demo scale. <script>alert(1)</script> see `speechlab score`.")
    _make_run(run_b, "CTC topologies", 11.5)
    path = write_report([run_a, run_b], out, title="All runs")
    assert path == out / "report.html"
    page = path.read_text(encoding="utf-8")

    # Both runs' tables, formatted per column, and their titles.
    for text in ("Multi-softmax RNN-T", "CTC topologies", "WER[%] per language",
                 "<td class=\"num\">23.35</td>", "<td class=\"num\">11.50</td>",
                 "<td class=\"num\">22.860</td>", "<td class=\"num\">-</td>"):
        assert text in page, text
    # Raw HTML in notes is shown, never executed.
    assert "<script" not in page and "&lt;script&gt;" in page
    assert "<code>speechlab score</code>" in page

    parser = _Collect()
    parser.feed(page)
    parser.close()
    assert parser.stack == []  # every element closed in order
    # Each figure is embedded byte for byte; nothing is fetched from anywhere.
    for run in (run_a, run_b):
        data = base64.b64encode((run / "figs" / "wer.png").read_bytes()).decode()
        assert f"data:image/png;base64,{data}" in parser.srcs
    assert all(s.startswith("data:image/png;base64,") for s in parser.srcs)
    assert "link" not in parser.tags and "script" not in parser.tags
    without_images = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert not re.search(r"https?:|ftp:|file:|src=\"//|href=\"//", without_images)
    assert "@import" not in page and "url(" not in page
    # The table of contents points at anchors that exist, and anchors are unique.
    assert len(parser.ids) == len(set(parser.ids))
    assert parser.hrefs and all(h.startswith("#") and h[1:] in parser.ids for h in parser.hrefs)
    assert len(parser.hrefs) == 2 + 2 * 2  # two runs, each with one table and one figure

    md = (out / "report.md").read_text(encoding="utf-8")
    assert md.startswith("# All runs\n") and "## Multi-softmax RNN-T" in md
    assert "| Multi-softmax | 23.35 | 22.860 |" in md
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(links) == 2 and all((out / link).is_file() for link in links)
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.md"]


def test_report_errors_name_the_input(tmp_path):
    with pytest.raises(DataError, match=r"nowhere.results\.json"):
        write_report([tmp_path / "nowhere"], tmp_path / "out")
    run = tmp_path / "run"
    _make_run(run, "r", 1.0)
    (run / "figs" / "wer.png").unlink()
    with pytest.raises(DataError, match=r"wer\.png: figure listed in results\.json is missing"):
        write_report([run], tmp_path / "out")
    (run / "figs" / "wer.png").write_bytes(b"GIF89a not a png")
    with pytest.raises(DataError, match="not a PNG"):
        write_report([run], tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(DataError, match="no run directories"):
        write_report([], tmp_path / "out")


def test_report_command_prints_html_path(tmp_path, capsys):
    run = tmp_path / "run"
    _make_run(run, "r", 1.0)
    parser = argparse.ArgumentParser(prog="speechlab")
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", str(run), "--out", str(tmp_path / "rep")])
    assert args.func(args) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == str(tmp_path / "rep" / "report.html") and Path(printed).is_file()
