"""The training loop: non-finite batches skipped, unused parameters untouched, clipping,
early stopping, checkpoint rotation, and exact resume after a crash (in-process)."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest
import torch
from torch import nn

from speechlab.errors import SpeechlabError
from speechlab.files import exclusive_dir
from speechlab.testing.toy_task import ToyConfig, ToyTask, build_model
from speechlab.train.checkpoint import list_checkpoints, load_checkpoint, training_ended
from speechlab.train.config import OptimConfig, TrainConfig
from speechlab.train.log import read_log
from speechlab.train.sampler import BucketBatches, MapBatches
from speechlab.train.trainer import Trainer


class LinearTask:
    """``loss = mean(w . x)`` over fixed items, in their natural order.

    ``nan_items`` get NaN features (non-finite loss); ``nan_grad_items`` get a finite loss with
    a NaN gradient (sqrt at 0); ``metrics`` is the planted sequence ``validate`` returns.
    """

    def __init__(self, xs, nan_items=(), nan_grad_items=(), metrics=(), batch_size=1):
        self.xs = torch.tensor(xs, dtype=torch.float32)
        self.nan_items = set(nan_items)
        self.nan_grad_items = set(nan_grad_items)
        self.metrics = list(metrics)
        self.batch_size = batch_size
        self.validations = 0

    def batches(self):
        return MapBatches(BucketBatches(len(self.xs), batch_size=self.batch_size, shuffle=False),
                          self.collate)

    def collate(self, idx):
        x = self.xs[idx].clone()
        for k, i in enumerate(idx):
            if i in self.nan_items:
                x[k] = math.nan
        return {"x": x, "ids": [f"utt{i}" for i in idx],
                "nan_grad": any(i in self.nan_grad_items for i in idx)}

    def loss(self, model, batch):
        out = model(batch["x"])
        loss = out.mean()
        if batch["nan_grad"]:
            loss = loss + torch.sqrt((out * 0) ** 2).sum()  # value 0, gradient inf * 0 = NaN
        return loss, {"out_max": float(out.detach().max())}, float(len(batch["x"]))

    def validate(self, model):
        value = self.metrics[self.validations]
        self.validations += 1
        return {"score": value, "other": 1.0}


def cfg(**kw):
    base = dict(max_steps=4, log_every=1, seed=0, progress=False,
                optim=OptimConfig(lr=0.1), early_stop_metric="score")
    base.update(kw)
    return TrainConfig(**base)


def test_nonfinite_batches_are_skipped_counted_and_logged(tmp_path):
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False)
    task = LinearTask([[1, 2, 3]] * 6, nan_items=[1], nan_grad_items=[3])
    trainer = Trainer(model, task, cfg(max_steps=4), tmp_path)
    result = trainer.fit()
    assert result.steps == 4 and result.nonfinite_batches == 2
    assert torch.isfinite(model.weight).all()
    # Six batches drawn, four updates: Adam's step counter saw only the finite ones.
    assert trainer.optimizer.state[model.weight]["step"].item() == 4
    log = read_log(result.log_path)
    bad = [r for r in log if r["kind"] == "nonfinite"]
    assert [(r["step"], r["what"], r["ids"]) for r in bad] == [(2, "loss", ["utt1"]),
                                                               (3, "grad", ["utt3"])]
    assert math.isnan(bad[0]["loss"])
    assert [r["step"] for r in log if r["kind"] == "train"] == [1, 2, 3, 4]
    assert [r["nonfinite_batches"] for r in log if r["kind"] == "train"] == [0, 1, 2, 2]


def test_diverged_run_stops_with_an_error(tmp_path):
    model = nn.Linear(3, 1, bias=False)
    task = LinearTask([[1, 2, 3]] * 4, nan_items=[0, 1, 2, 3])
    with pytest.raises(SpeechlabError, match="3 batches in a row.*non-finite loss"):
        Trainer(model, task, cfg(max_consecutive_nonfinite=3), tmp_path).fit()


def test_a_run_directory_in_use_is_refused_and_freed_after(tmp_path):
    model = nn.Linear(3, 1, bias=False)
    task = LinearTask([[1, 2, 3]] * 4)
    with exclusive_dir(tmp_path, "a test"):
        with pytest.raises(SpeechlabError, match=r"in use by another process \(pid \d+\)"):
            Trainer(model, task, cfg(early_stop_metric=None), tmp_path).fit()
        assert list_checkpoints(tmp_path) == []  # nothing written by the refused run
    # released: the run goes ahead, and releases the lock when it ends
    assert Trainer(model, task, cfg(early_stop_metric=None), tmp_path).fit().steps == 4
    with exclusive_dir(tmp_path):
        pass


def test_grad_norm_is_logged_and_clipped(tmp_path):
    model = nn.Linear(3, 1, bias=False)
    x = [3.0, 4.0, 12.0]  # d(w.x)/dw = x, |x| = 13
    trainer = Trainer(model, LinearTask([x] * 2), cfg(max_steps=2, grad_clip=1.0), tmp_path)
    seen = []
    trainer.optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: seen.append(model.weight.grad.norm().item()))
    result = trainer.fit()
    logged = [r["grad_norm"] for r in read_log(result.log_path) if r["kind"] == "train"]
    assert logged == pytest.approx([13.0, 13.0])
    assert seen == pytest.approx([1.0, 1.0], rel=1e-5)


def test_parameters_without_gradient_are_untouched(tmp_path):
    """Language heads that get no gradient must not move (not even by AdamW's decay) and
    their optimiser state must not advance."""
    toy = ToyConfig(languages=("a", "b", "c"), hours=(1.0, 1.0, 0.0), items=48)
    model = build_model(toy)
    unused = {k: v.clone() for k, v in model.heads["c"].state_dict().items()}
    task = ToyTask(toy)
    c = cfg(max_steps=12, early_stop_metric="loss",
            optim=OptimConfig(name="adamw", lr=0.05, weight_decay=0.1))
    trainer = Trainer(model, task, c, tmp_path)
    trainer.fit()
    for k, v in model.heads["c"].state_dict().items():
        assert torch.equal(v, unused[k]), k  # bit-identical
    for p in model.heads["c"].parameters():
        assert p not in trainer.optimizer.state
    counts = {lang: task.seen_languages.count(lang) for lang in "ab"}
    assert counts["a"] > 0 and counts["b"] > 0
    for lang in "ab":
        for p in model.heads[lang].parameters():
            assert trainer.optimizer.state[p]["step"].item() == counts[lang]
    assert trainer.optimizer.state[model.encoder[0].weight]["step"].item() == 12


@pytest.mark.parametrize("mode,values,stop_at,best", [
    ("min", [5, 4, 3, 3.5, 3.2, 1, 1], 5, 3),
    ("max", [1, 2, 2, 2.5, 2, 0, 9, 9], 6, 4),
])
def test_early_stopping(tmp_path, mode, values, stop_at, best):
    model = nn.Linear(3, 1, bias=False)
    task = LinearTask([[1, 0, 0]] * 10, metrics=values)
    c = cfg(max_steps=100, valid_every=2, patience=2, early_stop_mode=mode, checkpoint_every=3)
    assert training_ended(tmp_path) is None  # nothing trained yet
    result = Trainer(model, task, c, tmp_path).fit()
    assert result.stopped_early
    # what a package shipped from the directory says of it
    assert training_ended(tmp_path) == {"step": 2 * stop_at, "reason": "early stopping"}
    assert task.validations == stop_at
    assert result.steps == 2 * stop_at
    assert result.best_metric == values[best - 1] and result.best_step == 2 * best
    assert load_checkpoint(result.best_checkpoint)["step"] == 2 * best
    assert result.last_checkpoint.name == f"ckpt-{2 * stop_at:08d}.pt"
    valid = [r for r in read_log(result.log_path) if r["kind"] == "valid"]
    assert [r["score"] for r in valid] == values[:stop_at]
    # Running again resumes a finished run: nothing more happens.
    again = Trainer(nn.Linear(3, 1, bias=False), LinearTask([[1, 0, 0]] * 10, metrics=values), c,
                    tmp_path).fit()
    assert again.steps == result.steps and again.stopped_early
    assert read_log(result.log_path) == read_log(again.log_path)


def test_missing_early_stop_metric_is_named(tmp_path):
    task = LinearTask([[1, 0, 0]] * 3, metrics=[1.0])
    c = cfg(valid_every=1, early_stop_metric="wer")
    with pytest.raises(SpeechlabError, match="'wer'.*\\['other', 'score'\\]"):
        Trainer(nn.Linear(3, 1), task, c, tmp_path).fit()


def test_old_checkpoints_are_rotated(tmp_path):
    task = LinearTask([[1, 0, 0]] * 3)
    Trainer(nn.Linear(3, 1), task, cfg(max_steps=9, checkpoint_every=2, keep_checkpoints=2),
            tmp_path).fit()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [8, 9]


class CrashingToyTask(ToyTask):
    """Dies (like a killed process) when asked for its ``crash_at``-th loss."""

    def __init__(self, cfg, crash_at):
        super().__init__(cfg)
        self.calls, self.crash_at = 0, crash_at

    def loss(self, model, batch):
        self.calls += 1
        if self.calls == self.crash_at:
            raise KeyboardInterrupt
        return super().loss(model, batch)


def without_time(records):
    return [{k: v for k, v in r.items() if k not in ("time", "data_time")} for r in records]


def test_resume_after_crash_is_exact(tmp_path):
    toy = ToyConfig(poison=(5,))
    # Checkpoints every 5 updates but log lines every 3, so resuming must restore the
    # half-filled log window as well as models, optimiser, schedule, sampler and RNGs.
    c = cfg(max_steps=23, checkpoint_every=5, log_every=3, valid_every=7, early_stop_metric="loss",
            schedule=dataclasses.replace(TrainConfig().schedule, name="warmup_linear",
                                         warmup_steps=4))
    ref_model = build_model(toy)
    Trainer(ref_model, ToyTask(toy), c, tmp_path / "ref").fit()

    with pytest.raises(KeyboardInterrupt):
        Trainer(build_model(toy), CrashingToyTask(toy, crash_at=14), c, tmp_path / "run").fit()
    assert [s for s, _ in list_checkpoints(tmp_path / "run")] == [5, 10]
    assert training_ended(tmp_path / "run") is None  # cut short: it has not ended
    assert max(r["step"] for r in read_log(tmp_path / "run" / "log.jsonl")) > 10
    model = build_model(toy)
    result = Trainer(model, ToyTask(toy), c, tmp_path / "run").fit()

    assert result.steps == 23
    ref_log = without_time(read_log(tmp_path / "ref" / "log.jsonl"))
    assert any(r["kind"] == "nonfinite" for r in ref_log)
    assert without_time(read_log(result.log_path)) == ref_log
    for (k, a), (_, b) in zip(ref_model.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), k


def test_a_validation_with_nothing_to_validate_warns_and_falls_back_to_the_last_checkpoint(
        tmp_path, caplog):
    nan = math.nan
    model = nn.Linear(3, 1, bias=False)
    task = LinearTask([[1, 0, 0]] * 4, metrics=[nan, nan, nan])
    c = cfg(max_steps=6, valid_every=2, patience=1, checkpoint_every=2)
    with caplog.at_level("WARNING", logger="speechlab.train"):
        result = Trainer(model, task, c, tmp_path).fit()
    # NaN neither improves nor counts against patience: the run is not stopped early.
    assert result.steps == 6 and not result.stopped_early and task.validations == 3
    assert result.best_checkpoint is None and not (tmp_path / "best.pt").exists()
    assert result.checkpoint == result.last_checkpoint == tmp_path / "ckpt-00000006.pt"
    warnings = [r.getMessage() for r in caplog.records]
    assert sum("validation score is nan: nothing was validated" in w for w in warnings) == 3
    assert any("no validation gave a finite score" in w and "ckpt-00000006.pt" in w
               for w in warnings)


def test_a_non_finite_validation_after_a_good_one_keeps_the_best(tmp_path, caplog):
    model = nn.Linear(3, 1, bias=False)
    task = LinearTask([[1, 0, 0]] * 4, metrics=[2.0, math.nan, -math.inf, 1.0])
    with caplog.at_level("WARNING", logger="speechlab.train"):
        result = Trainer(model, task, cfg(max_steps=8, valid_every=2), tmp_path).fit()
    assert result.best_step == 8 and result.best_metric == 1.0
    assert result.checkpoint == result.best_checkpoint == tmp_path / "best.pt"
    warnings = [r.getMessage() for r in caplog.records]
    assert any("score is -inf: the model has diverged" in w and "best.pt stays at update 2" in w
               for w in warnings)


def test_a_full_disk_while_checkpointing_is_named_and_the_rerun_resumes(tmp_path, monkeypatch):
    import errno
    import os

    from speechlab import files
    from speechlab.cli import fault_message
    from speechlab.train import checkpoint as ckpt_mod

    toy = ToyConfig(items=24)
    c = cfg(max_steps=6, checkpoint_every=2, early_stop_metric="loss")
    clean = Trainer(build_model(toy), ToyTask(toy), c, tmp_path / "clean").fit()

    real_save, saves = torch.save, []

    def disk_full_on_second_save(obj, f, *a, **k):
        saves.append(f)
        if len(saves) == 2:  # what torch raises when the disk fills up mid-write
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos "
                               "704 vs 598")
        return real_save(obj, f, *a, **k)

    class Full:  # os.statvfs of a full file system
        f_bavail = f_bfree = 0
        f_frsize = 4096

    monkeypatch.setattr(ckpt_mod.torch, "save", disk_full_on_second_save)
    monkeypatch.setattr(files.os, "statvfs", lambda p: Full())
    run = tmp_path / "run"
    with pytest.raises(OSError) as e:
        Trainer(build_model(toy), ToyTask(toy), c, run).fit()
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(run / "ckpt-00000004.pt")
    message = fault_message(e.value)
    assert message.startswith(f"no space left on device while writing {run}/ckpt-00000004.pt; "
                              "free space and rerun")
    assert "resumes from its last checkpoint" in message
    assert [p.name for p in run.iterdir() if p.name.endswith(".tmp")] == []
    assert [s for s, _ in list_checkpoints(run)] == [2]

    monkeypatch.undo()
    resumed = Trainer(build_model(toy), ToyTask(toy), c, run).fit()
    assert resumed.steps == 6
    assert without_time(read_log(resumed.log_path)) == without_time(read_log(clean.log_path))
    final, ref = load_checkpoint(resumed.last_checkpoint), load_checkpoint(clean.last_checkpoint)
    for k, v in ref["model"].items():
        assert torch.equal(final["model"][k], v), k
    assert os.path.exists(run / "ckpt-00000006.pt")


def test_a_full_disk_while_logging_names_the_log(tmp_path):
    import errno

    from speechlab.train.log import MetricsLog

    class FullDisk:  # what write() on a full disk raises: an OSError naming no file
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    log = MetricsLog(tmp_path / "log.jsonl")
    log._file = FullDisk()
    with pytest.raises(OSError) as e:
        log.write({"kind": "train", "step": 1})
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(tmp_path / "log.jsonl")


class SlowBatchesTask(LinearTask):
    """A :class:`LinearTask` whose collation takes a planted 30 ms per batch."""

    def collate(self, idx):
        time.sleep(0.03)
        return super().collate(idx)


def test_the_time_spent_waiting_for_batches_is_logged_and_survives_resume(tmp_path):
    torch.manual_seed(0)
    task = SlowBatchesTask([[1, 2, 3]] * 8)
    result = Trainer(nn.Linear(3, 1, bias=False), task, cfg(max_steps=4), tmp_path).fit()
    train = [r for r in read_log(result.log_path) if r["kind"] == "train"]
    # Four updates, each waited at least 30 ms for its batch; waiting is part of the time.
    assert [r["step"] for r in train] == [1, 2, 3, 4]
    assert all(0.03 * r["step"] <= r["data_time"] <= r["time"] for r in train)
    # Resumed to 6 updates: the count goes on from the checkpoint instead of restarting.
    task = SlowBatchesTask([[1, 2, 3]] * 8)
    result = Trainer(nn.Linear(3, 1, bias=False), task, cfg(max_steps=6), tmp_path).fit()
    last = [r for r in read_log(result.log_path) if r["kind"] == "train"][-1]
    assert last["step"] == 6 and 0.18 <= last["data_time"] <= last["time"]


class PlantedClock:
    """``time.monotonic`` for the trainer: it moves only when a batch is collated, by
    ``per_batch`` seconds, so a time limit binds at a known update whatever the machine."""

    def __init__(self, per_batch: float) -> None:
        self.now, self.per_batch = 1000.0, per_batch

    def monotonic(self) -> float:
        return self.now


class ClockedTask(LinearTask):
    def __init__(self, clock, *args, **kw):
        super().__init__(*args, **kw)
        self.clock = clock

    def collate(self, idx):
        self.clock.now += self.clock.per_batch
        return super().collate(idx)


def test_a_time_limit_ends_the_run_early_for_good(tmp_path, monkeypatch):
    import types

    from speechlab.train import trainer as trainer_module

    clock = PlantedClock(per_batch=20.0)  # each update takes 20 s of the planted clock
    monkeypatch.setattr(trainer_module, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    torch.manual_seed(0)
    task = ClockedTask(clock, [[1, 2, 3]] * 8, metrics=[3.0, 2.0, 1.0])
    limited = cfg(max_steps=8, max_minutes=1.0, valid_every=5, checkpoint_every=2)
    result = Trainer(nn.Linear(3, 1, bias=False), task, limited, tmp_path).fit()
    # 60 s are reached after update 3: it is the last, validated and checkpointed like one.
    assert result.steps == 3
    records = read_log(result.log_path)
    assert [r["step"] for r in records if r["kind"] == "train"] == [1, 2, 3]
    assert [r["step"] for r in records if r["kind"] == "valid"] == [3]
    assert (tmp_path / "ckpt-00000003.pt").exists()
    assert training_ended(tmp_path) == {"step": 3, "reason": "time limit"}
    # Run again: the run is over, nothing more is trained.
    again = Trainer(nn.Linear(3, 1, bias=False), ClockedTask(clock, [[1, 2, 3]] * 8,
                                                              metrics=[0.5]),
                    limited, tmp_path).fit()
    assert again.steps == 3
    assert [r["step"] for r in read_log(result.log_path) if r["kind"] == "train"] == [1, 2, 3]
    # Without the limit the same run goes on to max_steps, as a raised max_steps would.
    more = Trainer(nn.Linear(3, 1, bias=False), ClockedTask(clock, [[1, 2, 3]] * 8,
                                                             metrics=[0.5, 0.4]),
                   cfg(max_steps=8, valid_every=5, checkpoint_every=2), tmp_path).fit()
    assert more.steps == 8
    assert training_ended(tmp_path) == {"step": 8, "reason": "max_steps"}
    assert [r["step"] for r in read_log(result.log_path) if r["kind"] == "train"] == \
        list(range(1, 9))
