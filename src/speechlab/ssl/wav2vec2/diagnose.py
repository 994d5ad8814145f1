"""Block-level attention diagnosis (Sec. 3 of the local-attention paper, made quantitative).

The paper looks at the mean-over-heads attention map of every Transformer block for a few
utterances (its Fig. 2) and sorts the blocks into the four patterns of Kovaleva et al.:
*vertical* (a few keys draw attention from most queries, whatever the query), *diagonal* (the
mass sits near the diagonal: frames attend to their neighbours), *vertical+diagonal* (both) and
*heterogeneous* (the rest). Blocks with vertical lines are the abnormal ones that LMSABs fix.

Here the sorting is done by statistics of a (T, T) row-stochastic map ``A`` (rows: queries),
computed on its valid frames (:func:`map_statistics`):

- ``band``: the mean over queries of the mass within ``b = max(2, round(T / 25))`` frames of
  the diagonal, ``mean_i sum_{|i-j|<=b} A_ij``. A uniform map has about ``(2b+1)/T`` there.
- ``vertical``: the mass the queries put, outside their own band, on the *popular* keys K:
  ``mean_i sum_{j in K, |i-j|>b} A_ij``. A key is popular when the queries outside its band
  give it on average at least ``POPULAR = 3`` times what a uniform map gives (``3/T``); at most
  the top fifth of the keys count. A few keys attended from everywhere make it large; a
  uniform or a diagonal map has no popular key and scores about 0.
- ``entropy``: mean row entropy over ``log T`` (1: uniform rows, 0: one key per query).

:func:`classify` then reads (thresholds in :data:`THRESHOLDS`)::

    band >= max(0.15, 2c) and vertical >= 0.2 and band + vertical >= 0.5  -> vertical+diagonal
    band >= max(0.5, 2c)                                                 -> diagonal
    vertical >= 0.4                                                      -> vertical
    otherwise                                                            -> heterogeneous

with ``c`` the band mass of a uniform map of that length (on short maps the band covers much
of a row). Below about 50 frames (1 s of speech) a regional pattern and a diagonal one cannot
be told apart this way.

so a clear diagonal with most of the rest spread evenly (the paper's Block 1) is
heterogeneous, as the paper files it. A block's label is the most common label over the
utterances, and ``agreement`` the share of utterances that carry it (the paper assumes block
patterns do not depend on the input; agreement measures it).

:func:`block_maps` runs a model over utterances one at a time and hands each block's maps to
the statistics and a thumbnail as soon as the block has run, so only one block's (T, T) maps
exist at a time; the model's outputs are those it computes without inspection.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

LABELS = ("vertical", "diagonal", "vertical+diagonal", "heterogeneous")
#: The blocks the diagnosis suggests making local: those with vertical lines.
ABNORMAL = ("vertical", "vertical+diagonal")
THRESHOLDS = {"band_min_mixed": 0.15, "vertical_min_mixed": 0.2, "mixed_total": 0.5,
              "band_min": 0.5, "vertical_min": 0.4}
THUMBNAIL = 64
#: A key is popular when the queries outside its band give it, on average, this many times the
#: attention a key gets from a uniform map (1/T).
POPULAR = 3.0


@dataclass(frozen=True)
class MapStatistics:
    length: int
    band: float
    vertical: float
    entropy: float
    band_width: int
    popular_keys: int
    band_chance: float  # the band mass of a uniform map of this length


def valid_length(attn: np.ndarray) -> int:
    """Frames before the padding of a (T, T) map: padded keys receive no attention, so the
    length is one past the last key any query attends to."""
    received = np.nan_to_num(attn).sum(0)
    nonzero = np.flatnonzero(received > 1e-6 * max(received.max(), 1e-30))
    return int(nonzero[-1]) + 1 if nonzero.size else 0


def _as_map(attn) -> np.ndarray:
    if isinstance(attn, Tensor):
        attn = attn.detach().cpu().double().numpy()
    a = np.asarray(attn, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] < 1:
        raise ValueError(f"an attention map is a square (T, T) array, got shape {a.shape}")
    return a


def map_statistics(attn, length: int | None = None) -> MapStatistics:
    """The statistics of the module doc for a (T, T) map (rows: queries), on its first
    ``length`` frames (default: :func:`valid_length`); rows renormalised after cropping."""
    a = _as_map(attn)
    n = valid_length(a) if length is None else int(length)
    if n < 1:
        raise ValueError("the attention map has no valid frame (every key is padding)")
    a = np.nan_to_num(a[:n, :n])
    rows = a.sum(1, keepdims=True)
    a = np.where(rows > 0, a / np.maximum(rows, 1e-30), 1.0 / n)
    b = max(2, round(n / 25))
    i = np.arange(n)
    near = np.abs(i[:, None] - i[None, :]) <= b
    band = float((a * near).sum(1).mean())
    off = np.where(near, 0.0, a)
    received = off.mean(0)
    order = np.argsort(-received, kind="stable")[: max(1, math.ceil(n / 5))]
    popular = order[received[order] >= POPULAR / n]
    k = int(popular.size)
    vertical = float(off[:, popular].sum(1).mean())
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(a > 0, a * np.log(a), 0.0).sum(1)
    entropy = float(ent.mean() / math.log(n)) if n > 1 else 0.0
    return MapStatistics(n, band, vertical, entropy, b, k, float(near.sum(1).mean() / n))


def label_of(s: MapStatistics) -> str:
    t = THRESHOLDS
    # On short maps the band covers much of the row: ask for twice a uniform map's band mass.
    floor = 2 * s.band_chance
    if s.band >= max(t["band_min_mixed"], floor) and s.vertical >= t["vertical_min_mixed"] \
            and s.band + s.vertical >= t["mixed_total"]:
        return "vertical+diagonal"
    if s.band >= max(t["band_min"], floor):
        return "diagonal"
    if s.vertical >= t["vertical_min"]:
        return "vertical"
    return "heterogeneous"


def classify(attn) -> str:
    """One of :data:`LABELS` for a (T, T) row-stochastic attention map (rows are queries),
    padded or not (module doc)."""
    return label_of(map_statistics(attn))


# ---------------------------------------------------------------------------------------------
# Capturing a model's maps


@dataclass
class BlockDiagnosis:
    """One block over the utterances: per-utterance statistics, labels and thumbnails
    (THUMBNAIL x THUMBNAIL maps resized by area averaging), the block's label and agreement."""

    block: int
    stats: list[MapStatistics]
    labels: list[str]
    thumbnails: list[np.ndarray]

    @property
    def label(self) -> str:
        counts = Counter(self.labels)
        # ties go to the label with vertical lines: the diagnosis should not miss them
        return max(counts, key=lambda l: (counts[l], l in ABNORMAL))

    @property
    def agreement(self) -> float:
        return self.labels.count(self.label) / len(self.labels)

    def mean(self, field: str) -> float:
        return float(np.mean([getattr(s, field) for s in self.stats]))


