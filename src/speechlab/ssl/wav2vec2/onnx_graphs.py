"""A wav2vec 2.0 CTC model (:class:`.model.Wav2Vec2CTC`) as one ONNX graph, run by onnxruntime
behind the model's own call: ``model(x (1,S)) -> log_probs (1,T,V), lengths (1,)``; the
waveform's normalization before it and the decoding after it (greedy, the LM's beam search)
stay as they are. The attention diagnosis needs the PyTorch encoder: an ONNX model has none.

The graph starts where the network's tensors start. With the learned conv front end that is
the waveform (input ``x``); the log-mel front end (``front_end: fbank``,
:class:`.feature_encoder.FbankEncoder`) is computed by kaldi-native-fbank outside PyTorch's
graph, so a trace would keep its output for the example waveform as a constant; its graph
starts at the stacked features (input ``feats`` (1, T, 160)), which are computed here as the
PyTorch model computes them, as sherpa-onnx computes its models' fbank outside theirs.

Shapes: S samples, T frames, V labels, C the front end's channels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from speechlab.errors import DataError
from speechlab.nn.onnx_graph import export_graph, session
from speechlab.ssl.wav2vec2.feature_encoder import FbankEncoder
from speechlab.ssl.wav2vec2.model import CtcConfig, Wav2Vec2CTC, build_ctc

FILE = "acoustic.onnx"


class _Graph(nn.Module):
    def __init__(self, model: Wav2Vec2CTC) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x)[0]


def _fbank_front_end(config: CtcConfig) -> bool:
    return config.model.front_end == "fbank"


def export_network(model: Wav2Vec2CTC) -> bytes:
    """The CTC model (in eval mode) as an ONNX graph over one waveform of any length, or over
    its stacked log-mel features for the fbank front end (module doc)."""
    model = model.eval()
    x = torch.randn(1, 24000)
    if _fbank_front_end(model.config):
        with torch.no_grad():
            feats, _ = model.encoder.features(x)
        return export_graph(_Graph(model), [feats], ["feats"], ["log_probs"],
                            {"feats": {1: "T"}, "log_probs": {1: "T"}})
    return export_graph(_Graph(model), [x], ["x"], ["log_probs"],
                        {"x": {1: "S"}, "log_probs": {1: "T"}})


class OnnxWav2Vec2CTC:
    """The graph in onnxruntime, called as the PyTorch model is for one waveform; ``head``
    and ``encoder`` are the model's skeleton on the meta device (its sizes, no weights)."""

    backend = "onnx"

    def __init__(self, graph: bytes | str | Path, config: CtcConfig, threads: int = 1,
                 source: object = "the ONNX graph") -> None:
        self.graph = session(graph, threads)
        self.config = config
        with torch.device("meta"):
            skeleton = build_ctc(config)
        self.head, self.encoder = skeleton.head, skeleton.encoder
        self.input = self.graph.get_inputs()[0].name
        self.front_end: FbankEncoder | None = None
        if _fbank_front_end(config):
            if self.input != "feats":
                # exported before the graph started at the features: its front end is the
                # example waveform's features, whatever it is given
                raise DataError(f"{source}: this ONNX graph of a model with the fbank front "
                                "end takes waveforms and answers every one with the same "
                                "features; export the model again (speechlab export --format "
                                "onnx)")
            self.front_end = FbankEncoder()

    def __call__(self, x: Tensor) -> tuple[Tensor, Tensor]:
        if self.front_end is not None:
            x = self.front_end(x)[0]
        feed: dict[str, Any] = {self.input: np.ascontiguousarray(x.numpy(), dtype=np.float32)}
        (lp,) = self.graph.run(["log_probs"], feed)
        return torch.from_numpy(lp), torch.tensor([lp.shape[1]])

    def eval(self) -> OnnxWav2Vec2CTC:
        return self

    def state_dict(self) -> dict[str, Tensor]:
        return {}
