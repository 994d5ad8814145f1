"""Shallow fusion of a token n-gram LM into the RNN-T search (speechlab.search.lm_fusion,
``RnntRecognizer.use_lm``, ``speechlab rnnt lm``, ``transcribe --lm``), on the planted
tone model whose answer is known: an LM that never saw a grapheme keeps the search from
emitting it, one that agrees with the audio changes nothing."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

import speechlab
from speechlab.asr.rnnt.commands import token_lm
from speechlab.errors import ConfigError
from speechlab.search.lm_fusion import LN10, START, TokenLM
from speechlab.testing.tone_rnnt import planted_run, tone_samples, write_tone_wav
from speechlab.text.ngram import NgramConfig, estimate


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    run = planted_run(tmp_path_factory.mktemp("tones") / "run")
    return run / "models" / "multisoftmax_lid"


def test_deltas_are_the_weighted_lm_log_probabilities():
    lm = estimate([["B_a", "b", "b"], ["B_b", "a"]], NgramConfig(order=2))
    symbols = ["<blank>", "a", "b", "B_a", "B_b", "c"]
    fused = TokenLM(lm, symbols, 0.5)
    assert fused.state([]) == (START,) and fused.state([3, 2]) == (2,)
    start = fused.deltas((START,), len(symbols))
    assert start[0] == 0.0  # the blank adds nothing
    assert math.isclose(start[3], 0.5 * LN10 * lm.logprob("B_a", ["<s>"]))
    after_b = fused.deltas((2,), len(symbols))
    assert math.isclose(after_b[1], 0.5 * LN10 * lm.logprob("a", ["b"]))
    assert after_b[5] < after_b[1]  # a token the LM never saw: heavily penalised, not -inf
    assert np.isfinite(after_b).all()
    with pytest.raises(ConfigError, match="shares no token"):
        TokenLM(lm, ["<blank>", "x", "y"], 0.5)
    with pytest.raises(ConfigError, match="weight"):
        TokenLM(lm, symbols, 0.0)


def test_the_bonus_is_added_to_every_label_and_never_to_the_blank():
    lm = estimate([["B_a", "b", "b"], ["B_b", "a"]], NgramConfig(order=2))
    symbols = ["<blank>", "a", "b", "B_a", "B_b", "c"]
    plain, rewarded = TokenLM(lm, symbols, 0.5), TokenLM(lm, symbols, 0.5, bonus=1.25)
    for state in ((START,), (2,)):
        got, want = rewarded.deltas(state, len(symbols)), plain.deltas(state, len(symbols))
        assert got[0] == want[0] == 0.0
        assert np.allclose(got[1:], want[1:] + 1.25)
    assert math.isclose(rewarded.score([3, 2]), plain.score([3, 2]) + 2 * 1.25)
    for bad in (11.0, -11.0, math.nan):
        with pytest.raises(ConfigError, match="bonus"):
            TokenLM(lm, symbols, 0.5, bonus=bad)


def test_the_bonus_reaches_the_search(planted):
    # at weight 0.7 the acoustics keep the "o" that an LM of "the fx" never saw; 3 per label
    # moves the search to another answer (the planted model's, found by trying)
    rec = speechlab.load(planted)
    audio, tok = tone_samples(), rec.tokenizers["en"]
    fx = token_lm(tok, ["the fx"] * 5, 3)[0]
    rec.use_lm("en", fx, 0.7)
    assert rec.transcribe(audio, 16000, language="en").text == "the fox"
    rec.use_lm("en", fx, 0.7, bonus=3.0)
    assert rec.transcribe(audio, 16000, language="en").text == "the fx"


@pytest.mark.parametrize("language", ["en", None])  # one decoder, or every one LID-free
def test_an_lm_that_never_saw_a_grapheme_keeps_it_out_and_one_that_agrees_changes_nothing(
        planted, language):
    rec = speechlab.load(planted)
    audio = tone_samples()
    assert rec.transcribe(audio, 16000, language=language).text == "the fox"
    tok = rec.tokenizers["en"]
    rec.use_lm("en", token_lm(tok, ["the fox"] * 5, 3)[0], 3.0)
    assert rec.transcribe(audio, 16000, language=language).text == "the fox"
    rec.use_lm("en", token_lm(tok, ["the fx"] * 5, 3)[0], 1.0)
    assert rec.transcribe(audio, 16000, language=language).text == "the fx"
    # a light weight leaves the acoustics in charge
    rec.use_lm("en", token_lm(tok, ["the fx"] * 5, 3)[0], 0.3)
    assert rec.transcribe(audio, 16000, language=language).text == "the fox"
    with pytest.raises(ConfigError, match="decodes en, hi"):
        rec.use_lm("fr", token_lm(tok, ["the fx"], 3)[0], 1.0)


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "speechlab", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def test_the_command_line_makes_the_lm_and_fuses_it(planted, tmp_path):
    package = speechlab.export(planted, tmp_path / "pkg")
    text = tmp_path / "text.txt"
    text.write_text("the fx\n" * 5 + "the fxß\n", encoding="utf-8")
    arpa = tmp_path / "fx.arpa"
    made = _cli("rnnt", "lm", package, text, "--language", "en", "--order", "3", "--out", arpa)
    assert made.returncode == 0, made.stderr
    assert "1 left out" in made.stdout and arpa.is_file()
    wav = write_tone_wav(tmp_path / "fox.wav")
    plain = _cli("transcribe", package, wav, "--language", "en")
    fused = _cli("transcribe", package, wav, "--language", "en", "--lm", f"en={arpa}",
                 "--lm-weight", "1")
    assert plain.returncode == 0 and fused.returncode == 0, (plain.stderr, fused.stderr)
    assert "the fox" in plain.stdout and "the fx" in fused.stdout and "the fox" not in fused.stdout
    # a model of two languages must be told which; a missing file is one line
    bare = _cli("transcribe", package, wav, "--lm", arpa)
    assert bare.returncode == 2 and "LANG=ARPA" in bare.stderr
    missing = _cli("transcribe", package, wav, "--lm", f"en={tmp_path / 'nope.arpa'}")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_models_without_a_token_search_refuse_an_lm(tmp_path):
    from speechlab.testing.tiny_models import ctc_package

    package = ctc_package(tmp_path / "ctc")
    wav = write_tone_wav(tmp_path / "fox.wav")
    arpa = tmp_path / "lm.arpa"
    estimate([["a"]], NgramConfig(order=1)).write(arpa)
    refused = _cli("transcribe", package, wav, "--lm", arpa)
    assert refused.returncode == 2 and "takes no token LM" in refused.stderr
    made = _cli("rnnt", "lm", package, wav, "--out", tmp_path / "x.arpa")
    assert made.returncode == 2 and "not an RNN-T package" in made.stderr
