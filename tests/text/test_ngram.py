"""Kneser-Ney estimation against hand-computed values, normalization as a property, ARPA
reading with one error per malformed case, each naming its line."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.errors import ConfigError, DataError
from speechlab.text.ngram import (
    ArpaLM,
    NgramConfig,
    discounts,
    estimate,
    lm_training_sentences,
    read_arpa,
)

# Corpus "a b" / "b", padded <s> a b </s> / <s> b </s>, plain KN with D = 0.5 (worked by hand):
#   unigram continuation counts a=1 (<s>_), b=2 (a_, <s>_), </s>=1 (b_), total 4; gamma() =
#   0.5*3/4; p(w) = (a(w)-0.5)/4 + gamma()/3 -> p(a)=1/4, p(b)=1/2, p(</s>)=1/4;
#   bigram <s>: a=1, b=1, gamma=0.5 -> p(a|<s>) = 0.25+0.5*0.25, p(b|<s>) = 0.25+0.5*0.5,
#   p(</s>|<s>) = 0.5*0.25; bigram a: b=1, gamma=0.5 -> p(b|a) = 0.5+0.5*0.5; bigram b:
#   </s>=2, gamma=0.25 -> p(</s>|b) = 1.5/2+0.25*0.25, p(a|b) = 0.25*0.25.
CORPUS = [["a", "b"], ["b"]]
BIGRAM = {
    ("a", ()): 0.25, ("b", ()): 0.5, ("</s>", ()): 0.25,
    ("a", ("<s>",)): 0.375, ("b", ("<s>",)): 0.5, ("</s>", ("<s>",)): 0.125,
    ("b", ("a",)): 0.75, ("a", ("a",)): 0.125, ("</s>", ("a",)): 0.125,
    ("</s>", ("b",)): 0.8125, ("a", ("b",)): 0.0625, ("b", ("b",)): 0.125,
}
# Trigram on the same corpus: bigram "a b" gets continuation count 1, "b </s>" 2, so the
# bigram level is as above; trigram histories have one continuation each (gamma = 0.5):
TRIGRAM = {
    ("b", ("<s>", "a")): 0.5 + 0.5 * 0.75,
    ("</s>", ("a", "b")): 0.5 + 0.5 * 0.8125,
    ("</s>", ("<s>", "b")): 0.5 + 0.5 * 0.8125,
    ("a", ("<s>", "b")): 0.5 * 0.0625,
    ("a", ("a", "b")): 0.5 * 0.0625,
}


@pytest.mark.parametrize("order,expected", [(2, BIGRAM), (3, {**BIGRAM, **TRIGRAM})])
def test_plain_kneser_ney_matches_hand_computation(order, expected):
    lm = estimate(CORPUS, NgramConfig(order=order, discount=0.5))
    for (word, history), p in expected.items():
        assert 10 ** lm.logprob(word, history) == pytest.approx(p, abs=1e-12), (word, history)
    assert lm.logprob("<s>", ()) == -99.0


def test_arpa_lists_backoffs_for_histories_only(tmp_path):
    lm = estimate(CORPUS, NgramConfig(order=2, discount=0.5))
    uni = lm.ngrams[0]
    assert 10 ** uni[("<s>",)][1] == pytest.approx(0.5)  # gamma(<s>)
    assert 10 ** uni[("b",)][1] == pytest.approx(0.25)
    assert uni[("</s>",)][1] is None
    assert all(bow is None for _, bow in lm.ngrams[1].values())
    path = tmp_path / "lm.arpa"
    lm.write(path)
    back = read_arpa(path)
    assert back.vocab == lm.vocab
    for n, grams in enumerate(lm.ngrams):
        for gram, (lp, bow) in grams.items():
            lp2, bow2 = back.ngrams[n][gram]
            assert lp2 == pytest.approx(lp, abs=1e-6)
            assert (bow is None) == (bow2 is None)


def test_modified_discounts_by_hand():
    # Y = 10/20; D1 = 1 - 2*.5*5/10, D2 = 2 - 3*.5*3/5, D3+ = 3 - 4*.5*2/3
    assert discounts([10, 5, 3, 2]) == pytest.approx((0.5, 1.1, 3 - 4 / 3))
    assert discounts([10, 5, 3, 2], modified=False) == pytest.approx((0.5,) * 3)
    assert discounts([10, 5, 0, 0]) == pytest.approx((0.5,) * 3)  # t3 = 0: plain KN
    assert discounts([3, 0, 0, 0]) == (0.5, 0.5, 0.5)  # Y undefined
    # D2 = 2 - 3*(1/3)*9/1 < 0 is invalid: plain
    assert discounts([1, 1, 9, 1]) == pytest.approx((1 / 3,) * 3)


def _histories(vocab, order):
    for n in range(order):
        for h in itertools.product(["<s>", *vocab], repeat=n):
            if "<s>" not in h[1:]:
                yield h


@settings(max_examples=25, deadline=None)
@given(sentences=st.lists(st.lists(st.sampled_from("abcd"), max_size=6), min_size=1,
                          max_size=12),
       order=st.integers(1, 4),
       kind=st.sampled_from(["modified", "plain", "fixed"]))
def test_probabilities_sum_to_one_for_every_history(tmp_path_factory, sentences, order, kind):
    cfg = NgramConfig(order, modified=kind == "modified",
                      discount=0.7 if kind == "fixed" else None)
    lm = estimate(sentences, cfg)
    path = tmp_path_factory.mktemp("lm") / "lm.arpa"
    lm.write(path)
    lm = read_arpa(path)  # check what the ARPA file says, through its back-off semantics
    vocab = [w for w in lm.vocab if w != "<s>"]
    words = [w for w in vocab if w != "</s>"]
    for h in _histories(words, order):
        total = sum(10 ** lm.logprob(w, h) for w in vocab)
        assert total == pytest.approx(1.0, abs=1e-5), h


def test_estimate_rejects_reserved_words_and_empty_input():
    with pytest.raises(DataError, match="sentence 1.*'<s>'"):
        estimate([["a"], ["<s>", "a"]])
    with pytest.raises(DataError, match="no LM training sentences"):
        estimate([])
    with pytest.raises(ConfigError):
        NgramConfig(order=0)
    with pytest.raises(ConfigError):
        NgramConfig(discount=1.5)


def test_lm_training_sentences_drop_held_out_sentences():
    sents = ["Open the file.", "Close the file", "open THE file!", "Save it"]
    out = lm_training_sentences(sents, held_out=["open the file"], normalize=str.lower)
    assert out == [["close", "the", "file"], ["save", "it"]]


GOOD = """\\data\\
ngram 1=3
ngram 2=2

