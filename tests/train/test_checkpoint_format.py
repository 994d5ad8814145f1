"""The checkpoint format: atomic saves, weights_only loads, clear errors on corrupt files, RNG
round trips, fine-tuning weight selection and safetensors export."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from speechlab.errors import SpeechlabError
from speechlab.train import checkpoint as ck
from speechlab.train.checkpoint import (
    export_safetensors,
    checkpoint_summary,
    latest_checkpoint,
    load_checkpoint,
    load_model_weights,
    rng_state,
    save_checkpoint,
    set_rng_state,
)


def test_round_trip_with_weights_only(tmp_path):
    model = nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    path = save_checkpoint(tmp_path / "c.pt", step=7, model=model.state_dict(),
                           optimizer=opt.state_dict(), rng=[rng_state()],
                           trainer={"best_metric": None, "stopped": False}, config={"lr": 1e-3})
    # The file is readable by plain torch with weights_only=True: no pickled code inside.
    raw = torch.load(path, weights_only=True)
    assert raw["format_version"] == ck.FORMAT_VERSION and raw["step"] == 7
    assert torch.equal(raw["model"]["weight"], model.weight)
    opt2 = torch.optim.Adam(nn.Linear(3, 2).parameters())
    opt2.load_state_dict(load_checkpoint(path)["optimizer"])


def test_rng_state_round_trip(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    save_checkpoint(tmp_path / "r.pt", rng=rng_state())
    expected = (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn())
    random.seed(99)
    np.random.seed(99)
    torch.manual_seed(99)
    set_rng_state(load_checkpoint(tmp_path / "r.pt")["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn()) == expected


def test_non_plain_values_are_refused_at_save_time(tmp_path):
    with pytest.raises(TypeError, match="ndarray"):
        save_checkpoint(tmp_path / "x.pt", bad=np.zeros(2))
    with pytest.raises(TypeError, match="Linear"):
        save_checkpoint(tmp_path / "x.pt", nested={"m": [nn.Linear(1, 1)]})
    assert not (tmp_path / "x.pt").exists()


def test_failed_save_leaves_the_old_checkpoint_intact(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "c.pt", step=1, w=torch.ones(4))
    before = path.read_bytes()
    real_save = torch.save

    def dies_half_way(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        with open(f, "r+b") as fh:  # leave a truncated file, then crash
            fh.truncate(10)
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", dies_half_way)
    with pytest.raises(OSError):
        save_checkpoint(path, step=2, w=torch.zeros(4))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary left behind


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_checkpoint_error_names_the_file(tmp_path, damage):
    path = save_checkpoint(tmp_path / "ckpt-00000003.pt", step=3, w=torch.randn(100))
    data = path.read_bytes()
    damaged = {"truncate": data[: len(data) // 2], "garbage": b"\x00not a checkpoint" * 10,
               "empty": b""}[damage]
    path.write_bytes(damaged)
    with pytest.raises(SpeechlabError, match="ckpt-00000003.pt.*corrupt or truncated"):
        load_checkpoint(path)
    with pytest.raises(SpeechlabError, match="ckpt-00000003.pt.*corrupt or truncated"):
        checkpoint_summary(path)  # mapped, not read: the same error


def _bytes_read() -> int:
    for line in open("/proc/self/io", encoding="ascii"):
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_step_and_card_are_read_without_the_weights(tmp_path):
    """``checkpoint_summary`` and ``load_checkpoint(mmap=True)`` map the file: the step and the
    config come back, and the 16 MB of weights are not read until a tensor is used."""
    weights = torch.arange(4_000_000, dtype=torch.float32)
    path = save_checkpoint(tmp_path / "ckpt-00000042.pt", step=42, model={"w": weights},
                           model_config={"family": "x"})
    before = _bytes_read()
    assert checkpoint_summary(path) == {"step": 42}
    mapped = load_checkpoint(path, mmap=True)
    assert mapped["model_config"] == {"family": "x"}
    assert _bytes_read() - before < path.stat().st_size // 8
    assert torch.equal(mapped["model"]["w"], weights)  # the tensors are there when used
    assert checkpoint_summary(save_checkpoint(tmp_path / "nostep.pt")) == {}
    averaged = save_checkpoint(tmp_path / "avg.pt", step=7, model={"w": weights},
                               training_model={"w": weights}, average_updates=5,
                               config={"ema_decay": 0.99})
    assert checkpoint_summary(averaged) == {"step": 7, "ema_decay": 0.99, "average_updates": 5}


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(SpeechlabError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")
    torch.save({"weight": torch.ones(1)}, tmp_path / "foreign.pt")
    with pytest.raises(SpeechlabError, match="not a speechlab checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    save_checkpoint(tmp_path / "future.pt")
    raw = torch.load(tmp_path / "future.pt", weights_only=True)
    raw["format_version"] = ck.FORMAT_VERSION + 1
    torch.save(raw, tmp_path / "future.pt")
    with pytest.raises(SpeechlabError, match="newer"):
        load_checkpoint(tmp_path / "future.pt")


def test_latest_checkpoint_orders_by_step(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for step in (9, 10, 100, 2):
        save_checkpoint(ck.checkpoint_path(tmp_path, step), step=step)
    (tmp_path / ".ckpt-00000999.pt.abc.tmp").write_bytes(b"half")
    (tmp_path / "best.pt").write_bytes(b"x")
    assert latest_checkpoint(tmp_path).name == "ckpt-00000100.pt"
    ck.remove_stale_temporaries(tmp_path)
    assert not list(tmp_path.glob(".*.tmp"))


class Multi(nn.Module):
    """Shared encoder + per-language heads (the multi-softmax layout)."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.heads = nn.ModuleDict({"hi": nn.Linear(4, 3), "ta": nn.Linear(4, 5)})