def thumbnail(attn: Tensor, size: int = THUMBNAIL) -> np.ndarray:
    """(T, T) -> (size, size), each cell the mean of the map over its area (any T)."""
    img = torch.nn.functional.adaptive_avg_pool2d(attn[None, None].float(), size)[0, 0]
    return img.numpy()


def block_maps(model: nn.Module, utterances: Sequence[Tensor]) -> list[BlockDiagnosis]:
    """Diagnose every block of ``model`` (a :class:`~.model.Wav2Vec2` or
    :class:`~.model.Wav2Vec2CTC`) over ``utterances`` (1-D 16 kHz waveforms), one utterance at
    a time, holding one block's map at a time."""
    encoder = getattr(model, "encoder", model)
    blocks: dict[int, BlockDiagnosis] = {}

    def take(block: int, maps: Tensor) -> None:
        m = maps[0]
        s = map_statistics(m)
        d = blocks.setdefault(block, BlockDiagnosis(block, [], [], []))
        d.stats.append(s)
        d.labels.append(label_of(s))
        d.thumbnails.append(thumbnail(m))

    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            for wav in utterances:
                wav = torch.as_tensor(wav, dtype=torch.float32).reshape(1, -1)
                feats, lens = encoder.features(wav)
                encoder.encode(feats, lens, on_attention=take)
    finally:
        encoder.train(was_training)
    return [blocks[b] for b in sorted(blocks)]


def suggested_blocks(diagnosis: Sequence[BlockDiagnosis]) -> tuple[int, ...]:
    """The blocks to make local: vertical and vertical+diagonal ones (1-based)."""
    return tuple(d.block for d in diagnosis if d.label in ABNORMAL)


def diagonal_blocks(diagnosis: Sequence[BlockDiagnosis]) -> tuple[int, ...]:
    return tuple(d.block for d in diagnosis if d.label == "diagonal")


def diagnosis_table(diagnosis: Sequence[BlockDiagnosis]):
    from speechlab.report import Table

    rows = [[f"Block {d.block}", d.mean("band"), d.mean("vertical"), d.mean("entropy"),
             100 * d.agreement, d.label] for d in diagnosis]
    return Table("diagnosis", "Per block, means over the utterances of the band mass near the "
                 "diagonal, the off-band mass on the most attended keys (vertical), the "
                 "normalised row entropy; the share of utterances with the block's label [%] "
                 "and the label (docs/local-attention.md defines each).",
                 ["Block", "band", "vertical", "entropy", "agreement", "pattern"], rows,
                 formats={"band": "{:.3f}", "vertical": "{:.3f}", "entropy": "{:.3f}",
                          "agreement": "{:.0f}"})


def grid_figure(diagnosis: Sequence[BlockDiagnosis], path, names: Sequence[str] | None = None):
    """The paper's Fig. 2: one row per utterance, one column per block, every map shown at one
    size (rows are queries, top to bottom; columns keys)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    from speechlab.files import atomic_path

    n_utts = len(diagnosis[0].thumbnails)
    n_blocks = len(diagnosis)
    fig = MplFigure(figsize=(1.3 * n_blocks + 0.6, 1.3 * n_utts + 0.6))
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_utts, n_blocks, squeeze=False)
    for c, d in enumerate(diagnosis):
        for r in range(n_utts):
            ax = axes[r][c]
            ax.imshow(d.thumbnails[r], cmap="viridis", interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"B{d.block}\n{d.label}", fontsize=7)
            if c == 0:
                ax.set_ylabel(names[r] if names else f"utt {r + 1}", fontsize=7)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    return path
