"""The jobs of a reproduction's plan: train a model, or decode with one.

A plan is a list of typed jobs, not of names to be taken apart: what a job trains, on which
data, from which seed and for how many updates are fields. The scheduler
(:mod:`speechlab.experiment.scheduler`) orders them by :attr:`needs`; the reproduction runs
each one (:meth:`speechlab.experiment.reproduction.Reproduction.train` / ``decode``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrainJob:
    """Train one model into ``models/<name>`` of the run directory.

    - ``model``: what to build, in the reproduction's own terms (e.g. an RNN-T variant).
    - ``data``: the languages its training and validation data hold (``()``: all of the run's).
    - ``init_from``: the name of another trained model of the run it starts from (fine-tuning),
      or None for training from scratch.
    - ``steps``: optimiser updates (None: the recipe's).
    - ``cost``: relative cost, for the record; plans list the costliest jobs first.
    """

    name: str
    model: str
    data: tuple[str, ...] = ()
    init_from: str | None = None
    steps: int | None = None
    cost: float = 1.0

    @property
    def needs(self) -> tuple[str, ...]:
        return (self.init_from,) if self.init_from else ()


@dataclass(frozen=True)
class DecodeJob:
    """Decode the test data of ``data`` (``()``: every language) with the trained model
    ``model``; the result is kept under ``name``. ``options`` are the reproduction's own
    decoding settings for this job (e.g. early stopping's tau and s_th)."""

    name: str
    model: str
    data: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    cost: float = 1.0

    @property
    def needs(self) -> tuple[str, ...]:
        return (self.model,)


Job = TrainJob | DecodeJob


def trained_models(plan: list[Job]) -> list[str]:
    """The names of the models a plan trains, in plan order."""
    return [j.name for j in plan if isinstance(j, TrainJob)]
