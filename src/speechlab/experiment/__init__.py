"""The experiment layer every paper's reproduction stands on; it knows no paper.

- :mod:`~speechlab.experiment.reproduction`: the :class:`Reproduction` protocol (a paper's
  recipe, plan and tables), :class:`Switch` and :class:`Run` (one paper, one scale, one
  directory).
- :mod:`~speechlab.experiment.jobs`: typed :class:`TrainJob` / :class:`DecodeJob`.
- :mod:`~speechlab.experiment.scheduler`: the dependency scheduler and its worker pool.
- :mod:`~speechlab.experiment.runner`: :func:`run_reproductions` (several papers through one
  scheduler), :func:`train_one` (one model, alone or under torchrun).
- :mod:`~speechlab.experiment.recipes`: the recipes shipped in ``speechlab/recipes``.
- :mod:`~speechlab.experiment.corpus`: the corpus a run reads (the embedded one built when
  none is given) and the held-out text of its language models.
- :mod:`~speechlab.experiment.scoring`: per-language WER/CER, paper-shaped error-rate tables,
  hypothesis files, training tables and curves from logs.

The list of papers lives above this layer, in :mod:`speechlab.papers`; trained models are
rebuilt by their own family (:mod:`speechlab.train.card`). See ``docs/experiments.md`` for how
a paper plugs in.
"""

from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.experiment.reproduction import Reproduction, Run, Switch
from speechlab.experiment.runner import load_run, run_reproductions, train_one

__all__ = ["DecodeJob", "Reproduction", "Run", "Switch", "TrainJob", "load_run",
           "run_reproductions", "train_one"]
