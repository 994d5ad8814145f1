"""espeak-ng synthesis: output format, prosody controls, batch determinism, the Indian-English
phoneme mapping (checked by the espeak-ng program itself), noise SNR and sox tempo."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from speechlab.data.synth import (
    BatchSynthesizer,
    SAMPLE_RATE,
    SynthRequest,
    _map_phoneme,
    add_noise,
    indian_english_phonemes,
    render,
    sox_tempo,
)
from speechlab.errors import DataError

HI = "यह एक छोटा सा परीक्षण वाक्य है"


def test_render_is_16k_int16_speech():
    audio = render(SynthRequest(HI, "hi+m3"))
    assert audio.dtype == np.int16 and audio.ndim == 1
    seconds = len(audio) / SAMPLE_RATE
    assert 0.8 < seconds < 5.0  # seven words at 175 wpm
    assert np.abs(audio).max() > 3000  # not silence


def test_rate_and_variant_change_the_audio():
    slow = render(SynthRequest(HI, "hi+m3", rate=100))
    fast = render(SynthRequest(HI, "hi+m3", rate=300))
    assert len(slow) > 1.8 * len(fast)
    f2 = render(SynthRequest(HI, "hi+f2", rate=100))
    assert not (len(f2) == len(slow) and np.array_equal(f2, slow))


def test_unknown_voice_and_accent_are_named():
    with pytest.raises(DataError, match="no voice 'xx-nope'"):
        render(SynthRequest("hello there friend", "xx-nope"))
    with pytest.raises(DataError, match="unknown accent 'klingon'"):
        render(SynthRequest("hello there friend", "en", accent="klingon"))


def test_a_respelt_request_is_english_read_by_a_voice_of_another_language():
    from speechlab.data.corpus import BASE_VOICES
    from speechlab.text.respell import respell

    text = "Open the file, then save it."
    base = BASE_VOICES["en-lp"]
    req = SynthRequest(text, base.voice, engine=base.engine, accent=base.accent)
    respelt = SynthRequest(respell(text, "it"), base.voice, engine="festival")
    audio, same = render(req), render(respelt)
    assert 1.0 < len(audio) / SAMPLE_RATE < 4.0 and np.array_equal(audio, same)
    with pytest.raises(DataError, match="unknown festival accent 'klingon'"):
        render(SynthRequest(text, base.voice, engine="festival", accent="klingon"))
    # a batch's respelling is done by the process that submits it (its workers are fresh
    # processes, each of which would load CMUdict again): the same audio
    with BatchSynthesizer(1) as synth:
        batched = synth.submit([req, SynthRequest(HI, "hi+m3")]).result()
    assert np.array_equal(batched[0], audio)


def test_batches_are_reproducible_across_processes_and_worker_counts():
    reqs = [SynthRequest(HI, "hi+f1", pitch=40, noise_snr_db=15.0, seed=7),
            SynthRequest("Please save your work before closing.", "hi+m2",
                         accent="indian_english"),
            SynthRequest("கோப்பை திறக்க முடியவில்லை", "ta+m5", word_gap=2)]
    with BatchSynthesizer(workers=2) as synth:
        a = synth.submit(reqs).result()
        b = synth.submit(reqs).result()
    with BatchSynthesizer(workers=1) as synth:
        c = synth.submit(reqs).result()
    for x, y, z in zip(a, b, c):
        assert x.tobytes() == y.tobytes() == z.tobytes()


@pytest.mark.parametrize("ph, mapped", [
    ("t", "t."), ("'d", "'d."), ("T", "t#"), ("D", "d"), ("w", "v"), ("eI", "e:"),
    ("oU", "o:"), ("_:r", "_:r"), ("_!w", "_!v"), ("k", "k"),
])
def test_map_phoneme(ph, mapped):
    assert _map_phoneme(ph) == mapped


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="needs the espeak-ng program")
def test_indian_english_phonemes_are_in_the_hindi_inventory():
    phon = indian_english_phonemes("The weather is very hot today, think about the water.")
    # Indian-English realisations are there: dental "th" stop, v for w, retroflex t/d.
    assert "t#" in phon and "v'Ed@r" in phon and "t." in phon and "w" not in phon
    # The espeak-ng program, reading the string as Hindi-voice phoneme input, echoes every
    # phoneme back (an unknown one would be dropped); it writes flapped r as "*".
    echo = subprocess.run(["espeak-ng", "-q", "-x", "-v", "hi", f"[[{phon}]]"],
                          capture_output=True, text=True, check=True).stdout
    assert echo.replace("*", "r").split() == phon.replace("*", "r").split()


def test_add_noise_hits_the_snr():
    rng = np.random.default_rng(0)
    t = np.arange(32000) / SAMPLE_RATE
    x = 0.3 * np.sin(2 * np.pi * 220 * t)
    for snr in (5.0, 20.0):
        y = add_noise(x, snr, "white", np.random.default_rng(1))
        noise = y - x
        measured = 10 * np.log10(np.mean(x**2) / np.mean(noise**2))
        assert abs(measured - snr) < 0.2
    with pytest.raises(DataError, match="unknown noise colour"):
        add_noise(x, 10.0, "purple", rng)


def test_pink_and_brown_noise_slopes():
    for color, slope in (("pink", -1.0), ("brown", -2.0)):
        n = 2**16
        noise = add_noise(np.ones(n), 0.0, color, np.random.default_rng(3)) - 1.0
        power = np.abs(np.fft.rfft(noise)) ** 2
        f = np.arange(len(power))
        band = (f > 50) & (f < n // 4)
        fitted = np.polyfit(np.log(f[band]), np.log(power[band]), 1)[0]
        assert abs(fitted - slope) < 0.15, (color, fitted)


@pytest.mark.skipif(shutil.which("sox") is None, reason="needs sox")
def test_sox_tempo_changes_length_not_rate():
    x = (np.sin(np.arange(16000) * 0.05) * 8000).astype(np.int16)
    y = sox_tempo(x, 1.25)
    assert y.dtype == np.int16
    assert abs(len(y) - len(x) / 1.25) < 0.02 * len(x)
