"""Bootstrap intervals: coverage of the estimate, width vs. data size and a normal reference."""

from __future__ import annotations

import math
import random

import kaldialign
import numpy as np
import pytest

from speechlab.errors import DataError
from speechlab.metrics import ErrorRate, bootstrap_ci, wer
from speechlab.metrics.stats import paired_bootstrap


def _corpus(n: int, seed: int, error_prob: float = 0.2):
    """n utterances of 1-12 words; each hypothesis word is replaced with error_prob."""
    rng = random.Random(seed)
    refs, hyps = [], []
    for _ in range(n):
        ref = [rng.choice("abcdefgh") for _ in range(rng.randint(1, 12))]
        hyp = [w if rng.random() > error_prob else "zz" for w in ref]
        refs.append(" ".join(ref))
        hyps.append(" ".join(hyp))
    return refs, hyps


def test_ci_contains_estimate_and_is_seeded():
    refs, hyps = _corpus(200, seed=1)
    res = wer(refs, hyps)
    low, high = bootstrap_ci(res, num_resamples=500, seed=3)
    assert low < res.wer < high
    assert bootstrap_ci(res, num_resamples=500, seed=3) == (low, high)
    assert bootstrap_ci(res, num_resamples=500, seed=4) != (low, high)
    low90, high90 = bootstrap_ci(res, level=0.9, num_resamples=500, seed=3)
    assert low <= low90 < high90 <= high


def test_ci_narrows_with_more_data():
    refs, hyps = _corpus(100, seed=2)
    small = wer(refs, hyps)
    large = wer(refs * 4, hyps * 4)  # same rate, four times the utterances
    lo_s, hi_s = bootstrap_ci(small, num_resamples=800, seed=0)
    lo_l, hi_l = bootstrap_ci(large, num_resamples=800, seed=0)
    # Width scales like 1/sqrt(n): four times the data halves it.
    assert (hi_l - lo_l) / (hi_s - lo_s) == pytest.approx(0.5, abs=0.12)


def test_ci_matches_normal_approximation_for_bernoulli_errors():
    # 2000 one-word utterances, exactly 400 wrong: WER 0.2 with binomial standard error.
    n, k = 2000, 400
    res = wer(["w"] * n, ["x"] * k + ["w"] * (n - k))
    low, high = bootstrap_ci(res, num_resamples=2000, seed=0)
    half = 1.959964 * math.sqrt(0.2 * 0.8 / n)
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)
    assert (low + high) / 2 == pytest.approx(0.2, abs=0.003)


def test_ci_close_to_kaldialign_bootstrap():
    refs, hyps = _corpus(300, seed=5)
    low, high = bootstrap_ci(wer(refs, hyps), num_resamples=2000, seed=0)
    ref = kaldialign.bootstrap_wer_ci([r.split() for r in refs], [h.split() for h in hyps],
                                      replications=2000, seed=0)
    # Kaldi uses mean +- 1.96 sd, we use percentiles: close, not equal.
    assert low == pytest.approx(ref["ci95min"], abs=0.004)
    assert high == pytest.approx(ref["ci95max"], abs=0.004)


def test_paired_bootstrap():
    refs, hyps = _corpus(300, seed=7, error_prob=0.25)
    base = wer(refs, hyps)
    same = paired_bootstrap(base, wer(refs, hyps), num_resamples=300)
    assert (same.delta, same.low, same.high, same.prob_improvement) == (0.0, 0.0, 0.0, 0.0)
    # The system fixes every error of every tenth utterance and breaks nothing.
    better_hyps = [r if i % 10 == 0 else h for i, (r, h) in enumerate(zip(refs, hyps))]
    better = wer(refs, better_hyps)
    pb = paired_bootstrap(base, better, num_resamples=1000, seed=1)
    assert pb.delta == pytest.approx(better.wer - base.wer) and pb.delta < 0
    assert pb.low < pb.delta < pb.high < 0
    assert pb.prob_improvement == 1.0
    # Pairing cancels the difficulty both systems share: the interval on the difference is
    # far tighter than what two independent intervals would give, sqrt(w_base^2 + w_sys^2).
    lo_b, hi_b = bootstrap_ci(base, num_resamples=1000, seed=1)
    lo_s, hi_s = bootstrap_ci(better, num_resamples=1000, seed=1)
    assert pb.high - pb.low < 0.5 * math.hypot(hi_b - lo_b, hi_s - lo_s)


