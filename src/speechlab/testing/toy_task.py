"""A tiny multilingual regression task that exercises every part of the trainer.

Items are random vectors; each language has its own linear "teacher" over a shared non-linear
map, and the model mirrors that (shared encoder + one head per language, like the multi-softmax
RNN-T's language-specific output layers). Batches are language-homogeneous
(:class:`~speechlab.train.sampler.LanguageBatches`), so a head gets no gradient on other
languages' batches. The collate function draws from the python, numpy and torch RNGs and the
model uses dropout, so a resume that failed to restore any RNG would show up as different
losses. Items listed in ``poison`` have NaN features, to test that such batches are skipped.

Run it as a script (also under torchrun), as the resume and DDP tests do::

    python -m speechlab.testing.toy_task --out DIR --train.max_steps 50 --train.checkpoint_every 1
    python -m torch.distributed.run --standalone --nproc_per_node 2 \\
        -m speechlab.testing.toy_task --out DIR --trace DIR/trace
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from speechlab.config import add_config_args, config_from_args
from speechlab.files import atomic_path
from speechlab.nn.dropout import Dropout
from speechlab.train import distributed
from speechlab.train.card import config_builder
from speechlab.train.config import TrainConfig
from speechlab.train.sampler import LanguageBatch, LanguageBatches, MapBatches
from speechlab.train.trainer import Interrupted, Trainer


@dataclass(frozen=True)
class ToyConfig:
    items: int = 96
    valid_items: int = 32
    dim: int = 8
    hidden: int = 16
    languages: tuple[str, ...] = ("a", "b")
    # Sampling weight ("hours of data") per language, in the order of ``languages``.
    hours: tuple[float, ...] = (1.0, 2.0)
    batch_size: int = 4
    dropout: float = 0.1
    noise: float = 0.05
    # Item indices whose features are NaN (their batches must be skipped).
    poison: tuple[int, ...] = ()
    # Seeds the data and the model's initial weights (the trainer's seed drives the rest).
    data_seed: int = 1234


@dataclass(frozen=True)
class ToyRunConfig:
    toy: ToyConfig = field(default_factory=ToyConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


class ToyModel(nn.Module):
    """Shared ``tanh`` encoder, one linear head per language.

    ``forward(x, language)``: x (B, D) -> predictions (B,), through ``language``'s head only.
    """

    def __init__(self, dim: int, hidden: int, languages: tuple[str, ...], dropout: float) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, hidden), nn.Tanh(), Dropout(dropout))
        self.heads = nn.ModuleDict({lang: nn.Linear(hidden, 1) for lang in languages})

    def forward(self, x: torch.Tensor, language: str) -> torch.Tensor:
        return self.heads[language](self.encoder(x)).squeeze(-1)


@dataclass
class ToyBatch:
    """x (B, D), y (B,), the batch's language, and item ids (for skipped-batch logs)."""

    x: torch.Tensor
    y: torch.Tensor
    language: str
    ids: list[str]
    indices: list[int]


def make_data(cfg: ToyConfig, n: int, seed_offset: int) -> tuple[torch.Tensor, torch.Tensor,
                                                                  list[str]]:
    """``n`` items: features (n, D), targets (n,), languages. Deterministic in ``data_seed``."""
    g = torch.Generator().manual_seed(cfg.data_seed + seed_offset)
    teacher_g = torch.Generator().manual_seed(cfg.data_seed)  # same teacher for train and valid
    shared = torch.randn(cfg.dim, cfg.dim, generator=teacher_g)
    heads = {lang: torch.randn(cfg.dim, generator=teacher_g) for lang in cfg.languages}
    x = torch.randn(n, cfg.dim, generator=g)
    langs = [cfg.languages[i % len(cfg.languages)] for i in range(n)]
    h = torch.tanh(x @ shared)
    y = torch.stack([h[i] @ heads[langs[i]] for i in range(n)])
    return x, y, langs


