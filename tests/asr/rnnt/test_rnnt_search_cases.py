"""The batched search gives the hypotheses the search before it gave (recorded in
``search_cases.json`` by ``python -m speechlab.testing.rnnt_search_cases``): every variant,
the LSTM and Transformer encoders, greedy and beam, with the language given and LID-free with
and without early stopping, on held-out audio of the tiny corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speechlab.testing.corpus import tiny_corpus
from speechlab.testing.rnnt_search_cases import hypotheses

pytestmark = [pytest.mark.needs_espeak]

RECORDED = json.loads((Path(__file__).parent / "search_cases.json").read_text())


@pytest.fixture(scope="module")
def now(tmp_path_factory):
    return hypotheses(tiny_corpus(tmp_path_factory.mktemp("corpus")))


def test_every_case_decodes_as_recorded(now):
    assert sorted(now) == sorted(RECORDED)
    for case, by_utt in RECORDED.items():
        for uid, old in by_utt.items():
            new = now[case][uid]
            if "lid-free" in case:
                assert new == old, (case, uid)  # language, every decoder's labels, frames run
            else:
                assert new[0] == old[0] and new[2] == old[2], (case, uid)  # labels, alignment
                assert new[1] == pytest.approx(old[1], rel=1e-5, abs=1e-4), (case, uid)
