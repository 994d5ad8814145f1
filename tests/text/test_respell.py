"""English respelt for festival's Czech, Finnish and Italian voices: each language's spelling
rules that its voice's letter-to-sound rules read, phrasing punctuation kept, clear errors."""

from __future__ import annotations

import pytest

from speechlab.errors import DataError
from speechlab.text.respell import ENCODINGS, SPELLERS, prime, respell


def test_czech_writes_plain_consonants_before_i_and_its_own_sibilants():
    # "di"/"ti"/"ni" would be read palatal: the plain ones are written with y
    assert respell("tip did need", "cs") == "typ dyd nýd"
    assert respell("she measures chips", "cs") == "ší mežerz čips"


def test_italian_spells_k_and_g_by_the_vowel_that_follows():
    assert respell("kick get", "it") == "chik ghet"
    assert respell("cat cot go", "it") == "chet cat gou"  # AE is spelt e: front
    assert respell("he", "it") == "i"  # h is silent in Italian: HH is dropped


def test_finnish_doubles_long_vowels_and_has_no_sh():
    assert respell("see shoe", "fi") == "sii suu"


def test_phrasing_punctuation_is_kept_and_other_marks_dropped():
    assert respell("Yes, no. (Maybe)!", "cs") == "jes, nou. mejbí!"


def test_every_spelling_is_in_its_voice_encoding():
    text = "The quick brown fox jumps over the lazy dog, then thinks about the weather."
    prime([text])
    for lang in SPELLERS:
        respell(text, lang).encode(ENCODINGS[lang])  # raises if a letter is not encodable


def test_an_unknown_language_is_a_clear_error():
    with pytest.raises(DataError, match="no respelling of English for language 'xx'"):
        respell("hello", "xx")
