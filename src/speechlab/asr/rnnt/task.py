"""Training the multi-softmax RNN-T family with the shared trainer.

:class:`RNNTTask` is the :class:`speechlab.train.trainer.Task` the trainer drives, over the
in-memory utterances of :mod:`speechlab.asr.data`: language-homogeneous mini-batches whose
language is drawn with probability proportional to its hours of training data (Section 4 of
the multi-softmax paper), the RNN-T loss, optionally the auxiliary CTC loss, plus the
frame-level LID cross-entropy for the ``multisoftmax_lid`` variant (Section 4.2).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from torch import Tensor, nn

from speechlab.nn.ctc import ctc_loss
from speechlab.asr.data import Batch, Utterance, WaveAugment, collate
from speechlab.audio.augment import AugmentPlan
from speechlab.asr.rnnt.loss import rnnt_loss, rnnt_loss_fused
from speechlab.asr.rnnt.model import RNNT, RNNTOutput, UnionMap, lid_ce_loss
from speechlab.audio.transforms import SpecAugment, SpecAugmentConfig
from speechlab.config import check_fields, ranged
from speechlab.devices import device_of, move
from speechlab.errors import DataError
from speechlab.metrics.lid import utterance_lid_accuracy
from speechlab.train.sampler import GroupedBatches, LanguageBatch, LanguageBatches, MapBatches

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskConfig:
    """Batching and loss options of RNN-T training.

    ``max_frames`` bounds the padded 10 ms frames in a batch; ``lid_weight`` scales the LID
    cross-entropy (the paper simply adds it: 1.0) and ``lid_reduction`` says whether it is a
    per-utterance sum over frames, like the RNN-T loss, or a mean over frames (see
    :func:`lid_ce_loss`); ``loss`` picks the full-logits loss or the fused one that never holds
    all (B,T,U+1,V) logits (for large vocabularies).

    ``batches_per_update`` language-homogeneous batches (each language drawn independently,
    ``max_frames`` each) make one update, their losses averaged per utterance. With 1 (the
    paper's description) every update sees one language, and the LID head only learns to
    follow the language of the last few batches: its posteriors stay at the training priors
    (docs/multisoftmax.md). Several per update is what data-parallel training on several
    devices, each with its own homogeneous batch, does.
    """

    max_frames: int = ranged(6000, ge=1)
    lid_weight: float = ranged(1.0, ge=0)
    lid_reduction: Literal["utterance", "frame"] = "frame"
    batches_per_update: int = ranged(1, ge=1)
    # Weight each batch's LID cross-entropy by 1 / (L * the chance of drawing its language), so
    # that every language weighs the same in the LID term although batches are drawn by hours
    # (the low-resource languages otherwise stay below the head's priors).
    lid_balance: bool = False
    # Languages are drawn for batches with probability proportional to hours ** alpha: 1 by
    # hours (the paper's natural mix), 0 uniformly, 0.5 in between (the usual multilingual
    # temperature sampling with T = 1 / alpha). Not in the paper below 1.
    language_alpha: float = ranged(1.0, ge=0, le=1)
    # "drawn": each batch's language drawn by the weights above; "cycle": the languages in
    # turn, so that with batches_per_update equal to the number of languages every update has
    # one batch of each (the LID head's bias then never follows the last language seen).
    language_order: Literal["drawn", "cycle"] = "drawn"
    loss: Literal["full", "fused"] = "full"
    spec_augment: bool = True
    valid_utterances: int = ranged(200, ge=1)
    # Weight of an auxiliary CTC loss on the encoder (through the joint network with the
    # prediction network left out, no extra parameters). The paper trains with the RNN-T loss
    # alone (0.0); on a few CPU-hours of synthetic data the CTC term makes the encoder learn
    # the audio-to-grapheme mapping in far fewer updates (see docs/multisoftmax.md).
    ctc_weight: float = ranged(0.0, ge=0)
    # Speaker and channel effects drawn afresh each time a training utterance is batched
    # (none by default; speechlab.asr.data.WaveAugment).
    augment: AugmentPlan = field(default_factory=AugmentPlan)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class BatchGroup:
    """Several language-homogeneous batches that make one update together."""

    batches: list[Batch]

    @property
    def ids(self) -> list[str]:
        return [i for b in self.batches for i in b.ids]


def _loss_full(out: RNNTOutput, batch: Batch) -> Tensor:
    return rnnt_loss(out.logits, batch.targets, out.enc_lens, batch.target_lens)


def _loss_fused(out: RNNTOutput, batch: Batch) -> Tensor:
    joint = out.joint
    return rnnt_loss_fused(out.enc, out.pred, lambda e, p: joint(e[:, :, 0], p[:, 0]),
                           batch.targets, out.enc_lens, batch.target_lens)


def collate_rnnt(utts: Sequence[Utterance], language: str, union: UnionMap | None,
                 feats: Sequence[Tensor] | None = None) -> Batch:
    """A language-homogeneous batch; ``union`` maps local ids to union ids (the vanilla and
    onehot models share one softmax over every language's symbols); ``feats`` replace the
    utterances' own (augmented ones)."""
    label_map = None if union is None else functools.partial(union.to_union, language)
    return collate(utts, language, label_map, feats)


LOSSES = {"full": _loss_full, "fused": _loss_fused}


class RNNTTask:
    """The trainer's task for one RNN-T model on in-memory utterances."""

    def __init__(self, model: RNNT, train: Sequence[Utterance], dev: Sequence[Utterance],
                 cfg: TaskConfig = TaskConfig(), *, seed: int = 0, rank: int = 0,
                 world_size: int = 1, augment: WaveAugment | None = None) -> None:
        """``augment`` re-renders the training utterances' features per batch (their samples
        must be kept)."""
        self.cfg = cfg
        self.augment = augment
        self.languages = set(model.languages)
        self.train = [u for u in train if u.tokens is not None and u.language in self.languages]
        self.dev = [u for u in dev if u.tokens is not None and u.language in self.languages]
        if not self.train:
            raise DataError(f"no training utterances in {sorted(self.languages)}")
        self.union = model.union if model.spec.union_vocab else None
        self.has_lid = model.lid_head is not None
        frames: dict[str, int] = {}
        for u in self.train:
            frames[u.language] = frames.get(u.language, 0) + u.num_frames
        mass = {lang: float(n) ** cfg.language_alpha for lang, n in frames.items()}
        total = sum(mass.values())
        # the chance that a batch is of each language (LanguageBatches draws by these weights)
        self.sampling = {lang: m / total for lang, m in mass.items()}
        self.lid_weights = {lang: (1.0 / (len(mass) * p) if cfg.lid_balance else 1.0)
                            for lang, p in self.sampling.items()}
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.spec_augment = SpecAugment(SpecAugmentConfig()) if cfg.spec_augment else None
        self._loss = LOSSES[cfg.loss]

    def batches(self) -> MapBatches:
        sampler = LanguageBatches([u.language for u in self.train], weights=self.sampling,
                                  durations=[u.num_frames for u in self.train],
                                  max_frames=self.cfg.max_frames, seed=self.seed, rank=self.rank,
                                  world_size=self.world_size,
                                  cycle=self.cfg.language_order == "cycle")
        if self.cfg.batches_per_update == 1:
            return MapBatches(sampler, self._collate)
        return MapBatches(GroupedBatches(sampler, self.cfg.batches_per_update), self._collate_group)

    def _collate(self, b: LanguageBatch) -> Batch:
        utts = [self.train[i] for i in b.indices]
        return collate_rnnt(utts, b.language, self.union,
                            self.augment.features(utts) if self.augment else None)

    def _collate_group(self, group: list[LanguageBatch]) -> BatchGroup:
        return BatchGroup([self._collate(b) for b in group])

    def _forward(self, model: nn.Module, batch: Batch, train: bool) -> tuple[Tensor, dict[str, float]]:
        x = batch.x
        if train and self.spec_augment is not None:
            x, _ = self.spec_augment(x, batch.x_lens)
        out = model(x, batch.x_lens, batch.targets, batch.target_lens, batch.language,
                    compute_logits=self.cfg.loss == "full", ctc=self.cfg.ctc_weight > 0)
        rnnt = self._loss(out, batch)
        stats = {"rnnt": float(rnnt.detach())}
        loss = rnnt
        if self.cfg.ctc_weight > 0:
            ctc = ctc_loss(out.ctc_logits, out.enc_lens, batch.targets, batch.target_lens)
            stats["ctc"] = float(ctc.detach())
            loss = loss + self.cfg.ctc_weight * ctc
        if self.has_lid:
            ce = lid_ce_loss(out.lid_logits, out.enc_lens, out.language_ids, self.cfg.lid_reduction)
            stats["lid_ce"] = float(ce.detach())
            stats["lid_acc"] = utterance_lid_accuracy(out.lid_logits, out.enc_lens, out.language_ids)
            balance = self.lid_weights.get(batch.language, 1.0) if train else 1.0
            loss = loss + self.cfg.lid_weight * balance * ce
        return loss, stats

    def loss(self, model: nn.Module, batch: Batch | BatchGroup) -> tuple[Tensor, dict[str, float], float]:
        """The mean over the utterances of one batch, or of every batch of a group."""
        group = batch.batches if isinstance(batch, BatchGroup) else [batch]
        n = sum(len(b.ids) for b in group)
        total: Tensor | float = 0.0
        stats: dict[str, float] = {}
        for b in group:
            share = len(b.ids) / n
            loss, own = self._forward(model, b, train=True)
            total = total + share * loss
            for k, v in own.items():
                stats[k] = stats.get(k, 0.0) + share * v
        return total, stats, float(n)

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Dev RNN-T loss per utterance over (at most ``valid_utterances`` of) each language, in
        all (``loss``, the metric the trainer tracks) and per language (``loss_<lang>``); for a
        model with a LID head also its utterance-level accuracy (frame-averaged posteriors, as
        LID-free decoding picks), per language (``lid_acc_<lang>``: a head that has collapsed
        onto one language shows there) and averaged over languages (``lid_acc``)."""
        by_lang: dict[str, list[Utterance]] = {}
        for u in self.dev:
            by_lang.setdefault(u.language, []).append(u)
        total, n = 0.0, 0
        lid_acc: list[float] = []
        per_language: dict[str, float] = {}
        device = device_of(model)
        for lang, utts in sorted(by_lang.items()):
            utts = utts[: self.cfg.valid_utterances]
            right, lang_total = 0.0, 0.0
            for i in range(0, len(utts), 16):
                chunk = utts[i : i + 16]
                batch = move(collate_rnnt(chunk, lang, self.union), device)
                loss, stats = self._forward(model, batch, train=False)
                lang_total += stats["rnnt"] * len(chunk)
                right += stats.get("lid_acc", 0.0) * len(chunk)
            total += lang_total
            n += len(utts)
            per_language[f"loss_{lang}"] = lang_total / len(utts)
            if self.has_lid:
                lid_acc.append(right / len(utts))
                per_language[f"lid_acc_{lang}"] = right / len(utts)
        result = {"loss": total / n if n else math.nan}
        if len(by_lang) > 1:
            result.update(per_language)
        if lid_acc:
            result["lid_acc"] = sum(lid_acc) / len(lid_acc)
        return result
