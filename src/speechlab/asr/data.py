"""Utterances in memory, the skip report, and padded batches: shared by every ASR paper.

:func:`load_utterances` turns a corpus split (lhotse cuts with cached fbank) into in-memory
:class:`Utterance` records: CMVN-normalised features and the label ids of each utterance's own
language. Bad utterances are counted by reason and logged, never passed on to a loss: an
unknown language (no tokenizer for it), an empty transcript, a symbol outside the language's
inventory, or audio too short for the model's first frame. :func:`collate` pads a list of
utterances into a :class:`Batch`.

Shapes: B batch, T frames, F feature dims, U labels.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import numpy as np
import torch
from torch import Tensor

from speechlab.audio.augment import FEATURE_EFFECT, AugmentPlan, apply_effects, draw_effects
from speechlab.audio.features import FbankConfig, fbank, load_features, warp_mel
from speechlab.audio.transforms import GlobalCMVN
from speechlab.errors import DataError
from speechlab.text.normalize import normalize_text

log = logging.getLogger(__name__)


class Tokenizer(Protocol):
    """What :func:`load_utterances` needs of a vocabulary: text -> label ids (1..V-1), raising
    :class:`DataError` for a symbol it lacks."""

    def encode(self, text: str, utt: str | None = None) -> list[int]: ...


@dataclass(frozen=True)
class Utterance:
    """One utterance held in memory. feats (T, F) are CMVN-normalised 10 ms fbank frames;
    ``tokens`` are label ids of ``language`` (None when the transcript could not be encoded:
    such utterances are scored on their text but never trained on)."""

    id: str
    language: str
    feats: Tensor
    text: str
    tokens: tuple[int, ...] | None
    # int16 samples at 16 kHz, kept only for training utterances augmented on the fly.
    audio: np.ndarray | None = field(default=None, compare=False, repr=False)

    @property
    def num_frames(self) -> int:
        return int(self.feats.shape[0])


class Labelled(Protocol):
    """An utterance record that may carry label ids (:class:`Utterance`, or wav2vec 2.0
    fine-tuning's frozen-feature records)."""

    @property
    def tokens(self) -> tuple[int, ...] | None: ...


L = TypeVar("L", bound=Labelled)


def with_labels(train: Sequence[L], dev: Sequence[L], dev_utterances: int, *,
                labels: str) -> tuple[list[L], list[L]]:
    """The training and validation utterances of a task that trains on label ids: those that
    have some (the rest cannot be trained or scored on), dev cut to its first
    ``dev_utterances``. A DataError, saying what the ``labels`` are, if no training utterance
    is left."""
    kept = [u for u in train if u.tokens]
    if not kept:
        raise DataError(f"no training utterances with {labels}")
    return kept, [u for u in dev if u.tokens][:dev_utterances]


@dataclass
class SkipReport:
    """Utterances left out of (or flagged in) a split, by reason, with a few example ids."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, reason: str, utt: str, n: int = 1) -> None:
        self.counts[reason] += n
        self.examples.setdefault(reason, [])
        if len(self.examples[reason]) < 3:
            self.examples[reason].append(utt)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        return "; ".join(f"{r}: {n} (e.g. {', '.join(self.examples.get(r, []))})"
                         for r, n in self.counts.items())


def load_utterances(cuts, tokenizers: Mapping[str, Tokenizer], cmvn: GlobalCMVN | None,
                    *, min_frames: int = 1, split: str = "",
                    keep_audio: bool = False) -> tuple[list[Utterance], SkipReport]:
    """Cuts with features -> utterances; skipped ones are counted by reason and logged.

    ``min_frames`` is the fewest 10 ms frames an utterance needs (one model output frame).
    ``keep_audio``: also hold each utterance's samples, for :class:`WaveAugment`.
    An utterance whose transcript holds a symbol outside its tokenizer is kept for scoring with
    ``tokens=None`` and counted as flagged.
    """
    skipped = SkipReport()
    out: list[Utterance] = []
    for cut in cuts:
        sup = cut.supervisions[0] if cut.supervisions else None
        if sup is None or not (sup.text or "").strip():
            skipped.add("empty transcript", cut.id)
            continue
        lang = sup.language
        tok = tokenizers.get(lang)
        if tok is None:
            skipped.add(f"language {lang!r} has no head", cut.id)
            continue
        feats = load_features(cut)
        if feats.shape[0] < min_frames:
            skipped.add("too short for one encoder frame", cut.id)
            continue
        try:
            tokens: tuple[int, ...] | None = tuple(tok.encode(sup.text, utt=cut.id))
        except DataError:
            # Scored on its text, but the loss cannot see a symbol the softmax lacks.
            skipped.add(f"symbol outside the {lang} inventory", cut.id)
            tokens = None
        if tokens is not None and not tokens:
            skipped.add("transcript empty after normalisation", cut.id)
            continue
        if cmvn is not None:
            feats = cmvn(feats[None], torch.tensor([feats.shape[0]]))[0][0]
        audio = None
        if keep_audio:
            audio = np.clip(np.round(cut.load_audio()[0] * 32768.0), -32768, 32767
                            ).astype(np.int16)
        out.append(Utterance(cut.id, lang, feats.float(), normalize_text(sup.text, lang), tokens,
                             audio))
    if skipped.total:
        log.warning("%s: skipped/flagged %d utterance(s): %s", split or "split", skipped.total,
                    skipped.summary())
    return out, skipped


@dataclass(frozen=True)
class Batch:
    """x (B,T,F) padded with zeros, x_lens (B,), targets (B,U) padded with 0, target_lens (B,);
    ``language`` is the batch's one language (None for a mixed batch)."""

    ids: list[str]
    language: str | None
    x: Tensor
    x_lens: Tensor
    targets: Tensor
    target_lens: Tensor


class WaveAugment:
    """Speaker and channel effects drawn afresh every time a training utterance is batched
    (:mod:`speechlab.audio.augment`): its samples go through a chain drawn from ``plan``, then
    fbank and the run's CMVN, so each epoch hears another room, line and level.

    Cheap effects only (speed, reverb, noise and babble of the batch's other utterances, band
    limits, telephone, gain, and vocal tract length perturbation of the filter banks): they
    cost a few milliseconds per second of audio, a small share of a training step. The chain's seed comes from torch's global generator, which the trainer
    checkpoints, so a resumed run draws what an uninterrupted one would have.
    """

    def __init__(self, plan: AugmentPlan, cmvn: GlobalCMVN | None,
                 fbank_cfg: FbankConfig = FbankConfig()) -> None:
        if plan.world_prob > 0:
            raise DataError("on-the-fly augmentation has no 'world' effect (it costs more "
                            "than a training step); give voices WORLD when the corpus is made")
        self.plan, self.cmvn, self.fbank_cfg = plan, cmvn, fbank_cfg

    def features(self, utts: Sequence[Utterance]) -> list[Tensor]:
        """Fresh CMVN-normalised features of ``utts`` (each (T', F)), in order."""
        import random

        rng = random.Random(int(torch.randint(2**31 - 1, ())))
        for u in utts:
            if u.audio is None:
                raise DataError(f"utterance {u.id}: no samples kept for on-the-fly "
                                "augmentation (load_utterances(keep_audio=True))")
        waves = [u.audio.astype(np.float64) / 32768.0 for u in utts]
        out = []
        for i, (u, x) in enumerate(zip(utts, waves)):
            others = [w for j, w in enumerate(waves) if j != i][:3]
            chain = draw_effects(self.plan, rng)
            y = apply_effects(x, [e for e in chain if e.name != FEATURE_EFFECT], others)
            mel = fbank(np.clip(y, -1.0, 1.0), self.fbank_cfg)
            for e in chain:
                if e.name == FEATURE_EFFECT and len(mel):
                    mel = warp_mel(mel, dict(e.params)["warp"], self.fbank_cfg)
            feats = torch.from_numpy(np.ascontiguousarray(mel, dtype=np.float32))
            if feats.shape[0] == 0:
                feats = u.feats  # too short once sped up: the cached features instead
            elif self.cmvn is not None:
                feats = self.cmvn(feats[None], torch.tensor([feats.shape[0]]))[0][0]
            out.append(feats.float())
        return out


def collate(utts: Sequence[Utterance], language: str | None = None,
            label_map: Callable[[list[int]], list[int]] | None = None,
            feats: Sequence[Tensor] | None = None) -> Batch:
    """Pad ``utts`` into one :class:`Batch`.

    ``label_map`` rewrites each utterance's label ids (e.g. local ids -> the union ids of a
    pooled softmax); utterances without tokens get an empty target. ``language`` defaults to
    the utterances' common language, None if they differ. ``feats``: the utterances' features
    to use instead of their own (augmented ones, :class:`WaveAugment`).
    """
    if not utts:
        raise DataError("collate: no utterances to put in a batch")
    if language is None and len({u.language for u in utts}) == 1:
        language = utts[0].language
    feats = [u.feats for u in utts] if feats is None else list(feats)
    lens = torch.tensor([f.shape[0] for f in feats])
    x = torch.zeros(len(utts), int(lens.max()), feats[0].shape[1])
    for i, f in enumerate(feats):
        x[i, : f.shape[0]] = f
    labels = [list(u.tokens or ()) for u in utts]
    if label_map is not None:
        labels = [label_map(t) for t in labels]
    t_lens = torch.tensor([len(t) for t in labels])
    targets = torch.zeros(len(utts), max(int(t_lens.max()), 1), dtype=torch.long)
    for i, t in enumerate(labels):
        targets[i, : len(t)] = torch.tensor(t, dtype=torch.long)
    return Batch([u.id for u in utts], language, x, lens, targets, t_lens)
