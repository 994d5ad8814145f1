"""Batches made ahead of the trainer by worker processes, resumable exactly.

With ``TrainConfig.loader_workers`` > 0 the trainer wraps a task's
:class:`~speechlab.train.sampler.MapBatches` in :class:`WorkerBatches`: the sampler still runs in
the trainer's process (it is cheap and holds the state a checkpoint keeps), and the collate
function (features, padding, on-the-fly augmentation: the costly part) runs in ``workers``
forked processes through torch's DataLoader, a few batches ahead, its results pinned for a
GPU's copy engine. The GPU keeps working while the next batches are made.

Exact resume is kept. Batch ``k`` (counted from the start of the run) is made with every
global RNG (python, numpy, torch) seeded from ``(seed, k)``, so its content depends on its
indices and its number alone, whichever worker makes it and whether the run was resumed; the
state a checkpoint keeps is the sampler's after the last batch handed out, and ``k``. A run keeps
its loading mode: with workers, a batch's random draws differ from those of the same run made
in the trainer's process (where they come from the trainer's own RNG stream).

Shapes and batches are the task's own; nothing here knows a model.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from speechlab.processes import seed_everything
from speechlab.train.sampler import MapBatches, ResumableBatches

log = logging.getLogger(__name__)

#: Multiplies the run's seed before a batch's number is added: seeds of two runs (seed, k)
#: and (seed + 1, k') meet only after 2**20 batches.
_SEED_STRIDE = 1 << 20


def batch_seed(seed: int, k: int) -> int:
    """The seed every global RNG gets before batch ``k`` of a run seeded ``seed`` is made."""
    return (seed * _SEED_STRIDE + k) % (2**63)


class _Made(Dataset):
    """Item ``(k, indices)`` -> ``(k, fn(indices))`` with the global RNGs seeded for batch k."""

    def __init__(self, fn: Callable[[Any], Any], seed: int) -> None:
        self.fn, self.seed = fn, seed

    def __getitem__(self, item: tuple[int, Any]) -> tuple[int, Any]:
        k, indices = item
        seed_everything(batch_seed(self.seed, k))
        return k, self.fn(indices)

    def __len__(self) -> int:  # never asked for by the sampler below; DataLoader wants it
        return 2**62


class _Drawn(Sampler):
    """Draws ``(k, indices)`` from the sampler for the DataLoader, noting the sampler's state
    after each draw, so that the state after any batch handed out can be given back."""

    def __init__(self, owner: WorkerBatches) -> None:
        self.owner = owner

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        owner = self.owner
        k = owner.count
        while True:
            indices = next(owner.sampler)
            owner.states.append((k, owner.sampler.state_dict()))
            yield k, indices
            k += 1

    def __len__(self) -> int:
        return 2**62


def _worker_init(_: int) -> None:
    # One thread each: workers share the machine's cores with the trainer, and a forked
    # child's OpenMP pool must not be the parent's.
    torch.set_num_threads(1)


class WorkerBatches:
    """A :class:`~speechlab.train.sampler.MapBatches` whose function runs in ``workers``
    processes, ``ahead`` batches per worker in advance (module doc); resumable exactly."""

    def __init__(self, batches: MapBatches, workers: int, seed: int, *, ahead: int = 2,
                 pin_memory: bool = False) -> None:
        self.sampler: ResumableBatches = batches.source
        self.fn = batches.fn
        self.workers, self.seed, self.ahead, self.pin_memory = workers, seed, ahead, pin_memory
        self.count = 0  # batches handed out
        self.states: deque[tuple[int, dict[str, Any]]] = deque()
        self._handed = self.sampler.state_dict()  # the sampler's state after batch count - 1
        self._iterator: Iterator[tuple[int, Any]] | None = None

    def __iter__(self) -> WorkerBatches:
        return self

    def __next__(self) -> Any:
        if self._iterator is None:
            loader = DataLoader(_Made(self.fn, self.seed), sampler=_Drawn(self), batch_size=None,
                                num_workers=self.workers, prefetch_factor=self.ahead,
                                pin_memory=self.pin_memory, worker_init_fn=_worker_init,
                                multiprocessing_context="fork", persistent_workers=False,
                                # its own generator: an iterator's base seed would otherwise be
                                # drawn from the trainer's RNG (model dropout), so a resumed run
                                # would draw one number more than an uninterrupted one
                                generator=torch.Generator().manual_seed(self.seed))
            self._iterator = iter(loader)
        k, batch = next(self._iterator)
        if k != self.count:
            raise RuntimeError(f"batch {k} arrived where batch {self.count} was due")
        while self.states and self.states[0][0] < k:
            self.states.popleft()
        self._handed = self.states.popleft()[1]
        self.count += 1
        return batch

    def state_dict(self) -> dict[str, Any]:
        """The sampler's state after the last batch handed out (not after the batches made
        ahead), and the number of batches handed out."""
        return {"sampler": self._handed, "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume after ``state``; a plain sampler state (a checkpoint of a run that made its
        batches in the trainer's process) continues the sampler, numbering batches from 0."""
        self.close()
        if set(state) == {"sampler", "count"}:
            self.sampler.load_state_dict(state["sampler"])
            self.count = int(state["count"])
        else:
            log.warning("resuming batches made in the trainer's process with loader workers: "
                        "the random draws of batches from here on differ from that run's")
            self.sampler.load_state_dict(state)
            self.count = 0
        self._handed = self.sampler.state_dict()

    def close(self) -> None:
        """Stop the workers (the batches made ahead are dropped)."""
        self._iterator = None  # the DataLoader's iterator shuts its workers down when freed
        self.states.clear()


def with_workers(batches: ResumableBatches, workers: int, seed: int, *,
                 pin_memory: bool = False) -> ResumableBatches:
    """``batches`` made by ``workers`` processes where it is a :class:`MapBatches` (a sampler
    and a function); as it is otherwise (stateful streams), with a note in the log."""
    if workers <= 0:
        return batches
    if not isinstance(batches, MapBatches):
        log.info("loader_workers=%d: this task's batches (%s) are made in the trainer's "
                 "process", workers, type(batches).__name__)
        return batches
    return WorkerBatches(batches, workers, seed, pin_memory=pin_memory)
