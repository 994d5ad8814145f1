"""A CTC-topology model decoding with another word LM (``use_word_lm``, ``transcribe
--word-lm``): the graph's vocabulary becomes the LM's, words the lexicon lacks are pronounced,
those the phones cannot spell are left out, the graph is cached, and other models refuse it."""

from __future__ import annotations

import numpy as np
import pytest

from speechlab.errors import ConfigError, DataError


def _noise(seconds: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, int(seconds * 16000)).astype(np.float32)


def test_a_word_lm_replaces_the_vocabulary(tmp_path, monkeypatch):
    import speechlab
    from speechlab.asr.ctc import phones
    from speechlab.testing.tiny_models import ctc_package
    from speechlab.text.lexicon import Lexicon
    from speechlab.text.ngram import NgramConfig, estimate

    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path / "cache"))
    asr = speechlab.load(ctc_package(tmp_path / "ctc"))
    audio = _noise(2.0, 0)
    plain = asr.transcribe(audio).text.split()
    # The tiny model's phones are not ARPAbet: its pronunciation source is stood in for. "nos"
    # is said as the first word the plain search gives, "zed" with a phone the model lacks.
    said = asr.tokenizer.lexicon[plain[0]]
    monkeypatch.setattr(phones, "lexicon_for", lambda language, words: Lexicon(
        {w: said if w == "nos" else [["Z", "EH", "D"]] for w in words}))
    arpa = tmp_path / "other.arpa"
    estimate([["nos"], ["nos", "stop"], ["zed", "stop"], ["stop"]],
             NgramConfig(order=2, discount=0.5)).write(arpa)
    asr.use_word_lm(arpa)
    assert sorted(asr.graph.lang.words) == ["nos", "stop"]  # "zed" cannot be spelt
    got = asr.transcribe(audio, nbest=2)
    assert got.text and set(got.text.split()) <= {"nos", "stop"}
    assert "nos" in got.text.split()  # where the plain search heard its first word
    assert all(w.confidence is not None for w in got.words)
    assert len(list((tmp_path / "cache" / "graphs").glob("*.fst"))) == 1
    # hotwords and a hotword new to this LM work over it
    assert "stop" in asr.transcribe(audio, hotwords=["stop"], hotword_score=15.0).text.split()
    # another recognizer of the package reads the graph back from the cache
    other = speechlab.load(tmp_path / "ctc")
    other.use_word_lm(arpa)
    assert other.transcribe(audio).text == asr.transcribe(audio).text
    assert len(list((tmp_path / "cache" / "graphs").glob("*.fst"))) == 1
    with pytest.raises(DataError, match="no such file"):
        other.use_word_lm(tmp_path / "missing.arpa")
    # the vocabulary is read from the unigrams alone; a fault anywhere is still one error
    # naming the file and line, before any graph is built or cached
    text = arpa.read_text()
    for where, bad in (("\\1-grams:", "-0.x5"), ("\\2-grams:", "0.5")):
        head, _, tail = text.partition(where + "\n")
        first, _, rest = tail.partition("\t")
        broken = tmp_path / f"broken{where[1]}.arpa"
        broken.write_text(f"{head}{where}\n{bad}\t{rest}")
        line = head.count("\n") + 2
        with pytest.raises(DataError, match=f"{broken}:{line}:"):
            other.use_word_lm(broken)
    assert len(list((tmp_path / "cache" / "graphs").glob("*.fst"))) == 1


def test_the_cli_takes_a_word_lm_and_other_models_refuse_it(tmp_path, monkeypatch, capsys):
    import soundfile as sf

    import speechlab
    from speechlab.cli import main
    from speechlab.testing.tiny_models import LEXICON, ctc_package, hf_ctc_directory
    from speechlab.text.ngram import NgramConfig, estimate

    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path / "cache"))
    pkg = ctc_package(tmp_path / "ctc")
    wav = tmp_path / "a.wav"
    sf.write(wav, _noise(1.5, 2), 16000)
    arpa = tmp_path / "go.arpa"
    estimate([["go"], ["go", "go"]], NgramConfig(order=2, discount=0.5)).write(arpa)
    assert "go" in LEXICON
    assert main(["transcribe", str(pkg), str(wav), "--word-lm", str(arpa)]) == 0
    text = capsys.readouterr().out.rstrip("\n").split("\t")[2]
    assert set(text.split()) <= {"go"}
    pytest.importorskip("transformers")
    hf_dir = hf_ctc_directory(tmp_path / "hf")
    hf = speechlab.load(hf_dir)
    with pytest.raises(ConfigError, match="no word LM of yours"):
        hf.use_word_lm(arpa)
    capsys.readouterr()
    assert main(["export", str(hf_dir), "--out", str(tmp_path / "x"), "--word-lm",
                 str(arpa)]) == 2
    assert "no word LM of yours" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
