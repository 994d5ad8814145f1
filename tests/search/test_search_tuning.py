"""Choosing a decoding weight on dev: the lowest error wins, ties go to the first listed."""

from __future__ import annotations

import pytest

from speechlab.errors import ConfigError
from speechlab.search.tuning import pick_on_dev


def test_the_lowest_dev_error_wins_and_every_error_is_kept_in_order():
    errors = {0.3: 0.40, 0.6: 0.25, 1.0: 0.31}
    best, seen = pick_on_dev([0.3, 0.6, 1.0], errors.__getitem__)
    assert best == 0.6
    assert list(seen.items()) == list(errors.items())


def test_a_tie_keeps_the_first_listed_and_each_value_is_scored_once():
    calls = []

    def error_of(v):
        calls.append(v)
        return {2: 0.1, 1: 0.1, 3: 0.5}[v]

    best, _ = pick_on_dev(iter([3, 2, 1]), error_of)
    assert best == 2 and calls == [3, 2, 1]


def test_no_candidate_is_refused():
    with pytest.raises(ConfigError, match="at least one candidate"):
        pick_on_dev([], lambda v: 0.0)
