"""The paper's stateful batches (Sec. 3.3): every training frame once per epoch, in streams.

Each epoch the training utterances (in an order drawn from ``(seed, epoch)``) are concatenated
into one long sequence of F frames, which is chopped into ``streams`` pieces of
``ceil(F / streams)`` frames (the last one shorter). Batch k holds window k of every piece:
frames ``[k W, (k + 1) W)`` of each, so row s of batch k + 1 continues row s of batch k, and the
model carries its state (LSTM (h, c), SALAD's position index) from one batch to the next;
``first`` says when to start again from the zero state. Windows past a piece's end are padding
(``lens`` says how much of each row is real).

``stateful=False`` (``--no-stateful``) keeps the same windows but shuffles them across
streams and batches, and every batch starts from the zero state at position 0.

Shapes: S streams, W window, L input dims, O output dims.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from speechlab.tts.features import TtsUtteranceData


@dataclass
class StreamBatch:
    """x (S, W, L), y (S, W, O), lens (S,); ``first``: start from the zero state; ``offset``:
    position of the window's first frame in its stream; ``frames`` (S, W): global indices of
    the frames in the concatenated training set (-1 on padding), for tests and bookkeeping."""

    x: torch.Tensor
    y: torch.Tensor
    lens: torch.Tensor
    first: bool
    offset: int
    frames: np.ndarray


class StreamBatches:
    """Endless stateful (or shuffled) window batches over ``utts``; resumable
    (:class:`~speechlab.train.sampler.ResumableBatches`)."""

    def __init__(self, utts: Sequence[TtsUtteranceData], *, streams: int = 32, window: int = 120,
                 stateful: bool = True, seed: int = 0) -> None:
        self.streams, self.window, self.stateful, self.seed = streams, window, stateful, seed
        lengths = np.array([u.num_frames for u in utts])
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        self.lengths = lengths
        phone_offsets = np.concatenate([[0], np.cumsum([len(u.phone_x) for u in utts])[:-1]])
        self.phone_x = torch.from_numpy(np.concatenate([u.phone_x for u in utts]))
        self.frame_phone = torch.from_numpy(np.concatenate(
            [u.frame_phone + o for u, o in zip(utts, phone_offsets)]))
        self.extra = torch.from_numpy(np.concatenate([u.extra for u in utts]))
        self.y = torch.from_numpy(np.concatenate([u.y for u in utts]))
        self.total = int(lengths.sum())
        self.piece = -(-self.total // streams)
        self.per_epoch = -(-self.piece // window)
        self.epoch, self.index = 0, 0
        self._plan: tuple[int, np.ndarray, np.ndarray | None] | None = None

    @property
    def batches_per_epoch(self) -> int:
        return self.per_epoch

    def _epoch_plan(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(F,) global frame indices in this epoch's concatenation order, and for the shuffled
        mode the order of the S x K windows."""
        if self._plan is None or self._plan[0] != self.epoch:
            rng = np.random.default_rng([self.seed, self.epoch])
            order = rng.permutation(len(self.lengths))
            frames = np.concatenate([np.arange(self.starts[u], self.starts[u] + self.lengths[u])
                                     for u in order])
            windows = None if self.stateful else rng.permutation(self.streams * self.per_epoch)
            self._plan = (self.epoch, frames, windows)
        return self._plan[1], self._plan[2]

    def _window(self, order: np.ndarray, stream: int, k: int) -> np.ndarray:
        lo = stream * self.piece + k * self.window
        hi = min(stream * self.piece + min((k + 1) * self.window, self.piece), self.total)
        idx = np.full(self.window, -1, dtype=np.int64)
        if hi > lo:
            idx[: hi - lo] = order[lo:hi]
        return idx

    def __iter__(self) -> Iterator[StreamBatch]:
        return self

    def __next__(self) -> StreamBatch:
        order, windows = self._epoch_plan()
        k = self.index
        if windows is None:
            rows = [self._window(order, s, k) for s in range(self.streams)]
        else:
            # The same S x K windows, S at a time in shuffled order.
            pick = windows[k * self.streams:(k + 1) * self.streams]
            rows = [self._window(order, int(w) // self.per_epoch, int(w) % self.per_epoch)
                    for w in pick]
        frames = np.stack(rows)
        batch = self._gather(frames, first=windows is not None or k == 0,
                             offset=0 if windows is not None else k * self.window)
        self.index += 1
        if self.index == self.per_epoch:
            self.epoch, self.index = self.epoch + 1, 0
        return batch

    def _gather(self, frames: np.ndarray, first: bool, offset: int) -> StreamBatch:
        valid = torch.from_numpy(frames >= 0)
        idx = torch.from_numpy(np.where(frames >= 0, frames, 0))
        x = torch.cat([self.phone_x[self.frame_phone[idx]], self.extra[idx]], dim=-1)
        x = x * valid[..., None]
        y = self.y[idx] * valid[..., None]
        return StreamBatch(x, y, valid.sum(1), first, offset, frames)

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
