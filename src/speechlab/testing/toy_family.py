"""A toy model family, for the tests and for docs/experiments.md: all a family needs to be
loaded, exported, transcribed with and served, plugged in by one registry entry
(:class:`speechlab.families.Family`).

Its "network" is a learnable gain; its recognizer says ``speech`` when a recording's level
(dB of the RMS, after the gain) is above the config's threshold, else ``silence``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from speechlab.contract import ModelBase, PackageParts, Transcript
from speechlab.families import Family
from speechlab.package import PackageCard
from speechlab.train.card import config_builder, load_trained

FAMILY = "toy"


@dataclass(frozen=True)
class ToyConfig:
    threshold_db: float = -40.0


class ToyNet(nn.Module):
    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        self.gain = nn.Parameter(torch.ones(1))


def build(config: ToyConfig) -> ToyNet:
    return ToyNet(config)


BUILDERS = {FAMILY: config_builder(ToyConfig, build)}

#: The registry entry that plugs the family in (a test adds it to ``families.FAMILIES``).
TOY = Family(FAMILY, "asr", "a toy energy recognizer", "speechlab.testing.toy_family:ToyRecognizer",
             "speechlab.testing.toy_family")


class ToyRecognizer(ModelBase):
    kind = "asr"
    family = FAMILY
    title = "a toy energy recognizer"
    CAPABILITIES = frozenset({"transcribe"})
    methods = ("level",)
    languages = ("en",)
    sample_rate = 16000

    def __init__(self, net: ToyNet) -> None:
        self.net = net.eval()

    def transcribe(self, audio: Any, sample_rate: int = 16000, language: str | None = None, *,
                   method: str | None = None, beam: int | None = None, nbest: int = 0,
                   progress: Callable[[float], None] | None = None) -> Transcript:
        from speechlab.audio.io import as_samples, load_audio

        if isinstance(audio, (str, Path)):
            x = load_audio(audio, None)
        else:
            x = as_samples(audio, sample_rate, self.sample_rate)
        rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if len(x) else 0.0
        level = 20 * np.log10(max(rms * float(self.net.gain.detach()), 1e-10))
        if progress is not None:
            progress(len(x) / self.sample_rate)
        text = "speech" if level > self.net.config.threshold_db else "silence"
        return Transcript(text, "en", nbest=((text, 1.0),) if nbest else None)

    def to_package(self) -> PackageParts:
        return self.package_parts(self.net, {})

    @classmethod
    def from_package(cls, path: Path, card: PackageCard, model: nn.Module) -> ToyRecognizer:
        assert isinstance(model, ToyNet)
        return cls(model)

    @classmethod
    def from_run(cls, model_dir: str | Path) -> ToyRecognizer:
        net = load_trained(model_dir, BUILDERS)
        assert isinstance(net, ToyNet)
        return cls(net)
