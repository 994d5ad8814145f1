"""The experiment layer every paper's reproduction stands on.

- :mod:`~speechlab.experiment.reproduction`: the :class:`Reproduction` protocol (a paper's
  plan and tables) and :class:`Run` (one paper at one scale in one directory).
- :mod:`~speechlab.experiment.jobs`: typed :class:`TrainJob` / :class:`DecodeJob`.
- :mod:`~speechlab.experiment.scheduler`: the dependency scheduler and its worker pool.
- :mod:`~speechlab.experiment.runner`: :func:`reproduce` (several papers through one
  scheduler), :func:`train_one` (one model, alone or under torchrun).
- :mod:`~speechlab.experiment.trained`: which checkpoint counts, rebuilding a model from it.
- :mod:`~speechlab.experiment.recipes`: the recipes shipped in ``speechlab/recipes``.
- :mod:`~speechlab.experiment.scoring`: per-language WER/CER, paper-shaped error-rate tables,
  hypothesis files, training tables and curves from logs.
- :mod:`~speechlab.experiment.papers`: the registered reproductions, by CLI name.

See ``docs/experiments.md`` for how a paper plugs in.
"""

from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.experiment.reproduction import Reproduction, Run
from speechlab.experiment.runner import load_run, reproduce, train_one
from speechlab.experiment.trained import ModelCard, best_or_latest, load_trained

__all__ = ["DecodeJob", "ModelCard", "Reproduction", "Run", "TrainJob", "best_or_latest",
           "load_run", "load_trained", "reproduce", "train_one"]