\\1-grams:
-99\t<s>\t-0.3
-0.5\ta\t-0.2
-0.4\t</s>

\\2-grams:
-0.2\t<s> a
-0.1\ta </s>

\\end\\
"""


def test_good_arpa_reads_and_backs_off(tmp_path):
    path = tmp_path / "good.arpa"
    path.write_text(GOOD)
    lm = read_arpa(path)
    assert lm.order == 2 and lm.vocab == ["<s>", "a", "</s>"]
    assert lm.logprob("a", ["<s>"]) == pytest.approx(-0.2)
    assert lm.logprob("</s>", ["<s>"]) == pytest.approx(-0.3 - 0.4)  # bow(<s>) + p(</s>)
    assert lm.logprob("zz", []) == -math.inf


def _edit(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


# (case, file text, line named in the error, words in the message)
MALFORMED = [
    ("no header", "ngram 1=3\n" + GOOD, 1, "expected the ARPA header"),
    ("bad ngram line", _edit("ngram 2=2", "ngram 2 = two"), 3, "bad number"),
    ("orders skip", _edit("ngram 2=2", "ngram 3=2"), 3, "expected 'ngram 2"),
    ("count mismatch", _edit("ngram 1=3", "ngram 1=4"), 5, "declares 4 1-grams but the "
                                                         "section has 3"),
    ("too few fields", _edit("-0.1\ta </s>", "-0.1\ta"), 12, "2-gram entry has 2 fields"),
    ("bad probability", _edit("-0.5\ta\t-0.2", "-0.x5\ta\t-0.2"), 7, "'-0.x5' is not a number"),
    ("bad back-off", _edit("-0.5\ta\t-0.2", "-0.5\ta\tnan"), 7, "'nan' is not finite"),
    ("positive log-prob", _edit("-0.2\t<s> a", "0.2\t<s> a"), 11, "> 0"),
    ("back-off on top order", _edit("-0.2\t<s> a", "-0.2\t<s> a\t-0.1"), 11,
     "2-gram entry has 4 fields"),
    ("unknown word", _edit("-0.1\ta </s>", "-0.1\ta b"), 12, "'b' of 2-gram 'a b' is not a "
                                                              "unigram"),
    ("duplicate", _edit("-0.1\ta </s>", "-0.1\t<s> a"), 12, "duplicate 2-gram"),
    ("sections out of order", _edit("\\1-grams:", "\\2-grams:"), 5, "expected section "
                                                                     "'\\\\1-grams:'"),
    ("missing end", GOOD.replace("\\end\\\n", ""), 13, "missing '\\\\end\\\\'"),
    ("text after end", GOOD + "junk\n", 15, "text after"),
]


@pytest.mark.parametrize("case,text,line,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_arpa_names_file_and_line(tmp_path, case, text, line, message):
    path = tmp_path / "bad.arpa"
    path.write_text(text)
    with pytest.raises(DataError, match=message) as err:
        read_arpa(path)
    assert f"{path}:{line}:" in str(err.value)


@pytest.mark.parametrize("case,text,line,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_the_vocabulary_alone_is_checked_as_far_as_it_is_read(tmp_path, case, text, line,
                                                               message):
    """``arpa_vocab`` reads the header and the unigrams (what a graph's word list needs) and
    checks them as ``read_arpa`` does; a fault in a longer n-gram is left to the full read."""
    from speechlab.text.ngram import arpa_vocab

    path = tmp_path / "bad.arpa"
    path.write_text(text)
    bigrams_line = text.splitlines().index("\\2-grams:") + 1 if "\\2-grams:" in text else 0
    if bigrams_line and line > bigrams_line:
        assert arpa_vocab(path) == ["a"]
    else:
        with pytest.raises(DataError, match=message) as err:
            arpa_vocab(path)
        assert f"{path}:{line}:" in str(err.value)


def test_the_vocabulary_reads_only_the_unigrams(tmp_path):
    import gzip

    from speechlab.text.ngram import arpa_vocab

    path = tmp_path / "lm.arpa.gz"
    path.write_bytes(gzip.compress(GOOD.encode(), mtime=0))
    assert arpa_vocab(path) == ["a"]  # <s> and </s> left out
    unigram = tmp_path / "uni.arpa"  # an LM of order 1 has no later section to stop at
    unigram.write_text("\\data\\\nngram 1=3\n\n\\1-grams:\n-1\t<s>\n-0.5\tb\n"
                       "-0.5\t</s>\n\n\\end\\\n")
    assert arpa_vocab(unigram) == ["b"] and read_arpa(unigram).order == 1
    lm = read_arpa(path, unigrams_only=True)
    assert lm.order == 1 and lm.vocab == read_arpa(path).vocab


def test_unreadable_arpa(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_arpa(tmp_path / "nope.arpa")
    path = tmp_path / "latin1.arpa"
    path.write_bytes(GOOD.replace("-0.1\ta </s>", "-0.1\ta \xe9").encode("latin-1"))
    with pytest.raises(DataError, match=f"{path}:12: line is not UTF-8"):
        read_arpa(path)


def test_a_gzip_compressed_arpa_reads_as_its_text(tmp_path):
    """Told by its first bytes, whatever its name; a tool that reads plain ARPA only gets an
    uncompressed copy; a broken archive is one error naming the file."""
    import gzip

    from speechlab.text.ngram import arpa_bytes, plain_arpa

    plain = tmp_path / "lm.arpa"
    plain.write_text(GOOD)
    packed = tmp_path / "lm.arpa.gz"
    packed.write_bytes(gzip.compress(GOOD.encode(), mtime=0))
    odd = tmp_path / "named.arpa"  # compressed under a plain name
    odd.write_bytes(packed.read_bytes())
    for path in (packed, odd):
        lm = read_arpa(path)
        assert lm.vocab == read_arpa(plain).vocab and lm.ngrams == read_arpa(plain).ngrams
        assert arpa_bytes(path) == plain.read_bytes()
        with plain_arpa(path) as text:
            assert text != path and text.read_text() == GOOD
        assert not text.exists()  # the copy is gone afterwards
    with plain_arpa(plain) as text:
        assert text == plain
    broken = tmp_path / "broken.arpa.gz"
    broken.write_bytes(packed.read_bytes()[:20])
    with pytest.raises(DataError, match=f"{broken}: a gzip-compressed ARPA file that does not"):
        read_arpa(broken)


def test_empty_model_has_no_vocab():
    assert ArpaLM().vocab == []


@settings(max_examples=25, deadline=None)
@given(first=st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=5), min_size=1,
                      max_size=8),
       second=st.lists(st.lists(st.sampled_from("bcd"), min_size=1, max_size=5), min_size=1,
                       max_size=8),
       orders=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       weight=st.floats(0.05, 0.95))
def test_a_mixture_of_two_lms_is_their_weighted_sum_and_normalized(
        tmp_path_factory, first, second, orders, weight):
    from speechlab.text.ngram import interpolate

    a = estimate(first, NgramConfig(orders[0], discount=0.7))
    b = estimate(second, NgramConfig(orders[1], discount=0.7))
    mixed = interpolate(a, b, weight)
    path = tmp_path_factory.mktemp("lm") / "mixed.arpa"
    mixed.write(path)
    mixed = read_arpa(path)  # what the ARPA file says, through its back-off semantics
    assert mixed.order == max(orders)
    vocab = [w for w in mixed.vocab if w != "<s>"]
    assert set(vocab) == {w for lm in (a, b) for w in lm.vocab} - {"<s>"}
    for h in _histories([w for w in vocab if w != "</s>"], mixed.order):
        total = sum(10 ** mixed.logprob(w, h) for w in vocab)
        assert total == pytest.approx(1.0, abs=1e-5), h

    def p(lm, w, h):
        return 10 ** lm.logprob(w, h) if lm.logprob(w, h) > -math.inf else 0.0

    # an n-gram either LM lists: exactly the weighted sum of the two LMs' probabilities
    for n, grams in enumerate(mixed.ngrams, 1):
        for g in grams:
            if g[-1] != "<s>":
                want = weight * p(a, g[-1], g[:-1]) + (1 - weight) * p(b, g[-1], g[:-1])
                assert 10 ** mixed.logprob(g[-1], g[:-1]) == pytest.approx(want, rel=1e-5)


def test_a_mixture_weight_outside_0_1_is_refused():
    from speechlab.text.ngram import interpolate

    lm = estimate([["a", "b"]], NgramConfig(2, discount=0.7))
    with pytest.raises(ConfigError, match="weight"):
        interpolate(lm, lm, 1.0)
