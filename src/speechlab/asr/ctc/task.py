"""Training a CTC-like acoustic model under one topology with the shared trainer.

:class:`CtcTask` is the :class:`speechlab.train.trainer.Task`: duration-bucketed batches of
in-memory utterances (:mod:`speechlab.asr.data`), the graph loss of eqs. 1-5 of the
CTC-topologies paper (:func:`speechlab.asr.ctc.loss.graph_loss`) averaged over the batch's
utterances, and the dev loss per utterance for validation. An utterance too short for its
transcript under the topology (a T2 topology needs two frames per phone) has an infinite loss:
it is left out of the batch's mean and counted (``infeasible`` in the log), never trained on
as NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from speechlab.asr.ctc.topology import Arcs
from speechlab.asr.data import Batch, Utterance, WaveAugment, collate, with_labels
from speechlab.audio.augment import AugmentPlan
from speechlab.audio.transforms import SpecAugment, SpecAugmentConfig
from speechlab.devices import device_of, move
from speechlab.errors import ConfigError
from speechlab.train.sampler import BucketBatches, MapBatches


@dataclass(frozen=True)
class CtcTaskConfig:
    """Batching and loss options: ``max_frames`` bounds a batch's padded 10 ms frames;
    ``denominator`` keeps eq. 5's normalisation term (the paper's training); ``numerator``
    is ``"phones"`` (``T o W`` over each transcript's first pronunciations) or ``"lexicon"``
    (``T o (L o W)`` of eq. 4: every pronunciation of every word, summed); ``augment``: the
    speaker and channel effects drawn afresh each time a training utterance is batched
    (none by default; :class:`speechlab.asr.data.WaveAugment`)."""

    max_frames: int = 8000
    max_utterances: int = 64
    denominator: bool = True
    spec_augment: bool = True
    valid_utterances: int = 300
    numerator: str = "phones"
    augment: AugmentPlan = field(default_factory=AugmentPlan)

    def __post_init__(self) -> None:
        for name in ("max_frames", "max_utterances", "valid_utterances"):
            if getattr(self, name) < 1:
                raise ConfigError(f"task.{name} must be >= 1, got {getattr(self, name)}")
        if self.numerator not in NUMERATORS:
            raise ConfigError(f"task.numerator must be one of {NUMERATORS}, got "
                              f"{self.numerator!r}")


NUMERATORS = ("phones", "lexicon")


class CtcTask:
    """The trainer's task for one CTC-like model and topology on in-memory utterances."""

    def __init__(self, topology: str, train: Sequence[Utterance], dev: Sequence[Utterance],
                 cfg: CtcTaskConfig = CtcTaskConfig(), *, seed: int = 0, rank: int = 0,
                 world_size: int = 1, lexicon_graph: Callable[[str], Arcs] | None = None,
                 augment: WaveAugment | None = None) -> None:
        """``lexicon_graph`` maps a transcript to its numerator ``T o (L o W)`` as arcs; it is
        required when ``cfg.numerator == "lexicon"`` (graphs are compiled once per
        utterance and kept). ``augment`` re-renders the training utterances' features per
        batch (their samples must be kept)."""
        if cfg.numerator == "lexicon" and lexicon_graph is None:
            raise ConfigError("task.numerator 'lexicon' needs a lexicon graph compiler")
        self.lexicon_graph = lexicon_graph if cfg.numerator == "lexicon" else None
        self._graphs: dict[str, Arcs] = {}
        self.topology = topology
        self.cfg = cfg
        self.train, self.dev = with_labels(train, dev, cfg.valid_utterances, labels="phone targets")
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self._text = {u.id: u.text for u in [*self.train, *self.dev]}
        self.spec_augment = SpecAugment(SpecAugmentConfig()) if cfg.spec_augment else None
        self.augment = augment

    def batches(self) -> MapBatches:
        sampler = BucketBatches(durations=[u.num_frames for u in self.train],
                                batch_size=self.cfg.max_utterances, max_frames=self.cfg.max_frames,
                                seed=self.seed, rank=self.rank, world_size=self.world_size)
        return MapBatches(sampler, self._train_batch)

    def _train_batch(self, idx: Sequence[int]) -> Batch:
        utts = [self.train[i] for i in idx]
        return collate(utts, feats=self.augment.features(utts) if self.augment else None)

    def _nll(self, model: nn.Module, batch: Batch, train: bool) -> Tensor:
        from speechlab.asr.ctc.loss import graph_loss

        x = batch.x
        if train and self.spec_augment is not None:
            x, _ = self.spec_augment(x, batch.x_lens)
        log_probs, lens = model(x, batch.x_lens)
        if self.lexicon_graph is not None:
            from speechlab.asr.ctc.loss import graph_loss_from_arcs

            nums = [self._numerator(i) for i in batch.ids]
            return graph_loss_from_arcs(log_probs, lens, nums, topology=self.topology,
                                        denominator=self.cfg.denominator)
        return graph_loss(log_probs, lens, batch.targets, batch.target_lens,
                          topology=self.topology, denominator=self.cfg.denominator)

    def _numerator(self, utt: str) -> Arcs:
        graph = self._graphs.get(utt)
        if graph is None:
            graph = self._graphs[utt] = self.lexicon_graph(self._text[utt])
        return graph

    def loss(self, model: nn.Module, batch: Batch) -> tuple[Tensor, dict[str, float], float]:
        """Mean negative log-likelihood over the batch's feasible utterances."""
        nll = self._nll(model, batch, train=True)
        ok = torch.isfinite(nll)
        n = int(ok.sum())
        # With every utterance infeasible this is a zero that still belongs to the graph (zero
        # gradients), so the trainer's step, and DDP's all-reduce, go on.
        loss = torch.where(ok, nll, 0.0).sum() / max(n, 1)
        return loss, {"infeasible": float(len(nll) - n)}, float(n)

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Dev negative log-likelihood per feasible utterance (``loss``) and the share of dev
        utterances the topology cannot align (``infeasible``)."""
        total, n, bad = 0.0, 0, 0
        device = device_of(model)
        for i in range(0, len(self.dev), 16):
            nll = self._nll(model, move(collate(self.dev[i : i + 16]), device), train=False)
            ok = torch.isfinite(nll)
            total += float(nll[ok].sum())
            n += int(ok.sum())
            bad += int((~ok).sum())
        return {"loss": total / n if n else math.nan, "infeasible": bad / max(len(self.dev), 1)}
