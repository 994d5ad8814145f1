"""The jobs of a reproduction's plan: train a model, or decode with one.

A plan is a list of typed jobs, never of names to be taken apart: what a job trains is its
``spec``, a frozen dataclass of the paper's own (an RNN-T variant and its languages, a
topology and a corpus, ...); what a decoding does is its ``options``, another of the paper's
frozen dataclasses; a decoding holds the very :class:`TrainJob` of its model, and a fine-tune
the one it starts from. Names are only directory and result names. The scheduler
(:mod:`speechlab.experiment.scheduler`) orders the jobs by :attr:`needs`; the reproduction runs
each one, and its report receives every decoding's result keyed by its :class:`DecodeJob`, so a
table picks its rows by the jobs' typed fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

S = TypeVar("S")  # a paper's model spec
O = TypeVar("O")  # a paper's decoding options


@dataclass(frozen=True)
class TrainJob(Generic[S]):
    """Train one model into ``models/<name>`` of the run directory.

    - ``spec``: what to build and on which data, in the paper's own terms.
    - ``init_from``: the trained model it starts from (fine-tuning), or None from scratch.
    - ``steps``: optimiser updates (None: the recipe's).
    - ``cost``: relative cost, for the record; plans list the costliest jobs first.
    """

    name: str
    spec: S
    init_from: TrainJob[S] | None = None
    steps: int | None = None
    cost: float = 1.0

    @property
    def needs(self) -> tuple[str, ...]:
        return (self.init_from.name,) if self.init_from is not None else ()


@dataclass(frozen=True)
class DecodeJob(Generic[S, O]):
    """Decode with the model ``model`` trains; the result is reported under this job.
    ``options`` are the paper's own settings for this decoding (which test data, early
    stopping's tau and s_th, ...)."""

    name: str
    model: TrainJob[S]
    options: O
    cost: float = 1.0

    @property
    def needs(self) -> tuple[str, ...]:
        return (self.model.name,)


Job = TrainJob | DecodeJob


def trained_models(plan: list[Job]) -> list[str]:
    """The names of the models a plan trains, in plan order."""
    return [j.name for j in plan if isinstance(j, TrainJob)]
