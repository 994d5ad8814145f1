"""Span masking of the latent frames and sampling of distractors (wav2vec 2.0 Sec. 3.1, 3.2).

Every frame starts a masked span of ``length`` frames with probability ``prob / length`` so
that about ``prob`` of the frames are masked (spans overlap); every utterance gets at least
``min_spans`` spans and spans stay inside its valid frames. Distractors for a masked frame are
the quantized targets of other masked frames of the same utterance, drawn uniformly.

Shapes: B batch, T frames, K distractors.
"""

from __future__ import annotations

import torch
from torch import Tensor


def span_mask(lengths: Tensor, num_frames: int, prob: float, length: int, *,
              min_spans: int = 2, generator: torch.Generator | None = None) -> Tensor:
    """(B,) valid frames -> (B, T) bool, True on masked frames."""
    B = lengths.shape[0]
    mask = torch.zeros(B, num_frames, dtype=torch.bool)
    if prob <= 0:
        return mask
    for b in range(B):
        n = int(lengths[b])
        if n <= length:  # too short for one span: mask nothing rather than everything
            continue
        spans = max(min_spans, int(prob * n / length + torch.rand((), generator=generator)))
        starts = torch.randperm(n - length, generator=generator)[:spans]
        idx = (starts[:, None] + torch.arange(length)[None, :]).reshape(-1)
        mask[b, idx] = True
    return mask


def sample_distractors(mask: Tensor, num: int, generator: torch.Generator | None = None) -> Tensor:
    """(B, T) mask -> (M, K) flat indices into (B * T) of K distractors for each of the M masked
    frames (in ``mask.nonzero()`` order), each another masked frame of the same utterance.
    An utterance with one masked frame gets itself (the loss then ignores the equal vectors)."""
    B, T = mask.shape
    out = []
    for b in range(B):
        frames = mask[b].nonzero().squeeze(1)
        m = frames.numel()
        if m == 0:
            continue
        if m == 1:
            out.append((b * T + frames).repeat(1, num))
            continue
        # draw among the m - 1 others: shift draws at or above one's own position by one
        draw = torch.randint(0, m - 1, (m, num), generator=generator)
        draw = draw + (draw >= torch.arange(m)[:, None]).long()
        out.append(b * T + frames[draw])
    return torch.cat(out) if out else torch.zeros(0, num, dtype=torch.long)
