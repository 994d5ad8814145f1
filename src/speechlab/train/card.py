"""What a trained model is: its card in every checkpoint, the checkpoint that counts, and the
model rebuilt from them.

Every checkpoint the trainer writes carries ``model_config``, a :class:`ModelCard` as a plain
dict: the model family and the config dataclass that built the model. So a trained model
rebuilds from its directory alone (:func:`load_trained`), whatever its sizes, with no side
file and no knowledge of the experiment that trained it. Each model family says how it is
built (its ``BUILDERS``: family name -> builder from the config dict); this module knows no
family.

The checkpoint that counts is ``best.pt`` (the best validation) if there is one, else the
newest periodic checkpoint (:func:`best_or_latest`): the one rule every consumer (decoding,
fine-tuning, reports, export) follows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from speechlab.config import to_dict
from speechlab.errors import DataError
from speechlab.train.checkpoint import (
    BEST_NAME,
    latest_checkpoint,
    load_checkpoint,
    load_model_weights,
)

#: A model family's builder: its config (``speechlab.config.to_dict`` of the family's config
#: dataclass) -> the untrained model.
Builder = Callable[[Mapping[str, Any]], nn.Module]


@dataclass(frozen=True)
class ModelCard:
    """What rebuilds a model: its ``family`` and the config that built it, as a plain dict."""

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

    def build(self, builders: Mapping[str, Builder], source: object = "checkpoint") -> nn.Module:
        """The untrained model, by this card's family's entry in ``builders``."""
        builder = builders.get(self.family)
        if builder is None:
            raise DataError(f"{source}: holds a {self.family!r} model; expected "
                            f"{' or '.join(repr(f) for f in builders)}")
        return builder(self.config)


def config_builder(config_class: type, build: Callable[[Any], nn.Module]) -> Builder:
    """A family's builder: the card's config dict -> ``config_class`` -> ``build(config)``."""
    from speechlab.config import from_dict

    return lambda config: build(from_dict(config_class, dict(config)))


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


def read_card(checkpoint: str | Path) -> ModelCard:
    """The :class:`ModelCard` stored in ``checkpoint``."""
    ckpt = load_checkpoint(checkpoint, mmap=True)  # the card only: no tensor is read
    if "model_config" not in ckpt:
        raise DataError(f"checkpoint {checkpoint} does not say which model it holds (no "
                        "model_config): it was written without one, so it cannot be rebuilt "
                        "on its own")
    return ModelCard.from_dict(ckpt["model_config"], checkpoint)


def checkpoint_of(path: str | Path) -> Path:
    """The checkpoint a path names: the file itself, or the one that counts in a directory."""
    path = Path(path)
    return path if path.is_file() else best_or_latest(path)


def load_trained(path: str | Path, builders: Mapping[str, Builder]) -> nn.Module:
    """Rebuild the model trained in ``path`` (a model directory: best, else latest checkpoint;
    or one checkpoint file) with its family's builder from ``builders`` and load its weights,
    in ``eval()`` mode. A checkpoint of a family not in ``builders`` is refused, naming both."""
    ckpt = checkpoint_of(path)
    model = read_card(ckpt).build(builders, ckpt)
    load_model_weights(model, ckpt)
    return model.eval()


#: The side file of a trained model directory that keeps decoding settings chosen on dev
#: (an acoustic weight, an LM weight), so the model decodes later as its run decoded it.
DECODING_NAME = "decoding.json"


def write_decoding(model_dir: str | Path, **settings: Any) -> None:
    from speechlab.files import atomic_write_json

    atomic_write_json(Path(model_dir) / DECODING_NAME, settings)


def read_decoding(model_dir: str | Path) -> dict[str, Any]:
    """The settings :func:`write_decoding` kept for ``model_dir`` (empty if none)."""
    from speechlab.files import read_json

    path = Path(model_dir) / DECODING_NAME
    if not path.is_file():
        return {}
    settings = read_json(path, "decoding settings file")
    if not isinstance(settings, dict):
        raise DataError(f"{path}: expected a JSON object of decoding settings")
    return settings
