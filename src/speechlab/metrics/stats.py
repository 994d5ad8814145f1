"""Bootstrap confidence intervals for error rates (Bisani & Ney, ICASSP 2004).

Utterances, not words, are the independent units of a test set, so both functions resample
whole utterances with replacement and recompute the *pooled* rate (resampled errors / resampled
reference words) of each replicate; the interval is the percentile interval of those
replicates. :func:`paired_bootstrap` resamples the same utterance indices for two systems, which
cancels the per-utterance difficulty they share and gives a much tighter interval on their
difference than two independent intervals would.

Both take :class:`~speechlab.metrics.error_rate.ErrorRate` objects returned by ``wer``/``cer``
(they need its ``per_utterance`` entries) and a ``seed``, so a report is reproducible.
:func:`mean_difference_interval` does the same paired resampling for a pooled per-frame mean
such as MCD, from each utterance's summed values and frame count.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from speechlab.errors import DataError
from speechlab.metrics.error_rate import ErrorRate

# Upper bound on the (replicates x utterances) index matrix drawn at once, to keep memory flat
# for large test sets (10^6 int64 = 8 MB).
_MAX_DRAW = 1_000_000


def _per_utt_arrays(result: ErrorRate, name: str) -> tuple[np.ndarray, np.ndarray]:
    if not result.per_utterance:
        raise DataError(f"{name} has no per-utterance counts to resample; compute it with "
                        "speechlab.metrics.wer()/cer() rather than from totals")
    errors = np.array([u.errors for u in result.per_utterance], dtype=np.int64)
    ref_len = np.array([u.ref_len for u in result.per_utterance], dtype=np.int64)
    return errors, ref_len


def _check_options(level: float, num_resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must lie in (0, 1), got {level}")
    if num_resamples < 1:
        raise ValueError(f"num_resamples must be positive, got {num_resamples}")


def _resample_indices(n: int, num_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """Yield (R_chunk, n) index matrices, num_resamples rows in total, from one seeded stream."""
    rng = np.random.default_rng(seed)
    chunk = max(1, _MAX_DRAW // n)
    done = 0
    while done < num_resamples:
        rows = min(chunk, num_resamples - done)
        yield rng.integers(0, n, size=(rows, n))
        done += rows


def _rates(errors: np.ndarray, ref_len: np.ndarray, idx: np.ndarray) -> np.ndarray:
    ref = ref_len[idx].sum(axis=1)
    err = errors[idx].sum(axis=1)
    # A replicate that drew only empty references has no defined rate; it is dropped (NaN).
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ref > 0, err / np.maximum(ref, 1), np.nan)


def _interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        raise DataError("every bootstrap replicate drew only empty references; the error rate "
                        "is undefined for this test set")
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_ci(result: ErrorRate, *, level: float = 0.95, num_resamples: int = 1000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval ``(low, high)`` of the pooled error rate (fractions)."""
    _check_options(level, num_resamples)
    errors, ref_len = _per_utt_arrays(result, "the result")
    rates = np.concatenate([_rates(errors, ref_len, idx)
                            for idx in _resample_indices(len(errors), num_resamples, seed)])
    return _interval(rates, level)


@dataclass(frozen=True)
class PairedBootstrap:
    """Difference ``system - baseline`` of two error rates on the same utterances.

    ``delta`` is the observed difference (negative = the system makes fewer errors), ``low`` and
    ``high`` bound it at the requested level, and ``prob_improvement`` is the fraction of
    replicates in which the system's rate is strictly below the baseline's (Bisani & Ney's
    "probability of improvement").
    """

    delta: float
    low: float
    high: float
    prob_improvement: float
    level: float
    num_resamples: int


def _check_same_references(ids: list, base_ref: np.ndarray, sys_ref: np.ndarray, what: str) -> None:
    """Both systems' utterances (aligned) must have references of the same length."""
    if not np.array_equal(base_ref, sys_ref):
        first = int(np.flatnonzero(base_ref != sys_ref)[0])
        raise DataError(f"{what} needs the same references: utterance "
                        f"{ids[first] or '#' + str(first)} has {base_ref[first]} reference "
                        f"tokens for the baseline but {sys_ref[first]} for the system")


