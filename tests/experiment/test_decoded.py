"""Kept decodings: what a paper's decode returns comes back equal, read without running code
from the file; anything else is refused and decoded again."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from speechlab.experiment.decoded import kept_or_decoded, load_decoded, save_decoded
from speechlab.papers.salad.recipe import SaladDecoding


def _salad():
    return SaladDecoding(preset="big", params=123, scores={"full": {"mcd": 4.5}},
                         f0=np.linspace(80, 200, 7, dtype=np.float32), wavs=["a.wav"],
                         epochs=1.5, mcd_sums={"full": np.arange(3, dtype=np.float64)})


def test_a_papers_result_with_arrays_comes_back_equal(tmp_path):
    value = {"salad": _salad(), "hyps": {"u1": "a b"}, "dev_wer": {0.5: 12.0},
             "scalar": np.float64(2.5), "tensor": torch.arange(4), "pair": (1, "x")}
    save_decoded(tmp_path / "d.pt", "key", value)
    found, back = load_decoded(tmp_path / "d.pt", "key")
    assert found
    assert back["salad"].f0.dtype == np.float32
    np.testing.assert_array_equal(back["salad"].f0, value["salad"].f0)
    np.testing.assert_array_equal(back["salad"].mcd_sums["full"], value["salad"].mcd_sums["full"])
    plain = dataclasses.replace(back["salad"], f0=None, mcd_sums={})
    assert plain == dataclasses.replace(value["salad"], f0=None, mcd_sums={})
    assert back["dev_wer"] == {0.5: 12.0} and back["pair"] == (1, "x")
    assert torch.equal(back["tensor"], value["tensor"]) and back["scalar"] == 2.5
    # another key: not this decoding
    assert load_decoded(tmp_path / "d.pt", "other") == (False, None)


class NotOurs:  # a class outside speechlab: never built from a file
    def __init__(self):
        self.x = 1


def test_foreign_classes_and_broken_files_are_decoded_again(tmp_path):
    path = tmp_path / "decoded" / "job.pt"
    path.parent.mkdir()
    torch.save({"key": "k", "value": NotOurs()}, path)
    assert load_decoded(path, "k") == (False, None)
    path.write_bytes(b"not a checkpoint")
    assert load_decoded(path, "k") == (False, None)

    @dataclasses.dataclass(frozen=True)
    class Job:
        name: str

    calls = []
    model = tmp_path / "model"
    model.mkdir()
    (model / "best.pt").write_bytes(b"weights")
    config = tmp_path / "config.yaml"
    config.write_text("a: 1\n")

    def decode():
        calls.append(1)
        return {"wer": 1.0}

    assert kept_or_decoded(tmp_path, Job("job"), config, model, decode) == {"wer": 1.0}
    assert kept_or_decoded(tmp_path, Job("job"), config, model, decode) == {"wer": 1.0}
    assert len(calls) == 1
    config.write_text("a: 2\n")  # another recipe: decoded again
    kept_or_decoded(tmp_path, Job("job"), config, model, decode)
    assert len(calls) == 2
