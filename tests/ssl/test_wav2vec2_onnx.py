"""wav2vec 2.0 CTC models on onnxruntime: the network as one ONNX graph gives the PyTorch
log-probabilities at any length and the same transcripts, in memory and as a package (int8
too); the attention diagnosis, which reads the PyTorch encoder, is not offered there."""

from __future__ import annotations

import numpy as np
import pytest

import speechlab
from speechlab.errors import ConfigError

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    from speechlab.testing.tiny_models import hf_ctc_directory

    return hf_ctc_directory(tmp_path_factory.mktemp("hf") / "hf")


def _audio(seconds: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, int(seconds * 16000)).astype(np.float32)


def test_the_graph_gives_the_models_log_probs_and_transcripts(hf):
    model = speechlab.load(hf)
    graph = model.onnx()
    assert graph.backend == "onnx" and "attention" not in graph.capabilities
    assert "attention" in model.capabilities
    for seconds, seed in ((0.7, 0), (2.3, 1), (3.9, 2)):
        x = _audio(seconds, seed)
        assert np.allclose(graph.log_probs(x), model.log_probs(x), atol=1e-4)
        assert graph.transcribe(x).text == model.transcribe(x).text
    with pytest.raises(ConfigError, match="ONNX graph"):
        graph.encoder


def test_an_onnx_package_and_its_int8_twin(hf, tmp_path):
    import onnx

    model = speechlab.load(hf)
    speechlab.export(hf, tmp_path / "onnx", format="onnx")
    speechlab.export(hf, tmp_path / "int8", format="onnx", int8=True)
    fp, q = speechlab.load(tmp_path / "onnx"), speechlab.load(tmp_path / "int8")
    assert fp.backend == q.backend == "onnx"
    x = _audio(2.0, 3)
    assert fp.transcribe(x).text == model.transcribe(x).text
    ops = {n.op_type for n in onnx.load(str(tmp_path / "int8" / "acoustic.onnx")).graph.node}
    assert "DynamicQuantizeLinear" in ops
    assert np.abs(q.log_probs(x) - model.log_probs(x)).max() < 1.0


@pytest.mark.parametrize("front_end", ["fbank", "conv"])
def test_speechlabs_own_models_give_their_log_probs_at_any_length(front_end):
    """speechlab's own wav2vec 2.0 CTC networks (the shipped ones: the log-mel front end, local
    attention blocks) as ONNX graphs: the PyTorch log-probs at lengths other than the trace's,
    shorter and longer than the local band. A graph that kept the trace's features or band as
    constants answered every waveform with the trace's 74 frames."""
    import torch

    from speechlab.nn.onnx_graph import export_graph
    from speechlab.ssl.wav2vec2.config import preset
    from speechlab.ssl.wav2vec2.model import CtcConfig, build_ctc
    from speechlab.ssl.wav2vec2.onnx_graphs import OnnxWav2Vec2CTC, _Graph, export_network
    from speechlab.errors import DataError

    torch.manual_seed(0)
    config = CtcConfig(preset("tiny", front_end=front_end, local_blocks=(1,), radius=3), 12)
    model = build_ctc(config).eval()
    graph = OnnxWav2Vec2CTC(export_network(model), config)
    for seconds, seed in ((0.1, 0), (0.6, 1), (1.5, 2), (2.9, 3)):
        x = torch.from_numpy(_audio(seconds, seed))[None]
        with torch.no_grad():
            want, lens = model(x)
        got, got_lens = graph(x)
        assert got.shape == want.shape and int(got_lens[0]) == int(lens[0])
        assert np.allclose(got.numpy(), want.numpy(), atol=1e-4)
    if front_end == "fbank":  # a graph exported from the waveform before: refused, by name
        old = export_graph(_Graph(model), [torch.randn(1, 24000)], ["x"], ["log_probs"],
                           {"x": {1: "S"}, "log_probs": {1: "T"}})
        with pytest.raises(DataError, match="export the model again"):
            OnnxWav2Vec2CTC(old, config, source="old.onnx")


@pytest.mark.parametrize("name", ["en_w2v2_local", "en_w2v2_orig"])
def test_the_shipped_packages_read_alike_on_onnxruntime(name):
    """The shipped wav2vec 2.0 models (log-mel front end; local attention in one) through their
    ONNX graphs: PyTorch's log-probs at lengths other than the trace's (before the fix their
    graphs answered every recording with the trace's example, or failed)."""
    from speechlab.shipped import models_dir

    if not (models_dir() / name / "speechlab.json").is_file():
        pytest.skip(f"{name} is not shipped here")
    model = speechlab.load(name)
    graph = model.onnx()
    for seconds, seed in ((1.1, 0), (2.7, 1)):
        x = _audio(seconds, seed)
        assert np.allclose(graph.log_probs(x), model.log_probs(x), atol=1e-3)
