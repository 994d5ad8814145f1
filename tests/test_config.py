from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

import pytest

from speechlab.config import add_config_args, config_from_args, load_config, save_config
from speechlab.errors import ConfigError


@dataclass(frozen=True)
class Optim:
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)


@dataclass(frozen=True)
class Cfg:
    name: str = "x"
    steps: int = 10
    langs: tuple[str, ...] = ("en", "hi")
    tau: float = math.inf
    optim: Optim = field(default_factory=Optim)
    mode: str | None = None


def test_defaults_yaml_and_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("steps: 20\noptim:\n  lr: 0.01\n")
    cfg = load_config(Cfg, p, ["optim.betas=[0.8, 0.9]", "langs=[ta]", "tau=inf"])
    assert cfg.steps == 20 and cfg.optim.lr == 0.01 and cfg.optim.betas == (0.8, 0.9)
    assert cfg.langs == ("ta",) and math.isinf(cfg.tau)


def test_roundtrip(tmp_path):
    cfg = Cfg(steps=3, optim=Optim(lr=0.5))
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(Cfg, tmp_path / "c.yaml") == cfg


@pytest.mark.parametrize("ov", ["nosuch=1", "steps=abc", "optim.lr=[1]", "optim.nosuch=2"])
def test_bad_overrides_name_the_key(ov):
    with pytest.raises(ConfigError) as e:
        load_config(Cfg, None, [ov])
    assert ov.split("=")[0].split(".")[-1] in str(e.value)


def test_cli_options_from_dataclass():
    parser = argparse.ArgumentParser()
    add_config_args(parser, Cfg)
    args = parser.parse_args(["--optim.lr", "0.2", "--steps", "7", "--set", "name=y"])
    cfg = config_from_args(Cfg, args)
    assert cfg == Cfg(steps=7, name="y", optim=Optim(lr=0.2))
