"""Training one acoustic model (SALAD or the RNN) on a prepared TTS corpus with the shared
trainer, in the paper's epochs (Sec. 3.3).

- :func:`train_model`: train (or resume) a model in its directory: epochs and patience become
  updates and validations of the stateful batches, Noam's H is the model's embedding size, and
  the directory gets the side files synthesis needs (:mod:`.synthesis`).
- :func:`epochs_done`: how many epochs a trained model's updates were.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from pathlib import Path

from speechlab.train import TrainConfig, fit
from speechlab.train.card import ModelCard
from speechlab.train.log import read_log
from speechlab.tts.features import TtsData, TtsUtteranceData
from speechlab.tts.model import FAMILY, AcousticModelConfig, build_from_config
from speechlab.tts.synthesis import write_model_files
from speechlab.tts.task import TtsTask, TtsTaskConfig

log = logging.getLogger(__name__)


def train_model(model_cfg: AcousticModelConfig, data: TtsData, train_cfg: TrainConfig,
                task_cfg: TtsTaskConfig, model_dir: Path, *, epochs: int, patience: int,
                question_file: str | None = None) -> None:
    """Train (or resume) the model ``model_cfg`` describes in ``model_dir`` for up to
    ``epochs`` epochs of ``task_cfg``'s batches, validating (dev MCD, early stopping after
    ``patience`` validations without improvement) once per epoch. ``train_cfg`` gives the
    optimiser, the schedule and the seed; ``question_file`` is the question set the data was
    made with (None: the project's English set), copied beside the checkpoints.

    The stateful streams are one sequence each: under torchrun every rank trains on all of
    them (:class:`~speechlab.tts.task.TtsTask` does not shard)."""
    task = TtsTask(data.train, data.dev, data.norm.outputs, task_cfg, seed=train_cfg.seed)
    per_epoch = task.batches().batches_per_epoch
    schedule = train_cfg.schedule
    if schedule.name == "noam":  # H is the model's embedding size (Sec. 3.3)
        schedule = dataclasses.replace(schedule, model_dim=model_cfg.emb_dim)
    cfg = dataclasses.replace(train_cfg, max_steps=epochs * per_epoch, valid_every=per_epoch,
                              checkpoint_every=per_epoch * max(1, epochs // 10),
                              patience=patience, early_stop_metric="mcd", schedule=schedule)
    model_dir.mkdir(parents=True, exist_ok=True)
    # SALAD attends within its training window at inference, as the paper's decoding does.
    window = task_cfg.window if model_cfg.kind == "salad" else None
    write_model_files(model_dir, {**data.stats(), "window": window}, question_file)
    log.info("%s: a %s model, %d batches per epoch, up to %d epochs", model_dir.name,
             model_cfg.kind, per_epoch, epochs)
    fit(build_from_config(model_cfg), lambda rank, world: task, cfg, model_dir,
        card=ModelCard.of(FAMILY, model_cfg))


def epochs_done(model_dir: Path, train: Sequence[TtsUtteranceData], task_cfg: TtsTaskConfig
                ) -> float:
    """The updates logged in ``model_dir`` in epochs of ``task_cfg``'s batches over ``train``
    (0 for an empty training set)."""
    steps = max((int(r.get("step", 0)) for r in read_log(model_dir / "log.jsonl")), default=0)
    per_epoch = -(-sum(u.num_frames for u in train) // task_cfg.streams) / task_cfg.window
    return steps / math.ceil(per_epoch) if per_epoch else 0.0
