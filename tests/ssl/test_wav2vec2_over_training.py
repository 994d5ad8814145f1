"""attention_over_training on a tiny run directory with two planted checkpoints: one whose
queries are all zero (every map uniform) and one whose queries are one constant vector (every
query ranks the keys alike: a few keys draw all the attention, a vertical map)."""

from __future__ import annotations

import json

import torch

from speechlab.ssl.wav2vec2 import build
from speechlab.ssl.wav2vec2.config import preset
from speechlab.ssl.wav2vec2.model import FAMILY
from speechlab.ssl.wav2vec2.over_training import attention_over_training, from_json, write_over_training
from speechlab.train.card import ModelCard
from speechlab.train.checkpoint import checkpoint_path, save_checkpoint


def _plant(model, scale: float) -> None:
    """Queries independent of the input: q = scale * u for a fixed u in every block."""
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, module in model.named_modules():
            if name.endswith("q_proj"):
                module.weight.zero_()
                module.bias.copy_(scale * torch.randn(module.bias.shape, generator=g))


def test_planted_checkpoints_are_followed(tmp_path):
    torch.manual_seed(0)
    card = ModelCard.of(FAMILY, preset("ci")).to_dict()
    run = tmp_path / "pretrained"
    run.mkdir()
    for step, scale in ((100, 0.0), (200, 200.0)):
        model = build("ci")
        _plant(model, scale)
        save_checkpoint(checkpoint_path(run, step), step=step, model=model.state_dict(),
                        model_config=card)
    (run / "log.jsonl").write_text(
        json.dumps({"kind": "train", "step": 100, "loss": 3.0}) + "\n"
        + json.dumps({"kind": "valid", "step": 200, "loss": 2.0, "accuracy": 0.4}) + "\n")
    utts = [torch.randn(16000), torch.randn(20000)]
    points = attention_over_training(run, utts)

    assert [p.step for p in points] == [100, 200]
    assert points[0].accuracy is None and points[1].accuracy == 0.4 and points[1].loss == 2.0
    assert [b.block for b in points[0].blocks] == [1, 2]
    for b in points[0].blocks:  # uniform maps
        assert abs(b.entropy - 1.0) < 1e-4 and b.vertical < 1e-6 and b.label == "heterogeneous"
    for b in points[1].blocks:  # the same few keys for every query
        assert b.entropy < 0.5 and b.vertical > 0.6 and b.label == "vertical"

    write_over_training(points, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "attention_over_training.json").read_text())
    assert from_json(data) == points
    assert (tmp_path / "out" / "attention_over_training.png").stat().st_size > 1000
