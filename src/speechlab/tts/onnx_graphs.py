"""A TTS acoustic model (:mod:`.model`: SALAD or the RNN) as one ONNX graph, and that graph run
by onnxruntime behind the model's own call, ``model(x, x_lens, window) -> y``; what comes
before (label features, normalization) and after (denormalization, WORLD) stays in Python.

- SALAD's graph is :meth:`~.model.Salad._decode`: ``x (B,T,L), x_lens (B,), start (B,) ->
  y (B,T,O)``, frames at absolute positions from ``start``; windowed attention cuts the
  utterance into windows around it, as PyTorch does (:func:`~.model.windowed`).
- The RNN's graph is its whole-utterance forward from the zero state: ``x, x_lens -> y``.

Shapes: B batch, T frames, L input dims, O output dims.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from speechlab.nn.onnx_graph import export_graph, session
from speechlab.tts.model import AcousticModelConfig, MusaRnn, Salad, windowed

FILE = "acoustic.onnx"


class _SaladGraph(nn.Module):
    def __init__(self, model: Salad) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor, x_lens: Tensor, start: Tensor) -> Tensor:
        return self.model._decode(x, x_lens, start)


class _RnnGraph(nn.Module):
    def __init__(self, model: MusaRnn) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor, x_lens: Tensor) -> Tensor:
        return self.model(x, x_lens)


def export_acoustic(model: nn.Module) -> bytes:
    """The acoustic model (in eval mode) as an ONNX graph (module doc)."""
    cfg: AcousticModelConfig = model.config
    x = torch.rand(2, 9, cfg.input_dim)
    lens = torch.tensor([9, 6])
    axes = {"x": {0: "B", 1: "T"}, "x_lens": {0: "B"}, "y": {0: "B", 1: "T"}}
    if isinstance(model, Salad):
        return export_graph(_SaladGraph(model.eval()), [x, lens, torch.tensor([0, 120])],
                            ["x", "x_lens", "start"], ["y"], {**axes, "start": {0: "B"}})
    return export_graph(_RnnGraph(model.eval()), [x, lens], ["x", "x_lens"], ["y"], axes)


class OnnxAcousticModel:
    """The acoustic model's graph in onnxruntime, called as the PyTorch model is:
    ``model(x (B,T,L), x_lens (B,), window=None) -> y (B,T,O)`` (``window``: SALAD attends
    within windows of that many frames; the RNN has no attention to limit)."""

    backend = "onnx"

    def __init__(self, graph: bytes | str | Path, config: AcousticModelConfig,
                 threads: int = 1) -> None:
        self.graph = session(graph, threads)
        self.config = config

    def __call__(self, x: Tensor, x_lens: Tensor, window: int | None = None) -> Tensor:
        if self.config.kind == "salad":
            return windowed(self._decode, x, x_lens, window)
        return self._run({"x": x, "x_lens": x_lens})

    def _decode(self, x: Tensor, x_lens: Tensor, start: Tensor) -> Tensor:
        return self._run({"x": x, "x_lens": x_lens, "start": start})

    def _run(self, feed: dict[str, Tensor]) -> Tensor:
        arrays: dict[str, Any] = {k: np.ascontiguousarray(v.numpy()) for k, v in feed.items()}
        arrays["x"] = arrays["x"].astype(np.float32, copy=False)
        (y,) = self.graph.run(["y"], arrays)
        return torch.from_numpy(y)

    def eval(self) -> OnnxAcousticModel:
        return self
