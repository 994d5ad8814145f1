"""The CTC-topology models on onnxruntime: the acoustic model as one ONNX graph gives the
PyTorch model's log-probabilities at any length, the same transcripts in memory (``onnx()``)
and from an ONNX package, and ``--int8`` quantizes it into a smaller graph that still decodes."""

from __future__ import annotations

import numpy as np
import pytest

import speechlab
from speechlab.testing.tiny_models import ctc_package


@pytest.fixture(scope="module")
def pkg(tmp_path_factory):
    return ctc_package(tmp_path_factory.mktemp("ctc") / "ctc", topology="S3-T2★")


def _audio(seconds: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, int(seconds * 16000)).astype(np.float32)


def test_the_graph_gives_the_models_log_probs_and_transcripts(pkg):
    model = speechlab.load(pkg)
    graph = model.onnx()
    assert graph.backend == "onnx" and model.backend == "torch" and graph.onnx() is graph
    for seconds, seed in ((0.9, 0), (2.6, 1), (4.1, 2)):  # lengths the export never saw
        x = _audio(seconds, seed)
        assert np.allclose(graph.log_probs(x), model.log_probs(x), atol=1e-4)
        assert graph.transcribe(x).text == model.transcribe(x).text
    with pytest.raises(Exception, match="runs an ONNX graph"):
        graph.to_package()


def test_an_onnx_package_and_its_int8_twin(pkg, tmp_path, capsys, caplog):
    import logging

    from speechlab.cli import main
    from speechlab.package import read_card

    model = speechlab.load(pkg)
    assert main(["export", str(pkg), "--out", str(tmp_path / "onnx"), "--format", "onnx"]) == 0
    caplog.set_level(logging.INFO)
    assert main(["export", str(pkg), "--out", str(tmp_path / "int8"), "--format", "onnx",
                 "--int8"]) == 0
    capsys.readouterr()
    # the quantizer's line per operator it leaves out stays out of the user's terminal
    assert not [r for r in caplog.records if r.name == "root"], caplog.records[:3]
    fp, q = speechlab.load(tmp_path / "onnx"), speechlab.load(tmp_path / "int8")
    assert fp.backend == q.backend == "onnx" and read_card(tmp_path / "int8").data["int8"]
    assert not (tmp_path / "onnx" / "model.safetensors").exists()
    import onnx

    ops = {n.op_type for n in onnx.load(str(tmp_path / "int8" / "acoustic.onnx")).graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops  # int8 matrix products
    float_ops = {n.op_type for n in onnx.load(str(tmp_path / "onnx" / "acoustic.onnx")).graph.node}
    assert "MatMulInteger" not in float_ops
    x = _audio(2.0, 3)
    assert fp.transcribe(x).text == model.transcribe(x).text
    # int8 changes the numbers a little, not what they are about
    assert np.abs(q.log_probs(x) - model.log_probs(x)).max() < 1.0
    assert isinstance(q.transcribe(x).text, str)
