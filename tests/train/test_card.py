"""Trained models rebuild from their directory alone, whatever their sizes, through their
family's builder; one rule picks the checkpoint that counts."""

from __future__ import annotations

import pytest
import torch

from speechlab.asr.rnnt import ModelDims, build
from speechlab.errors import DataError
from speechlab.families import load_trained
from speechlab.train import save_checkpoint
from speechlab.train.card import ModelCard, best_or_latest, read_card
from speechlab.train.checkpoint import checkpoint_path


def _save(path, model, card=None, **extra):
    parts = {"model": model.state_dict(), **extra}
    if card is not None:
        parts["model_config"] = card.to_dict()
    return save_checkpoint(path, **parts)


def test_best_or_latest_prefers_best_then_the_newest(tmp_path):
    with pytest.raises(DataError, match="holds no checkpoint"):
        best_or_latest(tmp_path)
    for step in (2, 10, 4):
        checkpoint_path(tmp_path, step).write_bytes(b"x")
    assert best_or_latest(tmp_path).name == "ckpt-00000010.pt"
    (tmp_path / "best.pt").write_bytes(b"x")
    assert best_or_latest(tmp_path).name == "best.pt"


def test_a_model_with_custom_dimensions_rebuilds_from_its_checkpoint(tmp_path):
    dims = ModelDims(feature_dim=8, stack=2, stride=2, encoder_layers=1, encoder_dim=10,
                     embed_dim=4, predictor_layers=1, predictor_dim=6, joint_dim=7)
    model = build("multisoftmax_lid", {"en": 5, "hi": 4}, dims)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    _save(checkpoint_path(tmp_path, 3), model, ModelCard.of("rnnt", model.config))
    back = load_trained(tmp_path)
    assert back.config.dims == dims and back.languages == ("en", "hi")
    assert back.variant == "multisoftmax_lid" and not back.training
    for (k, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items()):
        torch.testing.assert_close(a, b, msg=k)
    # the best checkpoint wins over the latest, and is what is loaded
    other = build("multisoftmax_lid", {"en": 5, "hi": 4}, dims)
    _save(tmp_path / "best.pt", other, ModelCard.of("rnnt", other.config))
    torch.testing.assert_close(load_trained(tmp_path).lid_head.weight, other.lid_head.weight)


def test_checkpoints_that_cannot_say_what_they_hold(tmp_path):
    model = build("mono", {"en": 5}, "tiny")
    _save(tmp_path / "a" / "best.pt", model)
    with pytest.raises(DataError, match="no model_config"):
        load_trained(tmp_path / "a")
    _save(tmp_path / "b" / "best.pt", model, ModelCard("nonesuch", {}))
    with pytest.raises(DataError, match="holds a 'nonesuch' model; expected 'rnnt' or 'ctc'"):
        load_trained(tmp_path / "b")
    save_checkpoint(tmp_path / "c.pt", model_config={"family": 3})
    with pytest.raises(DataError, match="model_config is not"):
        read_card(tmp_path / "c.pt")


def test_the_trainer_stores_the_card_in_every_checkpoint(tmp_path):
    from speechlab.testing.toy_task import BUILDERS, ToyConfig, ToyTask, build_model
    from speechlab.train import Trainer, TrainConfig
    from speechlab.train.card import load_trained
    from speechlab.train.checkpoint import list_checkpoints, load_checkpoint

    toy = ToyConfig(items=16, hidden=5)
    Trainer(build_model(toy), ToyTask(toy), TrainConfig(max_steps=4, checkpoint_every=2, valid_every=2,
                                                        log_every=2, progress=False),
            tmp_path, model_config=ModelCard.of("toy", toy).to_dict()).fit()
    paths = [p for _, p in list_checkpoints(tmp_path)] + [tmp_path / "best.pt"]
    assert len(paths) == 3
    for p in paths:
        assert ModelCard.from_dict(load_checkpoint(p)["model_config"]).config["hidden"] == 5
    assert load_trained(tmp_path, BUILDERS).encoder[0].out_features == 5
    # a family's own loader refuses another family's checkpoint, naming both
    from speechlab.asr.rnnt.model import load

    with pytest.raises(DataError, match="holds a 'toy' model; expected 'rnnt'"):
        load(tmp_path)
