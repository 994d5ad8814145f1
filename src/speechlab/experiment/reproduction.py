"""What a paper's reproduction is, to ``speechlab reproduce``, ``speechlab train``,
``speechlab demo`` and the report: the :class:`Reproduction` protocol.

A reproduction writes only its own plan and its own tables; everything else (recipes, the
scheduler and its worker processes, trained-model loading, scoring, the report) is shared.
It says:

- ``name`` (the CLI's PAPER), ``title``, the ``scales`` it has recipes for, the recipe
  dataclass ``config_class``, and ``demo_minutes``, its share of ``make demo``'s 20 minutes
  on the 2-core machine;
- ``prepare(cfg, out, corpus, write=...)``: the data every job needs, loaded once per process
  (``write=False`` in processes that must not write: workers and DDP ranks other than 0 only
  read what the main process prepared);
- ``plan(cfg)``: its :class:`~speechlab.experiment.jobs.TrainJob` and
  :class:`~speechlab.experiment.jobs.DecodeJob` list (the models it trains are the plan's
  train jobs);
- ``train(job, cfg, data, out)``: train one model into ``out / "models" / job.name`` with the
  shared trainer (resuming; under torchrun on this rank's shard);
- ``decode(job, cfg, data, out)``: a picklable result;
- ``report(cfg, data, decoded, out, scale)``: its tables and figures as a
  :class:`~speechlab.report.Results` (``decoded`` holds each decode job's result by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from speechlab.experiment.jobs import DecodeJob, Job, TrainJob
from speechlab.report import Results

MODELS_DIR = "models"


@runtime_checkable
class Reproduction(Protocol):
    name: str
    title: str
    scales: tuple[str, ...]
    demo_minutes: float
    config_class: type

    def prepare(self, cfg: Any, out: Path, corpus: Path | None, *, write: bool = True) -> Any: ...

    def plan(self, cfg: Any) -> list[Job]: ...

    def train(self, job: TrainJob, cfg: Any, data: Any, out: Path) -> None: ...

    def decode(self, job: DecodeJob, cfg: Any, data: Any, out: Path) -> Any: ...

    def report(self, cfg: Any, data: Any, decoded: Mapping[str, Any], out: Path,
               scale: str) -> Results: ...


@dataclass(frozen=True)
class Run:
    """One reproduction at one scale in one run directory (``out``); ``corpus`` replaces the
    embedded corpus when given."""

    paper: Reproduction
    cfg: Any
    scale: str
    out: Path
    corpus: Path | None = None

    @property
    def models_dir(self) -> Path:
        return self.out / MODELS_DIR
