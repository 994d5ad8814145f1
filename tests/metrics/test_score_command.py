"""``speechlab score``: results on Kaldi text files and errors naming file, line, utterance."""

from __future__ import annotations

import argparse
import json

import pytest

from speechlab.errors import DataError
from speechlab.metrics import cer, wer
from speechlab.metrics.commands import add_commands, read_transcripts, score_files


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="speechlab")
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def files(tmp_path):
    ref = tmp_path / "ref.txt"
    hyp = tmp_path / "hyp.txt"
    ref.write_text("u1 the cat sat\nu2 on the mat\nu3\nu4 नमस्ते दुनिया\n", encoding="utf-8")
    # Different order, CRLF line ends and extra spaces must not matter.
    hyp.write_text("u2 on a mat\r\nu1 the cat  sat\r\nu4 नमस्ते\r\nu3 uh\r\n", encoding="utf-8")
    return ref, hyp


def test_score_matches_wer(files, tmp_path, capsys):
    ref, hyp = files
    out = tmp_path / "sub" / "score.json"
    assert _run(["score", "--ref", str(ref), "--hyp", str(hyp), "--json", str(out),
                 "--num_resamples", "200"]) == 0
    expected = wer(["the cat sat", "on the mat", "", "नमस्ते दुनिया"],
                   ["the cat sat", "on a mat", "uh", "नमस्ते"], ids=["u1", "u2", "u3", "u4"])
    printed = capsys.readouterr().out
    assert str(expected) in printed and "%SER 75.00 [ 3 / 4 ]" in printed
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["errors"] == expected.errors == 3 and doc["ref_words"] == 8
    assert [u["utt_id"] for u in doc["per_utterance"]] == ["u1", "u2", "u3", "u4"]
    assert doc["ci"]["low"] <= doc["wer"] <= doc["ci"]["high"]
    assert doc["config"]["num_resamples"] == 200


def test_score_cer(files, capsys):
    ref, hyp = files
    res = score_files(ref, hyp, char=True)
    assert res == cer(["the cat sat", "on the mat", "", "नमस्ते दुनिया"],
                      ["the cat sat", "on a mat", "uh", "नमस्ते"])
    assert _run(["score", "--ref", str(ref), "--hyp", str(hyp), "--cer",
                 "--spaces", "true", "--num_resamples", "0"]) == 0
    assert capsys.readouterr().out.startswith("%CER ")


@pytest.mark.parametrize("content, message", [
    ("u1 a b\n\nu2 c\n", "ref.txt:2: empty line"),
    ("u1 a b\nu2 c\nu1 d\n",
     "ref.txt:3 (utterance 'u1'): duplicate utterance id (first seen on line 1)"),
    ("", "ref.txt: no utterances"),
])
def test_malformed_reference_names_file_and_line(tmp_path, content, message):
    ref = tmp_path / "ref.txt"
    ref.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_transcripts(ref)
    assert message in str(e.value)


def test_bad_encoding_names_line(tmp_path):
    ref = tmp_path / "ref.txt"
    ref.write_bytes(b"u1 ok\nu2 caf\xe9\n")
    with pytest.raises(DataError, match=r"ref\.txt:2: not valid UTF-8"):
        read_transcripts(ref)


def test_missing_utterances_are_named(tmp_path, files):
    ref, hyp = files
    short = tmp_path / "short.txt"
    short.write_text("u1 the cat sat\nu2 on the mat\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        score_files(ref, short)
    msg = str(e.value)
    assert str(short) in msg and "'u3', 'u4'" in msg and "2 utterance" in msg
    with pytest.raises(DataError) as e:
        score_files(short, hyp)
    assert str(short) in str(e.value) and "'u4'" in str(e.value)
    with pytest.raises(DataError, match="no such file"):
        score_files(tmp_path / "nope.txt", hyp)


def test_command_raises_user_error(tmp_path, files):
    # cli.main turns a DataError into one "speechlab: error: ..." line; the command must raise
    # it (not exit or print) so that happens.
    ref, _ = files
    bad = tmp_path / "bad.txt"
    bad.write_text("u1 x\nu1 y\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.txt:2"):
        _run(["score", "--ref", str(ref), "--hyp", str(bad)])


def test_score_normalizes_unicode_unless_told_not_to(tmp_path, capsys):
    import unicodedata

    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    # Precomposed: é U+00E9, Devanagari qa U+0958, Tamil vowel sign o U+0BCA.
    text = "caf\u00e9 \u0928\u0958\u094d\u0936\u093e \u0b95\u0bca\u0b9f\u0bc1"
    ref.write_text(f"u1 {text}\n", encoding="utf-8")
    hyp.write_text(f"u1 {unicodedata.normalize('NFD', text)}\n", encoding="utf-8")
    assert _run(["score", "--ref", str(ref), "--hyp", str(hyp), "--num_resamples", "0"]) == 0
    assert "%WER 0.00 [ 0 / 3" in capsys.readouterr().out
    assert _run(["score", "--ref", str(ref), "--hyp", str(hyp), "--num_resamples", "0",
                 "--normalization", "none"]) == 0
    assert "%WER 100.00 [ 3 / 3" in capsys.readouterr().out


def test_baseline_gives_the_relative_reduction_and_its_paired_interval(files, tmp_path, capsys):
    ref, hyp = files  # hyp: 3 errors in 8 reference words
    base = tmp_path / "base.txt"
    base.write_text("u1 a cat sat\nu2 in a mat\nu3 uh\nu4 नमस्ते\n", encoding="utf-8")  # 5 errors
    out = tmp_path / "score.json"
    assert _run(["score", "--ref", str(ref), "--hyp", str(hyp), "--baseline", str(base),
                 "--json", str(out), "--num_resamples", "300"]) == 0
    printed = capsys.readouterr().out
    assert "WERR vs. baseline: +40.00%" in printed  # 100 (5 - 3) / 5
    doc = json.loads(out.read_text(encoding="utf-8"))["baseline"]
    assert doc["errors"] == 5 and doc["reduction"] == pytest.approx(40.0)
    # u1 and u2 carry the whole difference; resamples without them give 0, with only them 100.
    assert 0.0 <= doc["ci"]["low"] <= 40.0 <= doc["ci"]["high"] <= 100.0


def test_baseline_must_hold_the_same_utterances(files, tmp_path):
    ref, hyp = files
    base = tmp_path / "base.txt"
    base.write_text("u1 a cat sat\nu2 in a mat\nu3 uh\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"base\.txt: 1 utterance id.*'u4'"):
        _run(["score", "--ref", str(ref), "--hyp", str(hyp), "--baseline", str(base)])


def test_a_perfect_baseline_has_no_relative_reduction(files, tmp_path):
    ref, hyp = files
    with pytest.raises(DataError, match=r"ref\.txt: the baseline makes no errors"):
        _run(["score", "--ref", str(ref), "--hyp", str(hyp), "--baseline", str(ref)])
