"""The toolkit's one report writer: many run directories -> one self-contained HTML page.

:func:`write_report` reads the ``results.json`` of every run directory given and writes
``report.html`` and ``report.md`` into the output directory. The HTML page carries everything
it shows: CSS is inline and figures are embedded as base64 ``data:`` URIs, so the page can be
mailed or archived as one file and opens offline with no JavaScript and no network access.
``report.md`` links the figures in place instead (relative paths to the run directories).
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from markdown_it import MarkdownIt

from speechlab.errors import DataError
from speechlab.files import atomic_write_text
from speechlab.report.results import Results, Table

REPORT_HTML = "report.html"
REPORT_MD = "report.md"

# Image types a figure may be, recognised by their leading bytes rather than the file name.
_IMAGE_MAGIC = {
    b"\x89PNG\r\n\x1a\n": "image/png",
    b"\xff\xd8\xff": "image/jpeg",
}

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 70rem;
       margin: 2rem auto; padding: 0 1rem; color: #222; line-height: 1.45; }
h1, h2, h3 { line-height: 1.2; }
section.run { border-top: 2px solid #ccc; margin-top: 2.5rem; padding-top: 0.5rem; }
.source { color: #666; font-family: monospace; font-size: 0.9em; }
figure { margin: 1.5rem 0; }
figcaption { font-weight: 600; margin-bottom: 0.4rem; }
figure.plot figcaption { margin-top: 0.4rem; font-weight: normal; font-style: italic; }
figure.plot img { max-width: 100%; height: auto; border: 1px solid #eee; }
table { border-collapse: collapse; margin: 0.3rem 0; }
th, td { padding: 0.25rem 0.7rem; border-bottom: 1px solid #ddd; }
thead th { border-bottom: 2px solid #444; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tbody tr:last-child td { border-bottom: 2px solid #444; }
.table-notes { color: #555; font-size: 0.9em; }
details { margin-top: 1rem; color: #444; }
details td { font-family: monospace; font-size: 0.85em; }
nav ol { padding-left: 1.4rem; }
"""

# Notes are markdown written by experiment code: raw HTML is escaped, and images are turned
# off because an image URL would make the page fetch from the network.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")


def _slug(text: str) -> str:
    s = re.sub(r"[^\w\s-]", "", text.lower(), flags=re.UNICODE)
    return re.sub(r"[\s]+", "-", s.strip()) or "section"


