"""Where tensors live and in what precision they are computed.

One device name for every command (``--device`` of ``train``, ``reproduce``, ``demo``,
``transcribe`` and ``serve``): ``auto`` (a GPU when there is one, else the CPU), ``cpu``,
``cuda`` or ``cuda:N``. The command line sets the process's default with :func:`set_default`;
it is kept in the environment (``SPEECHLAB_DEVICE``) so that the worker processes a
reproduction starts use it too. Under torchrun each rank takes its own GPU
(:mod:`speechlab.train.distributed`).

Mixed precision (``--precision`` / ``train.precision``): ``fp32``, ``bf16`` or ``fp16``, the
forward pass under :func:`autocast` and, for fp16, a gradient scaler (:func:`grad_scaler`); the
losses upcast their inputs and compute in float32 or float64 whatever the autocast dtype.

The losses whose recursions run in numba on the CPU (the RNN-T lattice, the topologies' graph
loss) have a second implementation in plain PyTorch ops that runs wherever its inputs are.
:func:`device_code` makes them take that path on the CPU too: the tests compare the two there,
and ``SPEECHLAB_DEVICE_CODE=1`` does the same for a whole process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from speechlab.errors import ConfigError

#: The environment variable that carries the default device into worker processes.
DEVICE_ENV = "SPEECHLAB_DEVICE"
#: Set to 1: the losses take their device code path on the CPU too (tests, benchmarks).
DEVICE_CODE_ENV = "SPEECHLAB_DEVICE_CODE"
#: Set to 0: on a CUDA device the losses' recursions run as PyTorch ops instead of as the
#: project's CUDA kernels (numba), e.g. to compare the two.
CUDA_KERNELS_ENV = "SPEECHLAB_CUDA_KERNELS"

#: Precision name -> the autocast dtype (None: no autocast).
PRECISIONS: dict[str, torch.dtype | None] = {
    "fp32": None,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}

DEVICE_HELP = ("where to compute: auto (a GPU when there is one, else the CPU), cpu, cuda or "
               "cuda:N (default: auto, or $SPEECHLAB_DEVICE)")
INFERENCE_DEVICE_HELP = ("where the networks run: cpu (default), cuda, cuda:N or auto (a GPU "
                         "when there is one); searches, lattices and the vocoder stay on the CPU")
PRECISION_HELP = ("training precision: fp32, bf16 or fp16 (autocast; fp16 with a gradient "
                  "scaler); the losses are computed in fp32")


def resolve(name: str | torch.device | None = None) -> torch.device:
    """The device ``name`` stands for (None: the process default, :func:`default_name`).

    Raises :class:`ConfigError` for a name that is not a device, or a GPU this machine does not
    have (saying which it has).
    """
    if isinstance(name, torch.device):
        name = str(name)
    text = (name or default_name()).strip().lower()
    if text == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(text)
    except RuntimeError:
        raise ConfigError(f"device {name!r} is not a device: use auto, cpu, cuda or cuda:N") \
            from None
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise ConfigError(f"device {name!r}: speechlab runs on cpu or cuda, not {device.type}")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name!r}: this machine has no CUDA GPU that torch can use "
                          "(torch.cuda.is_available() is False); use --device cpu or auto")
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise ConfigError(f"device {name!r}: this machine has {count} GPU(s), cuda:0.."
                          f"cuda:{count - 1}")
    return device


def default_name() -> str:
    """The process's default device name: ``$SPEECHLAB_DEVICE``, else ``auto``."""
    return os.environ.get(DEVICE_ENV, "").strip() or "auto"


def set_default(name: str) -> torch.device:
    """Check ``name`` and make it the default of this process and of the processes it starts."""
    device = resolve(name)
    os.environ[DEVICE_ENV] = name
    return device


