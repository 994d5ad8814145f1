"""Fine-tuning wav2vec 2.0 with CTC on characters (fairseq's base_10h recipe, as the
local-attention paper does): :class:`FinetuneTask`.

The feature encoder stays frozen throughout, so its outputs are computed once per utterance
(:mod:`.conv_features`) and shared by every fine-tuned variant of one pre-trained model; the
Transformer (with the feature projection) is frozen too for the first ``freeze_updates``
updates, while only the CTC head learns. Latent frames are span-masked with the mask embedding
(``mask_prob``, ``mask_length``) and channels are zeroed in spans (``channel_mask_prob``,
``channel_mask_length``), as in the recipe. Labels are a
:class:`~speechlab.text.graphemes.GraphemeTokenizer`'s: graphemes and their word-initial
forms, so word boundaries need no separator symbol.

Shapes: B batch, T frames, C conv channels, U labels.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from speechlab.asr.data import with_labels
from speechlab.config import check_fields, ranged
from speechlab.devices import device_of, move
from speechlab.ssl.wav2vec2.conv_features import FeatureBatch, FeatureUtterance, collate_features
from speechlab.ssl.wav2vec2.masking import span_mask
from speechlab.train.sampler import BucketBatches, MapBatches


@dataclass(frozen=True)
class FinetuneTaskConfig:
    max_frames: int = ranged(4000, ge=1)
    batch_size: int = ranged(16, ge=1)
    freeze_updates: int = ranged(0, ge=0)
    mask_prob: float = ranged(0.65, ge=0, le=1)
    mask_length: int = ranged(10, ge=1)
    channel_mask_prob: float = ranged(0.5, ge=0, le=1)
    channel_mask_length: int = ranged(64, ge=1)
    valid_utterances: int = ranged(100, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)


class FinetuneTask:
    """The trainer's task for CTC fine-tuning of a :class:`~.model.Wav2Vec2CTC` on frozen conv
    features."""

    def __init__(self, train: Sequence[FeatureUtterance], dev: Sequence[FeatureUtterance],
                 cfg: FinetuneTaskConfig, *, text_of: Callable[[list[int]], str],
                 seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        self.cfg = cfg
        self.text_of = text_of
        self.train, self.dev = with_labels(train, dev, cfg.valid_utterances, labels="labels")
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.step = 0

    def set_step(self, step: int) -> None:
        self.step = step

    def batches(self) -> MapBatches:
        sampler = BucketBatches(durations=[u.feats.shape[0] for u in self.train],
                                batch_size=self.cfg.batch_size, max_frames=self.cfg.max_frames,
                                seed=self.seed, rank=self.rank, world_size=self.world_size)
        return MapBatches(sampler, lambda idx: collate_features([self.train[i] for i in idx]))

    def _channel_mask(self, feats: Tensor) -> Tensor:
        c = self.cfg
        B, _, C = feats.shape
        keep = torch.ones(B, 1, C)
        if c.channel_mask_prob > 0 and C > c.channel_mask_length:
            spans = span_mask(torch.full((B,), C), C, c.channel_mask_prob, c.channel_mask_length,
                              min_spans=0)
            keep = (~spans).float()[:, None, :]
        return keep.to(feats.device)

    def _nll(self, model: nn.Module, batch: FeatureBatch, train: bool) -> Tensor:
        from speechlab.nn.ctc import ctc_loss

        c = self.cfg
        feats, mask = batch.feats, None
        if train:
            mask = span_mask(batch.lens.cpu(), feats.shape[1], c.mask_prob, c.mask_length,
                             min_spans=0).to(feats.device)
            feats = feats * self._channel_mask(feats)
        frozen = train and self.step < c.freeze_updates
        log_probs, lens = model(feats, batch.lens, mask, freeze_encoder=frozen)
        return ctc_loss(log_probs, lens, batch.targets, batch.target_lens)

    def loss(self, model: nn.Module, batch: FeatureBatch) -> tuple[Tensor, dict[str, float], float]:
        nll = self._nll(model, batch, train=True)
        return nll, {"frozen": float(self.step < self.cfg.freeze_updates)}, float(len(batch.ids))

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Dev CTC loss per utterance and greedy character error rate [%] (``text_of`` turns
        label ids into text)."""
        from speechlab.metrics import cer
        from speechlab.ssl.wav2vec2.decode import greedy_ids

        total, n, refs, hyps = 0.0, 0, [], []
        device = device_of(model)
        for i in range(0, len(self.dev), 16):
            batch = move(collate_features(self.dev[i : i + 16]), device)
            total += float(self._nll(model, batch, train=False)) * len(batch.ids)
            n += len(batch.ids)
            log_probs, lens = model(batch.feats, batch.lens)
            for b, u in enumerate(self.dev[i : i + 16]):
                refs.append(u.text)
                hyps.append(self.text_of(greedy_ids(log_probs[b, : int(lens[b])])))
        return {"loss": total / n if n else math.nan,
                "cer": 100.0 * cer(refs, hyps).wer if refs else math.nan}
