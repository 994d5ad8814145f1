"""Training one wav2vec 2.0 model with the shared trainer: pre-training on waveforms, or CTC
fine-tuning of a pre-trained one (the local-attention paper's Sec. 4.1, each fine-tune with
its own LMSAB blocks).

- :func:`pretrain_model`: pre-train (or resume) a model in a directory, on this rank's shard
  under torchrun.
- :func:`finetune_model`: fine-tune with CTC the model pre-trained in a directory; the frozen
  front end's frames are computed once (:func:`frozen_features`) and, given a cache file,
  shared by every fine-tune of the same checkpoint.

Every checkpoint carries its card (:data:`.model.FAMILY` / :data:`.model.CTC_FAMILY`), so
:func:`.model.load` rebuilds the trained model from its directory alone.

Shapes: S samples, T frames, C front-end channels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from speechlab.files import atomic_path
from speechlab.ssl.wav2vec2.config import Wav2Vec2Config
from speechlab.ssl.wav2vec2.conv_features import FeatureUtterance, conv_features
from speechlab.ssl.wav2vec2.finetune import FinetuneTask, FinetuneTaskConfig
from speechlab.ssl.wav2vec2.model import (
    CTC_FAMILY,
    FAMILY,
    CtcConfig,
    Wav2Vec2,
    build_ctc,
    build_from_config,
)
from speechlab.ssl.wav2vec2.pretrain import PretrainTask, PretrainTaskConfig
from speechlab.train import TrainConfig, distributed, fit, load_model_weights
from speechlab.train.card import ModelCard, best_or_latest


@dataclass
class Utterance:
    """One utterance: its (S,) 16 kHz waveform, its text and label ids (None: a character
    outside the vocabulary, so it is scored on its text but never trained on)."""

    id: str
    wav: Tensor
    text: str
    tokens: tuple[int, ...] | None


def pretrain_model(config: Wav2Vec2Config, train: Sequence[Tensor], dev: Sequence[Tensor],
                   task_cfg: PretrainTaskConfig, train_cfg: TrainConfig, run_dir: Path, *,
                   seed: int = 0) -> None:
    """Pre-train (or resume) the model of ``config`` in ``run_dir`` on the (S,) waveforms
    ``train`` (validated on ``dev``), initialised from ``seed``."""
    torch.manual_seed(seed)
    model = build_from_config(config)
    fit(model, lambda rank, world: PretrainTask(train, dev, task_cfg, seed=train_cfg.seed,
                                                rank=rank, world_size=world),
        train_cfg, run_dir, card=ModelCard.of(FAMILY, config))


def frozen_features(encoder: Wav2Vec2, splits: Mapping[str, Sequence[Utterance]], source: Path,
                    cache: Path | None = None, *, write: bool = True
                    ) -> dict[str, list[FeatureUtterance]]:
    """Each split's (T, C) front-end frames of ``encoder`` (whose weights come from the
    checkpoint ``source``). With ``cache``, the first fine-tune that needs them computes and
    (if it may ``write``) saves them there, keyed by the checkpoint's path, size and time; the
    others read them back. A stale or unreadable cache is recomputed, never trusted."""
    stat = source.stat()
    key = f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    cached = None
    if cache is not None and cache.is_file():
        try:
            cached = torch.load(cache, map_location="cpu", weights_only=True)
        except Exception:  # a stale or unreadable cache is recomputed, never trusted
            cached = None
    if not (isinstance(cached, dict) and cached.get("key") == key
            and all(len(cached.get(s, ())) == len(u) for s, u in splits.items())):
        cached = {"key": key, **{s: conv_features(encoder.feature_encoder, [x.wav for x in u])
                                 for s, u in splits.items()}}
        if write and cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(cache) as tmp:
                torch.save(cached, tmp)
    return {s: [FeatureUtterance(u.id, f, u.text, u.tokens) for u, f in zip(utts, cached[s])]
            for s, utts in splits.items()}


def finetune_model(config: CtcConfig, pretrained: Path, train: Sequence[Utterance],
                   dev: Sequence[Utterance], task_cfg: FinetuneTaskConfig,
                   train_cfg: TrainConfig, run_dir: Path, *, text_of: Callable[[list[int]], str],
                   features: Path | None = None, seed: int = 0) -> None:
    """Fine-tune (or resume) in ``run_dir`` the CTC model of ``config`` (its encoder's LMSAB
    blocks as ``config.model`` says), its encoder initialised from the model pre-trained in
    ``pretrained`` (best, else latest checkpoint) and its head from ``seed``. The front end
    stays frozen, so its frames are computed once (cached in ``features`` if given); ``text_of``
    turns label ids into text for the dev CER."""
    torch.manual_seed(seed)
    model = build_ctc(config)
    source = best_or_latest(pretrained)
    load_model_weights(model.encoder, source)
    feats = frozen_features(model.encoder, {"train": train, "dev": dev}, source, features,
                            write=distributed.current().is_main)
    fit(model, lambda rank, world: FinetuneTask(feats["train"], feats["dev"], task_cfg,
                                                text_of=text_of, seed=train_cfg.seed, rank=rank,
                                                world_size=world),
        train_cfg, run_dir, card=ModelCard.of(CTC_FAMILY, config))
