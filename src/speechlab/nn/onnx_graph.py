"""Networks as ONNX graphs: :func:`export_graph` writes a module as one (bytes), :func:`session`
runs one with onnxruntime.

Each family's library says which of its networks become graphs and with which inputs (the
RNN-T's streaming encoder, prediction step and joint; the TTS acoustic model); this module
only holds what they share: the exporter's settings and the runtime's.

Export uses PyTorch's TorchScript-based exporter (``dynamo=False``): it traces the module once
on example inputs and writes ``nn.LSTM`` as ONNX's LSTM operator, with the axes named in
``dynamic_axes`` left free. The module must therefore compute every size from its inputs'
shapes or values, never from a Python number taken out of a tensor (that would be traced as a
constant).

Sessions run on one intra-op thread, sequentially, with every graph optimization: the searches
call the graphs many times per frame on a handful of rows, where threads cost more than they
save and the machine is shared with other work. For the same reason :func:`runner` calls a
session without the Python binding's per-call checks of the input names, which a caller whose
names are fixed (and checked once against the graph) does not need.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from speechlab.errors import DataError

#: The ONNX operator set the graphs are written with.
OPSET = 17


def export_graph(module: nn.Module, inputs: Sequence[torch.Tensor], input_names: Sequence[str],
                 output_names: Sequence[str], dynamic_axes: Mapping[str, Mapping[int, str]]
                 ) -> bytes:
    """``module`` (in eval mode) traced on ``inputs`` as an ONNX graph (serialized bytes),
    checked by onnx's checker. ``dynamic_axes``: input or output name -> {axis: name} of the
    axes whose size may change from call to call (batch, frames, rows)."""
    import onnx

    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        # The exporter warns that it is the legacy one, that Python values taken from tensors
        # are traced as constants (ours are shapes, or checked by the parity tests) and that
        # an LSTM's batch must be 1 unless its initial state is an input (it is).
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), tuple(inputs), buf, dynamo=False, opset_version=OPSET,
                          input_names=list(input_names), output_names=list(output_names),
                          dynamic_axes={k: dict(v) for k, v in dynamic_axes.items()},
                          do_constant_folding=True)
    graph = buf.getvalue()
    onnx.checker.check_model(onnx.load_from_string(graph))
    return graph


def session(graph: bytes | str | Path, threads: int = 1) -> Any:
    """An onnxruntime ``InferenceSession`` of ``graph`` (its bytes or a file) on the CPU, with
    ``threads`` intra-op threads (module doc)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3  # errors only: not the notes on unused initializers
    source = graph if isinstance(graph, bytes) else str(graph)
    try:
        return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types
        where = "the graph" if isinstance(graph, bytes) else str(graph)
        reason = " ".join(str(e).split())  # one line, as every error a user sees
        raise DataError(f"{where}: not an ONNX graph onnxruntime can run ({reason}); export "
                        "the model again") from None


def runner(session: Any, outputs: Sequence[str]) -> Any:
    """``feed -> [outputs]``: ``session.run(outputs, feed)`` without onnxruntime's Python-side
    checks of the feed's names and values (a few microseconds a call, a tenth of a small
    graph's run), for callers that feed a graph the inputs it was checked to take. Falls back
    to ``session.run`` where the binding keeps no compiled session to call."""
    names = list(outputs)
    compiled = getattr(session, "_sess", None)
    if compiled is None or not callable(getattr(compiled, "run", None)):
        return lambda feed: session.run(names, feed)
    run = compiled.run

    def call(feed: Mapping[str, Any]) -> Any:
        try:
            return run(names, feed, None)
        except Exception:  # a feed the checks would refuse: the checked call says why
            return session.run(names, feed)

    return call
