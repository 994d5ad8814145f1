"""Confidence and n-best for every recognizer family: the shared helpers on their own, then
each family's words carry a confidence in [0, 1] and ``transcribe(..., nbest=N)`` gives
distinct texts, best first, the first the transcript's own; the CLI and the server pass it on
and refuse a bad N."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speechlab.confidence import alternatives, frame_confidence, word_confidences
from speechlab.errors import ConfigError


def test_alternatives_merge_equal_texts_and_normalise_log_scores():
    alts = alternatives(["a b", "a c", "a b"], [np.log(0.5), np.log(0.3), np.log(0.2)])
    assert [t for t, _ in alts] == ["a b", "a c"]
    assert [round(p, 6) for _, p in alts] == [0.7, 0.3]
    shares = alternatives(["x", "y"], [0.2, 0.1], log=False)  # shares are kept as they are
    assert shares == [("x", 0.2), ("y", 0.1)]
    assert alternatives([], []) == []


def test_word_confidence_aligns_alternatives_so_an_insertion_shifts_nothing():
    best = ["the", "cat", "sat"]
    alts = [("the cat sat", 0.6), ("the big cat sat", 0.3), ("a cat sad", 0.1)]
    assert word_confidences(best, alts) == [0.9, 1.0, 0.9]
    # over the alternatives given: shares that sum below 1 are normalised
    assert word_confidences(["x"], [("x", 0.2), ("y", 0.2)]) == [0.5]
    assert word_confidences([], alts) == []
    assert frame_confidence(np.array([1.0, 0.25])) == 0.5
    assert frame_confidence(np.array([])) == 0.0


@pytest.fixture(scope="module")
def tones(tmp_path_factory):
    import speechlab
    from speechlab.testing.tone_rnnt import MODEL, planted_run

    return speechlab.load(planted_run(tmp_path_factory.mktemp("tones")) / "models" / MODEL)


def _check(result, n):
    assert result.nbest is not None and 1 <= len(result.nbest) <= n
    assert result.nbest[0][0] == result.text
    probs = [p for _, p in result.nbest]
    assert probs == sorted(probs, reverse=True) and all(0 <= p <= 1 for p in probs)
    assert len({t for t, _ in result.nbest}) == len(result.nbest)
    assert sum(probs) <= 1 + 1e-6


def test_the_transducer_gives_beam_posteriors(tones):
    from speechlab.testing.tone_rnnt import tone_samples

    plain = tones.transcribe(tone_samples())
    assert plain.nbest is None and "nbest" not in plain.to_json()
    result = tones.transcribe(tone_samples(), nbest=3)
    _check(result, 3)
    assert result.text == plain.text == "the fox"
    # the planted model is sure of its words
    assert all(0.9 < w.confidence <= 1 for w in result.words)
    assert all("confidence" in w for w in result.to_json()["words"])


def test_the_ctc_topology_model_gives_lattice_posteriors(tmp_path):
    import speechlab
    from speechlab.testing.tiny_models import ctc_package

    model = speechlab.load(ctc_package(tmp_path / "ctc"))
    audio = np.random.default_rng(1).normal(0, 0.1, 24000).astype(np.float32)
    plain = model.transcribe(audio)
    result = model.transcribe(audio, nbest=4)
    assert result.text == plain.text and plain.nbest is None
    _check(result, 4)
    assert len(result.words) == len(plain.words)
    assert all(w.confidence is not None and 0 <= w.confidence <= 1 for w in result.words)


def test_wav2vec2_gives_frame_posteriors(tmp_path):
    pytest.importorskip("transformers")
    import speechlab
    from speechlab.testing.tiny_models import hf_ctc_directory

    model = speechlab.load(hf_ctc_directory(tmp_path / "hf"))
    audio = np.random.default_rng(2).normal(0, 0.1, 32000).astype(np.float32)
    result = model.transcribe(audio, nbest=2)
    assert result.nbest == ((result.text, 1.0),)  # greedy decoding has one hypothesis
    assert result.words and all(0 < w.confidence <= 1 for w in result.words)


def test_the_cli_and_the_options_take_nbest(tones, tmp_path, capsys):
    import soundfile as sf

    from speechlab.cli import main
    from speechlab.contract import recognition_options
    from speechlab.testing.tone_rnnt import MODEL, planted_run, tone_samples

    run = planted_run(tmp_path / "tones") / "models" / MODEL
    wav = tmp_path / "a.wav"
    sf.write(wav, tone_samples(), 16000)
    assert main(["transcribe", str(run), str(wav), "--json", "--nbest", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nbest"][0]["text"] == out["text"] == "the fox" and len(out["nbest"]) <= 2
    assert main(["transcribe", str(run), str(wav), "--nbest", "-1"]) == 2
    err = capsys.readouterr().err
    assert "--nbest must be a whole number" in err and err.count("\n") == 1
    with pytest.raises(ConfigError, match="nbest must be"):
        recognition_options(tones, nbest="many")
    assert recognition_options(tones, nbest="3")["nbest"] == 3
    assert "nbest" not in recognition_options(tones, nbest="0")