def check_precision(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of precision ``name`` on ``device``; a :class:`ConfigError` if the
    name is unknown or the device cannot compute in it."""
    if name not in PRECISIONS:
        raise ConfigError(f"precision {name!r} is not one of {', '.join(PRECISIONS)}")
    dtype = PRECISIONS[name]
    if (dtype is torch.bfloat16 and device.type == "cuda"
            and not torch.cuda.is_bf16_supported()):
        raise ConfigError(f"precision bf16: {torch.cuda.get_device_name(device)} has no bfloat16; "
                          "use fp16 or fp32")
    return dtype


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[Any]:
    """Autocast to ``precision`` on ``device`` (a context that does nothing for fp32)."""
    dtype = check_precision(precision, device)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler | None:
    """A gradient scaler for fp16 (whose small gradients underflow without one); None for the
    others (bf16 has float32's range)."""
    if check_precision(precision, device) is not torch.float16:
        return None
    return torch.amp.GradScaler(device.type)


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``obj`` with ``fn`` applied to every tensor in it: tensors in mappings, lists, tuples
    (named ones too) and dataclasses, rebuilt of the same type; anything else as it is."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: map_tensors(getattr(obj, f.name), fn)
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, Mapping):
        return type(obj)({k: map_tensors(v, fn) for k, v in obj.items()})  # type: ignore[call-arg]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(map_tensors(v, fn) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(v, fn) for v in obj)
    return obj


def move(obj: Any, device: torch.device, non_blocking: bool = False) -> Any:
    """``obj`` with every tensor in it on ``device`` (:func:`map_tensors`)."""
    return map_tensors(obj, lambda t: t.to(device, non_blocking=non_blocking))


def pin(obj: Any) -> Any:
    """``obj`` with its CPU tensors in page-locked memory, so that a copy to the GPU can
    overlap the computation (:func:`move` with ``non_blocking``)."""
    return map_tensors(obj, lambda t: t.pin_memory()
                       if t.device.type == "cpu" and not t.is_pinned() else t)


#: Half precision, what a forward under autocast gives the losses; they upcast it.
HALF = (torch.float16, torch.bfloat16)


def full_precision(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 if it is half precision (autocast's output), else as it is."""
    return x.float() if x.dtype in HALF else x


def device_of(module: Any) -> torch.device:
    """The device of a module's first parameter (or buffer); the CPU for one with neither, or
    for something that is no module (an ONNX graph's runner)."""
    if not isinstance(module, nn.Module):
        return torch.device("cpu")
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return torch.device("cpu")


_forced = threading.local()


@contextlib.contextmanager
def device_code(enabled: bool = True) -> Iterator[None]:
    """Within: the losses take their device (PyTorch) code path on the CPU as well, in this
    thread."""
    before = getattr(_forced, "on", False)
    _forced.on = enabled
    try:
        yield
    finally:
        _forced.on = before


def use_device_code(x: torch.Tensor) -> bool:
    """True when a computation on ``x`` should take the device code path: ``x`` is not on the
    CPU, or :func:`device_code` / ``SPEECHLAB_DEVICE_CODE=1`` asks for it."""
    return (x.device.type != "cpu" or getattr(_forced, "on", False)
            or os.environ.get(DEVICE_CODE_ENV) == "1")


def use_cuda_kernels(x: torch.Tensor) -> bool:
    """True when a recursion over ``x`` should run as the project's CUDA kernels: ``x`` is on
    a CUDA device, numba's CUDA target works here (numba-cuda, a driver), no kernel has failed
    to build or launch in this process (:func:`cuda_kernels_failed`), and
    ``SPEECHLAB_CUDA_KERNELS=0`` does not turn them off."""
    if x.device.type != "cuda" or os.environ.get(CUDA_KERNELS_ENV, "1") == "0":
        return False
    return _kernels_failure is None and _numba_cuda_works()


_kernels_failure: str | None = None


def cuda_kernels_failed(error: BaseException) -> None:
    """A kernel could not be built or launched (numba without the CUDA toolkit's compiler,
    say): say so once, and take the PyTorch-ops path from now on in this process."""
    global _kernels_failure
    if _kernels_failure is None:
        _kernels_failure = f"{type(error).__name__}: {error}"
        logging.getLogger(__name__).warning(
            "the CUDA kernels failed (%s); the losses take the slower PyTorch-ops path from "
            "now on", _kernels_failure)


@functools.cache
def _numba_cuda_works() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # no numba CUDA target, no driver, a toolkit it cannot use
        return False


def cuda_threads(items: int) -> int:
    """Threads per block for a kernel whose block takes ``items`` in strides: a warp at least,
    1024 at most."""
    return min(1024, max(32, 1 << max(items - 1, 0).bit_length()))


def add_device_options(parser: Any, precision: bool = True) -> None:
    """``--device`` (and, for commands that train, ``--precision``) on a command's parser; the
    command line applies ``--device`` before the command runs (:func:`apply_device_option`).
    Without ``precision`` (commands that run a model) the device defaults to the CPU."""
    parser.add_argument("--device", default=None,
                        help=DEVICE_HELP if precision else INFERENCE_DEVICE_HELP)
    if precision:
        parser.add_argument("--precision", default=None, choices=list(PRECISIONS),
                            help=PRECISION_HELP + " (default: the recipe's, fp32)")


def apply_device_option(args: Any) -> None:
    """Make a command's ``--device`` the default of this process and its workers; a device this
    machine lacks is a :class:`ConfigError` before any work."""
    name = getattr(args, "device", None)
    if name is not None:
        set_default(name)
