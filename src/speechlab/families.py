"""The registry of model families: each family declared once, in :data:`FAMILIES`.

A :class:`Family` says everything the layers above the families need of one: the name its
cards and checkpoints carry, its kind (:mod:`speechlab.contract`), how messages name it, the
class that loads its packages and run directories (``from_package`` / ``from_run``, which
implements the contract), the module whose ``BUILDERS`` rebuild its network from a card's
config, the module that adds its commands to the CLI, and, where it reads models made by other
toolkits, the function that opens them. The CLI (its commands), :func:`speechlab.load` (which
class reads a package or a run), ``export`` and ``serve`` (through the contract) read this
registry and nothing else; a new family is its own code plus one entry here.

References are ``"module:attribute"`` strings imported on use, as plugin entry points are, so
that listing the families imports none of them and one family's imports do not slow every
command.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from speechlab.errors import DataError
from speechlab.train.card import Builder
from speechlab.train.card import load_trained as _load_trained


@dataclass(frozen=True)
class Family:
    """One model family.

    ``name``: the family its cards and checkpoints carry; ``kind``: ``asr``, ``tts`` or
    ``ssl``; ``title``: how a message names one of its models; ``runtime``: the class with
    ``from_package(path, card, network)`` and ``from_run(model_dir)``; ``builders``: the module
    whose ``BUILDERS`` rebuild its network from a config dict; ``commands``: the module whose
    ``add_commands(subparsers)`` adds its commands (None: none of its own); ``opens``: a
    function taking a path in another toolkit's format and giving the loaded model, or None
    when the path is not of that format.
    """

    name: str
    kind: str
    title: str
    runtime: str
    builders: str
    commands: str | None = None
    opens: str | None = None

    def runtime_class(self) -> Any:
        return resolve(self.runtime)


FAMILIES: tuple[Family, ...] = (
    Family("rnnt", "asr", "a multi-softmax RNN-T",
           "speechlab.asr.rnnt.recognizer:RnntRecognizer", "speechlab.asr.rnnt.model",
           commands="speechlab.asr.rnnt.commands"),
    Family("ctc", "asr", "a CTC-topology model",
           "speechlab.asr.ctc.recognizer:CtcRecognizer", "speechlab.asr.ctc.model",
           commands="speechlab.asr.ctc.commands"),
    Family("wav2vec2_ctc", "asr", "a wav2vec 2.0 CTC model",
           "speechlab.ssl.wav2vec2.recognizer:Wav2Vec2Recognizer", "speechlab.ssl.wav2vec2.model",
           commands="speechlab.ssl.wav2vec2.commands",
           opens="speechlab.ssl.wav2vec2.external:open_foreign"),
    Family("wav2vec2", "ssl", "a wav2vec 2.0 encoder",
           "speechlab.ssl.wav2vec2.recognizer:Wav2Vec2Encoder", "speechlab.ssl.wav2vec2.model"),
    Family("tts", "tts", "a TTS acoustic model",
           "speechlab.tts.synthesis:Synthesizer", "speechlab.tts.model",
           commands="speechlab.tts.commands"),
)


def resolve(reference: str) -> Any:
    """The object a ``"module:attribute"`` reference names (imported now)."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def family(name: str, source: object = "the model") -> Family:
    """The registered family called ``name``; DataError naming the known ones otherwise."""
    for f in FAMILIES:
        if f.name == name:
            return f
    raise DataError(f"{source}: a model of family {name!r}, which this speechlab does not know "
                    f"(it knows {', '.join(f.name for f in FAMILIES)})")


def command_modules() -> tuple[str, ...]:
    """The modules that add each family's commands, in registry order, once each."""
    return tuple(dict.fromkeys(f.commands for f in FAMILIES if f.commands))


def openers() -> list[Any]:
    """The functions that open other toolkits' models (``Family.opens``)."""
    return [resolve(f.opens) for f in FAMILIES if f.opens]


def builders() -> dict[str, Builder]:
    """family name -> builder from the family's config dict, for every family."""
    out: dict[str, Builder] = {}
    for module in dict.fromkeys(f.builders for f in FAMILIES):
        out.update(resolve(f"{module}:BUILDERS"))
    return out


def load_trained(path: str | Path) -> nn.Module:
    """Any model speechlab trained, from its model directory or checkpoint, in eval mode."""
    return _load_trained(path, builders())
