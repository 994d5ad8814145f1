"""Trained models: which checkpoint of a run directory counts, and rebuilding a model from it.

Every checkpoint the trainer writes carries ``model_config``, a :class:`ModelCard` as a plain
dict: the model family and the config dataclass that built the model. So any trained model
rebuilds from its directory alone (:func:`load_trained`), whatever its sizes, with no side
file and no knowledge of the experiment that trained it.

The checkpoint that counts is ``best.pt`` (the best validation) if there is one, else the
newest periodic checkpoint (:func:`best_or_latest`): the one rule every consumer (decoding,
fine-tuning, reports) follows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from speechlab.config import from_dict, to_dict
from speechlab.errors import DataError
from speechlab.train.checkpoint import BEST_NAME, latest_checkpoint, load_checkpoint, load_model_weights


def best_or_latest(run_dir: str | Path) -> Path:
    """``best.pt`` of ``run_dir`` if it exists, else its newest periodic checkpoint."""
    run_dir = Path(run_dir)
    best = run_dir / BEST_NAME
    if best.is_file():
        return best
    latest = latest_checkpoint(run_dir)
    if latest is None:
        raise DataError(f"{run_dir} holds no checkpoint (no {BEST_NAME}, no ckpt-*.pt): train "
                        "the model first")
    return latest


def _build_rnnt(config: Mapping[str, Any]) -> nn.Module:
    from speechlab.asr.rnnt.config import RNNTConfig
    from speechlab.asr.rnnt.model import build_from_config

    return build_from_config(from_dict(RNNTConfig, dict(config)))


def _build_ctc(config: Mapping[str, Any]) -> nn.Module:
    from speechlab.asr.ctc.model import CtcModelConfig, build

    return build(from_dict(CtcModelConfig, dict(config)))


def _build_wav2vec2(config: Mapping[str, Any]) -> nn.Module:
    from speechlab.ssl.wav2vec2.config import Wav2Vec2Config
    from speechlab.ssl.wav2vec2.model import build_from_config

    return build_from_config(from_dict(Wav2Vec2Config, dict(config)))


def _build_wav2vec2_ctc(config: Mapping[str, Any]) -> nn.Module:
    from speechlab.ssl.wav2vec2.model import CtcConfig, build_ctc

    return build_ctc(from_dict(CtcConfig, dict(config)))


def _build_tts(config: Mapping[str, Any]) -> nn.Module:
    from speechlab.tts.model import AcousticModelConfig, build_from_config

    return build_from_config(from_dict(AcousticModelConfig, dict(config)))


def _build_toy(config: Mapping[str, Any]) -> nn.Module:
    from speechlab.testing.toy_task import ToyConfig, build_model

    return build_model(from_dict(ToyConfig, dict(config)))


# family -> builder from the family's config as a plain dict. Each model family adds its line.
FAMILIES: dict[str, Callable[[Mapping[str, Any]], nn.Module]] = {
    "rnnt": _build_rnnt,
    "ctc": _build_ctc,
    "wav2vec2": _build_wav2vec2, "wav2vec2_ctc": _build_wav2vec2_ctc,
    "tts": _build_tts,
    "toy": _build_toy,  # the trainer's and the experiment layer's test model
}


@dataclass(frozen=True)
class ModelCard:
    """What rebuilds a model: its ``family`` (a key of :data:`FAMILIES`) and the config that
    built it, as a plain dict (``speechlab.config.to_dict`` of the family's config dataclass)."""

    family: str
    config: dict[str, Any]

    @classmethod
    def of(cls, family: str, config: Any) -> ModelCard:
        return cls(family, to_dict(config))

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "config": self.config}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: object = "checkpoint") -> ModelCard:
        if not isinstance(d, Mapping) or not isinstance(d.get("family"), str) \
                or not isinstance(d.get("config"), Mapping):
            raise DataError(f"{source}: model_config is not {{'family': str, 'config': dict}}")
        return cls(d["family"], dict(d["config"]))

    def build(self) -> nn.Module:
        builder = FAMILIES.get(self.family)
        if builder is None:
            raise DataError(f"unknown model family {self.family!r}; known: {sorted(FAMILIES)}")
        return builder(self.config)


def read_card(checkpoint: str | Path) -> ModelCard:
    """The :class:`ModelCard` stored in ``checkpoint``."""
    ckpt = load_checkpoint(checkpoint)
    if "model_config" not in ckpt:
        raise DataError(f"checkpoint {checkpoint} does not say which model it holds (no "
                        "model_config): it was written without one, so it cannot be rebuilt "
                        "on its own")
    return ModelCard.from_dict(ckpt["model_config"], checkpoint)


def load_trained(run_dir: str | Path) -> nn.Module:
    """Rebuild the model trained in ``run_dir`` and load its weights (best, else latest), in
    ``eval()`` mode."""
    path = best_or_latest(run_dir)
    model = read_card(path).build()
    load_model_weights(model, path)
    return model.eval()
