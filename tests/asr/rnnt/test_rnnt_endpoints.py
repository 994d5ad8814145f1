"""Endpoints of a live stream (speechlab.endpoint): a recording of three sentences with pauses
comes out as three utterances, each as whole-file decoding of its own audio gives it, through
the API and the CLI; each rule fires on its own; bad settings are refused by name.

The model is the planted tone RNN-T (speechlab.testing.tone_rnnt): it spells "the fox" from
tone bursts whatever the silence around them, so the texts are exact on any CPU."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf

from speechlab.endpoint import EndpointConfig
from speechlab.errors import ConfigError
from speechlab.testing.tone_rnnt import MODEL, planted_run, tone_samples

PIECE = 1600  # 100 ms


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    import speechlab

    return speechlab.load(planted_run(tmp_path_factory.mktemp("tones")) / "models" / MODEL)


def three_sentences() -> np.ndarray:
    return np.concatenate([tone_samples("the fox", lead=0.6, tail=1.6)] * 3)


def streamed(model, audio, endpoint, **kw):
    """(utterances closed at endpoints, the last one from finish())."""
    stream = model.stream(endpoint=endpoint, **kw)
    closed = []
    for at in range(0, len(audio), PIECE):
        stream.accept_waveform(audio[at:at + PIECE])
        if stream.is_endpoint:
            closed.append(stream.reset())
    return closed, stream.finish()


def test_three_sentences_with_pauses_are_three_utterances_as_whole_file_decoding_gives_them(
        model):
    audio = three_sentences()
    closed, last = streamed(model, audio, EndpointConfig(silence_after_text=1.0))
    assert [u.text for u in closed] == ["the fox"] * 3
    assert last.text == "" and last.extra["utterance"] == 3
    starts = [u.extra["start"] for u in closed]
    ends = [u.extra["end"] for u in closed]
    assert starts[0] == 0.0 and starts[1:] == ends[:-1]  # back to back, nothing lost
    for k, u in enumerate(closed):
        assert u.extra["utterance"] == k and u.extra["endpoint"] == "silence_after_text"
        assert u.language == "en" and u.lid["en"] > 0.8
        assert all(u.extra["start"] <= w.start < w.end <= u.extra["end"] for w in u.words)
        piece = audio[int(u.extra["start"] * 16000):int(u.extra["end"] * 16000)]
        whole = model.transcribe(piece)
        assert whole.text == u.text
        # word times counted from the recording's start, as the whole-file ones shifted
        assert [round(w.start - u.extra["start"], 2) for w in u.words] == \
            [round(w.start, 2) for w in whole.words]


def test_without_resets_the_stream_is_one_utterance_as_before(model):
    audio = three_sentences()
    stream = model.stream(endpoint=EndpointConfig(silence_after_text=1.0))
    fired = 0
    for at in range(0, len(audio), PIECE):
        stream.accept_waveform(audio[at:at + PIECE])
        fired += stream.is_endpoint
    assert fired > 0  # the rule held, and nobody closed the utterance
    assert stream.finish().text == "the fox the fox the fox" == model.transcribe(audio).text


def test_each_rule_fires_on_its_own(model):
    silence = np.zeros(16000 * 3, dtype=np.float32)
    # 1: silence with nothing recognized
    closed, _ = streamed(model, silence, EndpointConfig(silence_before_text=1.0))
    assert closed and closed[0].text == "" and closed[0].extra["endpoint"] == "silence_before_text"
    chunk = model.chunk_frames * model.fbank.frame_shift  # endpoints fall between chunks
    assert 1.0 <= closed[0].extra["end"] < 1.0 + chunk + 0.1
    # none fires on silence shorter than rule 1, however long rule 2 waits after text
    assert streamed(model, silence, EndpointConfig(silence_before_text=5.0,
                                                   silence_after_text=0.1))[0] == []
    # 3: the longest utterance, text or not
    one = tone_samples("the fox", lead=0.6, tail=0.2)
    closed, last = streamed(model, one, EndpointConfig(silence_after_text=float("inf"),
                                                       max_utterance=1.0))
    assert [u.extra["endpoint"] for u in closed] == ["max_utterance"] * len(closed)
    assert len(closed) >= int(len(one) / 16000 / (1.0 + chunk + 0.1))
    assert all(1.0 <= u.extra["end"] - u.extra["start"] < 1.0 + chunk + 0.1 for u in closed)


def test_a_language_is_kept_per_utterance_and_lid_restarts(model):
    closed, _ = streamed(model, three_sentences(), EndpointConfig(silence_after_text=1.0))
    assert all(set(u.lid) == {"en", "hi"} and abs(sum(u.lid.values()) - 1) < 1e-6
               for u in closed)
    assert all(u.extra["active_frames"]["en"] == u.extra["active_frames"]["hi"] for u in closed)


def test_bad_endpoint_settings_are_refused_by_name():
    for given, message in (({"max_utterance": "abc"}, "--max-utterance must be seconds"),
                           ({"silence_after_text": "0"}, "--silence-after-text must be > 0"),
                           ({"silence_before_text": "nan"}, "--silence-before-text must be > 0")):
        with pytest.raises(ConfigError, match=message):
            EndpointConfig.from_options(given, flag="--")
    assert EndpointConfig.from_options({"max_utterance": "inf"}).max_utterance == float("inf")


def test_transcribe_stream_prints_one_line_per_utterance(model, tmp_path, capsys):
    from speechlab.cli import main

    wav = tmp_path / "three.wav"
    sf.write(wav, three_sentences(), 16000)
    run = planted_run(tmp_path / "again") / "models" / MODEL
    assert main(["transcribe", str(run), str(wav), "--stream", "--chunk-ms", "100",
                 "--silence-after-text", "1.0", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(u["segment"], u["text"]) for u in lines] == [(0, "the fox"), (1, "the fox"),
                                                          (2, "the fox")]
    assert main(["transcribe", str(run), str(wav), "--stream", "--chunk-ms", "100",
                 "--silence-after-text", "1.0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith(str(wav))] == [f"{wav}\ten\tthe fox"] * 3
    assert main(["transcribe", str(run), str(wav), "--stream", "--max-utterance", "-2"]) == 2
    err = capsys.readouterr().err
    assert "--max-utterance must be > 0" in err and err.count("\n") == 1


def test_partial_words_carry_confidences_and_speak_of_the_current_utterance(model):
    """``partial_words``: the partial text's words with times and confidences as the search
    stands; at an endpoint they are the words the utterance's final then gives."""
    stream = model.stream(endpoint=EndpointConfig(silence_after_text=1.0))
    audio = three_sentences()
    finals, shown, start = [], [], 0.0
    for at in range(0, len(audio), PIECE):
        stream.accept_waveform(audio[at:at + PIECE])
        words = stream.partial_words
        assert " ".join(w.word for w in words) == stream.partial
        assert all(start <= w.start <= w.end <= (at + PIECE) / 16000 + 1e-9 for w in words)
        assert all(0.0 < w.confidence <= 1.0 for w in words)
        shown.append(len(words))
        if stream.is_endpoint:
            final = stream.reset()
            assert final.words == words  # what the last partial showed, confidences included
            finals.append(final)
            start = final.extra["end"]
            assert stream.partial_words == ()
    assert [u.text for u in finals] == ["the fox"] * 3
    assert 1 in shown  # "the" was shown with its confidence before "fox" came
    assert stream.finish().words == stream.partial_words == ()
