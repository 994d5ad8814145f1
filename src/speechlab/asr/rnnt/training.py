"""Training one model of the multi-softmax RNN-T family on utterances, from scratch or
fine-tuned from another trained one (Table 3: a one-language model from a multi-softmax one).

- :func:`train_model`: train (or resume) a model in a directory with the shared trainer, on
  this rank's shard under torchrun.
- :func:`start_from`: load a trained model into a new one before fine-tuning: all of it if
  they are alike, else the shared parameters and one language's
  (:func:`monolingual_key_map`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import torch

from speechlab.asr.data import Utterance
from speechlab.asr.data import WaveAugment
from speechlab.asr.rnnt.model import BUILDERS, FAMILY, RNNT
from speechlab.asr.rnnt.task import RNNTTask, TaskConfig
from speechlab.errors import ConfigError
from speechlab.train import TrainConfig, distributed, fit, load_model_weights
from speechlab.train.card import ModelCard, best_or_latest, read_card


def train_model(model: RNNT, train: Sequence[Utterance], dev: Sequence[Utterance],
                train_cfg: TrainConfig, task_cfg: TaskConfig, run_dir: Path, *,
                languages: Sequence[str] = (), augment: WaveAugment | None = None) -> None:
    """Train (or resume) ``model`` in ``run_dir`` on the utterances of ``languages`` (all if
    empty), on this rank's shard under torchrun, with ``augment``'s fresh effects per batch
    if given. Validation (and so the choice of
    ``best.pt``) uses the dev utterances of the same languages: a model fine-tuned on one
    language is judged on that language alone."""
    if distributed.current().distributed:
        if task_cfg.batches_per_update != 1:
            raise ConfigError("under torchrun each rank's batch is one of an update's batches: "
                              "set task.batches_per_update=1 and use that many ranks instead "
                              f"(got {task_cfg.batches_per_update})")
        # A language-homogeneous batch leaves the other languages' parts without gradient.
        train_cfg = replace(train_cfg, find_unused_parameters=True)
    train = [u for u in train if not languages or u.language in languages]
    dev = [u for u in dev if not languages or u.language in languages]
    fit(model, lambda rank, world: RNNTTask(model, train, dev, task_cfg, seed=train_cfg.seed,
                                            rank=rank, world_size=world, augment=augment),
        train_cfg, run_dir, card=ModelCard.of(FAMILY, model.config))


def monolingual_key_map(source: RNNT, language: str) -> Callable[[str], str | None]:
    """Checkpoint key map from a multi-softmax model to a one-language model of the same sizes:
    shared parameters as they are, ``language``'s embedding / prediction net / output layer
    renamed to index 0, every other language's and the LID head discarded (Sec. 4 of the
    paper: fine-tuning "the shared and language specific parameters")."""
    route = source.routes[language]
    per_language = {"predictor.embeddings.": route.table, "joiner.outputs.": route.head}
    if source.spec.lang_predictor:
        per_language["predictor.lstms."] = route.net

    def map_key(key: str) -> str | None:
        if key.startswith("lid_head."):
            return None
        for prefix, index in per_language.items():
            if key.startswith(prefix):
                i, rest = key[len(prefix):].split(".", 1)
                return f"{prefix}0.{rest}" if int(i) == index else None
        return key

    return map_key


def start_from(model: RNNT, source_dir: Path) -> None:
    """Load the trained model in ``source_dir`` into ``model`` (Table 3): the whole model if
    they are alike (Onehot fine-tuning), else, for a one-language model from a multi-softmax
    one, the shared parameters and that language's (:func:`monolingual_key_map`)."""
    ckpt = best_or_latest(source_dir)
    source = read_card(ckpt)
    key_map = None
    if model.spec.single_language and source.config.get("variant") != "mono":
        with torch.device("meta"):
            key_map = monolingual_key_map(source.build(BUILDERS, ckpt), model.languages[0])
    load_model_weights(model, ckpt, map_key=key_map)
