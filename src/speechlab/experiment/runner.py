"""Running reproductions: every paper's jobs through one scheduler, and one model alone.

- :func:`run_reproductions` runs one or several :class:`~speechlab.experiment.reproduction.Run` s:
  each is prepared here (corpus, features, vocabularies written once), all their plans go
  through one :func:`~speechlab.experiment.scheduler.run_jobs` (so with several papers both
  cores stay busy across papers), then each writes its tables. A killed run resumes: a
  finished model's directory holds its final checkpoint, so its job only loads it, and a
  finished decoding is kept in ``decoded/`` (:mod:`.decoded`), so it is not run again.
- :func:`train_one` trains one model of a plan, alone or under torchrun (each rank on its own
  shard, rank 0 alone writing), into the same run-directory layout.
- :func:`decode_one` runs a model's decode jobs now, on the checkpoint it has (a training may
  still be running): the settings tuned on dev are written beside it, so a model taken from a
  run that has not finished decodes as the finished run would have it decode.

Worker processes load each paper's data once (:func:`_setup`, then lazily per paper).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from speechlab.config import save_config
from speechlab.data.corpus import check_corpus_dir
from speechlab.errors import ConfigError
from speechlab.experiment.decoded import kept_or_decoded
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.experiment.recipes import load_recipe
from speechlab.experiment.reproduction import Reproduction, Run
from speechlab.experiment.scheduler import Work, run_jobs
from speechlab.files import exclusive_dir
from speechlab.processes import seed_everything
from speechlab.report.results import collect_meta, record_invocation

log = logging.getLogger(__name__)

CONFIG_NAME = "config.yaml"


def load_run(paper: Reproduction, scale: str, out: str | Path, corpus: str | Path | None = None,
             config: Path | None = None, overrides: Sequence[str] = ()) -> Run:
    """The :class:`Run` of ``paper`` at ``scale`` (its recipe, or the file ``config``, with
    ``key=value`` overrides); nothing is written yet."""
    if config is None and scale not in paper.scales:
        raise ConfigError(f"{paper.name} has no scale {scale!r}; scales: {', '.join(paper.scales)}")
    if corpus is not None and not Path(corpus).is_dir():
        raise ConfigError(f"--corpus {corpus}: not a directory; give a corpus directory "
                          "(docs/corpus.md)")
    cfg = load_recipe(paper.config_class, paper.name, scale, config, overrides)
    if corpus is not None:
        check_corpus_dir(corpus, getattr(cfg, "languages", None))
    return Run(paper, cfg, scale, Path(out), Path(corpus) if corpus else None)


# ---------------------------------------------------------------------------------------------
# What runs in each process (the main one, or a worker)

_RUNS: dict[str, Run] = {}
_DATA: dict[str, Any] = {}


def _register(runs: Sequence[Run]) -> None:
    _RUNS.clear()
    _DATA.clear()
    _RUNS.update({r.paper.name: r for r in runs})


def _setup(runs: Sequence[Run]) -> None:
    """Start-up of a worker process: one thread (two workers share two cores), no progress
    bars, warnings only; each paper's data is loaded on its first job here."""
    from speechlab.train.log import PROGRESS_ENV

    torch.set_num_threads(1)
    os.environ[PROGRESS_ENV] = "0"
    logging.basicConfig(level=logging.WARNING)
    _register(runs)


def _data_of(run: Run) -> Any:
    if run.paper.name not in _DATA:
        # The main process has said what preparation found (utterances skipped, ...); a worker
        # reading the same data again keeps quiet but for errors.
        logger = logging.getLogger("speechlab")
        level, logger.level = logger.level, logging.ERROR
        try:
            _DATA[run.paper.name] = run.paper.prepare(run.cfg, run.out, run.corpus, write=False)
        finally:
            logger.level = level
    return _DATA[run.paper.name]


def _execute(payload: tuple[str, TrainJob | DecodeJob]) -> Any:
    paper, job = payload
    run = _RUNS[paper]
    data = _data_of(run)
    seed_everything(run.cfg.seed)
    if isinstance(job, TrainJob):
        start = time.time()
        run.paper.train(job, run.cfg, data, run.out)
        return f"trained {paper}/{job.name} ({(time.time() - start) / 60:.1f} min)"
    return kept_or_decoded(run.out, job, run.out / CONFIG_NAME, run.models_dir / job.model.name,
                           lambda: run.paper.decode(job, run.cfg, data, run.out))


# ---------------------------------------------------------------------------------------------
# Reproductions


