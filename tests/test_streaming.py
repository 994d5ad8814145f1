"""A model that reads whole recordings, streamed (speechlab.streaming.VadStream): the utterances
of a recording with pauses are cut by voice activity, each transcribed as the whole-file
decoding of its own speech, with times from the start of the stream; every endpoint rule
holds on its own."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from speechlab.contract import Transcript
from speechlab.endpoint import EndpointConfig
from speechlab.streaming import VadStream

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")


@pytest.fixture(scope="module")
def talk():
    from speechlab.testing.audio import spoken_with_pauses

    return spoken_with_pauses()


class Lengths:
    """A 'recognizer' that says how long what it was given lasts, in tenths of a second."""

    def __init__(self) -> None:
        self.heard: list[np.ndarray] = []

    def __call__(self, samples: np.ndarray) -> Transcript:
        self.heard.append(samples)
        return Transcript(f"len{round(len(samples) / 1600)}", "en")


def _run(stream, audio, piece=1600):
    closed = []
    for at in range(0, len(audio), piece):
        stream.accept_waveform(audio[at:at + piece])
        if stream.is_endpoint:
            closed.append(stream.reset())
    return closed, stream.finish()


def test_a_recording_with_pauses_is_one_utterance_per_sentence(talk):
    audio, spans = talk
    model = Lengths()
    closed, last = _run(VadStream(model, EndpointConfig(silence_after_text=0.8)), audio)
    assert len(closed) == 3 and last.text == ""
    assert [u.extra["utterance"] for u in closed] == [0, 1, 2]
    assert all(u.extra["endpoint"] == "silence_after_text" for u in closed)
    assert [u.extra["start"] for u in closed[1:]] == [u.extra["end"] for u in closed[:-1]]
    for u, heard, (a, b) in zip(closed, model.heard, spans):
        # what the model heard is the sentence (with the pad), not the pause
        assert u.extra["start"] <= a and b <= u.extra["end"]
        assert (b - a) - 0.3 <= len(heard) / 16000 <= (b - a) + 0.8
        # and it lies in the stream where the sentence is: the same samples
        at = int(round(a * 16000))
        assert np.flatnonzero(np.abs(heard) > 0.01).size > 0
        assert np.isin(heard[np.abs(heard) > 0.01][:50], audio[at - 8000:at + 8000]).all()


def test_each_rule_on_its_own(talk):
    audio, _ = talk
    silence = np.zeros(16000 * 3, np.float32)
    closed, _ = _run(VadStream(Lengths(), EndpointConfig(silence_before_text=1.0)), silence)
    assert closed and all(u.text == "" and u.extra["endpoint"] == "silence_before_text"
                          and u.language is None for u in closed)
    # a model of one language says it of an utterance with nothing heard, as transcribe does
    closed, _ = _run(VadStream(Lengths(), EndpointConfig(silence_before_text=1.0),
                               languages=("en",)), silence)
    assert closed and all(u.text == "" and u.language == "en" for u in closed)
    assert 1.0 <= closed[0].extra["end"] <= 1.2
    closed, _ = _run(VadStream(Lengths(), EndpointConfig(silence_after_text=float("inf"),
                                                         max_utterance=2.0)), audio)
    assert closed and all(u.extra["endpoint"] == "max_utterance" for u in closed)
    assert all(u.extra["end"] - u.extra["start"] <= 2.2 for u in closed)


def test_the_command_line_streams_a_whole_recording_model_by_voice(talk, tmp_path, capsys):
    import json

    import soundfile as sf

    import speechlab
    from speechlab.cli import main
    from speechlab.testing.tiny_models import ctc_package

    audio, spans = talk
    wav = tmp_path / "talk.wav"
    sf.write(wav, audio, 16000)
    pkg = ctc_package(tmp_path / "ctc")
    assert main(["transcribe", str(pkg), str(wav), "--stream", "--json",
                 "--silence-after-text", "0.8"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [u["segment"] for u in lines][:3] == [0, 1, 2]
    model = speechlab.load(pkg)
    assert all(u["start"] <= w["start"] <= w["end"] <= u["end"] + 1e-6
               for u in lines for w in u["words"] or [])
    # the same utterances as the API's stream over the model gives, piece for piece
    closed, last = _run(VadStream(lambda x: model.transcribe(x, 16000),
                                  EndpointConfig(silence_after_text=0.8)), audio,
                        piece=int(0.32 * 16000))
    api = [u.to_json() for u in [*closed, *([last] if last.text else [])]]
    assert [(u["text"], u["start"], u["end"]) for u in lines] == \
        [(a["text"], c.extra["start"], c.extra["end"]) for a, c in zip(api, [*closed, last])]
