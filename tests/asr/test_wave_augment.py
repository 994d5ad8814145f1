"""On-the-fly augmentation of training batches: fresh effects per batch, drawn from torch's
checkpointed generator (so a resumed run draws what an uninterrupted one would), features that
match the cached ones when no effect is drawn, and clear refusals."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.asr.ctc.task import CtcTask, CtcTaskConfig
from speechlab.asr.data import Utterance, WaveAugment, collate
from speechlab.audio.augment import AugmentPlan
from speechlab.audio.features import fbank
from speechlab.errors import DataError


def _utt(i: int, seconds: float = 1.0) -> Utterance:
    rng = np.random.default_rng(i)
    t = np.arange(int(16000 * seconds)) / 16000
    x = 0.3 * np.sin(2 * np.pi * (200 + 50 * i) * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    x = x + 0.01 * rng.standard_normal(len(t))
    audio = np.round(x * 32767).astype(np.int16)
    feats = torch.from_numpy(fbank(audio.astype(np.float64) / 32768.0))
    return Utterance(f"u{i}", "en", feats, "a b", (1, 2), audio)


PLAN = AugmentPlan(speed_prob=0.5, reverb_prob=0.5, noise_prob=0.5, channel_prob=0.5,
                   gain_prob=0.5)


def test_no_effect_gives_the_cached_features():
    utts = [_utt(i) for i in range(3)]
    feats = WaveAugment(AugmentPlan(), None).features(utts)
    for u, f in zip(utts, feats):
        assert torch.allclose(f, u.feats, atol=1e-4)


def test_each_batch_draws_afresh_and_a_reseeded_generator_draws_the_same():
    utts = [_utt(i) for i in range(4)]
    aug = WaveAugment(PLAN, None)
    torch.manual_seed(3)
    first, second = aug.features(utts), aug.features(utts)
    assert any(a.shape != b.shape or not torch.allclose(a, b) for a, b in zip(first, second))
    torch.manual_seed(3)
    again = aug.features(utts)
    assert all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(first, again))
    # Speed perturbation changes lengths; collate pads to what it is given.
    batch = collate(utts, feats=second)
    assert batch.x_lens.tolist() == [f.shape[0] for f in second]


def test_the_ctc_task_trains_on_augmented_batches():
    utts = [_utt(i) for i in range(4)]
    cfg = CtcTaskConfig(max_frames=1000, max_utterances=2, spec_augment=False, augment=PLAN)
    plain = CtcTask("S1-T1", utts, utts[:1], CtcTaskConfig(max_frames=1000, max_utterances=2,
                                                           spec_augment=False))
    task = CtcTask("S1-T1", utts, utts[:1], cfg, augment=WaveAugment(PLAN, None))
    torch.manual_seed(0)
    b_plain, b_aug = next(iter(plain.batches())), next(iter(task.batches()))
    assert b_plain.ids == b_aug.ids
    assert b_plain.x.shape != b_aug.x.shape or not torch.allclose(b_plain.x, b_aug.x)


def test_refusals():
    with pytest.raises(DataError, match="no 'world' effect"):
        WaveAugment(AugmentPlan(world_prob=0.1), None)
    u = _utt(0)
    bare = Utterance(u.id, u.language, u.feats, u.text, u.tokens)
    with pytest.raises(DataError, match="u0: no samples kept"):
        WaveAugment(PLAN, None).features([bare])


def test_vocal_tract_perturbation_warps_the_features_of_a_batch():
    """vtlp acts after the filter banks: with only it drawn, the features are the cached
    ones warped (formants up for a warp above 1), lengths unchanged; a plan without it draws
    what it drew before it existed."""
    import random

    from speechlab.audio.augment import draw_effects
    from speechlab.audio.features import warp_mel

    utts = [_utt(i) for i in range(3)]
    plan = AugmentPlan(vtlp_prob=1.0, vtlp_warp=(1.15, 1.15))
    feats = WaveAugment(plan, None).features(utts)
    for u, f in zip(utts, feats):
        assert f.shape == u.feats.shape and f.dtype == torch.float32
        warped = torch.from_numpy(warp_mel(u.feats.numpy(), 1.15))
        assert torch.allclose(f, warped, atol=1e-3)
        assert not torch.allclose(f, u.feats, atol=0.1)
    with_it = AugmentPlan(**{**PLAN.__dict__, "vtlp_prob": 1.0})
    for seed in range(20):
        old, new = draw_effects(PLAN, random.Random(seed)), draw_effects(with_it, random.Random(seed))
        assert new[:-1] == old and new[-1].name == "vtlp"
        assert 0.9 <= dict(new[-1].params)["warp"] <= 1.1
    rng_a, rng_b = random.Random(1), random.Random(1)
    draw_effects(PLAN, rng_a)
    draw_effects(AugmentPlan(**{**PLAN.__dict__, "vtlp_warp": (0.8, 1.2)}), rng_b)
    assert rng_a.random() == rng_b.random()  # without vtlp_prob, nothing more is drawn


def test_warp_mel_moves_a_formant_by_the_warp_and_keeps_the_band_ends():
    from speechlab.audio.features import FbankConfig, vtln_frequency, warp_mel
    from speechlab.errors import ConfigError

    cfg = FbankConfig()
    # a single peak at bin 30 moves up for warp > 1 and down for warp < 1
    frames = np.zeros((2, 80), np.float32)
    frames[:, 30] = 10.0
    up, down = warp_mel(frames, 1.1, cfg), warp_mel(frames, 0.9, cfg)
    assert np.argmax(up[0]) > 30 > np.argmax(down[0])
    assert np.array_equal(warp_mel(frames, 1.0, cfg), frames)
    f = np.array([20.0, 1000.0, 4000.0, 8000.0])
    assert vtln_frequency(f, 1.1, 20.0, 8000.0)[[0, 3]].tolist() == [20.0, 8000.0]
    assert vtln_frequency(f, 1.1, 20.0, 8000.0)[1] == pytest.approx(1000 / 1.1)
    assert np.all(np.diff(vtln_frequency(np.linspace(20, 8000, 500), 0.85, 20.0, 8000.0)) > 0)
    with pytest.raises(ConfigError, match="vocal tract warp"):
        warp_mel(frames, 3.0, cfg)
    with pytest.raises(DataError, match="log-mel frames"):
        warp_mel(frames[:, :40], 1.1, cfg)
