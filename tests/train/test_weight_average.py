"""The weights' moving average (``TrainConfig.ema_decay``): what it averages, that validation
and best.pt follow it, that a checkpoint's ``model`` is it while training resumes exactly from
its own weights, and that a run started without one gains one on resume."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch
from torch import nn

from speechlab.testing.toy_task import ToyConfig, ToyTask, build_model
from speechlab.train.average import WeightAverage
from speechlab.train.checkpoint import list_checkpoints, load_checkpoint, load_model_weights
from speechlab.train.config import OptimConfig, TrainConfig
from speechlab.train.log import read_log
from speechlab.train.trainer import Trainer

DECAY = 0.8


class WatchedToyTask(ToyTask):
    """The toy task, remembering the weights the model had at each loss call (so after every
    update but the last) and validating with one planted metric: the first weight."""

    def __init__(self, cfg, crash_at=0):
        super().__init__(cfg)
        self.weights: list[dict[str, torch.Tensor]] = []
        self.calls, self.crash_at = 0, crash_at

    def loss(self, model, batch):
        self.calls += 1
        if self.calls == self.crash_at:
            raise KeyboardInterrupt
        self.weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return super().loss(model, batch)

    def validate(self, model):
        return {**super().validate(model), "w0": float(model.encoder[0].weight[0, 0])}


def cfg(**kw):
    base = dict(max_steps=12, log_every=1, seed=0, progress=False, optim=OptimConfig(lr=0.05),
                ema_decay=DECAY, valid_every=4, checkpoint_every=4, keep_checkpoints=0,
                early_stop_metric="loss")
    base.update(kw)
    return TrainConfig(**base)


def ema_by_hand(snapshots, final):
    """The average after each update, from the weights after each update."""
    after = snapshots[1:] + [final]
    avg = {k: v.clone() for k, v in snapshots[0].items()}
    out = []
    for n, w in enumerate(after, start=1):
        d = min(DECAY, (1 + n) / (10 + n))
        avg = {k: d * avg[k] + (1 - d) * w[k] for k in avg}
        out.append(avg)
    return out


def test_the_average_is_the_exponential_moving_average_and_is_what_is_validated(tmp_path):
    toy = ToyConfig(dropout=0.0)
    model, task = build_model(toy), WatchedToyTask(toy)
    result = Trainer(model, task, cfg(), tmp_path).fit()
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    expected = ema_by_hand(task.weights, final)

    last = load_checkpoint(result.last_checkpoint)
    assert last["average_updates"] == 12
    for k, v in final.items():  # training's own weights are kept to resume from
        assert torch.equal(last["training_model"][k], v), k
    for k, v in expected[-1].items():  # "model" is the average
        torch.testing.assert_close(last["model"][k], v)
    assert not torch.allclose(last["model"]["encoder.0.weight"], final["encoder.0.weight"])

    valid = [r for r in read_log(result.log_path) if r["kind"] == "valid"]
    assert [r["step"] for r in valid] == [4, 8, 12]
    assert all(r["averaged"] is True for r in valid)
    for r in valid:  # validated: the averaged weights
        assert r["w0"] == pytest.approx(float(expected[r["step"] - 1]["encoder.0.weight"][0, 0]),
                                        rel=1e-5, abs=1e-6)
    best = load_checkpoint(tmp_path / "best.pt")
    torch.testing.assert_close(best["model"]["encoder.0.weight"],
                               expected[best["step"] - 1]["encoder.0.weight"])

    # Whoever loads the trained model gets the average.
    loaded = build_model(toy)
    load_model_weights(loaded, result.last_checkpoint)
    torch.testing.assert_close(loaded.state_dict()["encoder.0.weight"],
                               expected[-1]["encoder.0.weight"])


def test_resume_with_an_average_is_exact(tmp_path):
    toy = ToyConfig(dropout=0.1)
    ref_model = build_model(toy)
    Trainer(ref_model, WatchedToyTask(toy), cfg(), tmp_path / "ref").fit()
    with pytest.raises(KeyboardInterrupt):
        Trainer(build_model(toy), WatchedToyTask(toy, crash_at=7), cfg(), tmp_path / "run").fit()
    assert [s for s, _ in list_checkpoints(tmp_path / "run")] == [4]
    model = build_model(toy)
    result = Trainer(model, WatchedToyTask(toy), cfg(), tmp_path / "run").fit()
    assert result.steps == 12

    def without_time(path):
        return [{k: v for k, v in r.items() if k not in ("time", "data_time")}
                for r in read_log(path)]

    assert without_time(result.log_path) == without_time(tmp_path / "ref" / "log.jsonl")
    ref = load_checkpoint(tmp_path / "ref" / "ckpt-00000012.pt")
    got = load_checkpoint(result.last_checkpoint)
    for part in ("model", "training_model"):
        for k, v in ref[part].items():
            assert torch.equal(got[part][k], v), (part, k)
    for (k, a), (_, b) in zip(ref_model.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), k


def test_a_run_without_an_average_gains_one_on_resume_and_keeps_going(tmp_path, caplog):
    toy = ToyConfig(dropout=0.0)
    plain = dataclasses.replace(cfg(), ema_decay=0.0, max_steps=8)
    Trainer(build_model(toy), ToyTask(toy), plain, tmp_path).fit()
    before = load_checkpoint(tmp_path / "ckpt-00000008.pt")
    assert "training_model" not in before

    model = build_model(toy)
    with caplog.at_level(logging.INFO, logger="speechlab.train"):
        Trainer(model, ToyTask(toy), cfg(max_steps=8 + 1), tmp_path).fit()
    assert "starts from its weights at update 8" in caplog.text
    after = load_checkpoint(tmp_path / "ckpt-00000009.pt")
    assert after["average_updates"] == 1
    # One update of an average that started from update 8's weights: d = 2/11 of them.
    d = 2 / 11
    for k, v in before["model"].items():
        torch.testing.assert_close(after["model"][k],
                                   d * v + (1 - d) * after["training_model"][k])

    # Turned off again, the run goes on from training's own weights, not the average.
    off = dataclasses.replace(cfg(), ema_decay=0.0, max_steps=10)
    model = build_model(toy)
    trainer = Trainer(model, ToyTask(toy), off, tmp_path)
    trainer._resume(trainer.task.batches())
    for k, v in after["training_model"].items():
        assert torch.equal(model.state_dict()[k], v), k


def test_weight_average_in_model_restores_the_weights():
    model = nn.Linear(2, 1)
    avg = WeightAverage(model, 0.5)
    with torch.no_grad():
        model.weight.fill_(1.0)
    avg.update()  # n = 1: d = min(0.5, 2/11)
    own = model.weight.detach().clone()
    with avg.in_model():
        inside = model.weight.detach().clone()
    assert torch.equal(model.weight, own)
    assert not torch.equal(inside, own)
    with pytest.raises(ValueError, match="decay"):
        WeightAverage(model, 1.0)
    with pytest.raises(Exception, match="ema_decay"):
        TrainConfig(ema_decay=1.0)
