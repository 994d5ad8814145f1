"""Training an acoustic model with the shared trainer: the :class:`TtsTask`.

Batches are :class:`~speechlab.tts.batching.StreamBatches`; the loss is the mean squared error
over the real frames and all 43 normalized dims. In the stateful arrangement the task keeps the
model's state between batches (detached: gradients stop at the window's start, as in truncated
backpropagation through time) and checkpoints it (:class:`~speechlab.train.trainer.StatefulTask`),
so a resumed run continues the streams exactly. Validation predicts every dev utterance from the
zero state and reports MCD (the early-stopping metric, Sec. 3.3), F0 RMSE and V/UV accuracy.

The stateful streams are one sequence each, so this task does not shard over DDP ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from speechlab.config import check_fields, ranged
from speechlab.devices import device_of
from speechlab.metrics.tts import f0_rmse, mcd, mcd_per_frame, vuv_accuracy
from speechlab.tts.acoustic import MCEP, OutputNormalizer, f0_of
from speechlab.tts.batching import StreamBatch, StreamBatches
from speechlab.tts.features import TtsUtteranceData


@dataclass(frozen=True)
class TtsTaskConfig:
    """Batches of ``streams`` x ``window`` frames (the paper: 32 x 120), stateful or not;
    SALAD's attention window at validation (0: whole utterances)."""

    streams: int = ranged(32, ge=1)
    window: int = ranged(120, ge=1)
    stateful: bool = True
    valid_window: int = ranged(120, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)


def _bare(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)


@torch.no_grad()
def predict(model: nn.Module, utts: Sequence[TtsUtteranceData], window: int | None = None,
            batch_frames: int = 20000) -> list[np.ndarray]:
    """Normalized (T, O) predictions of each utterance from the zero state, in ``utts`` order
    (batched by length; padding does not change any output)."""
    model = _bare(model)
    device = device_of(model)
    out: list[np.ndarray | None] = [None] * len(utts)
    order = sorted(range(len(utts)), key=lambda i: utts[i].num_frames)
    i = 0
    while i < len(order):
        j = i + 1
        while j < len(order) and (j - i + 1) * utts[order[j]].num_frames <= batch_frames:
            j += 1
        group = order[i:j]
        T = max(utts[g].num_frames for g in group)
        x = torch.zeros(len(group), T, utts[group[0]].phone_x.shape[1] + 2)
        for r, g in enumerate(group):
            x[r, : utts[g].num_frames] = torch.from_numpy(utts[g].x())
        lens = torch.tensor([utts[g].num_frames for g in group])
        y = model(x.to(device), lens.to(device), window=window).float().cpu().numpy()
        for r, g in enumerate(group):
            out[g] = y[r, : utts[g].num_frames]
        i = j
    return out  # type: ignore[return-value]


@dataclass(frozen=True)
class Scores:
    """Table 2's measures over a set of utterances (frames pooled)."""

    mcd: float
    f0_rmse: float
    vuv: float

    def to_dict(self) -> dict[str, float]:
        return {"mcd": self.mcd, "f0_rmse": self.f0_rmse, "vuv": self.vuv}


def score(refs: Sequence[np.ndarray], hyps: Sequence[np.ndarray],
          outputs: OutputNormalizer) -> Scores:
    """MCD, F0 RMSE and V/UV accuracy of normalized predictions against normalized targets."""
    ref = outputs.inverse(np.concatenate(refs))
    hyp = outputs.inverse(np.concatenate(hyps))
    ref_f0, hyp_f0 = f0_of(ref), f0_of(hyp)
    return Scores(mcd(ref[:, MCEP], hyp[:, MCEP]), f0_rmse(ref_f0, hyp_f0),
                  vuv_accuracy(ref_f0, hyp_f0))


def mcd_sums(refs: Sequence[np.ndarray], hyps: Sequence[np.ndarray],
             outputs: OutputNormalizer) -> np.ndarray:
    """(utterances,) the sum of the per-frame MCD [dB] of each utterance (normalized
    predictions against normalized targets): with the frame counts, what a paired bootstrap of
    the pooled MCD resamples (``speechlab.metrics.mean_difference_interval``)."""
    return np.array([mcd_per_frame(outputs.inverse(r)[:, MCEP], outputs.inverse(h)[:, MCEP]).sum()
                     for r, h in zip(refs, hyps, strict=True)])


class TtsTask:
    """:class:`~speechlab.train.trainer.Task` of an acoustic model (also stateful)."""

    def __init__(self, train: Sequence[TtsUtteranceData], dev: Sequence[TtsUtteranceData],
                 outputs: OutputNormalizer, cfg: TtsTaskConfig, seed: int = 0) -> None:
        self.train, self.dev, self.outputs, self.cfg, self.seed = train, dev, outputs, cfg, seed
        self.state: tuple[torch.Tensor, ...] | None = None

    def batches(self) -> StreamBatches:
        return StreamBatches(self.train, streams=self.cfg.streams, window=self.cfg.window,
                             stateful=self.cfg.stateful, seed=self.seed)

    def loss(self, model: nn.Module, batch: StreamBatch) -> tuple[torch.Tensor, Mapping[str, float], float]:
        bare = _bare(model)
        state = bare.init_state(batch.x.shape[0]) if batch.first or self.state is None else self.state
        state = tuple(s.to(batch.x.device) for s in state)
        y, _, state = bare.streaming_forward(batch.x, batch.lens, state)
        self.state = tuple(s.detach() for s in state)
        mask = (torch.arange(batch.x.shape[1], device=batch.x.device)[None, :]
                < batch.lens[:, None]).float()
        frames = float(mask.sum())
        err = ((y.float() - batch.y) ** 2).mean(-1) * mask
        return err.sum() / max(frames, 1.0), {}, frames

    def validate(self, model: nn.Module) -> Mapping[str, float]:
        hyps = predict(model, self.dev, window=self.cfg.valid_window or None)
        refs = [u.y for u in self.dev]
        mse = float(np.mean(np.concatenate([(h - r) ** 2 for h, r in zip(hyps, refs)])))
        return {**score(refs, hyps, self.outputs).to_dict(), "loss": mse}

    def state_dict(self) -> dict[str, Any]:
        return {"state": list(self.state) if self.state is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.state = tuple(state["state"]) if state.get("state") is not None else None
