"""How a pre-training's attention forms over its updates (issue 27: *when* do the paper's
patterns appear?).

For every periodic checkpoint ``ckpt-*.pt`` of a pre-training run directory (the trainer keeps
them all with ``keep_checkpoints: 0``), :func:`attention_over_training` diagnoses each block on
a few fixed utterances exactly as ``speechlab diagnose attention`` does (:mod:`.diagnose`: mean
row entropy, band mass, vertical mass, label, agreement) and pairs it with the dev contrastive
accuracy and loss that the run's ``log.jsonl`` holds for the validation at that update (None
when no validation ran there). :func:`over_training_figure` draws one panel per statistic, one
line per block, against the update, and the contrastive accuracy beside them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from torch import Tensor

from speechlab.errors import DataError
from speechlab.ssl.wav2vec2.diagnose import block_maps

#: The per-block statistics followed, with the axis label of their panel.
STATISTICS = {"entropy": "row entropy / log T", "band": "band mass", "vertical": "vertical mass"}


@dataclass(frozen=True)
class BlockAtStep:
    block: int
    entropy: float
    band: float
    vertical: float
    label: str
    agreement: float


@dataclass(frozen=True)
class CheckpointDiagnosis:
    """One checkpoint: its update, the dev contrastive accuracy / loss of the validation at that
    update (None when none ran there), and its blocks."""

    step: int
    accuracy: float | None
    loss: float | None
    blocks: tuple[BlockAtStep, ...]


def validations(log_path: str | Path) -> dict[int, dict]:
    """The ``valid`` records of a ``log.jsonl`` by update (the last one wins on a resume)."""
    from speechlab.train.log import read_log

    return {int(r["step"]): r for r in read_log(log_path) if r.get("kind") == "valid"}


def diagnose_checkpoint(model, utterances: Sequence[Tensor], step: int,
                        validation: dict | None = None) -> CheckpointDiagnosis:
    """The :class:`CheckpointDiagnosis` of ``model`` (the weights of update ``step``) on the
    (S,) 16 kHz waveforms ``utterances``."""
    blocks = tuple(BlockAtStep(d.block, d.mean("entropy"), d.mean("band"), d.mean("vertical"),
                               d.label, d.agreement) for d in block_maps(model, utterances))
    v = validation or {}
    return CheckpointDiagnosis(step, v.get("accuracy"), v.get("loss"), blocks)


def attention_over_training(run_dir: str | Path, utterances: Sequence[Tensor], *,
                            normalize: bool = False) -> list[CheckpointDiagnosis]:
    """Every periodic checkpoint of the pre-training ``run_dir``, oldest first, diagnosed on
    ``utterances`` ((S,) waveforms; ``normalize``: zero mean, unit variance each, for models
    whose feature extractor wants it)."""
    from speechlab.ssl.wav2vec2.checkpoint_import import load_pretrained
    from speechlab.train.checkpoint import list_checkpoints

    run_dir = Path(run_dir)
    found = list_checkpoints(run_dir)
    if not found:
        raise DataError(f"{run_dir} holds no periodic checkpoint (ckpt-*.pt): pre-train with "
                        "checkpoint_every set (and keep_checkpoints: 0 to keep them all)")
    if normalize:
        utterances = [(w - w.mean()) / (w.var(unbiased=False) + 1e-7).sqrt() for w in utterances]
    valid = validations(run_dir / "log.jsonl")
    return [diagnose_checkpoint(load_pretrained(path), utterances, step, valid.get(step))
            for step, path in found]


def to_json(points: Sequence[CheckpointDiagnosis]) -> dict:
    return {"checkpoints": [asdict(p) for p in points]}


def from_json(data: dict) -> list[CheckpointDiagnosis]:
    return [CheckpointDiagnosis(p["step"], p["accuracy"], p["loss"],
                                tuple(BlockAtStep(**b) for b in p["blocks"]))
            for p in data["checkpoints"]]


def over_training_figure(points: Sequence[CheckpointDiagnosis], path: str | Path) -> Path:
    """Four panels against the update: entropy, band mass, vertical mass (one line per block)
    and the dev contrastive accuracy [%]."""
    from speechlab.report.plots import new_figure, save_figure

    if not points:
        raise ValueError("no checkpoint to draw")
    fig = new_figure((12.0, 3.2))
    axes = fig.subplots(1, len(STATISTICS) + 1)
    steps = [p.step for p in points]
    for ax, (field, name) in zip(axes, STATISTICS.items()):
        for b in range(len(points[0].blocks)):
            ax.plot(steps, [getattr(p.blocks[b], field) for p in points], marker=".",
                    label=f"B{points[0].blocks[b].block}")
        ax.set_xlabel("update")
        ax.set_title(name, fontsize=9)
        ax.set_ylim(0, 1.02)
    axes[0].legend(fontsize=7)
    acc = [(p.step, 100 * p.accuracy) for p in points if p.accuracy is not None]
    ax = axes[-1]
    if acc:
        ax.plot(*zip(*acc), marker="o", color="black")
    ax.set_xlabel("update")
    ax.set_ylim(bottom=0)
    ax.set_title("dev contrastive accuracy [%]", fontsize=9)
    return save_figure(fig, path)


def write_over_training(points: Sequence[CheckpointDiagnosis], out: str | Path) -> None:
    """``attention_over_training.json`` and ``attention_over_training.png`` into ``out``."""
    from speechlab.files import atomic_write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "attention_over_training.json",
                      json.dumps(to_json(points), indent=1) + "\n")
    over_training_figure(points, out / "attention_over_training.png")
