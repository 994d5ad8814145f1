"""The graph loss's forward-backward as CUDA kernels (numba.cuda), for scores on an NVIDIA GPU.

The same sums as :func:`speechlab.asr.ctc._graph_torch.total_scores`, which walks the frames
from Python, about forty kernel launches per frame: on a GPU a step of the S3-T2★ model took
longer than on two CPU cores (docs/gpu.md). Here each utterance is one thread block that walks
its own frames over its own graph, threads taking its nodes in strides, barriers between the
phases of a frame: two launches in all. The graphs are the
:class:`~speechlab.asr.ctc.loss_graphs.GraphBatch` arrays as the CPU kernels take them; a
shared graph (the denominator) is copied to the device once and kept. Log semiring, float64.

Used where the scores are on a CUDA device and numba can build kernels there
(:func:`speechlab.devices.use_cuda_kernels`). Without a GPU, numba's simulator runs the same
kernels through :func:`total_scores_arrays`, which is how the CPU-only tests hold them to the
numba CPU kernels.

Shape legend: B batch, T frames, V tokens, N nodes of the largest graph used.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from speechlab.asr.ctc.loss_graphs import GraphBatch
from speechlab.devices import cuda_threads
from speechlab.nn.cuda_launch import on_torch_stream, quiet_launches

Tensor = torch.Tensor
#: Shared graphs kept on the device: (id, device) -> (the graph, its device arrays).
_on_device: dict[tuple[int, str], tuple[GraphBatch, tuple[Any, ...]]] = {}


def kernels() -> Any:
    """The kernels' module (imported, so compiled, on first use)."""
    from speechlab.asr.ctc import _graph_cuda_kernels

    return _graph_cuda_kernels


def _graph_arrays(graph: GraphBatch) -> tuple[np.ndarray, ...]:
    """The arrays the kernels read, in their order (``final`` as int8)."""
    return (graph.column.astype(np.int64), graph.in_ptr.astype(np.int64),
            graph.in_src.astype(np.int64), graph.out_ptr.astype(np.int64),
            graph.out_dst.astype(np.int64), graph.final.astype(np.int8),
            graph.start.astype(np.int64), graph.lo.astype(np.int64),
            graph.eps.astype(np.int64), graph.hi.astype(np.int64))


def _launch(log_probs: Any, frames: Any, which: Any, arrays: tuple[Any, ...], alpha: Any,
            log_z: Any, beta: Any, grad: Any, batch: int, threads: int, stream: Any = 0) -> None:
    """Run the kernels on device arrays; ``beta`` None: the scores alone."""
    k = kernels()
    column, in_ptr, in_src, out_ptr, out_dst, final, start, lo, eps, hi = arrays
    with quiet_launches():
        k.forward[batch, threads, stream](log_probs, frames, which, column, in_ptr, in_src,
                                          final, start, lo, eps, hi, alpha, log_z)
        if beta is not None:
            k.backward[batch, threads, stream](log_probs, frames, which, column, out_ptr,
                                               out_dst, final, lo, eps, hi, alpha, log_z, beta,
                                               grad)


def _largest(graph: GraphBatch, which: np.ndarray) -> int:
    sizes = graph.hi[which] - graph.lo[which]
    return int(sizes.max()) if sizes.size else 1


def total_scores(log_probs: Tensor, frames: Tensor, graph: GraphBatch, which: np.ndarray,
                 need_grad: bool, shared: bool = False) -> tuple[Tensor, Tensor | None]:
    """log TotalScore(E o graph) per utterance and ``d log Z / d log_probs``, as
    :func:`speechlab.asr.ctc._graph_torch.total_scores` gives them, for CUDA tensors.

    Args:
        log_probs: (B, T, V) emission scores, any float dtype, on a CUDA device.
        frames: (B,) int64 valid frames, on the same device.
        graph, which: utterance b's graph is ``graph``'s graph ``which[b]``.
        need_grad: also return the occupancies.
        shared: keep the graph's device copy for later calls (a denominator).
    """
    device = log_probs.device
    batch, max_frames, vocab = log_probs.shape
    nodes = _largest(graph, which)
    lp = log_probs.detach().to(torch.float64).contiguous()
    n_t = frames.to(torch.int64).contiguous()
    which_t = torch.as_tensor(np.ascontiguousarray(which, dtype=np.int64)).to(device)
    alpha = torch.empty((batch, max_frames + 1, nodes), dtype=torch.float64, device=device)
    log_z = torch.empty(batch, dtype=torch.float64, device=device)
    beta = grad = None
    if need_grad:
        beta = torch.empty((batch, 2, nodes), dtype=torch.float64, device=device)
        grad = torch.zeros((batch, max_frames, vocab), dtype=torch.float64, device=device)

    with on_torch_stream(device) as (view, stream):
        key = (id(graph), str(device))
        hit = _on_device.get(key) if shared else None
        if hit is None or hit[0] is not graph:
            arrays = tuple(torch.as_tensor(a).to(device) for a in _graph_arrays(graph))
            if shared:
                if len(_on_device) > 16:
                    _on_device.clear()
                _on_device[key] = hit = (graph, arrays)
        else:
            arrays = hit[1]
        _launch(view(lp), view(n_t), view(which_t), tuple(view(a) for a in arrays),
                view(alpha), view(log_z), view(beta), view(grad), batch, cuda_threads(nodes),
                stream)
    return log_z, grad


def total_scores_arrays(log_probs: np.ndarray, frames: np.ndarray, graph: GraphBatch,
                        which: np.ndarray, need_grad: bool, threads: int | None = None
                        ) -> tuple[np.ndarray, np.ndarray | None]:
    """The kernels on host arrays (copied to the device and back): for numba's simulator in
    the tests, where a few ``threads`` per block (fewer than the nodes) make each thread
    take several nodes, as large graphs do on a GPU."""
    from numba import cuda

    batch, max_frames, vocab = log_probs.shape
    nodes = _largest(graph, which)
    lp = cuda.to_device(np.ascontiguousarray(log_probs, dtype=np.float64))
    n_t = cuda.to_device(np.ascontiguousarray(frames, dtype=np.int64))
    which_d = cuda.to_device(np.ascontiguousarray(which, dtype=np.int64))
    arrays = tuple(cuda.to_device(a) for a in _graph_arrays(graph))
    alpha = cuda.to_device(np.full((batch, max_frames + 1, nodes), -math.inf))
    log_z = cuda.device_array(batch, dtype=np.float64)
    beta = grad = None
    if need_grad:
        beta = cuda.to_device(np.full((batch, 2, nodes), -math.inf))
        grad = cuda.to_device(np.zeros((batch, max_frames, vocab)))
    _launch(lp, n_t, which_d, arrays, alpha, log_z, beta, grad, batch,
            threads or cuda_threads(nodes))
    return log_z.copy_to_host(), None if grad is None else grad.copy_to_host()
