"""Hotwords: a word the model misses is found when the search is biased towards it, for the
RNN-T (a context graph in the beam search) and the CTC-topology models (boosted arcs in
T∘L∘G, a word the graph lacks added to it first); the context graph on its own; bad hotwords
refused by the CLI, the options and the server's parser."""

from __future__ import annotations

import numpy as np
import pytest

from speechlab.errors import ConfigError
from speechlab.search.context import ContextGraph


def _noise(seconds: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, int(seconds * 16000)).astype(np.float32)


def test_the_context_graph_rewards_whole_hotwords_only():
    g = ContextGraph([[1, 2, 3], [2, 4]], score=1.0)
    total, state = 0.0, 0
    for label in (1, 2, 3):  # the whole of the first hotword
        delta, state = g.step(state, label)
        total += delta
    assert total == 3.0 and g.end[state]
    total, state = 0.0, 0
    for label in (1, 2, 5):  # a partial match, broken: its bonus is given back
        delta, state = g.step(state, label)
        total += delta
    assert total == 0.0 and state == 0
    # 1 2 4: "1 2" breaks, but its suffix "2" starts the second hotword, which completes
    total, state = 0.0, 0
    for label in (1, 2, 4):
        delta, state = g.step(state, label)
        total += delta
    assert total == 2.0 and g.end[state]
    d = g.deltas(g.next_state(0, 1), 6)
    assert d[2] == 1.0 and d[5] == -1.0 and d[1] == 0.0  # 1 again: back to depth 1
    with pytest.raises(ConfigError):
        ContextGraph([[1]], score=0)
    with pytest.raises(ConfigError):
        ContextGraph([[]], score=1)


def test_the_transducer_finds_a_hotword_it_missed():
    from speechlab.testing.rnnt import untrained_recognizer

    asr = untrained_recognizer()
    audio = _noise(2.0, 0)
    plain = asr.transcribe(audio, language="en").text
    assert "hello" not in plain.split()
    biased = asr.transcribe(audio, language="en", hotwords=["hello"], hotword_score=6.0)
    assert "hello" in biased.text.split()
    # streaming gives the same, and LID-free decoding biases the languages that spell it
    stream = asr.stream("en", hotwords=["hello"], hotword_score=6.0)
    stream.accept_waveform(audio)
    assert stream.finish().text == biased.text
    with pytest.raises(ConfigError, match="no language of this model spells it"):
        asr.transcribe(audio, hotwords=["zzzq"])


def test_the_ctc_model_finds_a_hotword_it_missed(tmp_path):
    import speechlab
    from speechlab.testing.tiny_models import ctc_package

    asr = speechlab.load(ctc_package(tmp_path / "ctc"))
    audio = _noise(2.0, 0)
    plain = asr.transcribe(audio).text.split()
    missed = next(w for w in asr.graph.lang.words if w not in plain)
    biased = asr.transcribe(audio, hotwords=[missed], hotword_score=10.0).text.split()
    assert missed in biased
    assert asr.transcribe(audio).text.split() == plain  # the plain graph is untouched
    with pytest.raises(ConfigError, match="not in this model's vocabulary"):
        asr.transcribe(audio, hotwords=["zebra"])
    with pytest.raises(ConfigError, match="does not take them"):
        asr.transcribe(audio, hotwords=[missed], method="prefix")


def test_the_boosted_arrays_decode_as_the_composed_graph(tmp_path):
    """Hotwords on a CTC-topology model are the search arrays with the hotwords' arcs made
    cheaper, decoded by our own search, instead of T∘L∘G composed again for each set of words:
    the same best path as kaldi's decoder over the composed graph, and the same n-best,
    posteriors and confidences as the composed graph's lattice."""
    import speechlab
    from speechlab.asr.ctc import lattice
    from speechlab.asr.ctc.decode import ViterbiDecoder
    from speechlab.testing.hotwords import composed_boost
    from speechlab.testing.tiny_models import ctc_package

    asr = speechlab.load(ctc_package(tmp_path / "ctc"))
    audio = _noise(2.0, 0)
    plain = asr.transcribe(audio).text.split()
    missed = [w for w in asr.graph.lang.words if w not in plain]
    lp = asr.log_probs(audio)
    for hotwords in (missed[:1], missed[1:3]):
        new = asr.transcribe(audio, hotwords=hotwords, hotword_score=10.0, nbest=5)
        assert any(w in t.split() for t, _ in new.nbest for w in hotwords)  # the bonus counts
        fst = composed_boost(asr, hotwords, 10.0)
        best = ViterbiDecoder(fst, asr.graph.num_tokens, asr.viterbi).decode(lp)
        assert " ".join(asr.graph.words(best.words)) == new.text
        biased = next(iter(asr._boosted_sets.values()))
        biased.lattice = lattice.DecodingGraph.from_fst(fst)  # the composed graph's arrays
        old = asr.transcribe(audio, hotwords=hotwords, hotword_score=10.0, nbest=5)
        assert old.text == new.text
        assert [(w.word, w.start, w.end) for w in old.words] == \
            [(w.word, w.start, w.end) for w in new.words]
        assert [t for t, _ in new.nbest] == [t for t, _ in old.nbest]
        assert np.allclose([p for _, p in new.nbest], [p for _, p in old.nbest], atol=1e-3)
        assert np.allclose([w.confidence for w in new.words], [w.confidence for w in old.words],
                           atol=1e-3)


