"""Voice activity detection (speechlab.audio.vad): the Silero network finds each sentence of a
recording with pauses and nothing in silence or noise; the segment rules on their own; any
recognizer transcribes only the speech (API and CLI)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile as sf

from speechlab.audio.vad import VadConfig, segments_of, speech_segments

pytestmark = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs espeak-ng")

@pytest.fixture(scope="module")
def talk() -> tuple[np.ndarray, list[tuple[float, float]]]:
    """Three sentences with 1.5 s pauses, and where each one's voice lies."""
    from speechlab.testing.audio import spoken_with_pauses

    return spoken_with_pauses()


def test_each_sentence_is_one_segment_and_silence_or_noise_none(talk):
    audio, spans = talk
    segments = speech_segments(audio)
    assert len(segments) == len(spans), segments
    for (start, end), (a, b) in zip(segments, spans):
        assert start <= a + 0.1 and end >= b - 0.25  # the sentence, give or take its edges
        assert end - start < (b - a) + 0.8  # and not the pause
    rng = np.random.default_rng(0)
    assert speech_segments(np.zeros(16000 * 3, np.float32)) == []
    assert speech_segments(rng.normal(0, 0.01, 16000 * 3).astype(np.float32)) == []


def test_the_webrtc_engine_finds_the_same_sentences(talk):
    """WebRTC's detector (30 ms yes/no decisions, tens of times cheaper) finds each sentence
    too, and nothing in digital silence; it is coarser about noise, which is not asked of it."""
    from speechlab.audio.vad import Vad

    audio, spans = talk
    cfg = VadConfig(engine="webrtc")
    segments = speech_segments(audio, cfg)
    assert len(segments) == len(spans), segments
    for (start, end), (a, b) in zip(segments, spans):
        assert start <= a + 0.1 and end >= b - 0.25
        assert end - start < (b - a) + 1.0
    assert speech_segments(np.zeros(16000 * 3, np.float32), cfg) == []
    vad = Vad.of(cfg)
    assert vad.window == 480 and set(vad.accept(audio[:16000]).tolist()) <= {0.0, 1.0}
    with pytest.raises(Exception, match="engine"):
        VadConfig(engine="other")


def test_the_segment_rules():
    step = 512 / 16000
    probs = np.array([0.0] * 10 + [0.9] * 20 + [0.1] * 5 + [0.9] * 20 + [0.0] * 30, np.float32)
    seconds = len(probs) * step
    cfg = VadConfig(min_silence=0.3, min_speech=0.25, pad=0.0)
    # a 5-window dip (0.16 s) is shorter than min_silence: one segment
    assert segments_of(probs, seconds, cfg) == [(round(10 * step, 3), round(55 * step, 3))]
    two = segments_of(probs, seconds, VadConfig(min_silence=0.1, min_speech=0.25, pad=0.0))
    assert two == [(round(10 * step, 3), round(30 * step, 3)),
                   (round(35 * step, 3), round(55 * step, 3))]
    # padding that makes neighbours touch joins them
    assert len(segments_of(probs, seconds, VadConfig(min_silence=0.1, pad=0.2))) == 1
    # a blip shorter than min_speech is dropped
    blip = np.array([0.0] * 10 + [0.9] * 3 + [0.0] * 20, np.float32)
    assert segments_of(blip, len(blip) * step, cfg) == []
    # a segment past max_segment is cut at its least speech-like window
    long = np.full(200, 0.9, np.float32)
    long[120] = 0.6
    cut = segments_of(long, len(long) * step, VadConfig(max_segment=5.0, pad=0.0))
    assert len(cut) == 2 and cut[0][1] == round(120 * step, 3)
    assert all(e - s <= 5.0 for s, e in cut)


def test_any_recognizer_transcribes_only_the_speech(talk, tmp_path, capsys):
    from speechlab.inference import transcribe_speech
    from speechlab.testing.toy_family import ToyConfig, ToyNet, ToyRecognizer

    audio, spans = talk
    heard: list[float] = []

    class Listening(ToyRecognizer):
        def transcribe(self, samples, *args, **kw):
            heard.append(len(samples) / 16000)
            return super().transcribe(samples, *args, **kw)

    result = transcribe_speech(Listening(ToyNet(ToyConfig())), audio, 16000)
    assert result.text == "speech speech speech"
    assert [s["text"] for s in result.extra["segments"]] == ["speech"] * 3
    assert sum(heard) < len(audio) / 16000 - 2.5  # the pauses never reached it
    # the command line, for a packaged CTC model
    from speechlab.cli import main
    from speechlab.testing.tiny_models import ctc_package

    wav = tmp_path / "talk.wav"
    sf.write(wav, audio, 16000)
    pkg = ctc_package(tmp_path / "ctc")
    assert main(["transcribe", str(pkg), str(wav), "--vad", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["segments"]) == 3
    for segment, (a, b) in zip(out["segments"], spans):
        assert segment["start"] <= a + 0.1 and segment["end"] >= b - 0.25
    assert not any("nbest" in segment for segment in out["segments"])
    # --nbest with --vad: each piece's alternatives, in its segment
    assert main(["transcribe", str(pkg), str(wav), "--vad", "--json", "--nbest", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    for segment in out["segments"]:
        assert 1 <= len(segment["nbest"]) <= 2
        assert segment["nbest"][0]["text"] == segment["text"]
        assert all(0.0 <= alt["p"] <= 1.0 for alt in segment["nbest"])
    assert main(["transcribe", str(pkg), str(wav), "--vad", "--stream"]) == 2
