"""Learning-rate schedules as ``torch.optim.lr_scheduler.LambdaLR`` factories.

A schedule is a multiplier of the optimiser's base lr as a function of the update number.
``LambdaLR`` keeps only its counters in ``state_dict()`` (the multiplier is a closure, rebuilt
from the config on resume), so a checkpointed schedule resumes exactly where it stopped.

Convention: ``LambdaLR`` calls the multiplier with the number of updates already taken
(0 for the first update); the formulas below are written in ``s = that + 1``, the 1-based index
of the update the lr is used for, so Noam never sees ``s = 0``.
"""

from __future__ import annotations

from typing import Callable

import torch

from speechlab.train.config import ScheduleConfig

Multiplier = Callable[[int], float]


def constant(cfg: ScheduleConfig, total_steps: int) -> Multiplier:
    def multiplier(done: int) -> float:
        return 1.0

    return multiplier


def warmup_linear(cfg: ScheduleConfig, total_steps: int) -> Multiplier:
    """Linear rise to 1 over ``warmup_steps`` updates, linear fall to ``final_lr_scale`` at
    ``total_steps`` (and held there afterwards)."""
    warmup = cfg.warmup_steps
    final = cfg.final_lr_scale

    def multiplier(done: int) -> float:
        s = done + 1
        if s <= warmup:
            return s / warmup
        if total_steps <= warmup:
            return 1.0
        frac = min(1.0, (s - warmup) / (total_steps - warmup))
        return 1.0 + (final - 1.0) * frac

    return multiplier


def noam(cfg: ScheduleConfig, total_steps: int) -> Multiplier:
    """``H**-0.5 * min(s**-0.5, s * w**-1.5)``: SALAD paper Sec. 3.3 (Vaswani et al. Eq. 3)."""
    scale = cfg.model_dim ** -0.5
    warmup = cfg.warmup_steps

    def multiplier(done: int) -> float:
        s = done + 1
        return scale * min(s ** -0.5, s * warmup ** -1.5)

    return multiplier


# name -> multiplier factory; ScheduleConfig.name picks one.
SCHEDULES: dict[str, Callable[[ScheduleConfig, int], Multiplier]] = {
    "constant": constant,
    "warmup_linear": warmup_linear,
    "noam": noam,
}


def build_scheduler(optimizer: torch.optim.Optimizer, cfg: ScheduleConfig,
                    max_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` over ``optimizer`` following ``cfg``; ``cfg.total_steps`` defaults to
    ``max_steps``. Call ``scheduler.step()`` once after each ``optimizer.step()``."""
    total = cfg.total_steps if cfg.total_steps is not None else max_steps
    return torch.optim.lr_scheduler.LambdaLR(optimizer, SCHEDULES[cfg.name](cfg, total))
