"""The reproductions speechlab has, by the name the CLI uses.

A new paper plugs in with one line here: a function returning its
:class:`~speechlab.experiment.reproduction.Reproduction` (imported on use, so that one paper's
heavy imports do not slow the others' commands).
"""

from __future__ import annotations

from collections.abc import Callable

from speechlab.errors import ConfigError
from speechlab.experiment.reproduction import Reproduction


def _multisoftmax() -> Reproduction:
    from speechlab.asr.rnnt.reproduce import MultiSoftmax

    return MultiSoftmax()


def _topologies() -> Reproduction:
    from speechlab.asr.ctc.reproduce import Topologies

    return Topologies()


def _local_attention() -> Reproduction:
    from speechlab.ssl.wav2vec2.reproduce import LocalAttention

    return LocalAttention()


def _salad() -> Reproduction:
    from speechlab.tts.reproduce import SaladReproduction

    return SaladReproduction()


PAPERS: dict[str, Callable[[], Reproduction]] = {
    "multisoftmax": _multisoftmax,
    "topologies": _topologies,
    "local-attention": _local_attention,
    "salad": _salad,
}


def get_paper(name: str) -> Reproduction:
    try:
        return PAPERS[name]()
    except KeyError:
        raise ConfigError(f"unknown paper {name!r}; papers: {', '.join(PAPERS)}") from None
