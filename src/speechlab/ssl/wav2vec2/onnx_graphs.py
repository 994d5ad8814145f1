"""A wav2vec 2.0 CTC model (:class:`.model.Wav2Vec2CTC`) as one ONNX graph, run by onnxruntime
behind the model's own call: ``model(x (1,S)) -> log_probs (1,T,V), lengths (1,)``; the
waveform's normalization before it and the decoding after it (greedy, the LM's beam search)
stay as they are. The attention diagnosis needs the PyTorch encoder: an ONNX model has none.

Shapes: S samples, T frames, V labels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from speechlab.nn.onnx_graph import export_graph, session
from speechlab.ssl.wav2vec2.model import CtcConfig, Wav2Vec2CTC, build_ctc

FILE = "acoustic.onnx"


class _Graph(nn.Module):
    def __init__(self, model: Wav2Vec2CTC) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x)[0]


def export_network(model: Wav2Vec2CTC) -> bytes:
    """The CTC model (in eval mode) as an ONNX graph over one waveform of any length."""
    x = torch.randn(1, 24000)
    return export_graph(_Graph(model.eval()), [x], ["x"], ["log_probs"],
                        {"x": {1: "S"}, "log_probs": {1: "T"}})


class OnnxWav2Vec2CTC:
    """The graph in onnxruntime, called as the PyTorch model is for one waveform; ``head``
    and ``encoder`` are the model's skeleton on the meta device (its sizes, no weights)."""

    backend = "onnx"

    def __init__(self, graph: bytes | str | Path, config: CtcConfig, threads: int = 1) -> None:
        self.graph = session(graph, threads)
        self.config = config
        with torch.device("meta"):
            skeleton = build_ctc(config)
        self.head, self.encoder = skeleton.head, skeleton.encoder

    def __call__(self, x: Tensor) -> tuple[Tensor, Tensor]:
        feed: dict[str, Any] = {"x": np.ascontiguousarray(x.numpy(), dtype=np.float32)}
        (lp,) = self.graph.run(["log_probs"], feed)
        return torch.from_numpy(lp), torch.tensor([lp.shape[1]])

    def eval(self) -> OnnxWav2Vec2CTC:
        return self

    def state_dict(self) -> dict[str, Tensor]:
        return {}
