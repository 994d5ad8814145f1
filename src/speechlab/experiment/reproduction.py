"""What a paper's reproduction is, to ``speechlab reproduce``, ``speechlab train``,
``speechlab demo`` and the report: the :class:`Reproduction` protocol.

A reproduction writes only its own recipe, plan and tables; everything else (recipes on disk,
the scheduler and its worker processes, scoring, the report) is shared, and its models'
training and decoding live in its paper's library. It says:

- ``name`` (the CLI's PAPER), ``title``, the ``scales`` it has recipes for, the recipe
  dataclass ``config_class`` (a :class:`Recipe`: it has a ``seed``), ``demo_minutes``, its
  share of ``make demo``'s 20 minutes on the 2-core machine, and ``switches``, the
  command-line switches of its own (:class:`Switch`);
- ``prepare(cfg, out, corpus, write=...)``: the data every job needs, loaded once per process
  (``write=False`` in processes that must not write: workers and DDP ranks other than 0 only
  read what the main process prepared);
- ``plan(cfg)``: its :class:`~speechlab.experiment.jobs.TrainJob` and
  :class:`~speechlab.experiment.jobs.DecodeJob` list;
- ``train(job, cfg, data, out)``: train one model into ``out / "models" / job.name`` (resuming;
  under torchrun on this rank's shard);
- ``decode(job, cfg, data, out)``: a picklable result;
- ``report(cfg, data, decoded, out, scale)``: its tables and figures as a
  :class:`~speechlab.report.Results` (``decoded`` maps each decode job to its result).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from speechlab.experiment.jobs import DecodeJob, Job, TrainJob
from speechlab.report import Results

MODELS_DIR = "models"


class Recipe(Protocol):
    """What the shared layer reads of a paper's recipe dataclass."""

    @property
    def seed(self) -> int: ...


C = TypeVar("C", bound=Recipe)  # the paper's recipe
D = TypeVar("D")  # its prepared data
R = TypeVar("R")  # the result of one of its decodings


@dataclass(frozen=True)
class Switch:
    """A command-line switch of one paper's ``reproduce`` / ``train`` (``--flag``): a name for
    recipe overrides a user would otherwise type as ``--set``."""

    flag: str
    overrides: tuple[str, ...]
    help: str


@runtime_checkable
class Reproduction(Protocol[C, D, R]):
    name: str
    title: str
    scales: tuple[str, ...]
    demo_minutes: float
    config_class: type[C]
    switches: tuple[Switch, ...]

    def prepare(self, cfg: C, out: Path, corpus: Path | None, *, write: bool = True) -> D: ...

    def plan(self, cfg: C) -> list[Job]: ...

    def train(self, job: TrainJob[Any], cfg: C, data: D, out: Path) -> None: ...

    def decode(self, job: DecodeJob[Any, Any], cfg: C, data: D, out: Path) -> R: ...

    def report(self, cfg: C, data: D, decoded: Mapping[DecodeJob[Any, Any], R], out: Path,
               scale: str) -> Results: ...


@dataclass(frozen=True)
class Run(Generic[C]):
    """One reproduction at one scale in one run directory (``out``); ``corpus`` replaces the
    embedded corpus when given."""

    paper: Reproduction[C, Any, Any]
    cfg: C
    scale: str
    out: Path
    corpus: Path | None = None

    @property
    def models_dir(self) -> Path:
        return self.out / MODELS_DIR