class Mono(nn.Module):
    def __init__(self, vocab=3):
        super().__init__()
        self.encoder = nn.Linear(4, 4)
        self.head = nn.Linear(4, vocab)


def test_fine_tune_from_shared_plus_one_language(tmp_path):
    multi = Multi()
    save_checkpoint(tmp_path / "multi.pt", model=multi.state_dict())

    def hindi_only(key):
        if key.startswith("heads."):
            return key.replace("heads.hi.", "head.", 1) if key.startswith("heads.hi.") else None
        return key

    mono = Mono()
    report = load_model_weights(mono, tmp_path / "multi.pt", map_key=hindi_only)
    assert report.missing == [] and report.unexpected == []
    assert torch.equal(mono.encoder.weight, multi.encoder.weight)
    assert torch.equal(mono.head.weight, multi.heads["hi"].weight)
    assert torch.equal(mono.head.bias, multi.heads["hi"].bias)


def test_prefix_filters_and_strictness(tmp_path):
    multi = Multi()
    save_checkpoint(tmp_path / "multi.pt", model=multi.state_dict())
    mono = Mono()
    head_before = mono.head.weight.clone()
    with pytest.raises(SpeechlabError, match="multi.pt does not match.*head.weight"):
        load_model_weights(mono, tmp_path / "multi.pt", exclude=["heads."])
    report = load_model_weights(mono, tmp_path / "multi.pt", include=["encoder."], strict=False)
    assert report.loaded == ["encoder.bias", "encoder.weight"]
    assert report.missing == ["head.bias", "head.weight"]
    assert torch.equal(mono.encoder.weight, multi.encoder.weight)
    assert torch.equal(mono.head.weight, head_before)


def test_shape_mismatch_is_always_an_error(tmp_path):
    save_checkpoint(tmp_path / "multi.pt", model=Multi().state_dict())
    with pytest.raises(SpeechlabError, match=r"head\.(weight|bias).*has shape \(5"):
        load_model_weights(Mono(), tmp_path / "multi.pt", strict=False,
                           map_key=lambda k: k.replace("heads.ta.", "head."))


def test_safetensors_export_round_trip(tmp_path):
    model = Multi()
    save_checkpoint(tmp_path / "c.pt", model=model.state_dict(), step=1)
    out = export_safetensors(tmp_path / "c.pt", tmp_path / "w.safetensors", {"step": "1"})
    from safetensors.torch import load_file

    loaded = load_file(str(out))
    assert loaded.keys() == model.state_dict().keys()
    assert all(torch.equal(loaded[k], v) for k, v in model.state_dict().items())
    fresh = Multi()
    load_model_weights(fresh, out)
    assert torch.equal(fresh.heads["ta"].weight, model.heads["ta"].weight)
    (tmp_path / "bad.safetensors").write_bytes(b"junk")
    with pytest.raises(SpeechlabError, match="bad.safetensors"):
        load_model_weights(fresh, tmp_path / "bad.safetensors")
