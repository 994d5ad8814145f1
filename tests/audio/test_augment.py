"""Speaker and channel effects: each checked against what it must do to a planted signal."""

from __future__ import annotations

import random

import numpy as np
import pytest

from speechlab.audio import augment as A
from speechlab.errors import ConfigError, DataError

SR = A.SAMPLE_RATE


def _tone(freq: float, seconds: float = 1.0, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return amp * np.sin(2 * np.pi * freq * t)


def _peak_hz(x: np.ndarray) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec) * SR / len(x))


def _band_db(x: np.ndarray, lo: float, hi: float) -> float:
    spec = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / SR)
    return 10 * np.log10(spec[(f >= lo) & (f < hi)].sum() + 1e-20)


def _voiced(f0: float = 120.0, seconds: float = 1.0) -> np.ndarray:
    """A vowel-like signal: a harmonic series at ``f0`` with a formant-shaped envelope."""
    t = np.arange(int(seconds * SR)) / SR
    x = sum(np.sin(2 * np.pi * k * f0 * t) * np.exp(-((k * f0 - 700) / 400) ** 2)
            for k in range(1, 40))
    return 0.3 * x / np.max(np.abs(x))


def test_speed_changes_length_and_pitch_together():
    y = A.speed(_tone(1000.0), 1.25)
    assert abs(len(y) - SR / 1.25) <= 1
    assert abs(_peak_hz(y) - 1250.0) < 5.0


def test_world_scales_f0_and_keeps_length():
    import pyworld

    x = _voiced(120.0)
    y = A.world(x, f0_scale=1.5, warp=1.0)
    assert len(y) == len(x)
    f0, _ = pyworld.dio(y, SR, frame_period=5.0)
    voiced = f0[f0 > 0]
    assert len(voiced) > 50
    assert abs(np.median(voiced) - 180.0) < 15.0


def test_world_warp_moves_the_envelope_up():
    x = _voiced(120.0)
    same = A.world(x, 1.0, 1.0)
    up = A.world(x, 1.0, 1.2)
    centroid = [float(np.sum(np.fft.rfftfreq(len(s), 1 / SR) * np.abs(np.fft.rfft(s)) ** 2)
                      / np.sum(np.abs(np.fft.rfft(s)) ** 2)) for s in (same, up)]
    assert centroid[1] > 1.1 * centroid[0]


def test_room_impulse_response_decays_at_its_rt60():
    rir = A.room_impulse_response(0.5, 0.0, np.random.default_rng(0))
    assert rir[0] == 1.0
    # Schroeder backward integration: -5 dB to -25 dB, extrapolated to -60 dB.
    tail = rir.copy()
    tail[0] = 0.0
    edc = 10 * np.log10(np.cumsum(tail[::-1] ** 2)[::-1] / np.sum(tail**2))
    t5, t25 = np.argmax(edc <= -5) / SR, np.argmax(edc <= -25) / SR
    assert 0.35 < 3 * (t25 - t5) < 0.65
    # drr_db: the direct path is that much above the reverberant energy.
    assert abs(10 * np.log10(1.0 / np.sum(tail**2)) - 0.0) < 1e-6


def test_reverb_keeps_length_and_peak_and_smears():
    x = np.zeros(SR)
    x[100] = 0.8
    y = A.reverb(x, rt60=0.4, drr_db=0.0, seed=1)
    assert len(y) == len(x) and abs(np.max(np.abs(y)) - 0.8) < 1e-9
    assert np.count_nonzero(np.abs(y) > 1e-3) > 1000


def test_babble_hits_its_snr_and_needs_others():
    x = _tone(300.0)
    other = _tone(2000.0, 0.3)
    assert A.babble(x, 10.0, [], seed=0) is x
    y = A.babble(x, 10.0, [other], seed=0)
    noise = y - x
    snr = 10 * np.log10(np.mean(x**2) / np.mean(noise**2))
    assert abs(snr - 10.0) < 0.5


