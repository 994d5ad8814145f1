"""LID-free decoding with a multi-softmax model (Section 4.2 and 6.3 of the paper).

One encoder pass per utterance; one search per language runs on it "in parallel", i.e. all
active searches advance frame-synchronously on the same projected encoder frames. The LID head
gives log P_t(l) on every frame; its posteriors averaged over the frames pick the output
language (``select="lid"``), or the true language is taken (``select="oracle"``, Table 4's
oracle row). With early stopping (``early_stop.EarlyStopper``) a decoder whose cumulative LID
score falls behind stops advancing and cannot be selected. Everything streams: features arrive
in chunks and partial hypotheses of every running decoder are available after each chunk.

Shapes: T frames, F feature dim, L languages.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from speechlab.asr.rnnt.config import DecodeConfig
from speechlab.asr.rnnt.early_stop import EarlyStopper
from speechlab.asr.rnnt.early_stop import t_avg as average_decoders
from speechlab.asr.rnnt.model import RNNT
from speechlab.asr.rnnt.networks import RnntNetworks, networks_of
from speechlab.asr.rnnt.search import Hyp, best, search_for
from speechlab.errors import ConfigError, DataError


@dataclass(frozen=True)
class LidFreeResult:
    """One utterance decoded without knowing its language.

    ``tokens`` are local ids of ``language``; ``hypotheses`` holds every decoder's best output
    (a switched-off decoder's covers only the frames it ran); ``lid_posteriors`` are P_t(l)
    averaged over all frames, ``lid_log_scores`` the sums of log P_t(l); ``active_frames`` and ``t_avg`` follow Eq. (2); ``cpu_seconds``
    is the process CPU time spent in encoder, LID head and searches.
    """

    language: str
    tokens: tuple[int, ...]
    hypotheses: dict[str, tuple[int, ...]]
    scores: dict[str, float]
    lid_posteriors: dict[str, float]
    lid_log_scores: dict[str, float]
    active_frames: dict[str, int]
    num_frames: int
    t_avg: float
    cpu_seconds: float


# A selector gets (languages, average LID posteriors (L,), frames each decoder ran (L,), true
# language or None) and returns the output language.
Selector = Callable[[Sequence[str], Tensor, Tensor, str | None], str]


def select_by_lid(languages: Sequence[str], posteriors: Tensor, frames: Tensor,
                  true_language: str | None) -> str:
    """Highest LID score (average posterior, or summed log-posterior: ``DecodeConfig.lid_average``)
    among the decoders that were never switched off.

    If every decoder was switched off (possible: the best-scoring language can change after a
    decoder was stopped), the ones that ran longest compete instead.
    """
    longest = frames.max()
    candidates = [i for i in range(len(languages)) if frames[i] == longest]
    return languages[max(candidates, key=lambda i: float(posteriors[i]))]


def select_oracle(languages: Sequence[str], posteriors: Tensor, frames: Tensor,
                  true_language: str | None) -> str:
    """The true language's decoder (an upper bound on what LID selection can do)."""
    if true_language is None:
        raise DataError("oracle selection needs the true language of the utterance")
    if true_language not in languages:
        raise DataError(f"unknown language {true_language!r}; the model knows {list(languages)}")
    return true_language


SELECTORS: dict[str, Selector] = {"lid": select_by_lid, "oracle": select_oracle}


def allowed_languages(known: Sequence[str], given: Sequence[str]) -> tuple[str, ...]:
    """``given`` checked against the model's ``known`` languages, in the model's order."""
    unknown = [lang for lang in given if lang not in known]
    if unknown:
        raise ConfigError(f"languages: {unknown[0]!r} is not one of this model's "
                          f"({', '.join(known)})")
    if not given:
        raise ConfigError(f"languages: name at least one of {', '.join(known)}")
    return tuple(lang for lang in known if lang in given)


class LidFreeDecoder:
    """Streaming LID-free decoder for one utterance of a multi-softmax model."""

    def __init__(self, model: RNNT | RnntNetworks, cfg: DecodeConfig = DecodeConfig(),
                 true_language: str | None = None,
                 languages: Sequence[str] | None = None) -> None:
        """``languages``: decode only these (an allowlist; None: every language of the
        model): only their decoders start, and the LID head's posteriors are renormalised
        over them, so selection and early stopping choose among them alone."""
        self.networks = networks_of(model)
        model = self.networks.model
        if not model.spec.lang_output:
            raise ConfigError(f"LID-free parallel decoding needs a multi-softmax model, not {model.variant!r}")
        if cfg.select not in SELECTORS:
            raise ConfigError(f"unknown selection {cfg.select!r}; choose one of {list(SELECTORS)}")
        stops = cfg.early_stop.tau != float("inf") and cfg.early_stop.s_th != float("inf")
        if model.lid_head is None and (cfg.select == "lid" or stops):
            raise ConfigError(f"LID selection and early stopping need a LID head; the {model.variant} "
                              "model has none (use multisoftmax_lid, or select=oracle without early stop)")
        self.model = model
        self.select = SELECTORS[cfg.select]
        self.true_language = true_language
        self.languages = tuple(model.languages) if languages is None else \
            allowed_languages(model.languages, languages)
        # the LID head's columns of the languages decoded, in the model's order
        self.columns = torch.tensor([model.languages.index(lang) for lang in self.languages])
        L = len(self.languages)
        # One search, one decoder per language: each step scores every language's hypotheses
        # in one joint call and extends them in one prediction-network call.
        self.search = search_for(self.networks.prediction_joint, list(self.languages), cfg.search)
        self.beams = self.search.start()
        self.stopper = EarlyStopper(L, cfg.early_stop.tau, cfg.early_stop.s_th)
        self.posterior_sum = torch.zeros(L, dtype=torch.float64)
        self.log_posterior_sum = torch.zeros(L, dtype=torch.float64)
        self.lid_average = cfg.lid_average
        self.state = self.networks.encoder.init_state(None)
        self.num_frames = 0
        self.cpu_seconds = 0.0

    @torch.inference_mode()
    def accept(self, feats: Tensor) -> dict[str, tuple[int, ...]]:
        """feats (T,F) the next chunk -> partial best output of every decoder still running."""
        start = time.process_time()
        # The joint's projection of each encoder frame is shared by every language's decoder.
        enc_proj, lid_logits, self.state = self.networks.encoder(feats, self.state)
        L = len(self.languages)
        # Without a LID head nothing is ever switched off (checked in __init__); the stopper
        # then only counts frames.
        lid = (torch.log_softmax(lid_logits.double()[:, self.columns], dim=-1)
               if lid_logits is not None
               else torch.zeros(enc_proj.shape[0], L, dtype=torch.float64))
        # The LID bookkeeping of the whole chunk at once; the sums add frame after frame
        # (cumsum), so they are the same as adding one frame at a time.
        running = self.stopper.steps(lid).tolist()
        self.posterior_sum.copy_(torch.cat([self.posterior_sum[None], lid.exp()]).cumsum(0)[-1])
        self.log_posterior_sum.copy_(torch.cat([self.log_posterior_sum[None], lid]).cumsum(0)[-1])
        frames = enc_proj[:, None].expand(-1, L, -1)  # frame t for every language's decoder
        for t in range(enc_proj.shape[0]):
            self.beams = self.search.step(self.beams, frames[t], self.num_frames + t, running[t])
        self.num_frames += enc_proj.shape[0]
        if self.search.scorer.rows > 64 * max(1, sum(len(b) for b in self.beams)):
            self.beams = self.search.compact(self.beams)
        self.cpu_seconds += time.process_time() - start
        return {lang: best(self.beams[i]).tokens
                for i, lang in enumerate(self.languages) if bool(self.stopper.on[i])}

    def best(self, language: str) -> Hyp:
        """The best hypothesis so far of ``language``'s decoder."""
        return best(self.beams[self.languages.index(language)])

    def finish(self) -> LidFreeResult:
        if self.num_frames == 0:
            raise DataError("the utterance gave no encoder frames; it is too short to decode")
        posteriors = self.posterior_sum / self.num_frames
        frames = self.stopper.frames.clone()
        evidence = posteriors if self.lid_average == "posterior" else self.log_posterior_sum
        language = self.select(self.languages, evidence, frames, self.true_language)
        bests = {lang: best(self.beams[i]) for i, lang in enumerate(self.languages)}
        return LidFreeResult(
            language=language,
            tokens=bests[language].tokens,
            hypotheses={lang: h.tokens for lang, h in bests.items()},
            scores={lang: h.score for lang, h in bests.items()},
            lid_posteriors={lang: float(posteriors[i]) for i, lang in enumerate(self.languages)},
            lid_log_scores={lang: float(self.log_posterior_sum[i]) for i, lang in enumerate(self.languages)},
            active_frames={lang: int(frames[i]) for i, lang in enumerate(self.languages)},
            num_frames=self.num_frames,
            t_avg=average_decoders(frames, self.num_frames),
            cpu_seconds=self.cpu_seconds,
        )


def decode_lid_free(model: RNNT | RnntNetworks, feats: Tensor, cfg: DecodeConfig = DecodeConfig(),
                    true_language: str | None = None) -> LidFreeResult:
    """Decode one utterance feats (T,F) without its language, in chunks of ``cfg.chunk_frames``
    feature frames (0: all at once), on a PyTorch model (put it in eval mode first: dropout)
    or on networks (:class:`~speechlab.asr.rnnt.networks.RnntNetworks`, e.g. ONNX graphs)."""
    if feats.dim() != 2:
        raise DataError(f"decode_lid_free takes one utterance's features (T, F), got shape {tuple(feats.shape)}")
    decoder = LidFreeDecoder(model, cfg, true_language)
    step = cfg.chunk_frames or max(feats.shape[0], 1)
    for i in range(0, max(feats.shape[0], 1), step):
        decoder.accept(feats[i : i + step])
    return decoder.finish()
