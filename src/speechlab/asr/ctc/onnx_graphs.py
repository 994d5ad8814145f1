"""A CTC-topology acoustic model (:mod:`.model`) as one ONNX graph, run by onnxruntime behind
the model's own call: ``model(x (B,T,F), x_lens (B,)) -> log_probs (B,T',V), lengths (B,)``.
What comes before (fbank, CMVN) and after (Viterbi over T∘L∘G, the lattice, the prefix
search) stays as it is: a package keeps its graph and LM beside ``acoustic.onnx``.

Shapes: B batch, T feature frames, F feature dims, T' output frames, V tokens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from speechlab.asr.ctc.model import CtcModel, CtcModelConfig
from speechlab.nn.onnx_graph import export_graph, session
from speechlab.nn.transformer import Conv2dSubsampling

FILE = "acoustic.onnx"


def export_network(model: CtcModel) -> bytes:
    """The acoustic model (in eval mode) as an ONNX graph (module doc)."""
    cfg = model.config
    assert cfg is not None
    x = torch.rand(2, 60, cfg.feature_dim)
    lens = torch.tensor([60, 41])
    return export_graph(model.eval(), [x, lens], ["x", "x_lens"], ["log_probs", "lengths"],
                        {"x": {0: "B", 1: "T"}, "x_lens": {0: "B"},
                         "log_probs": {0: "B", 1: "U"}, "lengths": {0: "B"}})


class OnnxCtcNetwork:
    """The acoustic model's graph in onnxruntime, called as the PyTorch model is (module doc);
    ``subsampling.output_lengths`` as the model's (arithmetic on lengths, no weights)."""

    backend = "onnx"

    def __init__(self, graph: bytes | str | Path, config: CtcModelConfig,
                 threads: int = 1) -> None:
        self.graph = session(graph, threads)
        self.config = config
        with torch.device("meta"):  # its sizes only: output_lengths reads no weight
            self.subsampling = Conv2dSubsampling(config.feature_dim, config.channels,
                                                 config.dim, second_stride=config.subsampling // 2)

    def __call__(self, x: Tensor, x_lens: Tensor) -> tuple[Tensor, Tensor]:
        feed: dict[str, Any] = {"x": np.ascontiguousarray(x.numpy(), dtype=np.float32),
                                "x_lens": np.ascontiguousarray(x_lens.numpy(), dtype=np.int64)}
        lp, lens = self.graph.run(["log_probs", "lengths"], feed)
        return torch.from_numpy(lp), torch.from_numpy(lens)

    def eval(self) -> OnnxCtcNetwork:
        return self

    def state_dict(self) -> dict[str, Tensor]:
        return {}
