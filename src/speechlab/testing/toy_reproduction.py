"""A toy reproduction: how a paper plugs into the experiment layer, small enough for CI.

It is written as a new paper would be: a recipe dataclass, a plan of typed jobs, and its own
tables; the shared layer schedules the jobs (in worker processes or here), rebuilds the
trained models from their checkpoints and writes the results. The model is the trainer's toy
regression model (:mod:`speechlab.testing.toy_task`): a shared encoder and one head per
language. The plan trains ``base`` from scratch, fine-tunes ``tuned`` from it, and "decodes"
(predicts) the test items of each language with both.

Each process that loads the data appends its pid to ``prepared.txt`` and each job appends its
name to ``jobs.txt`` when it finishes, so tests can see that workers load the data once and
that a job starts only after what it needs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from speechlab.experiment.jobs import DecodeJob, Job, TrainJob
from speechlab.report import Results, Table
from speechlab.testing.toy_task import (BUILDERS, FAMILY, ToyConfig, ToyTask, build_model,
                                        make_data)
from speechlab.train import TrainConfig, fit, load_model_weights
from speechlab.train.card import ModelCard, best_or_latest, load_trained

TEST_ITEMS = 24


@dataclass(frozen=True)
class ToyRecipe:
    toy: ToyConfig = field(default_factory=lambda: ToyConfig(items=48, dropout=0.0))
    train: TrainConfig = field(default_factory=lambda: TrainConfig(
        max_steps=20, log_every=5, valid_every=10, checkpoint_every=10, progress=False))
    finetune_steps: int = 10
    seed: int = 0


@dataclass(frozen=True)
class ToyData:
    """Test items: x (N, D), y (N,), their languages."""

    x: torch.Tensor
    y: torch.Tensor
    languages: list[str]


@dataclass(frozen=True)
class ToyModel:
    """What a train job builds: the toy model (every job the same)."""


@dataclass(frozen=True)
class ToyDecode:
    """Which languages' test items a decode job predicts (empty: all)."""

    languages: tuple[str, ...] = ()


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


class ToyReproduction:
    title = "Toy reproduction"
    scales = ("ci",)
    config_class = ToyRecipe
    switches = ()

    def __init__(self, name: str = "toy", demo_minutes: float = 0.5) -> None:
        self.name = name
        self.demo_minutes = demo_minutes

    def prepare(self, cfg: ToyRecipe, out: Path, corpus: Path | None, *, write: bool = True) -> ToyData:
        out.mkdir(parents=True, exist_ok=True)
        _append(out / "prepared.txt", f"{os.getpid()} {'write' if write else 'read'}")
        x, y, langs = make_data(cfg.toy, TEST_ITEMS, 2)
        return ToyData(x, y, langs)

    def plan(self, cfg: ToyRecipe) -> list[Job]:
        base = TrainJob("base", ToyModel())
        tuned = TrainJob("tuned", ToyModel(), init_from=base, steps=cfg.finetune_steps)
        return [base, tuned,
                DecodeJob("base", base, ToyDecode()),
                DecodeJob("tuned", tuned, ToyDecode()),
                DecodeJob("tuned_a", tuned, ToyDecode(("a",)))]

    def train(self, job: TrainJob[ToyModel], cfg: ToyRecipe, data: ToyData, out: Path) -> None:
        model = build_model(cfg.toy)
        train_cfg = cfg.train
        if job.init_from is not None:
            load_model_weights(model, best_or_latest(out / "models" / job.init_from.name))
            # Steps count on from zero in the new directory.
            train_cfg = replace(cfg.train, max_steps=job.steps)
        fit(model, lambda rank, world: ToyTask(cfg.toy, seed=cfg.train.seed, rank=rank,
                                               world_size=world),
            train_cfg, out / "models" / job.name, progress=False,
            card=ModelCard.of(FAMILY, cfg.toy))
        _append(out / "jobs.txt", f"train {job.name}")

    def decode(self, job: DecodeJob[ToyModel, ToyDecode], cfg: ToyRecipe, data: ToyData,
               out: Path) -> dict[str, float]:
        """Mean squared error per language of the model's predictions on the test items."""
        model = load_trained(out / "models" / job.model.name, BUILDERS)
        result = {}
        with torch.no_grad():
            for lang in job.options.languages or cfg.toy.languages:
                sel = [i for i, l in enumerate(data.languages) if l == lang]
                pred = model(data.x[sel], lang)
                result[lang] = float(((pred - data.y[sel]) ** 2).mean())
        _append(out / "jobs.txt", f"decode {job.name}")
        return result

    def report(self, cfg: ToyRecipe, data: ToyData,
               decoded: Mapping[DecodeJob[ToyModel, ToyDecode], dict[str, float]], out: Path,
               scale: str) -> Results:
        langs = list(cfg.toy.languages)
        rows = [[job.name] + [decoded[job].get(lang) for lang in langs]
                for job in self.plan(cfg) if isinstance(job, DecodeJob)]
        table = Table(name="mse", caption="Test MSE per language", columns=["Model"] + langs,
                      rows=rows, formats={lang: "{:.4f}" for lang in langs})
        return Results(title=f"{self.title} ({self.name})", tables=[table])
