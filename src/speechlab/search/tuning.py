"""Choosing a decoder's weight on a development set: :func:`pick_on_dev`.

Every paper tunes one decoding weight the same way (the LM weight of a beam search, the
acoustic weight of a Viterbi decoder): decode the dev set once per candidate, score it, keep
the candidate with the lowest error. Ties go to the candidate listed first, so a recipe that
lists its default first keeps it when the others are no better.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

from speechlab.errors import ConfigError

V = TypeVar("V", bound=Hashable)


def pick_on_dev(values: Iterable[V], error_of: Callable[[V], float]) -> tuple[V, dict[V, float]]:
    """The value of ``values`` whose ``error_of(value)`` (e.g. the dev WER of a decoding with
    that weight; lower is better) is lowest, the first of equal ones, and every value's error
    in the order given."""
    errors = {v: float(error_of(v)) for v in values}
    if not errors:
        raise ConfigError("pick_on_dev: give at least one candidate value")
    best = min(errors, key=errors.__getitem__)  # min keeps the first of equal errors
    return best, errors