def _kind(job: TrainJob | DecodeJob) -> str:
    return "train" if isinstance(job, TrainJob) else "decode"


@dataclass(frozen=True)
class RunSummary:
    """A finished run: its directory, the wall-clock minutes from the start of
    :func:`run_reproductions` until its results were written (``finished_after``), and its own share
    of the wall time (``minutes``: its preparation and report, plus its jobs' time divided by
    the number of workers), which is what its paper's demo budget is held against."""

    paper: str
    scale: str
    out: Path
    minutes: float
    budget_minutes: float | None
    finished_after: float = 0.0


def run_reproductions(runs: Sequence[Run], jobs: int = 1) -> list[RunSummary]:
    """Prepare every run, run all their jobs (``jobs`` at a time, one process and one thread
    each when ``jobs > 1``), and write each run's ``results.json`` / ``results.md``.

    Results do not depend on ``jobs`` except for the last bits of training (one thread vs.
    several sum in different orders) and measured times.
    """
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    names = [r.paper.name for r in runs]
    if len(set(names)) != len(names):
        raise ConfigError(f"each paper can run once per call, got {names}")
    started = time.time()
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    _register(runs)
    items: list[Work] = []
    decode_jobs: dict[tuple[str, str], DecodeJob] = {}
    own_seconds = {n: 0.0 for n in names}  # each paper's share of the wall time
    for run in runs:
        t0 = time.time()
        run.out.mkdir(parents=True, exist_ok=True)  # an unwritable --out fails here, at once
        seed_everything(run.cfg.seed)
        # Preparation checks the corpus before it writes anything into the run directory.
        _DATA[run.paper.name] = run.paper.prepare(run.cfg, run.out, run.corpus, write=True)
        save_config(run.cfg, run.out / CONFIG_NAME)
        record_invocation(run.out)  # which command and code (re)started the run
        own_seconds[run.paper.name] += time.time() - t0
        for job in run.paper.plan(run.cfg):
            # A model and its decoding may share a name: the key says which job it is.
            items.append(Work((run.paper.name, _kind(job), job.name), (run.paper.name, job),
                              tuple((run.paper.name, "train", n) for n in job.needs)))
            if isinstance(job, DecodeJob):
                decode_jobs[(run.paper.name, job.name)] = job
    counts = {n: sum(1 for w in items if w.key[0] == n) for n in names}
    left = dict(counts)
    decoded: dict[str, dict[DecodeJob, Any]] = {n: {} for n in names}
    summaries: list[RunSummary] = []

    def finish(run: Run) -> None:
        t0 = time.time()
        results = run.paper.report(run.cfg, _DATA[run.paper.name], decoded[run.paper.name], run.out,
                                   run.scale)
        results = dataclasses.replace(results, scale=run.scale,
                                      meta={**collect_meta(started=started), **results.meta})
        results.save(run.out)
        own_seconds[run.paper.name] += time.time() - t0
        after = (time.time() - started) / 60
        budget = run.paper.demo_minutes if run.scale == "demo" else None
        summaries.append(RunSummary(run.paper.name, run.scale, run.out,
                                    own_seconds[run.paper.name] / 60, budget, after))
        log.info("%s (%s scale) written to %s after %.1f min (its share: %.1f min)",
                 run.paper.name, run.scale, run.out, after, own_seconds[run.paper.name] / 60)

    def on_done(key: tuple[str, str, str], value: Any, seconds: float) -> None:
        paper, kind, name = key
        own_seconds[paper] += seconds / jobs
        if kind == "train":
            log.info("%s [%s: %d/%d jobs]", value, paper, counts[paper] - left[paper] + 1, counts[paper])
        else:
            decoded[paper][decode_jobs[(paper, name)]] = value
            log.info("decoded %s/%s in %.1f s [%s: %d/%d jobs]", paper, name, seconds, paper,
                     counts[paper] - left[paper] + 1, counts[paper])
        left[paper] -= 1
        if left[paper] == 0:
            finish(_RUNS[paper])

    log.info("%d jobs of %s, %d at a time", len(items), ", ".join(names), jobs)
    run_jobs(items, _execute, workers=jobs, setup=_setup, setup_args=(tuple(runs),), on_done=on_done)
    for run in runs:  # a plan with no jobs
        if counts[run.paper.name] == 0:
            finish(run)
    return summaries


