"""Small matplotlib helpers for the figures the papers show: curves, grouped bars, heatmaps.

Each helper draws one figure and writes it as a PNG (at :data:`DPI`) atomically, so a report
never embeds a half-written image. Figures are built on ``matplotlib.figure.Figure`` with the
Agg canvas directly instead of through ``pyplot``: no global backend switch, no figure left
open in a global registry, and it works on machines without a display.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from speechlab.files import atomic_path

DPI = 150
_SIZE = (6.4, 4.0)  # inches; at DPI 150 about 960 x 600 pixels before tight cropping


def new_figure(size: tuple[float, float] = _SIZE) -> MplFigure:
    """An empty figure on the Agg canvas, for a paper's own drawing (then :func:`save_figure`)."""
    fig = MplFigure(figsize=size)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: MplFigure, path: str | Path) -> Path:
    """Write ``fig`` at ``path``, atomically: a PNG, or an SVG (text, the same bytes for the
    same figure: no date, fixed ids) for a path ending in .svg."""
    import matplotlib

    path = Path(path)
    kind = path.suffix.lower().lstrip(".")
    if kind not in ("png", "svg"):
        raise ValueError(f"{path}: figures are written as PNG or SVG; give a path ending in "
                         ".png or .svg")
    # The temporary name ends in .tmp, so the format must be given explicitly.
    svg = {"svg.hashsalt": "speechlab", "svg.fonttype": "none"}  # text stays text
    with atomic_path(path) as tmp, matplotlib.rc_context(svg):
        fig.savefig(tmp, format=kind, dpi=DPI, bbox_inches="tight",
                    metadata={"Date": None} if kind == "svg" else None)
    return path


def _label(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)


def line_plot(xs: Sequence[float] | Mapping[str, Sequence[float]],
              series: Mapping[str, Sequence[float]], *, path: str | Path, xlabel: str = "",
              ylabel: str = "", title: str = "", logx: bool = False, logy: bool = False,
              markers: bool = True) -> Path:
    """One line per series (e.g. WER vs. training step per system).

    ``xs`` is either shared by all series or a mapping with one x sequence per series name.
    """
    if not series:
        raise ValueError("line_plot needs at least one series")
    fig = new_figure()
    ax = fig.add_subplot()
    for name, ys in series.items():
        x = xs[name] if isinstance(xs, Mapping) else xs
        if len(x) != len(ys):
            raise ValueError(f"series {name!r} has {len(ys)} values for {len(x)} x positions")
        ax.plot(list(x), list(ys), marker="o" if markers else None, label=name)
    ax.set_xscale("log" if logx else "linear")
    ax.set_yscale("log" if logy else "linear")
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend()
    _label(ax, xlabel, ylabel, title)
    return save_figure(fig, path)


def panel_plot(panels: Mapping[str, tuple[Mapping[str, Sequence[float]], Mapping[str, Sequence[float]]]],
               *, path: str | Path, xlabel: str = "", ylabel: str = "", title: str = "",
               columns: int = 2) -> Path:
    """Small multiples: one line plot per panel (e.g. dev loss against updates, one panel per
    language), a series keeping its colour in every panel and one legend for all.

    ``panels`` maps a panel title to ``(xs, series)``, each a mapping from series name to
    values.
    """
    if not panels:
        raise ValueError("panel_plot needs at least one panel")
    names = list(dict.fromkeys(n for _, series in panels.values() for n in series))
    colours = {n: f"C{i % 10}" for i, n in enumerate(names)}
    rows = -(-len(panels) // columns)
    cols = min(columns, len(panels))
    fig = new_figure((4.2 * cols, 3.0 * rows + 0.6))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (panel, (xs, series)) in zip(axes.flat, panels.items()):
        for name, ys in series.items():
            if len(xs[name]) != len(ys):
                raise ValueError(f"panel {panel!r}: series {name!r} has {len(ys)} values for "
                                 f"{len(xs[name])} x positions")
            ax.plot(list(xs[name]), list(ys), marker="o", markersize=3, color=colours[name], label=name)
        ax.grid(True, alpha=0.3)
        _label(ax, xlabel, ylabel, panel)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    handles = [ax.get_lines() for ax in axes.flat]
    seen: dict[str, Any] = {}
    for lines in handles:
        for line in lines:
            seen.setdefault(line.get_label(), line)
    fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(len(seen), 4),
               bbox_to_anchor=(0.5, -0.02 * rows), frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return save_figure(fig, path)


def bar_plot(categories: Sequence[str], series: Mapping[str, Sequence[float]], *,
             path: str | Path, xlabel: str = "", ylabel: str = "", title: str = "",
             value_labels: bool = False) -> Path:
    """Grouped bars: one group per category, one bar per series (e.g. WER per language per
    system, as in Table 2 of the multi-softmax paper)."""
    if not series:
        raise ValueError("bar_plot needs at least one series")
    for name, values in series.items():
        if len(values) != len(categories):
            raise ValueError(f"series {name!r} has {len(values)} values for "
                             f"{len(categories)} categories")
    fig = new_figure()
    ax = fig.add_subplot()
    x = np.arange(len(categories))
    width = 0.8 / len(series)
    for k, (name, values) in enumerate(series.items()):
        bars = ax.bar(x + (k - (len(series) - 1) / 2) * width, list(values), width, label=name)
        if value_labels:
            ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(x, list(categories))
    ax.grid(True, axis="y", alpha=0.3)
    if len(series) > 1:
        ax.legend()
    _label(ax, xlabel, ylabel, title)
    return save_figure(fig, path)


def heatmap(matrix: Any, *, path: str | Path, xlabel: str = "", ylabel: str = "",
            title: str = "", xticklabels: Sequence[str] | None = None,
            yticklabels: Sequence[str] | None = None, origin: str = "upper",
            cmap: str = "viridis", colorbar: bool = True) -> Path:
    """Image of a 2-D matrix, e.g. an attention map (query frames x key frames) or a confusion
    matrix. ``matrix`` is anything ``numpy.asarray`` accepts, or a torch tensor.

    ``origin="upper"`` draws row 0 at the top (matrices); ``"lower"`` at the bottom
    (alignments, where time runs upwards).
    """
    if hasattr(matrix, "detach"):  # torch tensor: leave the autograd graph and the device
        matrix = matrix.detach().cpu().numpy()
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or 0 in m.shape:
        raise ValueError(f"heatmap needs a non-empty 2-D matrix, got shape {m.shape}")
    if origin not in ("upper", "lower"):
        raise ValueError(f"origin must be 'upper' or 'lower', got {origin!r}")
    fig = new_figure()
    ax = fig.add_subplot()
    im = ax.imshow(m, origin=origin, aspect="auto", interpolation="nearest", cmap=cmap)
    if xticklabels is not None:
        ax.set_xticks(np.arange(m.shape[1]), list(xticklabels), rotation=90)
    if yticklabels is not None:
        ax.set_yticks(np.arange(m.shape[0]), list(yticklabels))
    if colorbar:
        fig.colorbar(im, ax=ax)
    _label(ax, xlabel, ylabel, title)
    return save_figure(fig, path)
