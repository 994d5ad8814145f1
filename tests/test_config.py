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


# ---------------------------------------------------------------------------------------------
# Numeric ranges: declared on the field, checked where the config is loaded.

from speechlab.asr.rnnt.config import DecodeConfig, EarlyStopConfig, ModelDims, RNNTConfig, SearchConfig  # noqa: E402
from speechlab.papers.topologies.recipe import TopologiesConfig  # noqa: E402
from speechlab.papers.multisoftmax.recipe import MultiSoftmaxConfig  # noqa: E402
from speechlab.asr.rnnt.task import TaskConfig  # noqa: E402
from speechlab.audio.features import FbankConfig  # noqa: E402
from speechlab.audio.transforms import SpecAugmentConfig  # noqa: E402
from speechlab.config import RANGE, ranged, check_fields, from_dict  # noqa: E402
from speechlab.data.corpus import CorpusConfig  # noqa: E402
from speechlab.data.importers import ImportConfig  # noqa: E402
from speechlab.metrics.commands import ScoreConfig  # noqa: E402
from speechlab.train.config import OptimConfig, ScheduleConfig, TrainConfig  # noqa: E402
from speechlab.ssl.wav2vec2.config import Wav2Vec2Config  # noqa: E402
from speechlab.ssl.wav2vec2.finetune import FinetuneTaskConfig  # noqa: E402
from speechlab.ssl.wav2vec2.model import CtcConfig  # noqa: E402
from speechlab.ssl.wav2vec2.pretrain import PretrainTaskConfig  # noqa: E402
from speechlab.ssl.wav2vec2.decode import LmSearchConfig  # noqa: E402
from speechlab.papers.local_attention.recipe import LocalAttentionConfig  # noqa: E402
from speechlab.tts.corpus import TtsCorpusConfig  # noqa: E402
from speechlab.tts.model import AcousticModelConfig  # noqa: E402
from speechlab.papers.salad.recipe import SaladConfig  # noqa: E402
from speechlab.tts.task import TtsTaskConfig  # noqa: E402

# Every config dataclass of the package; a new paper's configs join this list.
CONFIGS = [OptimConfig, ScheduleConfig, TrainConfig, ModelDims, RNNTConfig, SearchConfig,
           EarlyStopConfig, DecodeConfig, TaskConfig, FbankConfig, SpecAugmentConfig,
           ImportConfig, CorpusConfig, ScoreConfig, MultiSoftmaxConfig,
           TopologiesConfig,
           Wav2Vec2Config, CtcConfig, PretrainTaskConfig, FinetuneTaskConfig, LmSearchConfig,
           LocalAttentionConfig]
CONFIGS += [TtsCorpusConfig, AcousticModelConfig, TtsTaskConfig, SaladConfig]  # SALAD paper


def _numeric(tp) -> bool:
    import typing

    if tp in (int, float):
        return True
    return any(_numeric(a) for a in typing.get_args(tp) if a is not type(None))


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_numeric_config_field_declares_its_range(cls):
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    undeclared = [f.name for f in dataclasses.fields(cls)
                  if _numeric(hints[f.name]) and RANGE not in f.metadata]
    assert not undeclared, f"{cls.__name__}: give {undeclared} a range with ranged()"
    check_fields(cls())  # the defaults are in range


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_nan_and_out_of_range_values_are_refused_naming_the_key(cls):
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        rng = f.metadata.get(RANGE)
        if rng is None or hints[f.name] not in (int, float, float | None, int | None):
            continue
        bad = ["nan"] if hints[f.name] in (float, float | None) else []
        if rng.ge is not None:
            bad.append(str(rng.ge - 1))
        if rng.lt is not None or rng.le is not None:
            bad.append(str((rng.lt if rng.lt is not None else rng.le) + 1))
        if not rng.allow_inf and hints[f.name] in (float, float | None):
            bad.append("inf")
        for value in bad:
            with pytest.raises(ConfigError, match=rf"config key '{f.name}' must be"):
                load_config(cls, None, [f"{f.name}={value}"])


def test_nested_keys_and_containers_are_checked():
    with pytest.raises(ConfigError, match=r"'optim\.lr' must be > 0, got -0\.1"):
        load_config(TrainConfig, None, ["optim.lr=-0.1"])
    with pytest.raises(ConfigError, match=r"'optim\.betas' must be < 1"):
        load_config(TrainConfig, None, ["optim.betas=[0.9, 1.5]"])
    with pytest.raises(ConfigError, match=r"'minutes' must be a number, got nan"):
        load_config(CorpusConfig, None, ["minutes={en: .nan}"])
    with pytest.raises(ConfigError, match=r"'vocab_sizes' must be >= 2"):
        load_config(RNNTConfig, None, ["vocab_sizes={en: 1}"])
    # inf only where the field allows it (early stopping "never")
    assert math.isinf(load_config(EarlyStopConfig, None, ["tau=inf"]).tau)
    with pytest.raises(ConfigError, match="must be finite"):
        load_config(TrainConfig, None, ["checkpoint_seconds=inf"])
    # direct construction is checked too
    with pytest.raises(ConfigError, match="lr must be > 0"):
        OptimConfig(lr=-1.0)


def test_undeclared_fields_still_refuse_nan():
    with pytest.raises(ConfigError, match=r"'optim\.lr' must be a number, got nan"):
        load_config(Cfg, None, ["optim.lr=.nan"])
    assert math.isinf(load_config(Cfg, None, ["tau=inf"]).tau)


def test_a_user_dataclass_declares_ranges_with_ranged():
    @dataclass(frozen=True)
    class Paper:
        temperature: float = ranged(1.0, gt=0, le=10)

        def __post_init__(self) -> None:
            check_fields(self)

    assert from_dict(Paper, {"temperature": 2}).temperature == 2.0
    with pytest.raises(ConfigError, match=r"'temperature' must be <= 10, got 11\.0"):
        from_dict(Paper, {"temperature": 11})


def test_a_section_given_in_part_keeps_its_fields_own_default_not_its_classs():
    """A nested section whose field default comes from a factory (the corpus's effects) keeps
    that default for every key not given, in YAML, in --dotted options and in --help."""
    import argparse

    from speechlab.config import add_config_args, config_from_args, from_dict
    from speechlab.data.corpus import CorpusConfig

    cfg = from_dict(CorpusConfig, {"effects": {"world_prob": 0.1}})
    default = CorpusConfig().effects
    assert cfg.effects.world_prob == 0.1 and default.world_prob != 0.1
    assert cfg.effects.reverb_prob == default.reverb_prob > 0
    assert cfg.effects.channels == default.channels
    # a mapping field is replaced whole, not merged with its default
    cfg = from_dict(CorpusConfig, {"voices": {"en": {"en-us": 1.0}, "hi": {"hi": 1.0},
                                              "ta": {"ta": 1.0}, "gu": {"gu": 1.0}}})
    assert cfg.voices["en"] == {"en-us": 1.0}
    parser = argparse.ArgumentParser()
    add_config_args(parser, CorpusConfig)
    args = parser.parse_args(["--effects.gain_prob", "0.9"])
    got = config_from_args(CorpusConfig, args).effects
    assert got.gain_prob == 0.9 and got.speed_prob == default.speed_prob
    assert f"(default: {default.reverb_prob!r})" in parser.format_help()
