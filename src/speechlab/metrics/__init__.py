"""Scoring: word/character error rates, LID accuracy and bootstrap confidence intervals."""

from speechlab.metrics.error_rate import (
    ErrorRate,
    UtteranceErrors,
    align_words,
    cer,
    pool_runs,
    wer,
    werr,
    word_weighted_average,
)
from speechlab.metrics.lid import (
    LidAccuracy,
    lid_accuracy,
    lid_by_script,
    script_of,
    utterance_lid_accuracy,
)
from speechlab.metrics.stats import (PairedBootstrap, bootstrap_ci, mean_difference_interval,
                                     paired_bootstrap, werr_interval)

__all__ = [
    "ErrorRate",
    "LidAccuracy",
    "PairedBootstrap",
    "UtteranceErrors",
    "align_words",
    "bootstrap_ci",
    "cer",
    "lid_accuracy",
    "lid_by_script",
    "paired_bootstrap",
    "pool_runs",
    "script_of",
    "utterance_lid_accuracy",
    "wer",
    "werr",
    "werr_interval",
    "mean_difference_interval",
    "word_weighted_average",
]