def test_the_word_times_of_our_search_are_kaldis(tmp_path):
    """The best path of our own search gives each word the frame kaldi's decoder gives it, so
    the word times with hotwords are measured as without."""
    import speechlab
    from speechlab.asr.ctc import lattice
    from speechlab.testing.tiny_models import ctc_package

    asr = speechlab.load(ctc_package(tmp_path / "ctc"))
    v = asr.viterbi
    cfg = lattice.LatticeConfig(beam=v.beam, max_active=v.max_active, lattice_beam=0.0,
                                acoustic_scale=v.acoustic_weight, unique_paths=False)
    for seed in range(4):
        lp = asr.log_probs(_noise(2.0 + seed / 2, seed))
        kaldi = asr._decoder.decode(lp)
        ours = lattice.generate(asr._arrays_of(asr.graph), lp, cfg).best_path()
        assert ours.words == tuple(kaldi.words) and len(ours.words) > 0
        assert ours.tokens == tuple(int(t) for t in kaldi.tokens)
        assert ours.word_frames == tuple(kaldi.word_frames)


def test_a_hotword_the_ctc_model_lacks_is_added_to_its_graph(tmp_path, monkeypatch):
    import speechlab
    from speechlab.asr.ctc import phones
    from speechlab.testing.tiny_models import ctc_package
    from speechlab.text.lexicon import Lexicon

    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path / "cache"))
    asr = speechlab.load(ctc_package(tmp_path / "ctc"))
    audio = _noise(2.0, 0)
    plain = asr.transcribe(audio)
    assert "nos" not in asr.graph.lang.words
    # The tiny model's phones are not ARPAbet, so its pronunciation source is stood in for:
    # "nos" is said as a word the plain search misses.
    missed = next(w for w in asr.graph.lang.words if w not in plain.text.split())
    asked: list[list[str]] = []

    def pronounce(language, words):
        asked.append(list(words))
        return Lexicon({w: asr.tokenizer.lexicon[missed] for w in words})

    monkeypatch.setattr(phones, "lexicon_for", pronounce)
    biased = asr.transcribe(audio, hotwords=["Nos"], hotword_score=15.0, nbest=3)
    assert asked == [["nos"]]  # normalized as the transcripts were
    assert "nos" in biased.text.split()
    assert any(w.word == "nos" and w.confidence is not None for w in biased.words)
    assert any("nos" in text.split() for text, _ in biased.nbest)
    assert len(list((tmp_path / "cache" / "graphs").glob("*.fst"))) == 1  # built once, kept
    # ...but not its search arrays: each new set of words would add as much again to the disk
    assert not list((tmp_path / "cache" / "graphs").glob("*.npz"))
    again = asr.transcribe(audio, hotwords=["nos"], hotword_score=15.0)
    assert again.text == biased.text and asked == [["nos"]]  # the same graph, not rebuilt
    assert asr.transcribe(audio).text == plain.text  # the model's own graph is untouched
    assert "nos" not in asr.graph.lang.words
    # Another recognizer of the same package finds the graph in the cache.
    other = speechlab.load(tmp_path / "ctc")
    assert other.transcribe(audio, hotwords=["nos"], hotword_score=15.0).text == biased.text
    assert len(list((tmp_path / "cache" / "graphs").glob("*.fst"))) == 1
    other.new_words = False  # what speechlab serve does without --new-words
    with pytest.raises(ConfigError, match="adding words is off here"):
        other.transcribe(audio, hotwords=["nosy"])
    monkeypatch.setattr(phones, "lexicon_for", lambda language, words: Lexicon(
        {w: [["Z", "IY"]] for w in words}))
    with pytest.raises(ConfigError, match="cannot be spelt with its en phones"):
        asr.transcribe(audio, hotwords=["zee"])


def test_the_options_and_the_cli_refuse_bad_hotwords(tmp_path, capsys):
    import soundfile as sf

    import speechlab
    from speechlab.cli import main
    from speechlab.contract import recognition_options
    from speechlab.testing.tiny_models import ctc_package, hf_ctc_directory

    pkg = ctc_package(tmp_path / "ctc")
    asr = speechlab.load(pkg)
    assert recognition_options(asr, hotwords="go, stop", hotword_score="3") == {
        "language": None, "hotwords": ["go", "stop"], "hotword_score": 3.0}
    with pytest.raises(ConfigError, match="hotword_score must be a number in"):
        recognition_options(asr, hotwords="go", hotword_score="-1")
    with pytest.raises(ConfigError, match="non-empty words"):
        recognition_options(asr, hotwords="go,,stop")
    pytest.importorskip("transformers")
    hf = speechlab.load(hf_ctc_directory(tmp_path / "hf"))
    with pytest.raises(ConfigError, match="does not take hotwords"):
        recognition_options(hf, hotwords="go")
    wav = tmp_path / "a.wav"
    sf.write(wav, _noise(1.0, 1), 16000)
    capsys.readouterr()  # what saving the Hugging Face model printed
    assert main(["transcribe", str(pkg), str(wav), "--hotwords", "go", "--hotword-score",
                 "abc"]) == 2
    err = capsys.readouterr().err
    assert "--hotword-score must be a number" in err and err.count("\n") == 1
    assert main(["transcribe", str(pkg), str(wav), "--hotwords", "go"]) == 0
