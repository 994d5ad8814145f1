"""The demo's fbank front end: the conv encoder's 20 ms frames, per-utterance normalised bins,
padding that does not leak into an utterance's frames, and a model that pre-trains and
fine-tunes on it."""

from __future__ import annotations

import pytest
import torch

from speechlab.errors import DataError
from speechlab.ssl.wav2vec2.config import preset
from speechlab.ssl.wav2vec2.feature_encoder import FbankEncoder, FeatureEncoder
from speechlab.ssl.wav2vec2.model import CtcConfig, build, build_ctc


def _wav(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n) / 16000
    return 0.3 * torch.sin(2 * torch.pi * 440 * t) + 0.05 * torch.randn(n, generator=g)


@pytest.mark.parametrize("samples", [560, 879, 880, 16000, 23456])
def test_fbank_frames_are_the_conv_encoders_20ms_frames(samples):
    enc = FbankEncoder()
    feats, lens = enc(_wav(samples)[None])
    assert feats.shape == (1, int(lens[0]), 160)
    # Kaldi frames with snip_edges: 1 + (S - 400) // 160, stacked in pairs
    assert int(lens[0]) == (1 + (samples - 400) // 160) // 2
    assert int(enc.output_lengths(torch.tensor([samples]))[0]) == int(lens[0])
    if samples >= 16000:  # 50 frames a second, within a frame of the conv encoder's count
        conv = FeatureEncoder((4,) * 7, (10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2))
        assert abs(int(conv.output_lengths(torch.tensor([samples]))[0]) - int(lens[0])) <= 1
    assert preset("tiny", front_end="fbank").receptive_field == enc.receptive_field == 560
    assert preset("tiny", front_end="fbank").hop == 320


def test_fbank_bins_are_normalised_per_utterance_and_padding_does_not_leak():
    enc = FbankEncoder()
    a, b = _wav(16000, 1), _wav(9000, 2) * 3.0
    pad = torch.zeros(2, 16000)
    pad[0], pad[1, :9000] = a, b
    feats, lens = enc(pad, torch.tensor([16000, 9000]))
    one, _ = enc(b[None])
    n = int(lens[1])
    torch.testing.assert_close(feats[1, :n], one[0])
    assert feats[1, n:].abs().sum() == 0
    mel = feats[0, : int(lens[0])].reshape(-1, 80)  # the stacked pairs are 10 ms frames
    assert mel.mean(0).abs().max() < 1e-3
    # scaling the audio shifts every log-mel bin by a constant, which the normalisation removes
    torch.testing.assert_close(enc((b * 0.1)[None])[0], one, atol=1e-3, rtol=1e-3)


def test_fbank_front_end_refuses_short_audio():
    with pytest.raises(DataError, match="559 samples is shorter than the fbank front end"):
        FbankEncoder()(torch.zeros(1, 559))


def test_fbank_model_pretrains_and_fine_tunes():
    cfg = preset("ci", front_end="fbank")
    model = build(cfg)
    assert not any(p for p in model.feature_encoder.parameters())
    wav = torch.stack([_wav(8000, 3), _wav(8000, 4)])
    lens = torch.tensor([8000, 6000])
    feats, flens = model.features(wav, lens)
    mask = torch.zeros(feats.shape[:2], dtype=torch.bool)
    mask[:, 3:6] = True
    out = model(wav, lens, mask)
    assert out.context.shape[:2] == feats.shape[:2] and torch.equal(out.lens, flens)
    ctc = build_ctc(CtcConfig(cfg, vocab=7)).eval()  # no dropout
    log_probs, out_lens = ctc(feats, flens)
    assert log_probs.shape == (2, feats.shape[1], 7)
    # the same numbers from waveforms as from precomputed features (the fine-tuning cache)
    torch.testing.assert_close(ctc(wav, lens)[0], log_probs)
