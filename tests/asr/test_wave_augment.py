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
