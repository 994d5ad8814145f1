"""Pre-training wav2vec 2.0 with the shared trainer (wav2vec 2.0 Sec. 3; Fig. 1 of the
local-attention paper): :class:`PretrainTask`.

Per batch: random crops of ``crop_seconds`` from the utterances, span masks over the latent
frames (:mod:`.masking`), then

- the contrastive loss: for every masked frame, cosine similarity / ``logit_temp`` between its
  projected context vector and its projected quantized target, against ``num_negatives``
  distractors drawn from the targets of the utterance's other masked frames (a distractor equal
  to the target is left out); cross-entropy with the target as the right answer, averaged over
  the masked frames;
- ``diversity_weight`` x the codebook diversity loss ``(G V - perplexity) / (G V)``;
- ``feature_penalty`` x the mean squared conv feature;

with the Gumbel temperature annealed per update, ``max(tau_start * tau_decay ** step,
tau_end)``. Crops, masks and distractors come from torch's global RNG, which the trainer
checkpoints, so a resumed run draws what an uninterrupted one would.

Shapes: B batch, S samples, T frames, M masked frames, K distractors, F final dim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.config import check_fields, ranged
from speechlab.devices import device_of
from speechlab.errors import DataError
from speechlab.ssl.wav2vec2.masking import sample_distractors, span_mask
from speechlab.train.sampler import BucketBatches, MapBatches


@dataclass(frozen=True)
class PretrainTaskConfig:
    """The Base recipe's loss settings (wav2vec2_base_librispeech) and this repo's batching."""

    crop_seconds: float = ranged(15.6, gt=0)
    batch_size: int = ranged(8, ge=1)
    mask_prob: float = ranged(0.65, ge=0, le=1)
    mask_length: int = ranged(10, ge=1)
    min_spans: int = ranged(2, ge=0)
    num_negatives: int = ranged(100, ge=1)
    logit_temp: float = ranged(0.1, gt=0)
    diversity_weight: float = ranged(0.1, ge=0)
    feature_penalty: float = ranged(10.0, ge=0)
    tau_start: float = ranged(2.0, gt=0)
    tau_end: float = ranged(0.5, gt=0)
    tau_decay: float = ranged(0.999995, gt=0, le=1)
    valid_utterances: int = ranged(50, ge=1)

    def __post_init__(self) -> None:
        check_fields(self)


def _crop(wavs: Sequence[Tensor], samples: int, generator: torch.Generator | None = None
          ) -> tuple[Tensor, Tensor]:
    """Random crops of at most ``samples``, zero-padded: (B, S), (B,)."""
    lens = [min(len(w), samples) for w in wavs]
    out = torch.zeros(len(wavs), max(lens), device=wavs[0].device)
    for i, (w, n) in enumerate(zip(wavs, lens)):
        start = int(torch.randint(0, len(w) - n + 1, (), generator=generator))
        out[i, :n] = w[start : start + n]
    return out, torch.tensor(lens, device=out.device)


def contrastive_logits(context: Tensor, targets: Tensor, mask: Tensor, num_negatives: int,
                       logit_temp: float, generator: torch.Generator | None = None) -> Tensor:
    """context, targets (B, T, F), mask (B, T) -> (M, 1 + K) logits, the target first."""
    B, T, Fd = targets.shape
    flat = targets.reshape(B * T, Fd)
    pos = flat[mask.reshape(-1)]
    # drawn on the CPU (whose generator a run seeds), wherever the frames are
    neg = flat[sample_distractors(mask.cpu(), num_negatives, generator)]
    cands = torch.cat([pos[:, None], neg], 1)
    logits = F.cosine_similarity(context[mask][:, None].float(), cands.float(), dim=-1) / logit_temp
    same = (neg == pos[:, None]).all(-1)
    return torch.cat([logits[:, :1], logits[:, 1:].masked_fill(same, -math.inf)], 1)


class PretrainTask:
    """The trainer's task for wav2vec 2.0 pre-training on in-memory 16 kHz waveforms."""

    def __init__(self, train: Sequence[Tensor], dev: Sequence[Tensor], cfg: PretrainTaskConfig,
                 *, seed: int = 0, rank: int = 0, world_size: int = 1) -> None:
        self.cfg = cfg
        self.train = list(train)
        self.dev = list(dev)[: cfg.valid_utterances]
        if not self.train:
            raise DataError("pre-training needs at least one training utterance")
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.samples = int(cfg.crop_seconds * 16000)
        self.tau = cfg.tau_start

    def set_step(self, step: int) -> None:
        c = self.cfg
        self.tau = max(c.tau_start * c.tau_decay ** step, c.tau_end)

    def batches(self) -> MapBatches:
        sampler = BucketBatches(durations=[min(len(w), self.samples) for w in self.train],
                                batch_size=self.cfg.batch_size, seed=self.seed, rank=self.rank,
                                world_size=self.world_size)
        return MapBatches(sampler, lambda idx: [self.train[i] for i in idx])

    def _loss(self, model: nn.Module, wav: Tensor, lens: Tensor,
              generator: torch.Generator | None) -> tuple[Tensor, dict[str, float], float]:
        c = self.cfg
        core = getattr(model, "module", model)
        frames = core.feature_encoder.output_lengths(lens).cpu()
        mask = span_mask(frames, int(frames.max()), c.mask_prob, c.mask_length,
                         min_spans=c.min_spans, generator=generator).to(wav.device)
        out = model(wav, lens, mask, self.tau)
        logits = contrastive_logits(out.context, out.targets, mask, c.num_negatives,
                                    c.logit_temp, generator)
        m = logits.shape[0]
        if m == 0:
            raise DataError("no frame was masked: raise mask_prob or crop_seconds")
        target = torch.zeros(m, dtype=torch.long, device=logits.device)
        contrastive = F.cross_entropy(logits, target)
        diversity = (out.num_vars - out.perplexity) / out.num_vars
        loss = contrastive + c.diversity_weight * diversity + c.feature_penalty * out.feature_penalty
        accuracy = float((logits.argmax(-1) == 0).float().mean())
        return loss, {"contrastive": contrastive.item(), "diversity": diversity.item(),
                      "accuracy": accuracy, "tau": self.tau}, float(m)

    def loss(self, model: nn.Module, batch: list[Tensor]) -> tuple[Tensor, dict[str, float], float]:
        wav, lens = _crop(batch, self.samples)
        return self._loss(model, wav, lens, None)

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Contrastive loss and accuracy on fixed crops, masks and distractors of the dev set."""
        g = torch.Generator().manual_seed(self.seed)
        total, acc, n = 0.0, 0.0, 0
        device = device_of(model)
        for i in range(0, len(self.dev), self.cfg.batch_size):
            wav, lens = _crop(self.dev[i : i + self.cfg.batch_size], self.samples, g)
            _, stats, m = self._loss(model, wav.to(device), lens.to(device), g)
            total += stats["contrastive"] * m
            acc += stats["accuracy"] * m
            n += int(m)
        return {"loss": total / n if n else math.nan, "accuracy": acc / n if n else math.nan}
