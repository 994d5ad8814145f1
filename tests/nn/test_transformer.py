"""Transformer blocks over padded batches: padding changes nothing, masks are exact."""

from __future__ import annotations

import math

import pytest
import torch

from speechlab.nn import lengths_to_mask
from speechlab.nn.transformer import Conv2dSubsampling, TransformerEncoder, sinusoidal_positions


def test_lengths_to_mask_exclusive_and_inclusive():
    lens = torch.tensor([0, 2, 3])
    assert lengths_to_mask(lens, 4).tolist() == [[False] * 4, [True, True, False, False],
                                                 [True, True, True, False]]
    assert lengths_to_mask(lens, inclusive=True).tolist()[1] == [True, True, True, False]
    assert lengths_to_mask(lens).shape == (3, 3)


def test_an_utterance_gives_the_same_output_alone_and_padded():
    torch.manual_seed(0)
    enc = TransformerEncoder(dim=16, layers=2, heads=2, ff_dim=32, dropout=0.0).eval()
    x = torch.randn(2, 9, 16)
    lens = torch.tensor([9, 5])
    batched = enc(x, lens)
    alone = enc(x[1:, :5], lens[1:])
    torch.testing.assert_close(batched[1, :5], alone[0], atol=1e-5, rtol=1e-5)
    assert batched[1, 5:].abs().max() == 0  # padding stays zero
    # changing what lies in the padding changes nothing
    x2 = x.clone()
    x2[1, 5:] = 1e3
    torch.testing.assert_close(enc(x2, lens)[1, :5], batched[1, :5])


def test_subsampling_sees_only_real_frames():
    torch.manual_seed(0)
    sub = Conv2dSubsampling(feature_dim=20, channels=3, dim=8)
    x = torch.randn(1, 30, 20)
    lens = torch.tensor([23])
    y, ylens = sub(x, lens)
    assert ylens.tolist() == [((23 - 1) // 2 - 1) // 2] and y.shape[1] == ((30 - 1) // 2 - 1) // 2
    half = Conv2dSubsampling(feature_dim=20, channels=3, dim=8, second_stride=1)
    yh, yh_lens = half(x, lens)
    assert yh_lens.tolist() == [(23 - 1) // 2 - 2] and yh.shape[1] == (30 - 1) // 2 - 2
    x2 = x.clone()
    x2[:, 23:] = 7.0
    torch.testing.assert_close(sub(x2, lens)[0][:, : ylens[0]], y[:, : ylens[0]])


def test_sinusoidal_positions_follow_the_formula():
    pe = sinusoidal_positions(7, 6)
    for pos in (0, 3, 6):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert pe[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
