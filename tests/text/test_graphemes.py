"""Grapheme tokenizers (B_ word starts, inventory errors) and the union maps."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.errors import DataError
from speechlab.text.graphemes import BLANK, GraphemeTokenizer, UnionTokenizer

TEXTS = {
    "en": ["hello world", "don't stop believing", "the year 2024"],
    "hi": ["नमस्ते दुनिया", "भारत एक विशाल देश है", "क़लम"],
    "ta": ["வணக்கம் உலகம்", "தமிழ் மொழி", "கொம்பு"],
    "gu": ["નમસ્તે દુનિયા", "ગુજરાતી ભાષા"],
}


@pytest.mark.parametrize("lang", sorted(TEXTS))
def test_round_trip(lang):
    tok = GraphemeTokenizer.build(TEXTS[lang], lang)
    n = len(tok.graphemes)
    assert len(tok) == 1 + 2 * n and tok.symbols[0] == BLANK
    for text in TEXTS[lang]:
        ids = tok.encode(text)
        assert 0 not in ids
        assert tok.decode(ids) == text
        # One B_ id per word, at each word's first grapheme.
        words = text.split()
        assert sum(i > n for i in ids) == len(words)
        assert len(ids) == sum(len(w) for w in words)


def test_b_placement_planted():
    tok = GraphemeTokenizer.build(["ab ba"], "en")
    assert tok.symbols == (BLANK, "a", "b", "B_a", "B_b")
    assert tok.encode("ab  ba a") == [3, 2, 4, 1, 3]
    assert tok.decode([3, 2, 0, 4, 1, 3]) == "ab ba a"  # blanks skipped
    assert tok.decode([2, 3]) == "b a"  # hypothesis starting mid-word


def test_code_points_not_clusters():
    # "नमस्ते" is 6 code points: न म स ् त े (NFC); Tamil "கொ" is 2: க ொ.
    hi = GraphemeTokenizer.build(["नमस्ते"], "hi")
    assert hi.graphemes == tuple(sorted("नमस्ते"))
    assert len(hi.encode("नमस्ते")) == 6
    ta = GraphemeTokenizer.build(["கொ"], "ta")
    assert ta.graphemes == ("க", "ொ")


def test_out_of_inventory_names_character():
    tok = GraphemeTokenizer.build(TEXTS["hi"], "hi")
    with pytest.raises(DataError) as e:
        tok.encode("नमस्ते ज़िंदगी", utt="utt-7")
    msg = str(e.value)
    assert "U+091C" in msg and "ज़िंदगी" in msg and "utt-7" in msg and "'hi'" in msg


def test_encode_normalises():
    tok = GraphemeTokenizer.build(TEXTS["en"], "en")
    assert tok.encode("Hello, World!") == tok.encode("hello world")
    raw = GraphemeTokenizer("en", tok.graphemes, normalize=False)
    with pytest.raises(DataError, match=r"U\+0048"):
        raw.encode("Hello")


def test_save_load(tmp_path):
    tok = GraphemeTokenizer.build(TEXTS["ta"], "ta")
    tok.save(tmp_path / "ta.json")
    assert GraphemeTokenizer.load(tmp_path / "ta.json") == tok
    data = json.loads((tmp_path / "ta.json").read_text(encoding="utf-8"))
    data["symbols"] = data["symbols"][:-1]
    (tmp_path / "bad.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(DataError, match="bad.json"):
        GraphemeTokenizer.load(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{", encoding="utf-8")
    with pytest.raises(DataError, match="junk.json"):
        GraphemeTokenizer.load(tmp_path / "junk.json")


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(st.lists(st.text(alphabet="abcdé'xyz ", min_size=0, max_size=12), min_size=1, max_size=5))
def test_round_trip_property(texts):
    from speechlab.text.normalize import normalize_text

    texts = [t for t in texts if normalize_text(t, "en")] or ["a"]
    tok = GraphemeTokenizer.build(texts, "en")
    for t in texts:
        assert tok.decode(tok.encode(t)) == normalize_text(t, "en")


@pytest.fixture
def union():
    return UnionTokenizer.build(
        [(lang, t) for lang in ["en", "hi", "ta", "gu"] for t in TEXTS[lang]],
        languages=["en", "hi", "ta", "gu"],
    )


def test_union_maps(union):
    assert union.languages == ("en", "hi", "ta", "gu")
    sizes = {lang: len(t) for lang, t in union.tokenizers.items()}
    assert len(union) == 1 + sum(v - 1 for v in sizes.values())
    assert union.symbols[0] == BLANK and len(set(union.symbols)) == len(union)
    assert union.to_local(0) == (None, 0) and union.language_of(0) is None
    seen = {0}
    for lang, tok in union.tokenizers.items():
        ids = union.union_ids(lang)
        assert len(ids) == len(tok) and ids[0] == 0
        for local in range(len(tok)):
            u = union.to_union(lang, local)
            assert u == ids[local]
            if local:
                assert union.to_local(u) == (lang, local)
                assert union.language_of(u) == lang
                assert union.symbols[u] == tok.symbols[local]
                seen.add(u)
    assert seen == set(range(len(union)))  # the maps cover the union exactly once
    # Planted layout: en's symbols come first, right after the blank.
    assert union.to_union("en", 1) == 1
    assert union.to_union("hi", 1) == sizes["en"]


def test_union_encode_decode(union, tmp_path):
    hi_ids = union.encode("नमस्ते दुनिया", "hi")
    en_ids = union.encode("hello world", "en")
    assert {union.language_of(i) for i in hi_ids} == {"hi"}
    assert union.decode(en_ids + hi_ids) == "hello world नमस्ते दुनिया"
    with pytest.raises(DataError, match="unknown language 'fr'"):
        union.encode("bonjour", "fr")
    union.save(tmp_path / "union.json")
    back = UnionTokenizer.load(tmp_path / "union.json")
    assert back.symbols == union.symbols and back.languages == union.languages


def test_union_shared_symbols_are_qualified():
    union = UnionTokenizer.build([("en", "a1"), ("hi", "क1")])
    assert union.languages == ("en", "hi")  # sorted by default
    assert "1@en" in union.symbols and "1@hi" in union.symbols and "B_a" in union.symbols
    assert len(set(union.symbols)) == len(union)
    with pytest.raises(DataError, match="'ta'"):
        UnionTokenizer.build([("ta", "x")], languages=["en"])