def paired_bootstrap(baseline: ErrorRate, system: ErrorRate, *, level: float = 0.95,
                     num_resamples: int = 1000, seed: int = 0) -> PairedBootstrap:
    """Paired bootstrap of ``system.wer - baseline.wer`` over the utterances both scored."""
    _check_options(level, num_resamples)
    base_err, base_ref = _per_utt_arrays(baseline, "the baseline result")
    sys_err, sys_ref = _per_utt_arrays(system, "the system result")
    if len(base_err) != len(sys_err):
        raise DataError(f"paired bootstrap needs the same utterances: the baseline scored "
                        f"{len(base_err)}, the system {len(sys_err)}")
    base_ids = [u.utt_id for u in baseline.per_utterance]
    sys_ids = [u.utt_id for u in system.per_utterance]
    if base_ids != sys_ids:
        first = next(i for i, (a, b) in enumerate(zip(base_ids, sys_ids)) if a != b)
        raise DataError(f"paired bootstrap needs the same utterances in the same order: entry "
                        f"#{first} is {base_ids[first]!r} for the baseline but "
                        f"{sys_ids[first]!r} for the system")
    _check_same_references(base_ids, base_ref, sys_ref, "paired bootstrap")
    deltas = []
    for idx in _resample_indices(len(base_err), num_resamples, seed):
        deltas.append(_rates(sys_err, sys_ref, idx) - _rates(base_err, base_ref, idx))
    samples = np.concatenate(deltas)
    low, high = _interval(samples, level)
    valid = samples[~np.isnan(samples)]
    return PairedBootstrap(
        delta=system.wer - baseline.wer,
        low=low,
        high=high,
        prob_improvement=float(np.mean(valid < 0)),
        level=level,
        num_resamples=num_resamples,
    )


def werr_interval(baseline: ErrorRate, system: ErrorRate, *, level: float = 0.95,
                  num_resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval ``(low, high)`` of the relative error reduction
    ``100 (b - s) / b`` in percent (the multi-softmax paper's WERR), resampling the utterances
    of both systems together (paired). Utterances are matched by id, so the two results may
    list them in different orders, but they must hold the same ones."""
    _check_options(level, num_resamples)
    base_err, base_ref = _per_utt_arrays(baseline, "the baseline result")
    sys_err, sys_ref = _per_utt_arrays(system, "the system result")
    base_ids = [u.utt_id for u in baseline.per_utterance]
    sys_pos = {u.utt_id: i for i, u in enumerate(system.per_utterance)}
    if None in sys_pos or len(sys_pos) != len(base_ids) or set(sys_pos) != set(base_ids):
        missing = sorted(set(base_ids) ^ set(sys_pos), key=str)[:3]
        raise DataError(f"a WERR interval needs both systems scored on the same, named "
                        f"utterances; they differ in e.g. {missing}")
    order = np.array([sys_pos[i] for i in base_ids])
    sys_err, sys_ref = sys_err[order], sys_ref[order]
    _check_same_references(base_ids, base_ref, sys_ref, "a WERR interval")
    samples = []
    for idx in _resample_indices(len(base_err), num_resamples, seed):
        b = _rates(base_err, base_ref, idx)
        s = _rates(sys_err, sys_ref, idx)
        with np.errstate(divide="ignore", invalid="ignore"):
            samples.append(np.where(b > 0, 100.0 * (b - s) / b, np.nan))
    return _interval(np.concatenate(samples), level)


def mean_difference_interval(baseline_sums, system_sums, counts, *, level: float = 0.95,
                             num_resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """Paired percentile-bootstrap interval of ``system - baseline`` for a pooled per-frame
    mean such as MCD (e.g. dB per frame).

    Per utterance ``i``: ``baseline_sums[i]`` and ``system_sums[i]`` are the sums of the
    per-frame values over its ``counts[i]`` frames (the same frames for both systems). Each
    replicate resamples utterances with replacement and takes the difference of the two pooled
    means (resampled sums / resampled frames), so utterances, not frames, are the independent
    units, as in :func:`paired_bootstrap`. Positive: the system's mean is higher.
    """
    _check_options(level, num_resamples)
    base = np.asarray(baseline_sums, dtype=np.float64)
    sys_ = np.asarray(system_sums, dtype=np.float64)
    n = np.asarray(counts, dtype=np.float64)
    if not (base.shape == sys_.shape == n.shape) or base.ndim != 1:
        raise DataError(f"mean_difference_interval: per-utterance sums {base.shape} and "
                        f"{sys_.shape} and frame counts {n.shape} must be 1-D of one length")
    if base.size == 0 or n.sum() <= 0:
        raise DataError("mean_difference_interval: no frames to resample")
    diffs = []
    for idx in _resample_indices(base.size, num_resamples, seed):
        frames = n[idx].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            diffs.append(np.where(frames > 0, (sys_[idx].sum(axis=1) - base[idx].sum(axis=1))
                                  / np.maximum(frames, 1), np.nan))
    return _interval(np.concatenate(diffs), level)
