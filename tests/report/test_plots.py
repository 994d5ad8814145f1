"""Plot helpers write real PNGs atomically; the heatmap puts each row where it says."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from matplotlib.image import imread

from speechlab.report.plots import bar_plot, heatmap, line_plot, panel_plot

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC)
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


C0 = np.array([0x1F, 0x77, 0xB4]) / 255  # matplotlib's first series colour


def _c0_pixels(path) -> tuple[np.ndarray, np.ndarray]:
    """(rows, cols) of the pixels drawn in the first series' colour."""
    img = imread(path)[..., :3]
    return np.nonzero(np.abs(img - C0).sum(axis=-1) < 0.05)


def test_line_plot_puts_points_where_the_axes_say(tmp_path):
    # y = log10(x): a straight line on a log x axis, a bent one on a linear axis.
    xs, ys = [1, 10, 100, 1000], [0.0, 1.0, 2.0, 3.0]
    straightness = {}
    for logx in (True, False):
        p = line_plot(xs, {"s": ys}, path=tmp_path / f"log{logx}.png", logx=logx, markers=False)
        w, h = _png_size(p)
        assert w > 300 and h > 200
        rows, cols = _c0_pixels(p)
        # rising: image rows grow downwards, so the right end is higher (smaller row)
        assert rows[cols > np.percentile(cols, 90)].mean() < rows[cols < np.percentile(cols, 10)].mean()
        fit = np.polyfit(cols, rows, 1)
        straightness[logx] = np.abs(np.polyval(fit, cols) - rows).mean()
    assert straightness[True] < 2.0 < straightness[False]
    # Nothing but the finished images is left in the directory.
    assert sorted(x.name for x in tmp_path.iterdir()) == ["logFalse.png", "logTrue.png"]


def test_bar_heights_are_proportional_to_values(tmp_path):
    p = bar_plot(["En-IN", "Hi-IN"], {"mono": [1.0, 3.0]}, path=tmp_path / "bars.png",
                 ylabel="WER [%]", value_labels=True)
    rows, cols = _c0_pixels(p)
    middle = (cols.min() + cols.max()) / 2
    left, right = rows[cols < middle], rows[cols > middle]
    assert left.max() == pytest.approx(right.max(), abs=2)  # both bars stand on the x axis
    heights = (left.max() - left.min(), right.max() - right.min())
    assert heights[1] / heights[0] == pytest.approx(3.0, rel=0.03)


def test_plot_argument_errors(tmp_path):
    with pytest.raises(ValueError, match=r"\.png"):
        line_plot([1], {"a": [1]}, path=tmp_path / "x.pdf")
    with pytest.raises(ValueError, match="'a' has 2 values for 3"):
        line_plot([1, 2, 3], {"a": [1, 2]}, path=tmp_path / "x.png")
    with pytest.raises(ValueError, match="categories"):
        bar_plot(["x"], {"a": [1, 2]}, path=tmp_path / "x.png")
    with pytest.raises(ValueError, match="2-D"):
        heatmap(np.zeros(3), path=tmp_path / "x.png")
    assert list(tmp_path.iterdir()) == []


def _bright_and_dark_rows(path) -> tuple[float, float]:
    """Mean pixel row of the brightest (viridis yellow) and darkest (viridis purple) pixels."""
    img = imread(path)[..., :3]
    yellow = np.array([0.993, 0.906, 0.144])
    purple = np.array([0.267, 0.005, 0.329])
    rows = np.arange(img.shape[0])[:, None].repeat(img.shape[1], axis=1)
    near = lambda c: np.abs(img - c).sum(axis=-1) < 0.1  # noqa: E731
    return rows[near(yellow)].mean(), rows[near(purple)].mean()


@pytest.mark.parametrize("origin", ["upper", "lower"])
def test_heatmap_orientation(tmp_path, origin):
    m = torch.zeros(6, 8, requires_grad=True) + 0.0  # a tensor still in an autograd graph
    m = m + torch.nn.functional.one_hot(torch.zeros(8, dtype=torch.long), 6).T.float()
    p = heatmap(m, path=tmp_path / "att.png", origin=origin, colorbar=False,
                xticklabels=[str(i) for i in range(8)], yticklabels=list("abcdef"))
    bright, dark = _bright_and_dark_rows(p)
    # Row 0 holds the ones: at the top of the image for "upper", at the bottom for "lower".
    assert (bright < dark) == (origin == "upper")


def test_panel_plot_draws_one_panel_each_and_checks_lengths(tmp_path):
    panels = {lang: ({"mono": [1, 2], "ms": [1, 2, 3]}, {"mono": [3.0, 2.0], "ms": [4.0, 3.0, 2.5]})
              for lang in ("En-IN", "Hi-IN", "Ta-IN")}
    p = panel_plot(panels, path=tmp_path / "panels.png", xlabel="update", ylabel="loss")
    w, h = _png_size(p)
    assert w > h > 300  # two columns, two rows (the fourth panel left empty)
    with pytest.raises(ValueError, match="3 values for 2"):
        panel_plot({"x": ({"a": [1, 2]}, {"a": [1, 2, 3]})}, path=tmp_path / "bad.png")
    with pytest.raises(ValueError, match="at least one panel"):
        panel_plot({}, path=tmp_path / "none.png")
