"""The plain CTC objective, shared by every family that uses it: the RNN-T task's auxiliary
loss and wav2vec 2.0 fine-tuning (the CTC-topologies paper's graph loss, which equals it for
S1-T1, is :mod:`speechlab.asr.ctc.loss`)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def ctc_loss(logits: Tensor, logit_lens: Tensor, targets: Tensor, target_lens: Tensor,
             blank: int = 0) -> Tensor:
    """CTC loss, mean over the batch of per-utterance negative log-likelihoods.

    logits (B,T,V) unnormalised, logit_lens (B,), targets (B,U) label ids (padding anything in
    range), target_lens (B,). Utterances too short for their labels under CTC (which needs a
    frame per label plus one between repeats) add zero instead of +inf: as an auxiliary loss
    the main loss still trains on them.
    """
    log_probs = logits.log_softmax(-1).transpose(0, 1)  # (T,B,V)
    nll = F.ctc_loss(log_probs, targets, logit_lens, target_lens, blank=blank,
                     reduction="none", zero_infinity=True)
    return nll.mean()
