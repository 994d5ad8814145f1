"""Script detection and LID accuracy (Table 5 of the multi-softmax paper)."""

from __future__ import annotations

import unicodedata

import pytest

from speechlab.errors import DataError
from speechlab.metrics import lid_accuracy, lid_by_script, script_of
from speechlab.metrics.lid import _SCRIPT_BLOCKS, SCRIPTS

SAMPLES = {
    "Latin": "hello world, ça va?",
    "Devanagari": "नमस्ते दुनिया",
    "Tamil": "வணக்கம் உலகம்",
    "Gujarati": "નમસ્તે દુનિયા",
    "Bengali": "নমস্কার পৃথিবী",
    "Gurmukhi": "ਸਤ ਸ੍ਰੀ ਅਕਾਲ",
    "Telugu": "నమస్కారం",
    "Kannada": "ನಮಸ್ಕಾರ",
    "Malayalam": "നമസ്കാരം",
    "Oriya": "ନମସ୍କାର",
    "Arabic": "مرحبا بالعالم",
    "Hebrew": "שלום עולם",
    "Cyrillic": "привет мир",
    "Greek": "γειά σου κόσμε",
    "Thai": "สวัสดีชาวโลก",
    "Han": "你好世界",
    "Hiragana": "こんにちは",
    "Katakana": "コンピュータ",
    "Hangul": "안녕하세요",
    "Georgian": "გამარჯობა",
}


@pytest.mark.parametrize("script", sorted(SAMPLES))
def test_script_of_each_script(script):
    assert script_of(SAMPLES[script]) == script


def test_dominant_script_and_non_letters():
    # Five Devanagari letters/marks outnumber "ok"; digits and the danda count for nothing.
    assert script_of("ok नमस्ते 123 ।") == "Devanagari"
    assert script_of("ab नम") == "Latin"  # tie (2 vs 2): the script seen first wins
    assert script_of("नम ab") == "Devanagari"
    for text in ("", "   ", "123 456", "। ॥ !?", "\u0300"):
        assert script_of(text) is None


# Unicode character names start with (or contain) the script; an independent check that every
# block in the table holds only letters and marks of the script it is filed under.
_NAME_TOKEN = {"Han": "CJK"}


def test_script_blocks_agree_with_unicode_names():
    checked = 0
    for start, end, script in _SCRIPT_BLOCKS:
        token = _NAME_TOKEN.get(script, script.upper())
        for cp in range(start, end + 1):
            ch = chr(cp)
            if unicodedata.category(ch)[0] not in "LM":
                continue
            name = unicodedata.name(ch, "")
            if script == "Han" and not name:
                continue  # ideographs beyond this Python's Unicode version are unnamed
            assert token in name, f"U+{cp:04X} {name!r} filed under {script}"
            checked += 1
    assert checked > 50_000
    assert SCRIPTS >= set(SAMPLES)


def test_lid_accuracy_planted():
    true = ["hi", "hi", "ta", "ta", "ta", "gu"]
    pred = ["hi", "ta", "ta", "ta", None, "gu"]
    res = lid_accuracy(true, pred)
    assert (res.correct, res.total) == (4, 6)
    assert res.accuracy == pytest.approx(4 / 6)
    assert {k: (v.correct, v.total) for k, v in res.per_language.items()} == {
        "gu": (1, 1), "hi": (1, 2), "ta": (2, 3)}
    assert res.confusion == {"gu": {"gu": 1}, "hi": {"hi": 1, "ta": 1},
                             "ta": {"<none>": 1, "ta": 2}}
    assert res.macro_accuracy == pytest.approx((1 + 0.5 + 2 / 3) / 3)
    assert res.to_dict()["per_language"]["ta"]["accuracy"] == pytest.approx(2 / 3)


def test_table5_average_is_the_mean_over_languages():
    # Multilingual Vanilla row of Table 5: 88.7 86.2 90.4 85.5 -> Avg. 87.7 (1000 utterances each).
    true, pred = [], []
    for lang, acc in {"En-IN": 88.7, "Hi-IN": 86.2, "Ta-IN": 90.4, "Gu-IN": 85.5}.items():
        n_ok = round(acc * 10)
        true += [lang] * 1000
        pred += [lang] * n_ok + ["other"] * (1000 - n_ok)
    res = lid_accuracy(true, pred)
    assert 100 * res.macro_accuracy == pytest.approx(87.7, abs=0.005)
    assert 100 * res.per_language["Ta-IN"].accuracy == pytest.approx(90.4)


def test_lid_accuracy_bad_inputs():
    with pytest.raises(DataError):
        lid_accuracy(["a"], ["a", "b"])
    with pytest.raises(DataError):
        lid_accuracy([], [])


SCRIPT_FOR_LANG = {"en-IN": "Latin", "hi-IN": "Devanagari", "mr-IN": "Devanagari",
                   "ta-IN": "Tamil", "gu-IN": "Gujarati"}


def test_lid_by_script():
    hyps = [
        SAMPLES["Devanagari"],  # hi-IN right
        "hello there",          # en-IN right
        SAMPLES["Gujarati"],    # ta-IN decoded as Gujarati: wrong, reads as gu-IN
        SAMPLES["Devanagari"],  # gu-IN decoded in Devanagari (hi and mr share it)
        "",                     # ta-IN: empty hypothesis identifies nothing
        SAMPLES["Arabic"],      # en-IN decoded in a script no language here uses
        SAMPLES["Devanagari"],  # mr-IN right (script matches, whichever language)
    ]
    true = ["hi-IN", "en-IN", "ta-IN", "gu-IN", "ta-IN", "en-IN", "mr-IN"]
    res = lid_by_script(hyps, true, SCRIPT_FOR_LANG)
    assert (res.correct, res.total) == (3, 7)
    assert res.confusion["ta-IN"] == {"<none>": 1, "gu-IN": 1}
    assert res.confusion["gu-IN"] == {"script:Devanagari": 1}
    assert res.confusion["en-IN"] == {"en-IN": 1, "script:Arabic": 1}
    assert res.per_language["mr-IN"].accuracy == 1.0


def test_lid_by_script_errors():
    with pytest.raises(DataError, match="'fr-FR'"):
        lid_by_script(["bonjour"], ["fr-FR"], SCRIPT_FOR_LANG)
    with pytest.raises(DataError, match="Klingon"):
        lid_by_script(["x"], ["xx"], {"xx": "Klingon"})
    with pytest.raises(DataError):
        lid_by_script(["a", "b"], ["en-IN"], SCRIPT_FOR_LANG)