def budget_lines(summaries: Sequence[RunSummary]) -> list[str]:
    """One line per run: its share of the wall time against the paper's demo budget, and when
    its tables were written."""
    lines = []
    for s in summaries:
        line = f"{s.paper:<14} {s.scale:<8} {s.minutes:6.1f} min"
        if s.budget_minutes is not None:
            verdict = "within budget" if s.minutes <= s.budget_minutes else "OVER BUDGET"
            line += f" of {s.budget_minutes:.1f} ({verdict})"
        lines.append(line + f"; tables written after {s.finished_after:.1f} min")
    return lines


# ---------------------------------------------------------------------------------------------
# One model, alone or under torchrun


def train_one(run: Run, model: str) -> Path | None:
    """Train the model ``model`` of ``run``'s plan into ``run.out / "models" / model``; returns
    that directory on rank 0 (None on the other ranks).

    Under ``torchrun`` every rank joins the process group; rank 0 prepares the data (corpus,
    features, vocabularies) while the others wait, then every rank loads it and trains on its
    own shard; rank 0 alone writes checkpoints and logs. A model that starts from another
    (``init_from``) needs that one trained first in the same ``--out``.
    """
    from speechlab.train import distributed

    plan = run.paper.plan(run.cfg)
    jobs = {j.name: j for j in plan if isinstance(j, TrainJob)}
    job = jobs.get(model)
    if job is None:
        raise ConfigError(f"{run.paper.name} trains no model {model!r}; its models: "
                          f"{', '.join(jobs)}")
    ctx = distributed.init_distributed()
    try:
        seed = job.init_from
        if seed is not None and not (run.models_dir / seed.name).is_dir():
            raise ConfigError(f"{model} starts from {seed.name}, which is not trained in "
                              f"{run.out}: train it first (speechlab train {run.paper.name} "
                              f"{seed.name} --out {run.out})")
        if ctx.is_main:
            # A model another process is training now is refused before anything is written
            # or recorded as a start of it (the trainer holds the same lock while it trains).
            with exclusive_dir(run.models_dir / model, "a training run"):
                pass
            run.out.mkdir(parents=True, exist_ok=True)
            save_config(run.cfg, run.out / CONFIG_NAME)
            # which command and code trained the model: one shipped before the run ends
            # names them
            record_invocation(run.out, model=model)
            data = run.paper.prepare(run.cfg, run.out, run.corpus, write=True)
        distributed.barrier()
        if not ctx.is_main:
            data = run.paper.prepare(run.cfg, run.out, run.corpus, write=False)
        seed_everything(run.cfg.seed)
        run.paper.train(job, run.cfg, data, run.out)
        distributed.barrier()
    finally:
        distributed.cleanup()
    return run.models_dir / model if ctx.is_main else None


def decode_one(run: Run, model: str) -> list[tuple[str, Any, str]]:
    """Run the decode jobs of ``run``'s plan that decode ``model``, on the best checkpoint its
    directory holds now (its training may still be running, or have stopped). Each result is
    kept in ``RUN/decoded`` under the checkpoint files' key, so ``reproduce`` reuses it only
    if the model has not changed since. Returns ``(job name, result, summary)`` per job; the
    summary is the paper's ``summarize(job, cfg, data, result)`` if it has one."""
    plan = run.paper.plan(run.cfg)
    trained = {j.name for j in plan if isinstance(j, TrainJob)}
    if model not in trained:
        raise ConfigError(f"{run.paper.name} trains no model {model!r}; its models: "
                          f"{', '.join(sorted(trained))}")
    model_dir = run.models_dir / model
    if not any(model_dir.glob("*.pt")):
        raise ConfigError(f"{model_dir} holds no checkpoint: train it first (speechlab train "
                          f"{run.paper.name} {model} --out {run.out})")
    jobs = [j for j in plan if isinstance(j, DecodeJob) and j.model.name == model]
    if not jobs:
        raise ConfigError(f"{run.paper.name}'s plan decodes nothing with {model}")
    run.out.mkdir(parents=True, exist_ok=True)
    save_config(run.cfg, run.out / CONFIG_NAME)
    data = run.paper.prepare(run.cfg, run.out, run.corpus, write=True)
    summarize = getattr(run.paper, "summarize", None)
    out = []
    for job in jobs:
        seed_everything(run.cfg.seed)
        start = time.time()
        value = kept_or_decoded(run.out, job, run.out / CONFIG_NAME, model_dir,
                                lambda job=job: run.paper.decode(job, run.cfg, data, run.out))
        line = summarize(job, run.cfg, data, value) if summarize is not None else ""
        out.append((job.name, value, line or f"decoded in {time.time() - start:.0f} s"))
    return out
