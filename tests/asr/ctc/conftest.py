"""A tiny world for the CTC graph and decoder tests: three phones, five words with a prefix
("a" of "ab") and a homophone pair ("b", "c"), a trigram LM over them."""

from __future__ import annotations

import pytest

from speechlab.text.lexicon import Lexicon
from speechlab.text.ngram import NgramConfig, estimate

TINY_LEXICON = {"a": [["x"]], "ab": [["x", "y"]], "b": [["y"]], "c": [["y"]],
                "d": [["z", "x"], ["z", "y"]]}
TINY_TEXT = [["a", "b"], ["ab", "c"], ["a", "a", "c"], ["b"], ["d", "a"], ["c", "d", "b"],
             ["ab", "d"]]


@pytest.fixture(scope="session")
def tiny_lexicon() -> Lexicon:
    return Lexicon(TINY_LEXICON)


@pytest.fixture(scope="session")
def tiny_lm():
    return estimate(TINY_TEXT, NgramConfig(order=3, discount=0.6))


@pytest.fixture(scope="session")
def tiny_arpa(tmp_path_factory, tiny_lm):
    path = tmp_path_factory.mktemp("lm") / "tiny.arpa"
    tiny_lm.write(path)
    return path
