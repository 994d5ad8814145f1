"""Per-language transcript normalisation."""

from __future__ import annotations

import unicodedata

import pytest

from speechlab.text.normalize import normalize_text


@pytest.mark.parametrize("text,lang,expected", [
    ("Hello, World!  It\u2019s \"fine\"-ish.", "en", "hello world it's fine ish"),
    ("'quoted' dogs' rock'n'roll don''t", "en", "quoted dogs rock'n'roll don t"),
    ("भारत। नमस्ते॥\n\tदुनिया", "hi", "भारत नमस्ते दुनिया"),
    ("क्\u200dष", "hi", "क्ष"),  # zero-width joiner dropped, not turned into a space
    ("வணக்கம், உலகம்!", "ta", "வணக்கம் உலகம்"),
    ("નમસ્તે... દુનિયા?", "gu", "નમસ્તે દુનિયા"),
    ("don't", "hi", "don t"),  # the apostrophe is an English grapheme only
    ("ABC 123", "xx", "abc 123"),  # unknown language: default rules
    ("  ", "en", ""),
])
def test_normalize(text, lang, expected):
    assert normalize_text(text, lang) == expected


def test_nfc():
    # "ो" typed as two code points (ा + े is not NFC-equivalent, so use a true decomposition:
    # Tamil ொ = ெ + ா) must become the single precomposed code point.
    decomposed = "\u0b95\u0bc6\u0bbe"
    out = normalize_text(decomposed, "ta")
    assert out == "\u0b95\u0bca" == unicodedata.normalize("NFC", decomposed)
    # Devanagari nukta letters are NFC composition exclusions: they stay two code points.
    assert normalize_text("\u0958", "hi") == "\u0915\u093c"
