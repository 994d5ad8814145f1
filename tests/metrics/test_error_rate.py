"""WER/CER against an independent edit-distance DP and jiwer; pooling; the paper's averages."""

from __future__ import annotations

import jiwer
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.errors import DataError
from speechlab.metrics import ErrorRate, align_words, cer, wer, werr, word_weighted_average


def levenshtein(ref: list[str], hyp: list[str]) -> int:
    """Plain O(len(ref) * len(hyp)) edit distance, written independently of kaldialign."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


# A small vocabulary makes matches, substitutions and ties between alignments all common.
words = st.lists(st.sampled_from(["a", "b", "c", "dd", "é", "नम"]), max_size=8)
pairs = st.lists(st.tuples(words, words), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(pairs)
def test_wer_matches_reference_dp(batch):
    refs = [" ".join(r) for r, _ in batch]
    hyps = [" ".join(h) for _, h in batch]
    res = wer(refs, hyps)
    expected = [levenshtein(r, h) for r, h in batch]
    assert [u.errors for u in res.per_utterance] == expected
    assert res.errors == sum(expected)
    assert res.ref_words == sum(len(r) for r, _ in batch)
    assert res.hyp_words == sum(len(h) for _, h in batch)
    assert res.sentences == len(batch)
    assert res.sentence_errors == sum(e > 0 for e in expected)
    for u, (r, h) in zip(res.per_utterance, batch):
        # S/D/I of any minimum alignment obey these identities, whichever tie was taken.
        assert u.ref_len - u.deletions + u.insertions == len(h)
        assert u.substitutions + u.deletions <= len(r)
    if res.ref_words:
        assert res.wer == pytest.approx(sum(expected) / res.ref_words)
    else:
        with pytest.raises(DataError):
            _ = res.wer


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.tuples(words.filter(bool), words), min_size=1, max_size=6))
def test_wer_matches_jiwer(batch):
    refs = [" ".join(r) for r, _ in batch]
    hyps = [" ".join(h) for _, h in batch]
    ours = wer(refs, hyps)
    theirs = jiwer.process_words(refs, hyps)
    assert ours.errors == theirs.substitutions + theirs.deletions + theirs.insertions
    assert ours.wer == pytest.approx(theirs.wer)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.tuples(words.filter(bool), words), min_size=1, max_size=6))
def test_cer_with_spaces_matches_jiwer(batch):
    refs = [" ".join(r) for r, _ in batch]
    hyps = [" ".join(h) for _, h in batch]
    assert cer(refs, hyps, spaces=True).wer == pytest.approx(jiwer.cer(refs, hyps))


def test_planted_substitution_deletion_insertion():
    res = wer(["the cat sat on the mat", "a b", "x"], ["the cat sit on mat", "a b c d", "x"],
              ids=["u1", "u2", "u3"])
    u1, u2, u3 = res.per_utterance
    assert (u1.utt_id, u1.substitutions, u1.deletions, u1.insertions) == ("u1", 1, 1, 0)
    assert (u2.substitutions, u2.deletions, u2.insertions) == (0, 0, 2)
    assert u3.errors == 0
    assert (res.substitutions, res.deletions, res.insertions) == (1, 1, 2)
    assert (res.ref_words, res.hyp_words, res.sentences, res.sentence_errors) == (9, 10, 3, 2)
    assert res.wer == pytest.approx(4 / 9)
    assert str(res) == "%WER 44.44 [ 4 / 9, 2 ins, 1 del, 1 sub ]"


def test_whitespace_is_only_a_separator():
    assert wer(["  a\tb \n c "], ["a b c"]).errors == 0


def test_cer_spaces_dropped_by_default():
    # "ab c" vs "abc": the only difference is the space, which counts only with spaces=True.
    assert cer(["ab c"], ["abc"]).errors == 0
    with_spaces = cer(["ab c"], ["abc"], spaces=True)
    assert (with_spaces.deletions, with_spaces.ref_words) == (1, 4)
    # Code points: the Devanagari vowel sign is its own symbol.
    res = cer(["नमस्ते"], ["नमस्त"])
    assert (res.ref_words, res.deletions, res.unit) == (6, 1, "char")


def test_empty_references():
    res = wer(["", "a b"], ["x y", "a b"])
    assert res.per_utterance[0].insertions == 2 and res.wer == pytest.approx(1.0)
    all_empty = wer(["", ""], ["x", ""])
    assert all_empty.insertions == 1 and all_empty.sentence_errors == 1
    with pytest.raises(DataError, match="empty"):
        _ = all_empty.wer
    assert all_empty.to_dict()["wer"] is None
    assert "undefined" in str(all_empty)


def test_pooling_with_plus():
    a = wer(["a b c", "d"], ["a x c", ""], ids=["1", "2"])
    b = wer(["e f"], ["e f g"], ids=["3"])
    both = wer(["a b c", "d", "e f"], ["a x c", "", "e f g"], ids=["1", "2", "3"])
    assert a + b == both
    assert (a + b).per_utterance == both.per_utterance
    assert sum([a, b]) == both
    assert a + ErrorRate.empty() == a
    with pytest.raises(ValueError, match="pool"):
        _ = a + cer(["ab"], ["ab"])


def test_inconsistent_counts_rejected():
    with pytest.raises(ValueError, match="hyp_words"):
        ErrorRate(1, 0, 0, 5, 4, 1, 1)
    with pytest.raises(ValueError):
        ErrorRate(0, 0, 0, 0, 0, 1, 2)


def test_bad_inputs():
    with pytest.raises(TypeError, match="list"):
        wer("a b", "a b")
    with pytest.raises(DataError, match="2 references but 1"):
        wer(["a", "b"], ["a"])
    with pytest.raises(DataError, match="u7"):
        wer(["a"], [None], ids=["u7"])


@settings(max_examples=100, deadline=None, derandomize=True)
@given(words, words)
def test_align_words_is_a_minimum_alignment(r, h):
    ali = align_words(" ".join(r), " ".join(h))
    assert [a for a, _ in ali if a is not None] == r
    assert [b for _, b in ali if b is not None] == h
    assert sum(a != b for a, b in ali) == levenshtein(r, h)


# Tables 2-4 of the multi-softmax paper: WER[%] for En-IN, Hi-IN, Ta-IN, Gu-IN, then the
# word-weighted Avg. and the WERR column (baseline: first row of each table).
PAPER_TABLES = {
    "table2": [
        ("Monolingual", [24.67, 16.2, 32.92, 27.33], 23.97, 0.0),
        ("Multilingual Vanilla", [35.21, 22.94, 48.56, 28.83], 32.45, -35.35),
        ("Multilingual Onehot", [25.88, 18.88, 41.92, 27.9], 26.7, -11.37),
        ("Multi-softmax", [23.35, 17.2, 31.18, 23.86], 22.86, 4.65),
        ("Multi-softmax LSP", [23.46, 16.84, 30.3, 24.28], 22.73, 5.17),
    ],
    "table3": [
        ("Monolingual", [24.67, 16.2, 32.92, 27.33], 23.97, 0.0),
        ("Onehot finetuning", [23.65, 16.64, 31.36, 26.01], 23.24, 3.05),
        ("Multi-softmax finetuning", [21.93, 15, 28.45, 22.66], 21.04, 12.22),
    ],
    "table4": [
        ("Multilingual Vanilla", [35.21, 22.94, 48.56, 28.83], 32.45, 0.0),
        ("Multi-softmax LID", [28.92, 20.26, 35.83, 31.55], 27.95, 13.86),
        ("Multi-softmax LID Oracle", [25, 18.71, 33, 25.30], 24.45, 24.65),
    ],
}


def test_word_weighted_average_reproduces_paper_averages():
    rows = [r for table in PAPER_TABLES.values() for r in table]
    per_lang = np.array([r[1] for r in rows])
    avg = np.array([r[2] for r in rows])
    # The paper does not give word counts; the share of test words per language is the one
    # unknown shared by all nine rows, so recover it by least squares (shares sum to 1).
    a = np.vstack([per_lang, 100 * np.ones(4)])
    b = np.append(avg, 100.0)
    share = np.linalg.lstsq(a, b, rcond=None)[0]
    words_per_lang = np.round(share * 1_000_000).astype(int)
    langs = ["En-IN", "Hi-IN", "Ta-IN", "Gu-IN"]
    for name, wers, paper_avg, _ in rows:
        results = {}
        for lang, n, w in zip(langs, words_per_lang, wers):
            errors = round(w / 100 * n)
            results[lang] = ErrorRate(errors, 0, 0, int(n), int(n), 1, 1)
        # Every row's average is reproduced to the paper's rounding...
        assert 100 * word_weighted_average(results) == pytest.approx(paper_avg, abs=0.01), name
    # ...which the unweighted mean of the four rates does not do.
    assert np.mean(rows[0][1]) == pytest.approx(25.28, abs=0.01)
    # Planted: 5 errors in 10 words and none in 90 words pool to 5 %, not a mean of 25 %.
    small = wer(["a b c d e f g h i j"], ["a b c d e v w x y z"])
    big = wer([" ".join(["w"] * 90)], [" ".join(["w"] * 90)])
    assert word_weighted_average({"small": small, "big": big}) == pytest.approx(0.05)
    with pytest.raises(DataError):
        word_weighted_average({})


@pytest.mark.parametrize("table", sorted(PAPER_TABLES))
def test_werr_matches_paper(table):
    rows = PAPER_TABLES[table]
    baseline = rows[0][2]
    for name, _, avg, paper_werr in rows:
        # The paper computed WERR from unrounded averages; two-decimal inputs agree to 0.05.
        assert werr(baseline, avg) == pytest.approx(paper_werr, abs=0.05), name
    assert werr(0.2397, 0.2286) == pytest.approx(werr(23.97, 22.86))
    with pytest.raises(DataError):
        werr(0.0, 1.0)


# ---------------------------------------------------------------------------------------------
# Unicode normalisation: one text, several code-point spellings.

import unicodedata  # noqa: E402

# (text as typed in one spelling, the same text in another), Latin and Indic scripts.
SPELLINGS = [
    ("café résumé", unicodedata.normalize("NFD", "café résumé")),  # é vs e + U+0301
    ("\u0958\u093e\u0917\u091c\u093c", "\u0915\u093c\u093e\u0917\u091c\u093c"),  # Hindi क़ U+0958 vs क + nukta
    ("\u0b95\u0bca\u0b9f\u0bc1", "\u0b95\u0bc6\u0bbe\u0b9f\u0bc1"),  # Tamil கொ: U+0BCA vs U+0BC6 U+0BBE
    ("\u0ab8\u0ac1\u0a82\u0aa6\u0ab0 \u0baa\u0bca", "\u0ab8\u0ac1\u0a82\u0aa6\u0ab0 \u0baa\u0bc6\u0bbe"),
]


@pytest.mark.parametrize("ref, hyp", SPELLINGS)
def test_nfc_and_nfd_spellings_score_as_equal_by_default(ref, hyp):
    assert ref != hyp
    assert wer([ref], [hyp]).errors == 0
    assert cer([ref], [hyp]).errors == 0 and cer([ref], [hyp], spaces=True).errors == 0
    assert all(r == h for r, h in align_words(ref, hyp))
    # Turned off, the code points are compared as given.
    assert wer([ref], [hyp], normalization=None).errors > 0
    assert cer([ref], [hyp], normalization=None).errors > 0


def test_unknown_normalization_is_refused():
    with pytest.raises(ValueError, match="normalization must be one of"):
        wer(["a"], ["a"], normalization="NFX")


# --- pool_runs: repeats (seeds) of one system on the same utterances ---------------------------

def test_pooled_runs_sum_each_utterance_and_average_the_rate_by_words():
    from speechlab.metrics import paired_bootstrap, pool_runs

    refs, ids = ["a b c d", "e f"], ["u1", "u2"]
    runs = [wer(refs, ["a b c d", "e"], ids=ids),        # 1 error on u2
            wer(refs, ["a x c", "e f g"], ids=ids),       # 2 on u1, 1 on u2
            wer(refs, ["a b c d", "e f"], ids=ids)]       # none
    pooled = pool_runs(runs)
    assert [(u.utt_id, u.ref_len, u.errors) for u in pooled.per_utterance] == [
        ("u1", 12, 2), ("u2", 6, 2)]
    assert pooled.ref_words == 18 and pooled.errors == 4
    assert pooled.wer == pytest.approx(sum(r.errors for r in runs) / sum(r.ref_words for r in runs))
    assert pooled.sentences == 2 and pooled.sentence_errors == 2
    assert pool_runs(runs[:1]) == runs[0]  # one run is itself
    # paired against a pooled baseline, utterance by utterance
    base = pool_runs([wer(refs, ["x", "x"], ids=ids)] * 3)
    pb = paired_bootstrap(base, pooled, num_resamples=200)
    assert pb.delta == pytest.approx(pooled.wer - base.wer) and pb.prob_improvement == 1.0


def test_pooling_runs_of_other_utterances_or_references_is_refused():
    from speechlab.errors import DataError
    from speechlab.metrics import pool_runs

    a = wer(["a b", "c"], ["a b", "c"], ids=["u1", "u2"])
    with pytest.raises(DataError, match="run 1 does not list the same named utterances"):
        pool_runs([a, wer(["c", "a b"], ["c", "a b"], ids=["u2", "u1"])])
    with pytest.raises(DataError, match="utterance u2: 1 reference words in run 0 but 2"):
        pool_runs([a, wer(["a b", "c d"], ["a b", "c"], ids=["u1", "u2"])])
    with pytest.raises(DataError, match="run 1 is a char error rate"):
        pool_runs([a, cer(["a b", "c"], ["a b", "c"], ids=["u1", "u2"])])
    with pytest.raises(DataError, match="same named utterances"):
        pool_runs([wer(["a"], ["a"]), wer(["a"], ["a"])])  # no ids
    with pytest.raises(DataError, match="at least one"):
        pool_runs([])
