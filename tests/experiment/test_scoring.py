"""Shared scoring and tables on planted hypotheses: the numbers are worked out by hand."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from speechlab.experiment.scoring import (curves_from_logs, error_rate_table, merge, score,
                                          training_table, write_hyps)


@dataclass(frozen=True)
class U:
    id: str
    language: str
    text: str


UTTS = [U("en1", "en", "a b c d"), U("en2", "en", "e f"), U("hi1", "hi", "क ख")]
# en1: one substitution (1 of 4 words; chars "abcd" -> "abxd": 1 of 4)
# en2: perfect; hi1: "ख" deleted (1 of 2 words; 1 of 2 characters)
HYPS_A = {"en1": "a b x d", "en2": "e f", "hi1": "क"}
HYPS_B = {"en1": "a b c d", "en2": "e f", "hi1": "क ख"}


def test_per_language_rates_and_weighted_averages():
    a = score(UTTS, HYPS_A)
    assert a.words["en"].wer == pytest.approx(1 / 6) and a.words["hi"].wer == pytest.approx(1 / 2)
    # word-weighted: 2 errors over 8 reference words (not the mean of 1/6 and 1/2)
    assert a.average() == pytest.approx(2 / 8)
    # character-weighted: en 1 of 6 characters, hi 1 of 2, pooled 2 of 8
    assert a.chars["en"].wer == pytest.approx(1 / 6)
    assert a.average("chars") == pytest.approx(2 / 8)
    # a missing hypothesis is an empty one: every reference word deleted
    assert score(UTTS, {"en1": "a b c d", "en2": "e f"}).words["hi"].wer == 1.0


def test_error_rate_tables_report_the_reduction_against_the_first_row():
    a, b = score(UTTS, HYPS_A), score(UTTS, {**HYPS_A, "en1": "a b c d"})
    t = error_rate_table("t", "caption", [("A", a), ("B", b)], ["en", "hi", "ta"],
                         column_names={"en": "En-IN"})
    assert t.columns == ["System", "En-IN", "hi", "ta", "Avg.", "WERR", "WERR 95% CI"]
    assert t.rows[0] == ["A", pytest.approx(100 / 6), 50.0, None, 25.0, 0.0, None]
    # B fixes en1: 1 error of 8 words, half of A's: WERR 50%. Resampling the three utterances,
    # a replicate has 0% (en1 not drawn) up to 100% (only en1 drawn): the interval spans it.
    assert t.rows[1][:6] == ["B", 0.0, 50.0, None, 12.5, pytest.approx(50.0)]
    assert t.rows[1][6] == "[+0.0, +100.0]"
    c = error_rate_table("c", "caption", [("A", a), ("B", b)], ["en", "hi"], unit="chars", ci=False)
    assert c.columns[-1] == "CERR"
    assert c.rows[1][-1] == pytest.approx(50.0)


def test_merge_joins_per_language_systems_and_refuses_overlap():
    en = score(UTTS[:2], HYPS_A, seconds=1.0)
    hi = score(UTTS[2:], HYPS_A, seconds=2.0)
    both = merge([en, hi])
    assert both.average() == pytest.approx(score(UTTS, HYPS_A).average())
    assert both.seconds == 3.0
    with pytest.raises(ValueError, match="scored twice"):
        merge([en, en])


def test_hypothesis_files_list_every_utterance_in_order(tmp_path):
    write_hyps(tmp_path, UTTS, {"a": score(UTTS, HYPS_A), "b": score(UTTS, HYPS_B)})
    assert (tmp_path / "ref.txt").read_text().splitlines() == ["en1 a b c d", "en2 e f", "hi1 क ख"]
    assert (tmp_path / "a.txt").read_text().splitlines()[2] == "hi1 क"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["a"]["hi"]["errors"] == 1 and summary["b"]["en"]["errors"] == 0


def _log(path, records):
    path.mkdir(parents=True)
    (path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_training_table_and_curves_from_planted_logs(tmp_path):
    _log(tmp_path / "m1", [
        {"kind": "train", "step": 10, "loss": 5.0, "time": 60.0},
        {"kind": "valid", "step": 10, "loss": 4.0, "loss_en": 3.0},
        {"kind": "train", "step": 20, "loss": 3.0, "time": 150.0},
        {"kind": "valid", "step": 20, "loss": 4.5, "loss_en": 2.0},
    ])
    _log(tmp_path / "m2", [{"kind": "train", "step": 5, "loss": 1.0, "time": 6.0}])  # never validated
    t = training_table(tmp_path, ["m1", "m2", "missing"], caption="c")
    assert t.rows == [["m1", 20, 4.0, 10, 2.5]]
    xs, ys = curves_from_logs(tmp_path, {"en": ("m1", "loss_en"), "hi": ("m1", "loss_hi"),
                                         "m2": ("m2", "loss")}, scale=10.0)
    assert xs == {"en": [10, 20]} and ys == {"en": [30.0, 20.0]}
