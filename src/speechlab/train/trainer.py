"""The one training loop of speechlab.

Every model (multilingual RNN-T, CTC over WFST topologies, wav2vec 2.0, TTS) is trained by
:class:`Trainer`; what differs lives in a :class:`Task`: where batches come from, how a batch
becomes a loss, and how the model is validated. The loop in :meth:`Trainer.fit` reads top to
bottom: batch -> loss -> finite? -> backward -> clip -> step -> schedule -> log -> validate
(early stopping, best checkpoint) -> checkpoint.

Resuming is automatic and exact: ``fit()`` continues from the newest checkpoint in ``out_dir``
with the model, optimiser, schedule, sampler position and every RNG restored, so a run killed at
any moment and restarted produces the same per-step losses and final weights as one that was
never interrupted (on CPU, with a deterministic task). A run stopped by a fault (disk full while
writing a checkpoint) loses nothing either: checkpoints are written under a temporary name and
renamed, so the previous one is intact and a rerun resumes from it. A run asked to stop (SIGTERM,
as a scheduler or a shutdown sends it, or Ctrl-C) finishes its update, writes a checkpoint and
raises :class:`Interrupted`: it loses nothing; a second signal stops it at once. (Single-process
runs, whose main thread runs the loop, with no handler of the program's own for the signal.)

Which weights a run leaves to use (:attr:`TrainResult.checkpoint`): ``best.pt``, the best
validation so far, if any validation gave a finite metric; otherwise the last checkpoint. A
validation whose metric is not finite (NaN when there was nothing to validate, e.g. every dev
utterance of the model's language was skipped; inf or NaN when the model diverged) is logged
with a warning, never counts as an improvement, and, if NaN, does not count against
``patience`` either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import signal
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

import torch
from torch import nn

from speechlab import devices
from speechlab.config import save_config, to_dict
from speechlab.errors import SpeechlabError
from speechlab.files import exclusive_dir
from speechlab.processes import seed_everything
from speechlab.train import distributed
from speechlab.train.average import WeightAverage
from speechlab.train.checkpoint import (
    BEST_NAME,
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    remove_stale_temporaries,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from speechlab.train.config import OptimConfig, TrainConfig
from speechlab.train.loader import WorkerBatches, with_workers
from speechlab.train.log import MetricsLog, ProgressBar, TensorBoardLog, progress_wanted
from speechlab.train.sampler import ResumableBatches
from speechlab.train.schedule import build_scheduler

logger = logging.getLogger("speechlab.train")

LOG_NAME = "log.jsonl"


class Interrupted(KeyboardInterrupt):
    """Training stopped by ``signum`` after writing a checkpoint at update ``step``: rerunning
    resumes from there."""

    def __init__(self, signum: int, step: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name} after update {step}, "
                         "checkpoint written")
        self.signum = signum
        self.step = step

    def __reduce__(self) -> tuple[type, tuple[int, int]]:  # crosses process boundaries
        return Interrupted, (self.signum, self.step)


#: The signals a run stops at gracefully, with the handler each has when nobody set one.
_GRACEFUL = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.default_int_handler}


@contextlib.contextmanager
def _stop_requests(enabled: bool):
    """A list that gets the number of the first SIGTERM / SIGINT received meanwhile; the
    signal's previous handler comes back at once, so a second one acts as it always did. Only
    signals whose handler is the default are taken (a program's own handlers are left alone),
    and only in the main thread (Python delivers signals there)."""
    received: list[int] = []
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {}

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        signal.signal(signum, previous[signum])
        logger.warning("%s: stopping after this update (a checkpoint is written); send it again "
                       "to stop at once", signal.Signals(signum).name)

    for sig, default in _GRACEFUL.items():
        if signal.getsignal(sig) is default:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield received
    finally:
        for sig, old in previous.items():
            if not received or received[0] != sig:
                signal.signal(sig, old)
CONFIG_NAME = "train.yaml"


# ---------------------------------------------------------------------------------------------
# Optimisers, picked by OptimConfig.name.


def _adam(params: Iterable[nn.Parameter], cfg: OptimConfig) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps,
                            weight_decay=cfg.weight_decay)


def _adamw(params: Iterable[nn.Parameter], cfg: OptimConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=cfg.lr, betas=cfg.betas, eps=cfg.eps,
                             weight_decay=cfg.weight_decay)


OPTIMIZERS: dict[str, Callable[[Iterable[nn.Parameter], OptimConfig], torch.optim.Optimizer]] = {
    "adam": _adam,
    "adamw": _adamw,
}


def build_optimizer(params: Iterable[nn.Parameter], cfg: OptimConfig) -> torch.optim.Optimizer:
    """The optimiser ``cfg.name`` over ``params``.

    Pass all parameters, frozen ones included: a parameter whose ``.grad`` is None in a step
    (frozen, or an unused language head) is skipped by Adam(W) entirely, and it joins in as
    soon as it gets gradients (wav2vec 2.0 fine-tuning unfreezes the encoder after N updates).
    """
    return OPTIMIZERS[cfg.name](params, cfg)


# ---------------------------------------------------------------------------------------------
# What the trainer drives.


@runtime_checkable
class Task(Protocol):
    """The model-specific part of training.

    - ``batches()``: an endless :class:`~speechlab.train.sampler.ResumableBatches` of ready
      model inputs, called once per ``fit()``. A batch may carry its utterance ids as
      ``batch.ids`` or ``batch["ids"]``; they are logged when the batch is skipped.
    - ``loss(model, batch) -> (loss, stats, weight)``: ``loss`` a scalar tensor to minimise;
      ``stats`` extra floats to log; ``weight`` how much this batch counts in the logged
      averages (frames, tokens or utterances). Under DDP ``model`` is the DDP wrapper: call
      ``model(...)`` so that gradients are synchronised.
    - ``validate(model) -> metrics``: run with the bare model in ``eval()`` mode under
      ``torch.no_grad()``; must contain ``TrainConfig.early_stop_metric``. Under DDP every rank
      calls it and rank 0's metrics decide.
    """

    def batches(self) -> ResumableBatches: ...

    def loss(self, model: nn.Module, batch: Any) -> tuple[torch.Tensor, Mapping[str, float], float]:
        ...

    def validate(self, model: nn.Module) -> Mapping[str, float]: ...


@runtime_checkable
class StepAwareTask(Protocol):
    """Optional: a task told the number of updates done before each batch (annealed Gumbel
    temperature, freezing the encoder for the first N updates)."""

    def set_step(self, step: int) -> None: ...


@runtime_checkable
class StatefulTask(Protocol):
    """Optional: a task with its own state to checkpoint (e.g. the recurrent state SALAD
    carries from one batch to the next)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class TrainResult:
    """What a finished ``fit()`` leaves behind."""

    steps: int
    best_metric: float | None
    best_step: int | None
    stopped_early: bool
    nonfinite_batches: int
    log_path: Path
    last_checkpoint: Path | None
    best_checkpoint: Path | None

    @property
    def checkpoint(self) -> Path | None:
        """The weights to use: the best checkpoint, or the last one when no validation gave a
        finite metric (or there was no validation)."""
        return self.best_checkpoint or self.last_checkpoint


@dataclass
class _LoopState:
    """Counters of the loop that a checkpoint must carry besides model/optimiser/sampler."""

    best_metric: float | None = None
    best_step: int = 0
    bad_validations: int = 0
    nonfinite_batches: int = 0
    consecutive_nonfinite: int = 0
    stopped: bool = False
    elapsed: float = 0.0
    # Of ``elapsed``, the seconds spent waiting for the next batch (sampling and collation):
    # the part of training that data loading keeps off the model.
    data_time: float = 0.0


class _Window:
    """Weighted sums of what happened since the last train log line."""

    def __init__(self, sums: Mapping[str, float] | None = None) -> None:
        # Task stats are kept under "stat:" so that none can collide with the trainer's sums.
        self.sums: dict[str, float] = dict(sums or {})

    def add(self, loss: float, weight: float, stats: Mapping[str, float], grad_norm: float) -> None:
        s = self.sums
        s["weight"] = s.get("weight", 0.0) + weight
        s["count"] = s.get("count", 0.0) + 1
        s["loss"] = s.get("loss", 0.0) + loss * weight
        s["grad_norm"] = s.get("grad_norm", 0.0) + grad_norm
        for k, v in stats.items():
            s["stat:" + k] = s.get("stat:" + k, 0.0) + float(v) * weight

    @staticmethod
    def means(gathered: list[dict[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
        """Weighted means over all ranks' windows: (trainer fields, task stats)."""
        total: dict[str, float] = {}
        for sums in gathered:
            for k, v in sums.items():
                total[k] = total.get(k, 0.0) + v
        count = total.get("count", 0.0)
        # A task may report zero weight (frames of an empty batch): average per batch then.
        denom = total["weight"] if total.get("weight", 0.0) > 0 else max(count, 1.0)
        own = {"loss": total.get("loss", math.nan) / denom,
               "grad_norm": total.get("grad_norm", math.nan) / max(count, 1.0),
               "weight": total.get("weight", 0.0)}
        stats = {k[5:]: v / denom for k, v in total.items() if k.startswith("stat:")}
        return own, stats


def _batch_ids(batch: Any) -> list[str] | None:
    ids = batch.get("ids") if isinstance(batch, Mapping) else getattr(batch, "ids", None)
    return [str(i) for i in ids] if ids is not None else None


class Trainer:
    """Trains ``model`` on ``task`` following ``cfg``, writing everything under ``out_dir``.

    ``out_dir`` receives ``log.jsonl``, ``train.yaml``, ``ckpt-XXXXXXXX.pt`` (the last
    ``keep_checkpoints``), ``best.pt`` (best validation so far) and ``tensorboard/``. Under DDP
    only rank 0 writes; every rank reads the checkpoint on resume.

    ``progress``: force the progress bar on/off (default: ``cfg.progress`` on a TTY).
    ``model_config``: a plain dict saying how to rebuild ``model`` (see
    :class:`speechlab.train.card.ModelCard`), stored in every checkpoint so that the
    trained model rebuilds from its directory alone.
    ``device``: where the model, its batches, the optimiser state and the losses live (a name
    :func:`speechlab.devices.resolve` takes; default: the process default, ``auto``); under
    torchrun with GPUs each rank's own. Checkpoints load on any device: a run resumes on
    another device than the one that wrote it.
    """

    def __init__(self, model: nn.Module, task: Task, cfg: TrainConfig, out_dir: str | Path, *,
                 progress: bool | None = None,
                 model_config: Mapping[str, Any] | None = None,
                 device: str | torch.device | None = None) -> None:
        self.dist = distributed.current()
        self.device = (self.dist.device if self.dist.distributed and device is None
                       else devices.resolve(device))
        devices.check_precision(cfg.precision, self.device)
        # Moved before the optimiser is built, so that its state is made where the weights are.
        self.model = model.to(self.device)
        # cfg.ema_decay: the weights' moving average, validated and saved as the model's weights.
        self.average = WeightAverage(self.model, cfg.ema_decay) if cfg.ema_decay else None
        self.model_config = dict(model_config) if model_config is not None else None
        self.task = task
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.scaler = devices.grad_scaler(self.device, cfg.precision)
        self.optimizer = build_optimizer(model.parameters(), cfg.optim)
        self.scheduler = build_scheduler(self.optimizer, cfg.schedule, cfg.max_steps)
        self.step = 0
        self.state = _LoopState()
        self._window = _Window()
        self._progress_requested = cfg.progress if progress is None else progress
        self.log = MetricsLog(self.out_dir / LOG_NAME, enabled=self.dist.is_main)

    # -- the loop ------------------------------------------------------------------------------

    def fit(self) -> TrainResult:
        """Train to ``cfg.max_steps`` (resuming from the run directory's last checkpoint).

        Rank 0 holds a lock on the run directory meanwhile: a second process training into the
        same directory fails at once with a clear error instead of interleaving checkpoints.
        """
        if not self.dist.is_main:
            return self._fit()
        with exclusive_dir(self.out_dir, "a training run"):
            return self._fit()

    def _fit(self) -> TrainResult:
        cfg, main = self.cfg, self.dist.is_main
        if main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_temporaries(self.out_dir)
        # Rank-offset so that ranks' batches draw different augmentations.
        batches = with_workers(self.task.batches(), cfg.loader_workers,
                               cfg.seed * 1024 + self.dist.rank,
                               pin_memory=self.device.type == "cuda")
        resumed_from = self._resume(batches)
        if main:
            # Lines written after the checkpoint we resume from will be written again.
            self.log.truncate_after(self.step)
            save_config(cfg, self.out_dir / CONFIG_NAME)
        model = distributed.wrap_model(self.model,
                                       find_unused_parameters=cfg.find_unused_parameters)
        if self.average is not None and resumed_from is None:
            self.average.restart()  # from the weights DDP gave every rank (rank 0's)
        tensorboard = TensorBoardLog(self.out_dir / "tensorboard", cfg.tensorboard and main)
        bar = ProgressBar(cfg.max_steps, self.step,
                          progress_wanted(self._progress_requested, main))
        started, last_save = time.monotonic(), time.monotonic()
        elapsed_before = self.state.elapsed
        last_checkpoint = resumed_from
        self.optimizer.zero_grad(set_to_none=True)
        # With several ranks a stop would have to be agreed on every update; there the signal
        # keeps its usual effect (the run resumes from its last periodic checkpoint).
        with _stop_requests(self.dist.world_size == 1) as stop:
            try:
                # A run resumed past its time limit is over (every rank read the same elapsed
                # time from the checkpoint); in the loop the limit ends it like max_steps.
                timed_out = bool(cfg.max_minutes) and self.state.elapsed >= 60 * cfg.max_minutes
                while self.step < cfg.max_steps and not self.state.stopped and not timed_out:
                    step = self.step + 1  # the update being attempted
                    if isinstance(self.task, StepAwareTask):
                        self.task.set_step(self.step)
                    fetch = time.monotonic()
                    batch = self._on_device(next(batches))
                    self.state.data_time += time.monotonic() - fetch
                    self.model.train()
                    with devices.autocast(self.device, cfg.precision):
                        loss, stats, weight = self.task.loss(model, batch)
                    loss = loss.float()

                    # A non-finite loss would poison Adam's moments for good: skip the batch on
                    # every rank (one rank alone skipping would hang the others in all-reduce).
                    if not distributed.all_true(bool(torch.isfinite(loss.detach()).all())):
                        self._skip(step, batch, "loss", loss.detach())
                        continue

                    if self.scaler is not None:
                        # fp16: the loss is scaled up so that small gradients do not flush to
                        # zero, and the gradients unscaled before they are clipped or used.
                        self.scaler.scale(loss).backward()
                        self.scaler.unscale_(self.optimizer)
                    else:
                        loss.backward()
                    grads = [p.grad for p in self.model.parameters() if p.grad is not None]
                    grad_norm = torch.nn.utils.get_total_norm(grads)
                    # Gradients are already averaged across ranks here, so every rank sees the
                    # same norm and takes the same branch.
                    if not torch.isfinite(grad_norm):
                        self.optimizer.zero_grad(set_to_none=True)
                        if self.scaler is not None and self._overflowed():
                            continue
                        self._skip(step, batch, "grad", loss.detach())
                        continue
                    if cfg.grad_clip > 0:
                        torch.nn.utils.clip_grads_with_norm_(
                            [p for p in self.model.parameters() if p.grad is not None],
                            cfg.grad_clip, grad_norm)

                    lr = self.optimizer.param_groups[0]["lr"]
                    if self.scaler is not None:
                        self.scaler.step(self.optimizer)
                        self.scaler.update()
                    else:
                        self.optimizer.step()
                    self.scheduler.step()
                    if self.average is not None:
                        self.average.update()
                    # None, not zero: a parameter unused by the next batch (another language's
                    # head) then gets no Adam update at all, not a decay of its moments.
                    self.optimizer.zero_grad(set_to_none=True)
                    self.step = step
                    self.state.consecutive_nonfinite = 0
                    self.state.elapsed = elapsed_before + time.monotonic() - started
                    self._window.add(loss.item(), float(weight), stats, grad_norm.item())
                    timed_out = self._out_of_time(step)
                    finished = step >= cfg.max_steps or timed_out

                    if step % cfg.log_every == 0 or finished:
                        record = self._log_train(step, lr)
                        tensorboard.write("train", step, record)
                    bar.update(step, f"loss {loss.item():.4g}")

                    if cfg.valid_every and (step % cfg.valid_every == 0 or finished):
                        record = self._validate(step, batches)
                        tensorboard.write("valid", step, record)

                    due = bool(cfg.checkpoint_every) and step % cfg.checkpoint_every == 0
                    if cfg.checkpoint_seconds:
                        # Clocks differ across ranks; rank 0's decides so all ranks join the save.
                        due = due or distributed.broadcast_object(
                            time.monotonic() - last_save >= cfg.checkpoint_seconds)
                    if due or finished or self.state.stopped or stop:
                        last_checkpoint = self._save(checkpoint_path(self.out_dir, step), batches)
                        last_save = time.monotonic()
                    if stop and not finished:
                        raise Interrupted(stop[0], step)
            finally:
                bar.close()
                tensorboard.close()
                self.log.close()
                if isinstance(batches, WorkerBatches):
                    batches.close()
        best = self.out_dir / BEST_NAME
        if main and cfg.valid_every and not self.state.best_step:
            logger.warning("no validation gave a finite %s, so no %s was written; the last "
                           "checkpoint (%s) is the one to use", cfg.early_stop_metric, BEST_NAME,
                           last_checkpoint)
        return TrainResult(
            steps=self.step, best_metric=self.state.best_metric,
            best_step=self.state.best_step or None, stopped_early=self.state.stopped,
            nonfinite_batches=self.state.nonfinite_batches, log_path=self.out_dir / LOG_NAME,
            last_checkpoint=last_checkpoint,
            best_checkpoint=best if self.state.best_step and best.exists() else None)

    # -- pieces of the loop --------------------------------------------------------------------

    def _on_device(self, batch: Any) -> Any:
        """The batch where the model is (as it is on the CPU). To a GPU from page-locked
        memory, so that the copy runs beside the work already queued there."""
        if self.device.type == "cpu":
            return batch
        if self.device.type == "cuda":
            batch = devices.pin(batch)
        return devices.move(batch, self.device, non_blocking=True)

    def _overflowed(self) -> bool:
        """fp16: gradients that overflowed at this loss scale. The scaler lowers the scale and
        the batch is tried at the lower scale no more (as every fp16 trainer does); not
        counted as a non-finite batch unless the scale has nothing left to lower."""
        assert self.scaler is not None
        before = self.scaler.get_scale()
        self.scaler.update()
        if self.scaler.get_scale() < before and self.scaler.get_scale() > 2.0 ** -16:
            logger.debug("fp16 gradients overflowed; loss scale %g -> %g", before,
                         self.scaler.get_scale())
            return True
        return False

    def _out_of_time(self, step: int) -> bool:
        """``max_minutes`` of training have passed: the run ends after this update, as if it
        were the last (validated, checkpointed); resumed with the same limit, it stays ended."""
        if not self.cfg.max_minutes:
            return False
        # Clocks differ across ranks; rank 0's decides so that every rank stops together.
        over = distributed.broadcast_object(self.state.elapsed >= 60 * self.cfg.max_minutes)
        if over:
            logger.warning("stopping after update %d of %d: the %g-minute time limit "
                           "(train.max_minutes) is reached", step, self.cfg.max_steps,
                           self.cfg.max_minutes)
        return over

    def _skip(self, step: int, batch: Any, what: str, loss: torch.Tensor) -> None:
        """Count and log a batch whose loss or gradient is not finite; give up if it keeps
        happening. Every rank gets here together (the decision is collective)."""
        self.state.nonfinite_batches += 1
        self.state.consecutive_nonfinite += 1
        value = float(loss.float().sum())
        # Name the culprits: under DDP the bad batch may be another rank's.
        culprits = [r for r in distributed.all_gather_object((_batch_ids(batch), value))
                    if not math.isfinite(r[1])] or [(_batch_ids(batch), value)]
        ids = [i for r in culprits for i in (r[0] or [])] or None
        self.log.write({"kind": "nonfinite", "step": step, "what": what,
                        "loss": culprits[0][1], "ids": ids,
                        "nonfinite_batches": self.state.nonfinite_batches})
        if self.dist.is_main:
            logger.warning("update %d: non-finite %s, batch skipped (ids: %s)", step, what,
                           ", ".join(ids[:10]) if ids else "not given")
        if self.state.consecutive_nonfinite >= self.cfg.max_consecutive_nonfinite:
            raise SpeechlabError(
                f"{self.state.consecutive_nonfinite} batches in a row gave a non-finite {what} "
                f"(at update {step}); training has diverged. Lower optim.lr, set grad_clip, or "
                f"check the data: the skipped batches' ids are in {self.log.path}")

    def _log_train(self, step: int, lr: float) -> dict[str, Any]:
        own, stats = _Window.means(distributed.all_gather_object(self._window.sums))
        self._window = _Window()
        # Task stats first so that a stat cannot overwrite the trainer's own fields.
        record = {**stats, "kind": "train", "step": step, **own, "lr": lr,
                  "time": round(self.state.elapsed, 3),
                  "data_time": round(self.state.data_time, 3),
                  "nonfinite_batches": self.state.nonfinite_batches}
        self.log.write(record)
        if self.dist.is_main:
            logger.info("step %d/%d loss %.4g lr %.3g grad_norm %.3g", step, self.cfg.max_steps,
                        record["loss"], lr, record["grad_norm"])
        return record

    def _validate(self, step: int, batches: ResumableBatches) -> dict[str, Any]:
        """Validate, track the best metric (saving best.pt), decide on early stopping."""
        cfg, st = self.cfg, self.state
        self.model.eval()
        averaged = self.average.in_model() if self.average else contextlib.nullcontext()
        with averaged, torch.no_grad(), devices.autocast(self.device, cfg.precision):
            metrics = {k: float(v) for k, v in self.task.validate(self.model).items()}
        self.model.train()
        metrics = distributed.broadcast_object(metrics)
        if cfg.early_stop_metric not in metrics:
            raise SpeechlabError(
                f"early_stop_metric {cfg.early_stop_metric!r} is not among the validation "
                f"metrics {sorted(metrics)}; set early_stop_metric to one of them")
        value = metrics[cfg.early_stop_metric]
        finite = math.isfinite(value)
        if not finite:
            improved = False
        elif st.best_metric is None:
            improved = True
        elif cfg.early_stop_mode == "min":
            improved = value < st.best_metric - cfg.early_stop_min_delta
        else:
            improved = value > st.best_metric + cfg.early_stop_min_delta
        if improved:
            st.best_metric, st.best_step, st.bad_validations = value, step, 0
        elif not math.isnan(value):
            st.bad_validations += 1
            if cfg.patience and st.bad_validations >= cfg.patience:
                st.stopped = True
        if not finite and self.dist.is_main:
            fallback = (f"{BEST_NAME} stays at update {st.best_step}" if st.best_step else
                        f"no {BEST_NAME} yet: the last checkpoint is the one to use")
            logger.warning(
                "update %d: validation %s is %s: %s; it is not an improvement%s (%s)", step,
                cfg.early_stop_metric, value,
                "nothing was validated (no dev utterance left, e.g. all skipped)"
                if math.isnan(value) else "the model has diverged",
                " and does not count against patience" if math.isnan(value) else "", fallback)
        record = {**metrics, "kind": "valid", "step": step, "best": improved,
                  "best_metric": st.best_metric, "best_step": st.best_step}
        if self.average is not None:
            record["averaged"] = True  # these metrics are the weights' moving average's
        self.log.write(record)
        if self.dist.is_main:
            logger.info("step %d validation %s%s", step,
                        " ".join(f"{k} {v:.4g}" for k, v in metrics.items()),
                        " (best)" if improved else "")
            if st.stopped:
                logger.info("early stopping: %s has not improved for %d validations",
                            cfg.early_stop_metric, st.bad_validations)
        if improved:
            self._save(self.out_dir / BEST_NAME, batches, prune=False)
        return record

    def _save(self, path: Path, batches: ResumableBatches, prune: bool = True) -> Path:
        """Write a resumable checkpoint (rank 0), with every rank's sampler and RNG states and
        its half-filled log window (so a resumed run logs the same averages)."""
        # Collective: every rank must get here, including those that write nothing.
        ranks = distributed.all_gather_object(
            {"rng": rng_state(), "batches": batches.state_dict(), "window": self._window.sums})
        if self.dist.is_main:
            parts: dict[str, Any] = dict(
                step=self.step, model=self.model.state_dict(),
                optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(),
                batches=[r["batches"] for r in ranks], rng=[r["rng"] for r in ranks],
                window=[r["window"] for r in ranks], trainer=dataclasses.asdict(self.state),
                config=to_dict(self.cfg), world_size=self.dist.world_size)
            if self.average is not None:
                # "model": the weights to use, the average; training goes on from its own.
                parts["training_model"] = parts["model"]
                parts["model"] = {**parts["model"], **self.average.state_dict()}
                parts["average_updates"] = self.average.updates
            if isinstance(self.task, StatefulTask):
                parts["task"] = self.task.state_dict()
            if self.scaler is not None:
                parts["scaler"] = self.scaler.state_dict()
            if self.model_config is not None:
                parts["model_config"] = self.model_config
            save_checkpoint(path, **parts)
            if prune and self.cfg.keep_checkpoints:
                for _, old in list_checkpoints(self.out_dir)[:-self.cfg.keep_checkpoints]:
                    old.unlink(missing_ok=True)
        return path

    def _resume(self, batches: ResumableBatches) -> Path | None:
        """Load the newest checkpoint in ``out_dir`` if there is one, else seed a fresh run."""
        path = latest_checkpoint(self.out_dir)
        if path is None:
            # Offset by rank so that dropout/augmentation differ across ranks.
            seed_everything(self.cfg.seed + self.dist.rank)
            return None
        ckpt = load_checkpoint(path)
        # A run with a moving average keeps training's own weights apart from "model".
        own = ckpt.get("training_model", ckpt["model"])
        try:
            self.model.load_state_dict(own)
        except RuntimeError as e:
            raise SpeechlabError(f"checkpoint {path} does not fit the model ({e}); the model "
                                 "config changed since it was written: use a new out_dir") from None
        if self.average is not None:
            if "training_model" in ckpt:
                self.average.load_state_dict(ckpt["model"], ckpt.get("average_updates", 0))
            else:
                self.average.restart()
                if self.dist.is_main:
                    logger.info("%s has no averaged weights: the moving average (ema_decay "
                                "%g) starts from its weights at update %d", path,
                                self.cfg.ema_decay, int(ckpt["step"]))
        # Adam's state goes to its parameters' device on loading: a run written on a GPU
        # resumes on the CPU and back.
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        if self.scaler is not None and "scaler" in ckpt:
            self.scaler.load_state_dict(ckpt["scaler"])
        rank = self.dist.rank
        if len(ckpt["rng"]) != self.dist.world_size:
            logger.warning("checkpoint %s was written by %d ranks, this run has %d: data order "
                           "and randomness will differ from an uninterrupted run", path,
                           len(ckpt["rng"]), self.dist.world_size)
            rank = min(rank, len(ckpt["rng"]) - 1)
        batches.load_state_dict(ckpt["batches"][rank])
        set_rng_state(ckpt["rng"][rank])
        self._window = _Window(ckpt["window"][rank])
        if isinstance(self.task, StatefulTask) and "task" in ckpt:
            self.task.load_state_dict(ckpt["task"])
        self.state = _LoopState(**ckpt["trainer"])
        self.step = int(ckpt["step"])
        if self.dist.is_main:
            logger.info("resuming from %s at update %d", path, self.step)
        return path


def fit(model: nn.Module, make_task: Callable[[int, int], Task], cfg: TrainConfig,
        out_dir: str | Path, *, card: Any = None, progress: bool | None = None,
        device: str | torch.device | None = None) -> TrainResult:
    """Train (or resume) ``model`` in ``out_dir`` with the task ``make_task(rank, world_size)``
    builds for this process: under torchrun each rank gets its own shard of the batches, in a
    single process the whole. ``card`` (a :class:`speechlab.train.card.ModelCard`) goes into
    every checkpoint, so the trained model rebuilds from its directory alone."""
    dist = distributed.current()
    return Trainer(model, make_task(dist.rank, dist.world_size), cfg, out_dir, progress=progress,
                   model_config=None if card is None else card.to_dict(), device=device).fit()
