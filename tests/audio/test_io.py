"""Audio and transcript validation: each kind of bad input is caught and named."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from lhotse import AudioSource, MonoCut, Recording, SupervisionSegment

from speechlab.audio.io import (
    audio_info,
    load_audio,
    validate_audio_file,
    validate_cut,
    validate_recording,
    validate_supervision,
)
from speechlab.errors import DataError


def _tone(n: int = 16000, channels: int = 1) -> np.ndarray:
    x = (np.sin(np.arange(n) * 0.07) * 9000).astype(np.int16)
    return x if channels == 1 else np.stack([x] * channels, axis=1)


@pytest.fixture
def good(tmp_path):
    path = tmp_path / "good.wav"
    sf.write(path, _tone(), 16000, subtype="PCM_16")
    return path


def test_load_audio_reads_float_mono(good):
    audio = load_audio(good)
    assert audio.dtype == np.float32 and audio.shape == (16000,)
    np.testing.assert_allclose(audio, _tone() / 32768.0, atol=1e-6)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.wav \(utterance 'u1'\): audio file does not exist"):
        load_audio(tmp_path / "nope.wav", utt="u1")


def test_zero_byte_file(tmp_path):
    p = tmp_path / "zero.wav"
    p.write_bytes(b"")
    with pytest.raises(DataError, match=r"zero\.wav.*empty \(0 bytes\)"):
        load_audio(p)


def test_unreadable_file(tmp_path):
    p = tmp_path / "garbage.wav"
    p.write_bytes(b"this is not audio at all" * 20)
    with pytest.raises(DataError, match=r"garbage\.wav.*unreadable audio"):
        load_audio(p)


def test_truncated_wav(good, tmp_path):
    data = good.read_bytes()
    p = tmp_path / "cut.wav"
    p.write_bytes(data[: len(data) // 2])
    # libsndfile alone would silently return the first half.
    assert sf.info(str(p)).frames < 16000
    with pytest.raises(DataError, match=r"cut\.wav.*truncated WAV: header declares 32000"):
        load_audio(p)


def test_header_only_wav_has_no_samples(tmp_path):
    p = tmp_path / "empty.wav"
    sf.write(p, np.zeros(0, dtype=np.int16), 16000, subtype="PCM_16")
    with pytest.raises(DataError, match=r"empty\.wav.*no samples"):
        load_audio(p)


def test_wrong_sample_rate(tmp_path):
    p = tmp_path / "8k.wav"
    sf.write(p, _tone(8000), 8000, subtype="PCM_16")
    with pytest.raises(DataError, match=r"8k\.wav.*8000 Hz, expected 16000 Hz"):
        load_audio(p)
    assert load_audio(p, expected_sr=8000).shape == (8000,)
    assert load_audio(p, expected_sr=None).shape == (8000,)


def test_wrong_channel_count(tmp_path):
    p = tmp_path / "stereo.wav"
    sf.write(p, _tone(channels=2), 16000, subtype="PCM_16")
    with pytest.raises(DataError, match=r"stereo\.wav.*2 channels, expected 1"):
        load_audio(p)
    assert load_audio(p, channels=2).shape == (16000, 2)


def test_flac_is_fine(tmp_path):
    p = tmp_path / "x.flac"
    sf.write(p, _tone(), 16000, subtype="PCM_16")
    info = validate_audio_file(p)
    assert (info.sample_rate, info.channels, info.frames) == (16000, 1, 16000)


def _rec(path, rec_id="r1", n=16000, sr=16000) -> Recording:
    return Recording(id=rec_id, sources=[AudioSource("file", [0], str(path))], sampling_rate=sr,
                     num_samples=n, duration=n / sr)


def test_validate_recording(good, tmp_path):
    validate_recording(_rec(good))
    with pytest.raises(DataError, match=r"good\.wav.*16000 samples but the manifest says 20000"):
        validate_recording(_rec(good, n=20000))
    with pytest.raises(DataError, match=r"recording 'r1': sample rate 8000"):
        validate_recording(_rec(good, sr=8000, n=8000))
    with pytest.raises(DataError, match="does not exist"):
        validate_recording(_rec(tmp_path / "gone.wav"))


def test_validate_recording_with_resampling_transform(tmp_path):
    """A recording behind lhotse's resampling transform is decoded to be checked: the
    resampled length must match the manifest, and what the file holds must be finite."""
    p = tmp_path / "8k.wav"
    sf.write(p, _tone(8000), 8000, subtype="PCM_16")
    rec = _rec(p, n=8000, sr=8000).resample(16000)
    assert rec.num_samples == 16000
    validate_recording(rec)  # decoded through lhotse's transform: 16000 samples, as said
    from dataclasses import replace

    with pytest.raises(DataError, match=r"8k\.wav.*file has 8000 samples at 8000 Hz \(16000 at "
                                        r"16000 Hz\) but the manifest says 20000"):
        validate_recording(replace(rec, num_samples=20000, duration=20000 / 16000))
    bad = tmp_path / "nan.wav"
    sf.write(bad, np.full(8000, np.nan, np.float32), 8000, subtype="FLOAT")
    with pytest.raises(DataError, match="recording 'r1'.*(NaN|non-finite|not finite)"):
        validate_recording(_rec(bad, n=8000, sr=8000).resample(16000))


@pytest.mark.parametrize("text, lang, message", [
    ("", "hi", "empty transcript"),
    ("   ", "hi", "empty transcript"),
    (None, "hi", "empty transcript"),
    ("नमस्ते दुनिया", None, "no language tag"),
    ("नमस्ते दुनिया", "xx", "unknown language tag 'xx'"),
])
def test_validate_supervision(text, lang, message):
    with pytest.raises(DataError, match=f"utterance 'u7': {message}"):
        validate_supervision(text, lang, ["en", "hi"], utt="u7")


@pytest.mark.parametrize("text, lang, known", [
    ("नमस्ते दुनिया", "hi", ["en", "hi"]),
    ("hello world", "en", ["en"]),
    (" a ", "ta", ["ta"]),
])
def test_validate_supervision_accepts_good(text, lang, known):
    """Good supervisions pass, and the same ones with their language unknown do not: the check
    reads what it is given."""
    assert validate_supervision(text, lang, known, utt="u7") is None
    with pytest.raises(DataError, match=f"unknown language tag '{lang}'"):
        validate_supervision(text, lang, [k for k in ["en", "hi", "ta", "gu"] if k != lang],
                             utt="u7")


def test_validate_cut(good):
    rec = _rec(good)
    sup = SupervisionSegment("u1", "r1", 0.0, 1.0, text="hello there", language="en")
    cut = MonoCut("u1", 0.0, 1.0, 0, recording=rec, supervisions=[sup])
    validate_cut(cut)
    bad_lang = MonoCut("u1", 0.0, 1.0, 0, recording=rec,
                       supervisions=[SupervisionSegment("u1", "r1", 0.0, 1.0, text="hi",
                                                        language="fr")])
    with pytest.raises(DataError, match="unknown language tag 'fr'"):
        validate_cut(bad_lang)
    too_long = MonoCut("u1", 0.5, 1.0, 0, recording=rec, supervisions=[sup])
    with pytest.raises(DataError, match="lasts 1.000 s"):
        validate_cut(too_long)
    no_sup = MonoCut("u1", 0.0, 1.0, 0, recording=rec, supervisions=[])
    with pytest.raises(DataError, match="no supervision"):
        validate_cut(no_sup)


def test_audio_info_streamed_wav_header_is_not_truncation(tmp_path):
    # WAVs written to a pipe carry a placeholder data size; that is not a truncation.
    p = tmp_path / "stream.wav"
    sf.write(p, _tone(), 16000, subtype="PCM_16")
    data = bytearray(p.read_bytes())
    pos = data.find(b"data")
    data[pos + 4: pos + 8] = (0xFFFFFFFF).to_bytes(4, "little")
    p.write_bytes(bytes(data))
    assert audio_info(p).frames == 16000


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_samples_are_refused_naming_file_and_utterance(tmp_path, value):
    from speechlab.testing.audio import nonfinite_wav

    p = nonfinite_wav(tmp_path / "bad.wav", value=value, at=0.25, count=7)
    msg = r"bad\.wav \(utterance 'u1'\): 7 non-finite sample value\(s\).*at 0\.250 s"
    with pytest.raises(DataError, match=msg):
        validate_audio_file(p, utt="u1")
    with pytest.raises(DataError, match=msg):
        load_audio(p, utt="u1")
    rec = Recording.from_file(p, recording_id="r1")
    with pytest.raises(DataError, match=r"bad\.wav \(utterance 'r1'\): 7 non-finite"):
        validate_recording(rec)
    # The same samples, finite, are fine; and integer formats are never read for this check.
    ok = tmp_path / "ok.wav"
    sf.write(ok, np.nan_to_num(sf.read(p)[0], nan=0.0, posinf=0.0, neginf=0.0), 16000,
             subtype="FLOAT")
    assert validate_audio_file(ok).is_float and not audio_info(tmp_path / "ok.wav").frames == 0


def test_non_finite_samples_of_a_command_recording_are_refused(tmp_path):
    from speechlab.testing.audio import nonfinite_wav

    p = nonfinite_wav(tmp_path / "bad.wav")
    rec = Recording(id="piped", sources=[AudioSource(type="command", channels=[0],
                                                     source=f"cat {p}")],
                    sampling_rate=16000, num_samples=16000, duration=1.0)
    with pytest.raises(DataError, match="recording 'piped': 100 non-finite"):
        validate_recording(rec)
