"""Training one acoustic model of a CTC-like topology on utterances, with the graph loss
(eqs. 1-5 of the CTC-topologies paper).

- :func:`lexicon_graphs`: transcript -> its numerator ``T o (L o W)`` (eq. 4) over every
  pronunciation of every word, for training against words rather than one phone sequence.
- :func:`train_model`: train (or resume) a model in a directory with the shared trainer, on
  this rank's shard under torchrun; its checkpoints carry the model's card
  (:func:`speechlab.asr.ctc.model.load` rebuilds it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from speechlab.asr.ctc.model import FAMILY, CtcModel
from speechlab.asr.ctc.phones import PhoneTokenizer
from speechlab.asr.ctc.task import CtcTask, CtcTaskConfig
from speechlab.asr.ctc.topology import Arcs
from speechlab.asr.data import Utterance, WaveAugment
from speechlab.train import TrainConfig, fit
from speechlab.train.card import ModelCard


def lexicon_graphs(topology: str, tokenizer: PhoneTokenizer) -> Callable[[str], Arcs]:
    """transcript -> its numerator ``T o (L o W)`` (eq. 4) as arcs, over the tokenizer's
    lexicon and phone order (every pronunciation of every word)."""
    from speechlab.asr.ctc import graphs

    compile_ = graphs.TrainingGraphCompiler(topology, graphs.make_lang(tokenizer.lexicon,
                                                                       tokenizer.phones))
    return lambda text: graphs.to_arcs(compile_(tokenizer.words(text))[0])


def train_model(model: CtcModel, topology: str, train: Sequence[Utterance],
                dev: Sequence[Utterance], train_cfg: TrainConfig, task_cfg: CtcTaskConfig,
                run_dir: Path, *, tokenizer: PhoneTokenizer | None = None,
                augment: WaveAugment | None = None) -> None:
    """Train (or resume) ``model``, whose outputs are the tokens of ``topology``, in
    ``run_dir`` with the graph loss, validating on ``dev``. With ``task_cfg.numerator ==
    "lexicon"`` the numerators are the words' graphs over ``tokenizer``'s lexicon
    (:func:`lexicon_graphs`); otherwise the utterances' phone targets. ``augment``: fresh
    speaker and channel effects per batch (the training utterances keep their samples)."""
    numerators = (lexicon_graphs(topology, tokenizer)
                  if task_cfg.numerator == "lexicon" and tokenizer is not None else None)
    fit(model, lambda rank, world: CtcTask(topology, train, dev, task_cfg, seed=train_cfg.seed,
                                           rank=rank, world_size=world,
                                           lexicon_graph=numerators, augment=augment),
        train_cfg, run_dir, card=ModelCard.of(FAMILY, model.config))
