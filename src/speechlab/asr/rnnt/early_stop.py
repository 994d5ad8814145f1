"""Early stopping of the LID-free decoders (Section 6.3 of the multi-softmax paper).

Confidence of language l after encoder frame t, Eq. (1): ``s_l(t) = sum_{t'<=t} log P_t'(l)``.
Every decoder still on runs frame t; it is switched off after frame t, for good, if
``t > tau`` and ``s_l(t) < max_k s_k(t) - s_th`` (strictly: a score exactly ``s_th`` below the
best stays on). A decoder switched off at frame t ran ``t + 1`` frames; one never switched off
ran all T. ``tau = inf`` or ``s_th = inf`` keeps every decoder on (Table 7, first row). The
LID model keeps running on every frame, so the scores of switched-off languages keep moving and
``max_k`` is over all languages.

Average decoder time, Eq. (2): ``T_avg = sum_l t_l / T`` (4 when all four decoders run).

Scores are summed in float64 in both implementations below, so the whole-utterance and the
frame-by-frame versions agree exactly.

Shapes: T frames, L languages.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from speechlab.errors import ConfigError, DataError


def _check_thresholds(tau: float, s_th: float) -> None:
    if math.isnan(tau) or math.isnan(s_th):
        raise ConfigError("early stopping: tau and s_th must be numbers, not nan")
    if s_th < 0:
        raise ConfigError(f"early stopping: s_th must be >= 0 (a margin below the best score), got {s_th}")


def active_frames(lid_log_probs: Tensor, tau: float, s_th: float) -> Tensor:
    """Frames each language's decoder runs: lid_log_probs (T,L) of one utterance -> (L,) long.

    ``tau`` is in encoder frames (30 ms in the paper), ``s_th`` in nats.
    """
    _check_thresholds(tau, s_th)
    if lid_log_probs.dim() != 2:
        raise DataError(f"lid_log_probs must be (T, L) for one utterance, got shape {tuple(lid_log_probs.shape)}")
    T, L = lid_log_probs.shape
    if bool(torch.isnan(lid_log_probs).any()):
        raise DataError("lid_log_probs contains nan")
    if T == 0:
        return torch.zeros(L, dtype=torch.long)
    s = lid_log_probs.detach().to(torch.float64).cpu().cumsum(0)  # Eq. (1), (T, L)
    t = torch.arange(T, dtype=torch.float64)[:, None]
    switch_off = (t > tau) & (s < s.max(dim=1, keepdim=True).values - s_th)  # (T, L)
    first = switch_off.to(torch.uint8).argmax(dim=0)  # first frame meeting the condition
    return torch.where(switch_off.any(dim=0), first + 1, torch.full_like(first, T))


def t_avg(frames: Tensor, num_frames: int) -> float:
    """Eq. (2): average number of decoders running per frame, from :func:`active_frames`."""
    return float(frames.sum()) / num_frames if num_frames else 0.0


class EarlyStopper:
    """:func:`active_frames` one frame at a time, for streaming decoders.

    ``step(log P_t)`` returns which decoders run frame t, then applies the switch-off rule;
    ``steps`` does the same for a chunk of frames at once.
    """

    def __init__(self, num_languages: int, tau: float = math.inf, s_th: float = math.inf) -> None:
        _check_thresholds(tau, s_th)
        self.tau = tau
        self.s_th = s_th
        self.scores = torch.zeros(num_languages, dtype=torch.float64)  # s_l(t), Eq. (1)
        self.on = torch.ones(num_languages, dtype=torch.bool)
        self.frames = torch.zeros(num_languages, dtype=torch.long)  # frames each decoder ran
        self.t = 0

    def step(self, log_probs: Tensor) -> Tensor:
        """log_probs (L,) = log P_t(l) of the next frame -> (L,) bool, decoders that run it."""
        running = self.on.clone()
        self.scores += log_probs.detach().to(torch.float64).cpu()
        self.frames += running.long()
        if self.t > self.tau:
            self.on &= ~(self.scores < self.scores.max() - self.s_th)
        self.t += 1
        return running

    def steps(self, log_probs: Tensor) -> Tensor:
        """log_probs (T, L) of the next T frames -> (T, L) bool, decoders that run each: the
        same as :meth:`step` frame by frame (the scores are summed in the same order), in a
        few tensor operations instead of a few per frame."""
        L = self.scores.shape[0]
        lp = log_probs.detach().to(torch.float64).cpu()
        T = lp.shape[0]
        if T == 0:
            return torch.zeros(0, L, dtype=torch.bool)
        s = torch.cat([self.scores[None], lp]).cumsum(0)[1:]  # s_l(t) after each frame, Eq. (1)
        t = torch.arange(self.t, self.t + T, dtype=torch.float64)[:, None]
        switch_off = (t > self.tau) & (s < s.max(dim=1, keepdim=True).values - self.s_th)
        on = self.on & (switch_off.cumsum(0) == 0)  # (T, L): still on after each frame
        running = torch.cat([self.on[None], on[:-1]])
        self.scores.copy_(s[-1])
        self.frames += running.sum(0)
        self.on.copy_(on[-1])
        self.t += T
        return running
