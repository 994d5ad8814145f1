"""The TTS acoustic models as ONNX graphs (``tts.onnx_graphs``): the graph gives the PyTorch
model's frames (within 1e-4, batches, lengths, windowed attention), and a synthesizer on it
speaks as the PyTorch one (features within 1e-4, the waveform within a 16-bit step)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import speechlab
from speechlab.cli import main
from speechlab.testing.tts_labels import HELLO_LABELS
from speechlab.tts.model import build_from_config, preset
from speechlab.tts.onnx_graphs import OnnxAcousticModel, export_acoustic

TOL = 1e-4
LABELS = HELLO_LABELS


@pytest.mark.parametrize("name, extra", [("tiny_salad", {}), ("mini_salad", {}),
                                         ("tiny_salad", {"output_conv": 3}), ("tiny_rnn", {})],
                         ids=["tiny_salad", "mini_salad", "salad-conv-output", "tiny_rnn"])
def test_the_acoustic_graph_gives_the_models_frames(name, extra):
    from dataclasses import replace

    cfg = replace(preset(name, input_dim=30), **extra)
    torch.manual_seed(0)
    model = build_from_config(cfg).eval()
    graph = OnnxAcousticModel(export_acoustic(model), cfg)
    g = torch.Generator().manual_seed(1)
    for batch, frames, window in ((1, 50, None), (3, 17, None), (1, 300, 120), (2, 121, 40),
                                  (1, 1, None)):
        x = torch.rand(batch, frames, 30, generator=g)
        lens = torch.full((batch,), frames)
        lens[-1] = max(1, frames - 5)
        with torch.no_grad():
            want = model(x, lens, window=window)
        got = graph(x, lens, window)
        assert got.shape == want.shape
        assert float((got - want).abs().max()) <= TOL


def test_an_onnx_salad_package_speaks_as_the_torch_package(tmp_path, capsys):
    from speechlab.testing.tiny_models import salad_package
    from speechlab.tts.labels import parse_labels

    pkg = salad_package(tmp_path / "salad")
    assert main(["export", str(pkg), "--out", str(tmp_path / "onnx"), "--format", "onnx"]) == 0
    assert "backend onnx" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "onnx").iterdir()) == [
        "acoustic.onnx", "questions.hed", "speechlab.json"]
    card = json.loads((tmp_path / "onnx" / "speechlab.json").read_text())
    assert card["backend"] == "onnx" and card["files"]["acoustic"] == "acoustic.onnx"
    torch_tts, onnx_tts = speechlab.load(pkg), speechlab.load(tmp_path / "onnx")
    assert (torch_tts.backend, onnx_tts.backend) == ("torch", "onnx")
    labels = parse_labels(LABELS)
    for window in ("model", None, 40):
        want = torch_tts.synthesize(labels=labels, window=window)
        got = onnx_tts.synthesize(labels=labels, window=window)
        assert got.features.shape == want.features.shape
        assert np.abs(got.features - want.features).max() <= TOL
        assert len(got.waveform) == len(want.waveform)
        assert np.abs(got.waveform - want.waveform).max() <= 1 / 32768
    # the same from a PyTorch package, exported on the fly
    on_the_fly = speechlab.load(pkg, backend="onnx")
    assert on_the_fly.backend == "onnx"
    assert np.abs(on_the_fly.synthesize(labels=labels).features
                  - torch_tts.synthesize(labels=labels).features).max() <= TOL
    # speechlab synth runs the ONNX package as any other
    assert main(["synth", str(tmp_path / "onnx"), str(_label_file(tmp_path)), "--out",
                 str(tmp_path / "x.wav")]) == 0
    assert (tmp_path / "x.wav").stat().st_size > 0


def _label_file(tmp_path):
    path = tmp_path / "x.lab"
    path.write_text("\n".join(LABELS) + "\n")
    return path