class ToyTask:
    """The :class:`~speechlab.train.trainer.Task` of the toy model.

    ``seen`` / ``seen_languages`` record the items and batch languages this rank drew (the
    DDP test checks the shards).
    """

    def __init__(self, cfg: ToyConfig, *, seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        if len(cfg.hours) != len(cfg.languages):
            raise ValueError("toy.hours needs one weight per language")
        self.cfg = cfg
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.x, self.y, self.languages = make_data(cfg, cfg.items, 0)
        for i in cfg.poison:
            self.x[i] = float("nan")
        self.valid_x, self.valid_y, self.valid_languages = make_data(cfg, cfg.valid_items, 1)
        self.seen: list[int] = []
        self.seen_languages: list[str] = []

    def batches(self) -> MapBatches:
        sampler = LanguageBatches(self.languages, weights=dict(zip(self.cfg.languages,
                                                                   self.cfg.hours)),
                                  batch_size=self.cfg.batch_size, seed=self.seed, rank=self.rank,
                                  world_size=self.world_size)
        return MapBatches(sampler, self.collate)

    def collate(self, batch: LanguageBatch) -> ToyBatch:
        idx = torch.tensor(batch.indices)
        # Augmentation drawing from all three global RNGs, so resume must restore all three.
        scale = 1.0 + 0.1 * (random.random() - 0.5)
        offset = float(np.random.normal(scale=0.01))
        x = self.x[idx] * scale + offset + self.cfg.noise * torch.randn(len(idx), self.cfg.dim)
        self.seen.extend(batch.indices)
        self.seen_languages.append(batch.language)
        return ToyBatch(x, self.y[idx], batch.language, [f"item-{i}" for i in batch.indices],
                        list(batch.indices))

    def loss(self, model: nn.Module, batch: ToyBatch) -> tuple[torch.Tensor, dict[str, float],
                                                               float]:
        pred = model(batch.x, batch.language)
        err = pred - batch.y
        loss = (err ** 2).mean()
        return loss, {"abs_err": float(err.detach().abs().mean())}, float(len(batch.y))

    def validate(self, model: nn.Module) -> dict[str, float]:
        metrics: dict[str, float] = {}
        total = 0.0
        for lang in self.cfg.languages:
            sel = [i for i, l in enumerate(self.valid_languages) if l == lang]
            pred = model(self.valid_x[sel], lang)
            mse = float(((pred - self.valid_y[sel]) ** 2).sum())
            metrics[f"loss_{lang}"] = mse / max(len(sel), 1)
            total += mse
        metrics["loss"] = total / len(self.valid_languages)
        return metrics


def build_model(cfg: ToyConfig) -> ToyModel:
    """The toy model, initialised from ``data_seed`` (identical in every run and rank)."""
    with torch.random.fork_rng():
        torch.manual_seed(cfg.data_seed)
        return ToyModel(cfg.dim, cfg.hidden, cfg.languages, cfg.dropout)


def _write_trace(trace_dir: Path, rank: int, task: ToyTask, model: nn.Module) -> None:
    with atomic_path(trace_dir / f"rank{rank}.pt") as tmp:
        torch.save({"seen": torch.tensor(task.seen, dtype=torch.long),
                    "languages": task.seen_languages,
                    "params": {k: v.detach().clone() for k, v in model.state_dict().items()}},
                   tmp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train the toy task (trainer tests).")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--trace", type=Path, default=None,
                        help="write rankN.pt with the items seen and final weights here")
    add_config_args(parser, ToyRunConfig)
    args = parser.parse_args(argv)
    cfg = config_from_args(ToyRunConfig, args)
    torch.set_num_threads(1)
    ctx = distributed.init_distributed()
    try:
        model = build_model(cfg.toy)
        task = ToyTask(cfg.toy, seed=cfg.train.seed, rank=ctx.rank, world_size=ctx.world_size)
        try:
            result = Trainer(model, task, cfg.train, args.out, progress=False).fit()
        except Interrupted as e:  # as the speechlab command answers a stopped training
            print(f"interrupted: {e}", file=sys.stderr)
            return 128 + e.signum
        if args.trace is not None:
            _write_trace(args.trace, ctx.rank, task, model)
        if ctx.is_main:
            summary: Mapping[str, Any] = {"steps": result.steps, "best_metric": result.best_metric,
                                          "nonfinite_batches": result.nonfinite_batches,
                                          "stopped_early": result.stopped_early}
            print(json.dumps(summary))
    finally:
        distributed.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())



FAMILY = "toy"
#: family name -> builder from the config dict, for :func:`speechlab.train.card.load_trained`.
BUILDERS = {FAMILY: config_builder(ToyConfig, build_model)}
