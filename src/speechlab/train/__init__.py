"""One trainer for every speechlab model: configs, optimisers, schedules, checkpoints, DDP.

- :mod:`speechlab.train.config`: ``TrainConfig`` / ``OptimConfig`` / ``ScheduleConfig``.
- :mod:`speechlab.train.trainer`: ``Trainer(model, task, cfg, out_dir).fit()``, ``fit`` (the
  task made for this rank), and the ``Task`` protocol a model family implements.
- :mod:`speechlab.train.sampler`: resumable, rank-aware batch samplers (bucketing,
  language-homogeneous).
- :mod:`speechlab.train.checkpoint`: the checkpoint format, fine-tuning weight loading,
  safetensors export.
- :mod:`speechlab.train.card`: the model card every checkpoint carries, the checkpoint that
  counts, and a trained model rebuilt from them.
- :mod:`speechlab.train.schedule`, :mod:`speechlab.train.distributed`, :mod:`speechlab.train.log`.

See ``docs/training.md``.
"""

from speechlab.train.checkpoint import (
    export_safetensors,
    latest_checkpoint,
    load_checkpoint,
    load_model_weights,
    save_checkpoint,
)
from speechlab.train.config import OptimConfig, ScheduleConfig, TrainConfig
from speechlab.train.sampler import (
    BucketBatches,
    GroupedBatches,
    LanguageBatch,
    LanguageBatches,
    MapBatches,
    ResumableBatches,
)
from speechlab.train.card import ModelCard, best_or_latest, load_trained, read_card
from speechlab.train.trainer import Task, Trainer, TrainResult, build_optimizer, fit

__all__ = [
    "BucketBatches", "GroupedBatches", "LanguageBatch", "LanguageBatches", "MapBatches",
    "ModelCard", "OptimConfig", "ResumableBatches", "ScheduleConfig", "Task", "TrainConfig",
    "TrainResult", "Trainer", "best_or_latest", "build_optimizer", "export_safetensors", "fit",
    "latest_checkpoint", "load_checkpoint", "load_model_weights", "load_trained", "read_card",
    "save_checkpoint",
]
