"""Frozen configs of the shared trainer: optimiser, learning-rate schedule, training loop.

Load them like every other speechlab config::

    cfg = load_config(TrainConfig, "train.yaml", ["optim.lr=3e-4", "schedule.name=noam"])

The names in ``OptimConfig.name`` and ``ScheduleConfig.name`` are keys of
:data:`speechlab.train.trainer.OPTIMIZERS` and :data:`speechlab.train.schedule.SCHEDULES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError


@dataclass(frozen=True)
class OptimConfig:
    """Adam-family optimiser.

    The defaults are PyTorch's Adam defaults, which the SALAD paper uses for its LSTM baseline;
    its Noam setup is ``betas=(0.9, 0.98), eps=1e-9`` with ``schedule.name=noam``.
    """

    name: Literal["adam", "adamw"] = "adam"
    lr: float = ranged(1e-3, gt=0)
    betas: tuple[float, float] = ranged((0.9, 0.999), ge=0, lt=1)
    eps: float = ranged(1e-8, ge=0)
    # Adam: L2 penalty added to the gradient; AdamW: decoupled decay. Either way it only touches
    # parameters that received a gradient in the step.
    weight_decay: float = ranged(0.0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class ScheduleConfig:
    """Learning-rate schedule: a multiplier of ``OptimConfig.lr`` as a function of the update.

    - ``constant``: 1.
    - ``warmup_linear``: rises linearly to 1 over ``warmup_steps`` updates, then falls linearly to
      ``final_lr_scale`` at ``total_steps`` (the CTC-topologies paper's schedule).
    - ``noam``: ``model_dim**-0.5 * min(s**-0.5, s * warmup_steps**-1.5)`` (Eq. in Sec. 3.3 of the
      SALAD paper, after Vaswani et al.); set ``optim.lr=1`` for the formula as published.
    """

    name: Literal["constant", "warmup_linear", "noam"] = "constant"
    warmup_steps: int = ranged(0, ge=0)
    # None: the run's ``TrainConfig.max_steps``.
    total_steps: int | None = ranged(None, ge=1)
    final_lr_scale: float = ranged(0.0, ge=0)
    model_dim: int = ranged(256, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.name == "noam" and self.warmup_steps < 1:
            raise ConfigError("schedule.name=noam needs schedule.warmup_steps >= 1")


@dataclass(frozen=True)
class TrainConfig:
    """The training loop. Step counts are optimiser updates (skipped batches do not count)."""

    max_steps: int = ranged(1000, ge=1, le=10_000_000,
                            why="at 0.1 s an update, 10^7 updates take 12 days")
    # Clip the global gradient norm to this value; 0 disables clipping (the norm is still logged).
    grad_clip: float = ranged(0.0, ge=0)
    log_every: int = ranged(10, ge=1)
    # Run ``Task.validate`` every this many updates and after the last one; 0 never validates.
    valid_every: int = ranged(0, ge=0)
    # Save a resumable checkpoint every this many updates and/or seconds; 0 disables either
    # trigger. A final checkpoint is always written when the run ends.
    checkpoint_every: int = ranged(0, ge=0)
    checkpoint_seconds: float = ranged(0.0, ge=0)
    # Periodic checkpoints kept on disk (best.pt is kept separately); 0 keeps all of them.
    keep_checkpoints: int = ranged(3, ge=0)
    # An exponential moving average of the weights, updated after every update with this decay
    # (0: none). When on, it is what is validated (so early stopping and best.pt follow it) and
    # a checkpoint's ``model`` holds it, the weights a model is loaded with; training goes on
    # from the raw weights, kept beside it. 0.999 averages over about the last 1,000 updates.
    ema_decay: float = ranged(0.0, ge=0, lt=1)
    early_stop_metric: str = "loss"
    early_stop_mode: Literal["min", "max"] = "min"
    # A validation counts as an improvement only if it beats the best by more than this.
    early_stop_min_delta: float = ranged(0.0, ge=0)
    # Stop after this many validations without improvement; 0 never stops early.
    patience: int = ranged(0, ge=0)
    # Stop after this many minutes of training (counted over resumes, validation included) even
    # if max_steps is not reached; 0: no limit. For runs that must end in time on any machine
    # (the demo): where the limit binds, fewer updates are made and the log says so.
    max_minutes: float = ranged(0.0, ge=0)
    # Give up (with an error) after this many non-finite batches in a row: the run has diverged.
    max_consecutive_nonfinite: int = ranged(100, ge=1)
    seed: int = ranged(0, ge=0)
    tensorboard: bool = False
    # A rich progress bar with ETA on interactive terminals (never in non-TTY runs, never on
    # ranks other than 0, never when SPEECHLAB_PROGRESS=0).
    progress: bool = True
    # The forward pass under autocast in bfloat16 or float16 (with a gradient scaler), or in
    # float32; the losses are computed in float32 either way. bf16 on CPUs and recent GPUs;
    # fp16 on older GPUs.
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    # Worker processes that make the batches (collate, on-the-fly augmentation) ahead of the
    # trainer, for a GPU that would otherwise wait for them; 0 makes them in the trainer's
    # process. Resume stays exact either way (speechlab.train.loader).
    loader_workers: int = ranged(0, ge=0, le=64)
    # DDP must look for parameters that took no part in the loss (language-specific heads of the
    # multi-softmax RNN-T); it costs a graph traversal per step, so it is off by default.
    find_unused_parameters: bool = False
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.patience > 0 and self.valid_every == 0:
            raise ConfigError("patience > 0 needs valid_every > 0: early stopping counts validations")