def _read_listed(path: Path, what: str, remedy: str) -> bytes:
    """The bytes of a file results.json lists (a figure, a sound); a clear error if it is gone."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: {what} listed in results.json is missing; re-run the "
                        f"experiment or {remedy}") from None


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _embed_image(path: Path) -> str:
    data = _read_listed(path, "figure", "remove the figure")
    for magic, mime in _IMAGE_MAGIC.items():
        if data.startswith(magic):
            return _data_url(mime, data)
    raise DataError(f"{path}: figure is not a PNG or JPEG image; save figures with "
                    "speechlab.report.plots")


def _embed_audio(path: Path) -> str:
    data = _read_listed(path, "sound", "remove it")
    if not (data.startswith(b"RIFF") and data[8:12] == b"WAVE"):
        raise DataError(f"{path}: not a WAV file")
    return _data_url("audio/wav", data)


def _table_html(table: Table, anchor: str) -> str:
    e = html.escape
    numeric = table.numeric_columns()
    cls = [' class="num"' if n else "" for n in numeric]
    head = "".join(f"<th{c}>{e(col)}</th>" for col, c in zip(table.columns, cls))
    body = "\n".join(
        "<tr>" + "".join(f"<td{c}>{e(cell)}</td>" for cell, c in zip(row, cls)) + "</tr>"
        for row in table.formatted_rows()
    )
    caption = f"<b>{e(table.name)}</b>" + (f": {e(table.caption)}" if table.caption else "")
    notes = (f'<div class="table-notes">{_MARKDOWN.render(table.notes)}</div>'
             if table.notes else "")
    return (f'<figure class="table" id="{anchor}"><figcaption>{caption}</figcaption>\n'
            f"<table><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody></table>"
            f"{notes}</figure>")


def _meta_html(meta: dict[str, Any]) -> str:
    if not meta:
        return ""
    rows = "\n".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_meta_text(v))}</td></tr>"
                     for k, v in meta.items())
    return f"<details><summary>Run information</summary><table>\n{rows}\n</table></details>"


def _meta_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _run_html(results: Results, run_dir: Path, anchor: str) -> tuple[str, list[tuple[str, str]]]:
    """HTML of one run and its (anchor, label) table-of-contents entries."""
    e = html.escape
    toc: list[tuple[str, str]] = []
    parts = [f'<section class="run" id="{anchor}">', f"<h2>{e(results.title)}</h2>",
             f'<p class="source">{e(str(run_dir))}</p>']
    if results.scale:
        parts.append(f'<p class="scale">Scale: <strong>{e(results.scale)}</strong></p>')
    if results.notes:
        parts.append(_MARKDOWN.render(results.notes))
    for i, table in enumerate(results.tables, start=1):
        a = f"{anchor}-table-{i}"
        toc.append((a, table.name))
        parts.append(_table_html(table, a))
    for i, fig in enumerate(results.figures, start=1):
        a = f"{anchor}-figure-{i}"
        toc.append((a, fig.caption or fig.path))
        if fig.path.lower().endswith(".wav"):  # a sound to listen to, embedded like images
            src = _embed_audio(run_dir / fig.path)
            parts.append(f'<figure class="plot" id="{a}"><audio controls src="{src}"></audio>'
                         f"<figcaption>{e(fig.caption)}</figcaption></figure>")
            continue
        src = _embed_image(run_dir / fig.path)
        parts.append(f'<figure class="plot" id="{a}"><img src="{src}" alt="{e(fig.caption)}">'
                     f"<figcaption>{e(fig.caption)}</figcaption></figure>")
    parts.append(_meta_html(results.meta))
    parts.append("</section>")
    return "\n".join(parts), toc


def render_html(runs: Sequence[tuple[Path, Results]], title: str) -> str:
    """The complete HTML page for already loaded runs."""
    e = html.escape
    sections, nav = [], []
    for n, (run_dir, results) in enumerate(runs, start=1):
        anchor = f"run-{n}-{_slug(results.title)}"
        body, toc = _run_html(results, run_dir, anchor)
        sections.append(body)
        sub = "".join(f'<li><a href="#{a}">{e(label)}</a></li>' for a, label in toc)
        nav.append(f'<li><a href="#{anchor}">{e(results.title)}</a>'
                   + (f"<ol>{sub}</ol>" if sub else "") + "</li>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>{e(title)}</h1>\n<nav><h2>Contents</h2><ol>{''.join(nav)}</ol></nav>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )


def render_markdown(runs: Sequence[tuple[Path, Results]], title: str, out_dir: Path) -> str:
    """``report.md``: the runs' markdown under one title, figures linked relative to out_dir."""
    toc = "\n".join(f"{n}. [{r.title}](#{_slug(r.title)})" for n, (_, r) in enumerate(runs, 1))
    parts = [f"# {title}", "## Contents\n\n" + toc]
    for run_dir, results in runs:
        rel = PurePosixPath(Path(os.path.relpath(run_dir.resolve(), out_dir.resolve())).as_posix())
        parts.append(results.to_markdown(heading_level=2, figure_dir=str(rel)).strip())
    return "\n\n".join(parts) + "\n"


def write_report(run_dirs: Sequence[str | Path], out_dir: str | Path,
                 title: str = "speechlab report") -> Path:
    """Write ``report.html`` and ``report.md`` for ``run_dirs`` into ``out_dir``; returns the
    HTML path. Each file is written atomically."""
    if not run_dirs:
        raise DataError("no run directories given to report on")
    out_dir = Path(out_dir)
    runs = [(Path(d), Results.load(d)) for d in run_dirs]
    page = render_html(runs, title)
    md = render_markdown(runs, title, out_dir)
    html_path = out_dir / REPORT_HTML
    atomic_write_text(html_path, page)
    atomic_write_text(out_dir / REPORT_MD, md)
    return html_path
