"""CtcRecognizer.analyse_lattice: one utterance's Viterbi words and its lattice's summary,
against the recognizer's own transcription and the lattice metrics computed directly."""

import math

import numpy as np
import pytest

import speechlab
from speechlab.asr.ctc import recognizer as recognizer_module
from speechlab.asr.ctc.lattice_metrics import fullsum_nbest, path_proportions
from speechlab.errors import DataError
from speechlab.testing.tiny_models import ctc_package


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return speechlab.load(ctc_package(tmp_path_factory.mktemp("ctc") / "pkg", seed=3))


def _speechlike(seconds: float, seed: int) -> np.ndarray:
    """Bursts of noise and tones at changing levels: enough for a random model to put its
    probability on a few paths, different in each stretch."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    envelope = np.repeat(rng.uniform(0.0, 1.0, len(t) // 1600 + 1), 1600)[: len(t)]
    tone = np.sin(2 * np.pi * rng.uniform(150, 400) * t)
    return (0.3 * envelope * (tone + 0.5 * rng.standard_normal(len(t)))).astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_viterbi_words_and_the_lattice_summary_agree_with_direct_measures(rec, seed):
    samples = _speechlike(1.5, seed)
    a = rec.analyse_lattice(samples, nbest=4)
    assert a.text == rec.transcribe(samples).text
    assert a.frames == len(rec.log_probs(samples))
    hyps = a.summary.hypotheses
    ranked = fullsum_nbest(a.lattice, 4)
    assert [h.words for h in hyps[: len(ranked)]] == [w for w, _ in ranked]
    log_total = path_proportions(a.lattice, ranked[0][0]).log_total
    for h, (_, log_sum) in zip(hyps, ranked):
        assert h.share == pytest.approx(math.exp(log_sum - log_total), rel=1e-9)
    assert sum(h.share for h in hyps[: len(ranked)]) <= 1 + 1e-9
    props = a.summary.proportions
    if props is None:  # the lattice search pruned W* away: no hypothesis is marked Viterbi
        assert not any(h.viterbi for h in hyps) and not a.summary.fullsum_agrees
    else:
        (viterbi,) = [h for h in hyps if h.viterbi]
        assert " ".join(rec.graph.words(viterbi.words)) == a.text
        assert viterbi.share == pytest.approx(props.bhp, rel=1e-9)
        assert 0 < props.bpp <= 1
        assert a.summary.fullsum_agrees == (hyps[0].viterbi or math.isclose(
            hyps[0].share, viterbi.share, rel_tol=1e-9))


def test_a_lattice_too_large_is_made_again_with_half_the_beam(rec, monkeypatch):
    samples = _speechlike(1.5, 0)
    full = rec.analyse_lattice(samples)
    assert full.lattice_beam == 8.0
    # a bound between the lattice at beam 1 and the one at beam 8: the beam is halved to fit
    small = rec.analyse_lattice(samples, lattice_beam=1.0)
    assert small.lattice.num_states < full.lattice.num_states
    monkeypatch.setattr(recognizer_module, "MAX_LATTICE_STATES", small.lattice.num_states * 2)
    halved = rec.analyse_lattice(samples)
    assert halved.lattice_beam < 8.0 and halved.text == full.text
    monkeypatch.setattr(recognizer_module, "MAX_LATTICE_STATES", 1)
    with pytest.raises(DataError, match="too large to analyse"):
        rec.analyse_lattice(samples)


def test_a_recording_without_an_output_frame_is_refused(rec):
    with pytest.raises(DataError, match="too short"):
        rec.analyse_lattice(np.zeros(100, dtype=np.float32))


def test_a_recording_shorter_than_the_model_input_transcribes_to_nothing(rec):
    assert rec.log_probs(np.zeros(100, dtype=np.float32)).shape == (0, rec.graph.num_tokens)
    assert rec.transcribe(np.zeros(100, dtype=np.float32)).text == ""
