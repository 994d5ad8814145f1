"""LR schedules against their formulas, optimiser/schedule dicts, and the train config file."""

from __future__ import annotations

import typing

import pytest
import torch

from speechlab.config import load_config
from speechlab.errors import ConfigError
from speechlab.train.config import OptimConfig, ScheduleConfig, TrainConfig
from speechlab.train.schedule import SCHEDULES, build_scheduler
from speechlab.train.trainer import OPTIMIZERS, build_optimizer


def lr_curve(cfg: ScheduleConfig, base_lr: float, steps: int, max_steps: int = 100) -> list[float]:
    """The lr each of ``steps`` updates is taken with, read off a real optimiser."""
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=base_lr)
    sched = build_scheduler(opt, cfg, max_steps)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        p.grad = torch.ones(1)
        opt.step()
        sched.step()
    return lrs


def test_constant():
    assert lr_curve(ScheduleConfig(name="constant"), 0.01, 5) == [0.01] * 5


def test_warmup_linear_rises_then_falls_to_final_scale():
    cfg = ScheduleConfig(name="warmup_linear", warmup_steps=4, total_steps=12, final_lr_scale=0.1)
    lrs = lr_curve(cfg, 1.0, 15)
    # Update s (1-based) uses s/4 during warmup, then falls linearly to 0.1 at update 12.
    expected = [1 / 4, 2 / 4, 3 / 4, 1.0] + [1 + (0.1 - 1) * (s - 4) / 8 for s in range(5, 13)]
    expected += [0.1] * 3
    assert lrs == pytest.approx(expected, abs=1e-12)


def test_warmup_linear_total_defaults_to_max_steps():
    cfg = ScheduleConfig(name="warmup_linear", warmup_steps=2, final_lr_scale=0.0)
    lrs = lr_curve(cfg, 1.0, 6, max_steps=6)
    assert lrs == pytest.approx([0.5, 1.0, 0.75, 0.5, 0.25, 0.0])


def test_noam_matches_salad_formula():
    h, w = 128, 10
    cfg = ScheduleConfig(name="noam", warmup_steps=w, model_dim=h)
    lrs = lr_curve(cfg, 1.0, 40)
    expected = [h ** -0.5 * min(s ** -0.5, s * w ** -1.5) for s in range(1, 41)]
    assert lrs == pytest.approx(expected, rel=1e-12)
    assert max(range(40), key=lambda i: lrs[i]) == w - 1  # peak at update w


def test_scheduler_state_resumes_the_curve():
    cfg = ScheduleConfig(name="noam", warmup_steps=5, model_dim=16)
    full = lr_curve(cfg, 2.0, 12)
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=2.0)
    sched = build_scheduler(opt, cfg, 100)
    for _ in range(7):
        p.grad = torch.ones(1)
        opt.step()
        sched.step()
    opt2 = torch.optim.Adam([p], lr=2.0)
    sched2 = build_scheduler(opt2, cfg, 100)
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sched.state_dict())
    rest = []
    for _ in range(5):
        rest.append(opt2.param_groups[0]["lr"])
        p.grad = torch.ones(1)
        opt2.step()
        sched2.step()
    assert rest == full[7:]


def test_dicts_cover_the_config_literals():
    hints = typing.get_type_hints(OptimConfig)
    assert set(OPTIMIZERS) == set(typing.get_args(hints["name"]))
    hints = typing.get_type_hints(ScheduleConfig)
    assert set(SCHEDULES) == set(typing.get_args(hints["name"]))


@pytest.mark.parametrize("name,cls", [("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW)])
def test_build_optimizer(name, cls):
    cfg = OptimConfig(name=name, lr=0.5, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.01)
    opt = build_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg)
    assert type(opt) is cls
    group = opt.param_groups[0]
    assert (group["lr"], group["betas"], group["eps"], group["weight_decay"]) == \
        (0.5, (0.8, 0.9), 1e-6, 0.01)


def test_train_config_from_yaml_and_overrides(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_text("max_steps: 50\noptim:\n  name: adamw\n  betas: [0.9, 0.98]\n"
                    "schedule:\n  name: noam\n  warmup_steps: 4000\n  model_dim: 512\n")
    cfg = load_config(TrainConfig, path, ["optim.lr=2", "patience=3", "valid_every=10"])
    assert cfg.max_steps == 50 and cfg.optim.name == "adamw" and cfg.optim.lr == 2.0
    assert cfg.optim.betas == (0.9, 0.98) and cfg.schedule.model_dim == 512
    assert cfg.patience == 3


@pytest.mark.parametrize("overrides,needle", [
    (["optim.name=sgd"], "optim.name"),
    (["schedule.name=noam"], "warmup_steps"),
    (["max_steps=0"], "max_steps"),
    (["patience=2"], "valid_every"),
])
def test_bad_train_config_is_a_config_error(overrides, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(TrainConfig, None, overrides)
