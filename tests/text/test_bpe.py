"""Sentencepiece BPE wrapper: blank at 0, round trip, unknown characters, save/load."""

from __future__ import annotations

import pytest

from speechlab.errors import DataError
from speechlab.text.bpe import BpeTokenizer
from speechlab.text.graphemes import BLANK

SENTS = ["the cat sat on the mat", "the dog sat on the log", "a cat and a dog", "that is that"] * 5


def test_train_round_trip(tmp_path):
    tok = BpeTokenizer.train(SENTS, tmp_path / "bpe", "en", vocab_size=40)
    assert tok.symbols[0] == BLANK and tok.blank_id == 0 and len(tok) <= 40
    for s in SENTS[:4] + ["The Cat, the Log!"]:
        ids = tok.encode(s)
        assert ids and 0 not in ids
        assert tok.decode(ids) == s.lower().replace(",", "").replace("!", "")
    assert tok.decode([0] + tok.encode("cat") + [0]) == "cat"
    # Merges happened: a frequent word is shorter in pieces than in letters.
    assert len(tok.encode("the")) < 3

    back = BpeTokenizer.load(tmp_path / "bpe")
    assert back.symbols == tok.symbols and back.encode("the dog") == tok.encode("the dog")


def test_unknown_character(tmp_path):
    tok = BpeTokenizer.train(SENTS, tmp_path / "bpe", "en", vocab_size=40)
    with pytest.raises(DataError, match=r"\['z'\].*utt-3"):
        tok.encode("the catz", utt="utt-3")


def test_load_errors(tmp_path):
    with pytest.raises(DataError, match="lacks"):
        BpeTokenizer.load(tmp_path)
