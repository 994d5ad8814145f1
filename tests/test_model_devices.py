"""``Model.to(device)`` (``speechlab.load(..., device=)``, ``--device`` of transcribe, synth and
serve): on the CPU it changes nothing; the code that moves each family's networks and its
inputs runs here with the CPU as its target and gives the same outputs; a GPU the machine
lacks and an ONNX model on a GPU are refused clearly. (tests/test_cuda.py compares a GPU's
outputs with these on a machine that has one.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.errors import ConfigError
from speechlab.testing.device_models import models, outputs


@pytest.fixture(scope="module")
def loaders(tmp_path_factory):
    return models(tmp_path_factory.mktemp("models"))


@pytest.mark.parametrize("name", ["ctc", "salad", "wav2vec2", "rnnt"])
def test_moving_the_networks_keeps_what_a_model_does(loaders, name):
    model = loaders[name]()
    before = outputs(model)
    assert model.to("cpu") is model
    model._networks_to(torch.device("cpu"))  # the code a GPU runs, aimed at the CPU
    after = outputs(model)
    assert after.keys() == before.keys()
    for key, value in before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_allclose(after[key], value, rtol=1e-5, atol=1e-5)
        else:
            assert after[key] == value, key


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_gpu_the_machine_lacks_and_onnx_on_a_gpu_are_refused(loaders):
    model = loaders["ctc"]()
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        model.to("cuda")
    with pytest.raises(ConfigError, match="not a device"):
        model.to("gpu0")


def test_an_onnx_model_stays_on_the_cpu(loaders, monkeypatch):
    import speechlab.devices as devices

    model = loaders["ctc"]().onnx()
    # a machine with a GPU: the refusal is the ONNX model's, not the device's
    monkeypatch.setattr(devices, "resolve", lambda name=None: torch.device("cuda"))
    with pytest.raises(ConfigError, match="onnxruntime's CPU build"):
        model.to("cuda")
