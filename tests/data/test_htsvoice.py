"""The SLT voice's 16 kHz model file: the same log spectra below 8 kHz, the same durations and
level through festival, one file per user made once, and a clear refusal of what it cannot
convert."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from speechlab.data import festival, htsvoice
from speechlab.data.festival import FestivalItem, synthesize
from speechlab.errors import DataError

SLT = Path("/usr/share/festival/voices/us/cmu_us_slt_arctic_hts/hts/"
           "cmu_us_slt_arctic_hts.htsvoice")
needs_slt = pytest.mark.skipif(not SLT.is_file(), reason="festvox-us-slt-hts not installed")
EN = "The weather was fine and the market was full of people."


def log_amplitude(c: np.ndarray, alpha: float, rate: int, f: np.ndarray) -> np.ndarray:
    w = 2 * np.pi * f / rate
    theta = w + 2 * np.arctan(alpha * np.sin(w) / (1 - alpha * np.cos(w)))
    return np.cos(np.outer(theta, np.arange(len(c)))) @ c


@needs_slt
def test_the_16k_mel_cepstra_describe_the_same_spectra_below_8k():
    voice = htsvoice.read_htsvoice(SLT)
    new = htsvoice.read_htsvoice_bytes(htsvoice.convert(voice))
    assert new.field("SAMPLING_FREQUENCY") == "16000" and new.field("FRAME_PERIOD") == "80"
    assert new.field("VECTOR_LENGTH[MCP]") == "25" and new.field("OPTION[MCP]") == "ALPHA=0.42"
    # the streams the conversion leaves alone are byte for byte the voice's own
    for key in ("DURATION_PDF", "DURATION_TREE", "STREAM_PDF[LF0]", "STREAM_TREE[MCP]"):
        assert new.blocks(key) == voice.blocks(key), key
    trees, windows = int(voice.field("NUM_STATES")), int(voice.field("NUM_WINDOWS[MCP]"))
    _, old_pdfs = htsvoice._pdfs(voice.blocks("STREAM_PDF[MCP]")[0], trees, windows, 45)
    _, new_pdfs = htsvoice._pdfs(new.blocks("STREAM_PDF[MCP]")[0], trees, windows, 25)
    assert len(old_pdfs) == len(new_pdfs) and (new_pdfs[:, 1] > 0).all()
    f = np.linspace(50, 7950, 400)
    rng = np.random.default_rng(0)
    errors = []
    for p in rng.choice(len(old_pdfs), 50, replace=False):
        old = log_amplitude(old_pdfs[p, 0, 0], 0.45, 32000, f)
        # the gain term carries the rate's change of level (log 2 / 2): put it back to compare
        c = new_pdfs[p, 0, 0].copy()
        c[0] += 0.5 * np.log(2)
        errors.append(np.sqrt(np.mean((log_amplitude(c, 0.42, 16000, f) - old) ** 2)))
    # natural log amplitude: 0.1 is under 1 dB
    assert np.median(errors) < 0.1, np.median(errors)


@needs_slt
def test_festival_speaks_the_16k_model_with_the_same_durations_and_level(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path))
    new, = synthesize([FestivalItem(EN, "cmu_us_slt_arctic_hts_16k")])
    old, = synthesize([FestivalItem(EN, "cmu_us_slt_arctic_hts")])
    assert len(new) == len(old)  # the same frames: durations are the voice's own

    def db(x: np.ndarray) -> float:
        return 10 * np.log10(np.mean(x.astype(np.float64) ** 2))

    # without the gain term's correction the 16 kHz voice is 2 dB louder, 3.5 dB quieter
    # with the global variance mapped as if the coefficients were independent
    assert abs(db(new) - db(old)) < 1.5, db(new) - db(old)
    assert list((tmp_path / "festival").glob("*-16k-*.htsvoice"))


def test_the_converted_file_is_made_once_per_user(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path / "cache"))
    calls = []
    real = htsvoice.convert

    def counting(voice):
        calls.append(1)
        return real(voice)

    monkeypatch.setattr(htsvoice, "convert", counting)
    src = tmp_path / "v.htsvoice"
    src.write_bytes(tiny_voice())
    a = htsvoice.converted_voice(src)
    b = htsvoice.converted_voice(src)
    assert a == b and a.is_file() and len(calls) == 1
    assert htsvoice.read_htsvoice(a).field("SAMPLING_FREQUENCY") == "16000"
    assert not [p for p in a.parent.iterdir() if p.name.startswith(".")]  # no temporary left
    # another voice file (other bytes) is another entry
    src.write_bytes(tiny_voice(seed=1))
    assert htsvoice.converted_voice(src) != a and len(calls) == 2


def tiny_voice(rate: int = 32000, option: str = "ALPHA=0.45", seed: int = 0) -> bytes:
    """A voice file with the layout of festival's SLT: two states, one PDF each, 6 coefficients."""
    rng = np.random.default_rng(seed)
    order, windows, states = 6, 3, 2
    means = rng.normal(size=(states, windows, order))
    pdfs = np.stack([means, np.full_like(means, 0.1)], 1)
    blocks = {"DURATION_PDF": b"\0" * 8, "STREAM_WIN[MCP]": b"1\n",
              "STREAM_PDF[MCP]": np.ones(states, "<i4").tobytes() + pdfs.astype("<f4").tobytes(),
              "GV_PDF[MCP]": np.ones(1, "<i4").tobytes()
              + np.stack([np.full(order, 0.5), np.full(order, 0.01)]).astype("<f4").tobytes()}
    data, spans = b"", []
    for key, block in blocks.items():
        spans.append(f"{key}:{len(data)}-{len(data) + len(block) - 1}")
        data += block
    header = (f"[GLOBAL]\nHTS_VOICE_VERSION:1.0\nSAMPLING_FREQUENCY:{rate}\nFRAME_PERIOD:160\n"
              f"NUM_STATES:{states}\n[STREAM]\nVECTOR_LENGTH[MCP]:{order}\nIS_MSD[MCP]:0\n"
              f"NUM_WINDOWS[MCP]:{windows}\nUSE_GV[MCP]:1\nOPTION[MCP]:{option}\n"
              "[POSITION]\n" + "\n".join(spans) + "\n[DATA]\n")
    return header.encode() + data


@pytest.mark.parametrize("rate,option,message", [
    (16000, "ALPHA=0.42", "above 16000 Hz"),
    (32000, "GAMMA=-0.33 ALPHA=0.45", "gamma 0"),
])
def test_what_it_cannot_convert_is_refused_by_name(tmp_path, rate, option, message):
    with pytest.raises(DataError, match=re.escape(message)):
        htsvoice.convert(htsvoice.read_htsvoice_bytes(tiny_voice(rate, option)))
    bad = tmp_path / "x.htsvoice"
    bad.write_bytes(b"not a voice")
    with pytest.raises(DataError, match="not an HTS voice file"):
        htsvoice.read_htsvoice(bad)


def test_a_corpus_names_the_voices_that_speak_through_a_converted_model():
    conv = festival.model_conversions(["kal_diphone", "cmu_us_slt_arctic_hts",
                                       "cmu_us_slt_arctic_hts_16k"])
    assert list(conv) == ["cmu_us_slt_arctic_hts_16k"]
    assert "16000 Hz" in conv["cmu_us_slt_arctic_hts_16k"]
