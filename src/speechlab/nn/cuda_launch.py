"""Launching the project's numba CUDA kernels on PyTorch tensors: on PyTorch's own stream, with
views of the tensors and no host synchronisation, and without numba's per-launch warning about
small grids (a block per utterance is few blocks, by design).

Imported only where kernels run (importing numba's CUDA target is the callers' business).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch


@contextlib.contextmanager
def on_torch_stream(device: torch.device) -> Iterator[tuple[Callable[[torch.Tensor | None], Any],
                                                            Any]]:
    """``(view, stream)`` for ``device``: ``view(t)`` is a numba device array over the tensor
    ``t`` (None stays None), and kernels launched on ``stream`` run in order with PyTorch's
    work on that device."""
    from numba import cuda

    def view(t: torch.Tensor | None) -> Any:
        # sync=False: the kernels go on PyTorch's own stream, which orders them already
        return None if t is None else cuda.as_cuda_array(t, sync=False)

    index = device.index if device.index is not None else torch.cuda.current_device()
    with cuda.gpus[index]:
        yield view, cuda.external_stream(torch.cuda.current_stream(device).cuda_stream)


@contextlib.contextmanager
def quiet_launches() -> Iterator[None]:
    """No NumbaPerformanceWarning for the launches inside."""
    from numba.core.errors import NumbaPerformanceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPerformanceWarning)
        yield
