"""The RNN-T lattice recursion as CUDA kernels (numba.cuda), for log-probs on an NVIDIA GPU.

The same sums as :mod:`speechlab.asr.rnnt._loss_numba` (its docstring has the lattice
conventions) and :mod:`speechlab.asr.rnnt._loss_torch`. The PyTorch-ops path walks the lattice's
T + U anti-diagonals from Python, a dozen kernel launches each: on a GPU a step of the
multi-softmax model spent three quarters of its launches there, and the loss ran 16-63 times
slower than torchaudio's fused kernel (docs/gpu.md). Here each utterance is one thread block
that walks its own diagonals, one thread per label position (strided past 1024), with a barrier
between diagonals: three launches in all, forward, backward, occupancies. Float64 throughout.

Used where the log-probs are on a CUDA device and numba's CUDA target works there (a driver,
numba with its CUDA target: numba-cuda; :func:`speechlab.devices.use_cuda_kernels`);
``SPEECHLAB_CUDA_KERNELS=0`` keeps the PyTorch-ops path. The kernels run on PyTorch's current stream, so nothing waits for the host. Without a GPU,
numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs the same kernels through
:func:`lattice_arrays`, which is how the CPU-only tests hold them to the numba CPU kernel.

Shape legend: B batch, T frames, P = U + 1 label positions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from speechlab.devices import cuda_threads
from speechlab.nn.cuda_launch import on_torch_stream, quiet_launches

Tensor = torch.Tensor

OCC_THREADS = 256


def kernels() -> Any:
    """The kernels' module (imported, so compiled, on first use)."""
    from speechlab.asr.rnnt import _loss_cuda_kernels

    return _loss_cuda_kernels


def _launch(blank: Any, label: Any, frames: Any, labels: Any, alpha: Any, beta: Any, cost: Any,
            occ_blank: Any, occ_label: Any, shape: tuple[int, int, int], stream: Any = 0,
            threads: int | None = None) -> None:
    """Run the kernels on device arrays; ``beta`` None: the cost alone."""
    k = kernels()
    batch, frames_max, positions = shape
    threads = threads or cuda_threads(positions)
    with quiet_launches():
        k.forward[batch, threads, stream](blank, label, frames, labels, alpha, cost)
        if beta is None:
            return
        k.backward[batch, threads, stream](blank, label, frames, labels, beta)
        total = batch * frames_max * positions
        blocks = max(1, min(4096, -(-total // OCC_THREADS)))
        k.occupancy[blocks, OCC_THREADS, stream](blank, label, frames, labels, alpha, beta,
                                                  cost, occ_blank, occ_label)


def lattice(blank_lp: Tensor, label_lp: Tensor, frames: Tensor, labels: Tensor,
            need_occupancy: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """:func:`speechlab.asr.rnnt._loss_torch.lattice` for CUDA tensors: the same arguments
    and results (cost (B,) float64, occupancies (B, T, U+1) float64 or None)."""
    device = blank_lp.device
    shape = tuple(blank_lp.shape)
    blank64 = blank_lp.detach().to(torch.float64).contiguous()
    label64 = label_lp.detach().to(torch.float64).contiguous()
    frames64, labels64 = frames.to(torch.int64).contiguous(), labels.to(torch.int64).contiguous()
    alpha = torch.full(shape, -math.inf, dtype=torch.float64, device=device)
    cost = torch.empty(shape[0], dtype=torch.float64, device=device)
    beta = occ_blank = occ_label = None
    if need_occupancy:
        beta = torch.full(shape, -math.inf, dtype=torch.float64, device=device)
        occ_blank = torch.empty(shape, dtype=torch.float64, device=device)
        occ_label = torch.empty(shape, dtype=torch.float64, device=device)

    with on_torch_stream(device) as (view, stream):
        _launch(view(blank64), view(label64), view(frames64), view(labels64), view(alpha),
                view(beta), view(cost), view(occ_blank), view(occ_label), shape, stream)  # type: ignore[arg-type]
    return cost, occ_blank, occ_label


def lattice_arrays(blank_lp: np.ndarray, label_lp: np.ndarray, frames: np.ndarray,
                   labels: np.ndarray, need_occupancy: bool, threads: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The kernels on host arrays (copied to the device and back): for numba's simulator in
    the tests, where a few ``threads`` per block (fewer than the label positions) make each
    thread take several positions, as long transcripts do on a GPU."""
    from numba import cuda

    shape = tuple(blank_lp.shape)
    blank = cuda.to_device(np.ascontiguousarray(blank_lp, dtype=np.float64))
    label = cuda.to_device(np.ascontiguousarray(label_lp, dtype=np.float64))
    n_t = cuda.to_device(np.ascontiguousarray(frames, dtype=np.int64))
    n_u = cuda.to_device(np.ascontiguousarray(labels, dtype=np.int64))
    alpha = cuda.to_device(np.full(shape, -np.inf))
    cost = cuda.device_array(shape[0], dtype=np.float64)
    beta = occ_blank = occ_label = None
    if need_occupancy:
        beta = cuda.to_device(np.full(shape, -np.inf))
        occ_blank = cuda.device_array(shape, dtype=np.float64)
        occ_label = cuda.device_array(shape, dtype=np.float64)
    _launch(blank, label, n_t, n_u, alpha, beta, cost, occ_blank, occ_label, shape,  # type: ignore[arg-type]
            threads=threads)
    host = [None if a is None else a.copy_to_host() for a in (occ_blank, occ_label)]
    return cost.copy_to_host(), host[0], host[1]