def test_bandpass_and_telephone_cut_what_a_line_cannot_carry():
    low, high = _tone(1000.0), _tone(6000.0)
    assert _band_db(A.bandpass(low, 0.0, 4000.0), 900, 1100) > _band_db(low, 900, 1100) - 1
    assert _band_db(A.bandpass(high, 0.0, 4000.0), 5900, 6100) < _band_db(high, 5900, 6100) - 30
    tel_low, tel_high = A.telephone(low), A.telephone(_tone(5000.0))
    assert len(tel_low) == len(low)
    assert _band_db(tel_low, 900, 1100) > _band_db(low, 900, 1100) - 2
    assert _band_db(tel_high, 4900, 5100) < _band_db(_tone(5000.0), 4900, 5100) - 30


def test_mu_law_is_an_8_bit_quantizer():
    x = np.linspace(-1, 1, 5001)
    assert len(np.unique(A.mu_law(x))) <= 256
    assert np.max(np.abs(A.mu_law(x) - x)) < 0.05


@pytest.mark.parametrize("name", ["gsm", "amr-nb", "vorbis"])
def test_codecs_are_deterministic_and_keep_the_level(name):
    if name not in A.sox_codecs():
        pytest.skip(f"this sox writes no {name}")
    x = _voiced(150.0)
    y1, y2 = A.codec(x, name), A.codec(x, name)
    assert np.array_equal(y1, y2)  # sox's dither is off: the same samples every run
    assert len(y1) == len(x)
    level = 10 * np.log10(np.mean(y1**2) / np.mean(x**2))
    assert -6.0 < level < 3.0


def test_gain_scales_and_clips():
    x = _tone(500.0, amp=0.4)
    assert np.allclose(A.gain(x, 20 * np.log10(2.0)), np.clip(2 * x, -1, 1))
    assert np.max(A.gain(x, 20.0)) == 1.0


def test_unknown_effect_and_bad_plan_are_refused():
    with pytest.raises(DataError, match="unknown effect 'echo'"):
        A.apply_effects(np.zeros(10), [A.Effect.of("echo")])
    with pytest.raises(ConfigError, match="speed is a .low, high. range"):
        A.AugmentPlan(speed=(1.2, 0.8))
    with pytest.raises(ConfigError, match="channels: unknown"):
        A.AugmentPlan(channels=("fax",))
    # vtlp warps features: not a waveform effect, not a corpus one
    with pytest.raises(ConfigError, match="on-the-fly effect"):
        A.apply_effects(np.zeros(1600), [A.Effect.of("vtlp", warp=1.1)])
    from speechlab.config import from_dict
    from speechlab.data.corpus import CorpusConfig

    with pytest.raises(ConfigError, match="task.augment"):
        from_dict(CorpusConfig, {"effects": {"vtlp_prob": 0.5}})


def test_draw_effects_is_seeded_ordered_and_follows_its_probabilities():
    none = A.AugmentPlan()
    assert not none.active
    assert A.draw_effects(none, random.Random(0)) == ()
    every = A.AugmentPlan(world_prob=1, speed_prob=1, reverb_prob=1, noise_prob=1,
                          noise_colors=("pink",), channel_prob=1, gain_prob=1)
    names = [e.name for e in A.draw_effects(every, random.Random(0))]
    assert names == ["world", "speed", "reverb", "noise", "telephone", "gain"] or \
        names == ["world", "speed", "reverb", "noise", "bandpass", "gain"]
    plan = A.AugmentPlan(world_prob=0.25, reverb_prob=0.5)
    a = [A.draw_effects(plan, random.Random(7)) for _ in range(2)]
    assert a[0] == a[1]
    rng = random.Random(1)
    draws = [A.draw_effects(plan, rng) for _ in range(2000)]
    share = {k: np.mean([any(e.name == k for e in d) for d in draws]) for k in ("world", "reverb")}
    assert abs(share["world"] - 0.25) < 0.04 and abs(share["reverb"] - 0.5) < 0.04
    for d in draws[:50]:
        for e in d:
            if e.name == "world":
                f0 = dict(e.params)["f0_scale"]
                assert plan.f0_scale[0] <= f0 <= plan.f0_scale[1]