def test_bootstrap_errors():
    res = wer(["a b"], ["a c"], ids=["u1"])
    with pytest.raises(DataError, match="per-utterance"):
        bootstrap_ci(ErrorRate(1, 0, 0, 2, 2, 1, 1))
    with pytest.raises(ValueError):
        bootstrap_ci(res, level=1.5)
    with pytest.raises(DataError, match="empty"):
        bootstrap_ci(wer([""], ["x"]), num_resamples=10)
    with pytest.raises(DataError, match="'u1'"):
        paired_bootstrap(res, wer(["a b"], ["a c"], ids=["u2"]))
    with pytest.raises(DataError, match="same utterances"):
        paired_bootstrap(res, wer(["a b", "c"], ["a c", "c"]))


def test_werr_interval_is_the_percentile_interval_of_paired_replicates():
    import numpy as np

    from speechlab.metrics.stats import werr_interval

    refs, hyps = _corpus(60, seed=3, error_prob=0.3)
    _, better = _corpus(60, seed=3, error_prob=0.15)
    ids = [f"u{i}" for i in range(60)]
    base, system = wer(refs, hyps, ids=ids), wer(refs, better, ids=ids)
    low, high = werr_interval(base, system, num_resamples=500, seed=7)
    # brute force: the same seeded draws, one replicate at a time
    e_b = np.array([u.errors for u in base.per_utterance])
    e_s = np.array([u.errors for u in system.per_utterance])
    n = np.array([u.ref_len for u in base.per_utterance])
    draws = np.random.default_rng(7).integers(0, 60, size=(500, 60))
    werrs = [100 * (e_b[d].sum() - e_s[d].sum()) / e_b[d].sum() for d in draws]
    assert (low, high) == pytest.approx(tuple(np.quantile(werrs, [0.025, 0.975])))
    observed = 100 * (base.wer - system.wer) / base.wer
    assert low < observed < high
    assert n.sum() == base.ref_words
    # matched by id: the system's utterances in another order give the same interval
    shuffled = ErrorRate(**{**system.__dict__, "per_utterance": system.per_utterance[::-1]})
    assert werr_interval(base, shuffled, num_resamples=500, seed=7) == (low, high)
    # a system equal to the baseline: exactly 0; one without errors: exactly 100
    assert werr_interval(base, base) == (0.0, 0.0)
    assert werr_interval(base, wer(refs, refs, ids=ids)) == pytest.approx((100.0, 100.0))


def test_werr_interval_refuses_different_utterances():
    from speechlab.metrics.stats import werr_interval

    refs, hyps = _corpus(10, seed=4)
    a = wer(refs, hyps, ids=[f"u{i}" for i in range(10)])
    b = wer(refs, hyps, ids=[f"v{i}" for i in range(10)])
    with pytest.raises(DataError, match="same, named utterances"):
        werr_interval(a, b)


def test_mean_difference_interval_planted_shift_and_brute_force():
    from speechlab.metrics import mean_difference_interval

    rng = np.random.default_rng(3)
    counts = rng.integers(5, 50, size=20).astype(float)
    base = rng.uniform(3.0, 6.0, size=20) * counts
    # A system exactly 0.4 dB per frame worse on every frame: every replicate says 0.4.
    low, high = mean_difference_interval(base, base + 0.4 * counts, counts)
    assert low == pytest.approx(0.4) and high == pytest.approx(0.4)
    # Against a direct loop over the same seeded draws.
    system = rng.uniform(3.0, 6.0, size=20) * counts
    draws = np.random.default_rng(0).integers(0, 20, size=(200, 20))
    want = [(system[i].sum() - base[i].sum()) / counts[i].sum() for i in draws]
    got = mean_difference_interval(base, system, counts, num_resamples=200, seed=0)
    assert got == pytest.approx(tuple(np.quantile(want, [0.025, 0.975])))
    with pytest.raises(DataError, match="one length"):
        mean_difference_interval(base, system[:5], counts)
