"""Data-parallel training across processes (torchrun), and no-ops when there is one process.

Run any training entry point under ``python -m torch.distributed.run --nproc_per_node N ...``
and call :func:`init_distributed` first: it reads torchrun's environment (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and joins the process group, gloo on CPU and NCCL on GPU.
Every helper here works unchanged in a single process, so the trainer has one code path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from speechlab.errors import ConfigError

# Collective backend per device type: NCCL only talks to GPUs, gloo works on CPU.
BACKENDS = {"cpu": "gloo", "cuda": "nccl"}


@dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def _env_int(name: str, default: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None:
        if default is None:
            raise ConfigError(f"environment variable {name} is not set; start the job with "
                              "`python -m torch.distributed.run --nproc_per_node N ...`")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name}={raw!r} is not an integer") from None


def init_distributed() -> DistContext:
    """Join the process group torchrun describes; a single-process context without torchrun.

    Idempotent: a second call returns the current context.
    """
    if dist.is_available() and dist.is_initialized():
        return current()
    world_size = _env_int("WORLD_SIZE", 1)
    if world_size <= 1:
        return DistContext()
    rank = _env_int("RANK")
    local_rank = _env_int("LOCAL_RANK", rank)
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            raise ConfigError(f"environment variable {name} is not set; start the job with "
                              "`python -m torch.distributed.run --nproc_per_node N ...`")
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend=BACKENDS[device.type], rank=rank, world_size=world_size)
    return DistContext(rank, world_size, local_rank, device)


def current() -> DistContext:
    """The context of this process (single-process if no group was initialised)."""
    if not (dist.is_available() and dist.is_initialized()):
        return DistContext()
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    device = (torch.device("cuda", local_rank) if dist.get_backend() == BACKENDS["cuda"]
              else torch.device("cpu"))
    return DistContext(rank, dist.get_world_size(), local_rank, device)


def is_main() -> bool:
    """True on rank 0 (and in a single process): the one rank that writes files."""
    return current().is_main


def barrier() -> None:
    if current().distributed:
        dist.barrier()


def all_gather_object(obj: Any) -> list[Any]:
    """``obj`` from every rank, in rank order (``[obj]`` in a single process)."""
    ctx = current()
    if not ctx.distributed:
        return [obj]
    out: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank."""
    if not current().distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_true(flag: bool) -> bool:
    """True only if ``flag`` is True on every rank, so all ranks take the same branch (skipping
    a batch on one rank alone would leave the others waiting in backward's all-reduce)."""
    ctx = current()
    if not ctx.distributed:
        return flag
    t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=ctx.device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return bool(t.item())


def wrap_model(model: nn.Module, *, find_unused_parameters: bool = False) -> nn.Module:
    """DDP around ``model`` when there are several ranks, else ``model`` itself.

    DDP broadcasts rank 0's parameters and buffers at construction, so every rank starts from
    the same weights whatever its own initialisation was.
    """
    ctx = current()
    if not ctx.distributed:
        return model
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids,
                                               find_unused_parameters=find_unused_parameters)


def cleanup() -> None:
    """Leave the process group (call at the end of a torchrun entry point).

    A DDP wrapper left in a reference cycle keeps the group's gloo work objects (and the
    tensors they hold) alive until interpreter shutdown, where freeing them from gloo's own
    threads can abort the process (SIGABRT after a successful run). So the garbage goes first,
    and the group is destroyed while the interpreter is whole.
    """
    if dist.is_available() and dist.is_initialized():
        import gc

        gc.collect()
        dist.destroy_process_group()
