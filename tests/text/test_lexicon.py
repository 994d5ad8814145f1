"""Kaldi lexicon.txt reader/writer, cmudict and espeak-ng lexicons."""

from __future__ import annotations

import subprocess

import pytest

from speechlab.errors import DataError
from speechlab.testing.audio import have_espeak
from speechlab.text import lexicon as L
from speechlab.text.lexicon import Lexicon, cmudict_lexicon, espeak_lexicon


def test_read_write_round_trip(tmp_path):
    path = tmp_path / "lexicon.txt"
    path.write_text("hello HH AH L OW\nhello HH EH L OW\n\nनमस्ते n ə m ʌ s t eː\nhello HH AH L OW\n",
                    encoding="utf-8")
    lex = Lexicon.read(path)
    assert lex["hello"] == [("HH", "AH", "L", "OW"), ("HH", "EH", "L", "OW")]  # duplicate dropped
    assert lex.phones == tuple(sorted({"HH", "AH", "EH", "L", "OW", "n", "ə", "m", "ʌ", "s", "t", "eː"}))
    assert lex.oov(["hello", "world", "world"]) == ["world"]
    lex.write(tmp_path / "out.txt")
    assert Lexicon.read(tmp_path / "out.txt") == lex
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()[0] == "hello HH AH L OW"


@pytest.mark.parametrize("content,line,what", [
    ("a A\nb B\nlonely\n", 3, "no phones"),
    ("a A\n\nb #1\n", 3, "reserved"),
    ("<eps> A\n", 1, "reserved"),
    (b"a A\nb \xff\xfe\n", 2, "UTF-8"),
])
def test_parse_errors_name_the_line(tmp_path, content, line, what):
    path = tmp_path / "lexicon.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=f"lexicon.txt:{line}: .*{what}"):
        Lexicon.read(path)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        Lexicon.read(tmp_path / "nope.txt")


def test_cmudict():
    lex = cmudict_lexicon(["Hello", "tomato", "qwxzv"])
    assert set(lex["hello"]) == {("HH", "AH", "L", "OW"), ("HH", "EH", "L", "OW")}
    assert ("T", "AH", "M", "EY", "T", "OW") in lex["tomato"]
    assert "qwxzv" not in lex
    stressed = cmudict_lexicon(["hello"], remove_stress=False)
    assert ("HH", "AH0", "L", "OW1") in stressed["hello"]
    assert all(not p[-1].isdigit() for p in lex.phones)


@pytest.mark.needs_espeak
@pytest.mark.skipif(not have_espeak(), reason="espeak-ng not installed")
def test_espeak_batched(monkeypatch):
    calls = []
    real = subprocess.run

    def counting(cmd, *a, **k):
        calls.append(cmd)
        return real(cmd, *a, **k)

    monkeypatch.setattr(L.subprocess, "run", counting)
    lex = espeak_lexicon(["hello", "world", "hello", "cat"], "en-us")
    assert len(calls) == 1  # one process for all words
    assert lex.words == ["hello", "world", "cat"]
    assert lex["cat"] == [("k", "æ", "t")]
    assert lex["hello"][0][0] == "h" and "l" in lex["hello"][0]
    assert not any(c in p for p in lex.phones for c in "ˈˌ")  # stress removed

    hi = espeak_lexicon(["नमस्ते", "hello"], "hi")
    assert hi["नमस्ते"] == [("n", "ə", "m", "ʌ", "s", "t", "eː")]
    assert not any(p.startswith("(") for p in hi.phones)  # language-switch marks removed

    ascii_ = espeak_lexicon(["cat"], "en-us", ipa=False, remove_stress=False)
    assert ascii_["cat"] == [("k", "'a", "t")]


@pytest.mark.needs_espeak
@pytest.mark.skipif(not have_espeak(), reason="espeak-ng not installed")
def test_espeak_errors():
    with pytest.raises(DataError, match="voice .zz."):
        espeak_lexicon(["hello"], "zz")
    with pytest.raises(DataError, match="whitespace"):
        espeak_lexicon(["two words"], "en-us")


@pytest.mark.needs_espeak
@pytest.mark.skipif(not have_espeak(), reason="espeak-ng not installed")
def test_espeak_misaligned_output_falls_back(monkeypatch):
    real = L._run_espeak

    def drop_line(words, voice, ipa):
        lines = real(words, voice, ipa)
        return lines[1:] if len(words) > 1 else lines

    monkeypatch.setattr(L, "_run_espeak", drop_line)
    lex = espeak_lexicon(["cat", "dog"], "en-us")
    assert lex["cat"] == [("k", "æ", "t")] and lex["dog"][0][0] == "d"
