"""MCD, F0 RMSE and V/UV accuracy against hand computations."""

import math

import numpy as np
import pytest

from speechlab.metrics.tts import MCD_CONSTANT, f0_rmse, mcd, mcd_per_frame, vuv_accuracy


def test_mcd_constant_is_the_usual_one():
    assert MCD_CONSTANT == pytest.approx(6.141851463713754)


def test_mcd_by_hand_excludes_c0():
    ref = np.array([[10.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    # c0 differs wildly and must not count; frame 1: |(3,4)| = 5; frame 2: |(0,0)| = 0
    hyp = np.array([[-50.0, 3.0, 4.0], [99.0, 1.0, 1.0]])
    assert mcd_per_frame(ref, hyp) == pytest.approx([5 * MCD_CONSTANT, 0.0])
    assert mcd(ref, hyp) == pytest.approx(2.5 * 10 * math.sqrt(2) / math.log(10))


def test_mcd_mean_of_frames_not_of_squares():
    ref = np.zeros((2, 2))
    hyp = np.array([[0.0, 1.0], [0.0, 3.0]])
    assert mcd(ref, hyp) == pytest.approx(2.0 * MCD_CONSTANT)  # (1 + 3) / 2, not sqrt(5)


def test_mcd_refuses_unaligned_frames():
    with pytest.raises(ValueError, match="same shape"):
        mcd(np.zeros((3, 4)), np.zeros((2, 4)))


def test_f0_rmse_only_on_frames_voiced_in_both():
    ref = np.array([100.0, 0.0, 200.0, 150.0, 0.0])
    hyp = np.array([110.0, 120.0, 0.0, 120.0, 0.0])
    # frames 0 and 3: errors 10 and 30 -> sqrt((100 + 900) / 2)
    assert f0_rmse(ref, hyp) == pytest.approx(math.sqrt(500.0))
    assert math.isnan(f0_rmse(np.zeros(3), np.ones(3)))


def test_vuv_accuracy_by_hand():
    ref = np.array([100.0, 0.0, 200.0, 150.0, 0.0])
    hyp = np.array([110.0, 120.0, 0.0, 120.0, 0.0])
    assert vuv_accuracy(ref, hyp) == pytest.approx(3 / 5)
