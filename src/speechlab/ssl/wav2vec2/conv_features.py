"""The frozen feature encoder's frames of each utterance, as CTC fine-tuning reads them
(:mod:`.finetune`): computed once per utterance (:func:`conv_features`), kept with the
utterance's text and label ids (:class:`FeatureUtterance`), padded into batches
(:func:`collate_features`).

Shapes: B batch, T frames, C conv channels, U labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class FeatureUtterance:
    """One utterance's frozen conv features (T, C), its text and label ids."""

    id: str
    feats: Tensor
    text: str
    tokens: tuple[int, ...] | None


@dataclass
class FeatureBatch:
    """Padded :class:`FeatureUtterance` s: feats (B, T, C) with lens (B,), targets (B, U) with
    target_lens (B,) (an utterance without labels has none)."""

    ids: list[str]
    feats: Tensor
    lens: Tensor
    targets: Tensor
    target_lens: Tensor


def collate_features(utts: Sequence[FeatureUtterance]) -> FeatureBatch:
    """Pad ``utts`` (zeros past each one's frames and labels) into one batch."""
    lens = torch.tensor([u.feats.shape[0] for u in utts])
    feats = torch.zeros(len(utts), int(lens.max()), utts[0].feats.shape[1])
    for i, u in enumerate(utts):
        feats[i, : u.feats.shape[0]] = u.feats
    labels = [list(u.tokens or ()) for u in utts]
    t_lens = torch.tensor([len(t) for t in labels])
    targets = torch.zeros(len(utts), max(int(t_lens.max()), 1), dtype=torch.long)
    for i, t in enumerate(labels):
        targets[i, : len(t)] = torch.tensor(t, dtype=torch.long)
    return FeatureBatch([u.id for u in utts], feats, lens, targets, t_lens)


def conv_features(feature_encoder: nn.Module, wavs: Sequence[Tensor]) -> list[Tensor]:
    """Each waveform's (T, C) conv features, one utterance at a time (no padding enters the
    first layer's group normalisation)."""
    out = []
    with torch.no_grad():
        for w in wavs:
            feats, _ = feature_encoder(torch.as_tensor(w, dtype=torch.float32)[None])
            out.append(feats[0].clone())
    return out
