"""RNN-T greedy and beam search, frame-synchronous, whole-utterance and streaming.

Every search here consumes one encoder frame per ``step``; that one interface serves
whole-utterance decoding, streaming (frames arrive chunk by chunk) and the LID-free decoder
(one search per language advanced frame by frame, see ``multilingual_decode``).

Beam search is time-synchronous with label-prefix merging (in the spirit of Saon et al. 2020,
ref. [9] of the multi-softmax paper): on each frame, hypotheses either take blank (they have
consumed the frame) or emit a label and stay on it, at most ``max_symbols_per_frame`` times.
Hypotheses reaching the same label sequence by different alignments are merged by log-add
(``speechlab.search.Beam``). Both kinds share one budget of ``beam`` hypotheses per emission
step, so with ``beam=1`` it makes exactly the greedy choices: each step keeps the single most
probable extension, blank included.

A scorer decodes with one language's softmax only: a multi-softmax model can never emit another
language's label, and its output ids are local to that language.

Shapes: T frames, J joint dim, V vocabulary, N hypotheses, F feature dim.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor

from speechlab.asr.rnnt.config import SearchConfig
from speechlab.asr.rnnt.model import RNNT, Language
from speechlab.errors import ConfigError, DataError
from speechlab.search import Beam, Hypothesis, topk_together


@dataclass(frozen=True)
class PredictorCache:
    """Per-hypothesis predictor result: ``W_p pred`` (J,) and LSTM state h, c (layers, D)."""

    proj: Tensor
    h: Tensor
    c: Tensor


class TransducerScorer:
    """One language's view of an RNN-T for search: label steps and joint log-probabilities."""

    def __init__(self, model: RNNT, language: str | None = None) -> None:
        self.model = model
        self.language = language
        self.route = model.route(language)
        self.blank = model.blank
        self.vocab_size = self.route.vocab_size
        ids = model.language_ids(language, 1)
        p = next(model.parameters())
        self.cond = model.language_onehot(ids, p.device)  # (1, L) for the onehot variant, else None

    def _cond_rows(self, n: int) -> Tensor | None:
        return None if self.cond is None else self.cond.expand(n, -1)

    def start(self) -> PredictorCache:
        """The predictor after the start symbol (blank), as in training."""
        h, c = self.model.predictor.init_state(1)
        return self._step(torch.tensor([self.blank]), h, c)[0]

    def extend(self, tokens: Sequence[int], caches: Sequence[PredictorCache]) -> list[PredictorCache]:
        """Feed ``tokens[i]`` to hypothesis ``i``; one batched predictor step for all."""
        h = torch.stack([c.h for c in caches], dim=1)
        c = torch.stack([c.c for c in caches], dim=1)
        return self._step(torch.tensor(list(tokens)), h, c)

    def _step(self, tokens: Tensor, h: Tensor, c: Tensor) -> list[PredictorCache]:
        device = h.device
        out, (h, c) = self.model.predictor.step(tokens.to(device), (h, c), self.route.table,
                                                self.route.net, self._cond_rows(len(tokens)))
        proj = self.model.joiner.project_predictor(out)
        return [PredictorCache(proj[i], h[:, i], c[:, i]) for i in range(len(tokens))]

    def log_probs(self, enc_proj: Tensor, caches: Sequence[PredictorCache]) -> Tensor:
        """enc_proj (J,) one projected encoder frame -> log P(label | frame, hyp) (N, V)."""
        pred = torch.stack([c.proj for c in caches])
        logits = self.model.joiner.joint(enc_proj[None, :], pred, self.route.head)
        return torch.log_softmax(logits.float(), dim=-1)


class Search(Protocol):
    """A frame-synchronous search: ``start()``, then ``step`` once per encoder frame."""

    scorer: TransducerScorer

    def start(self) -> Beam: ...

    def step(self, beam: Beam, enc_proj: Tensor) -> Beam: ...


class GreedySearch:
    """Most probable label on each emission step; at most ``max_symbols_per_frame`` per frame."""

    def __init__(self, scorer: TransducerScorer, cfg: SearchConfig) -> None:
        self.scorer = scorer
        self.max_symbols = cfg.max_symbols_per_frame
        self.frame = 0  # frames stepped since start(): each label's emission frame

    def start(self) -> Beam:
        self.frame = 0
        return Beam([Hypothesis((), 0.0, self.scorer.start())])

    def step(self, beam: Beam, enc_proj: Tensor) -> Beam:
        hyp = beam.best()
        blank = self.scorer.blank
        t, self.frame = self.frame, self.frame + 1
        for _ in range(self.max_symbols):
            lp = self.scorer.log_probs(enc_proj, [hyp.state])[0]
            v = int(lp.argmax())  # first of equals: blank wins a tie
            if v == blank:
                return Beam([hyp.rescore(float(lp[blank]))])
            hyp = hyp.extend(v, float(lp[v]), self.scorer.extend([v], [hyp.state])[0], time=t)
        # Label budget spent: the frame ends with blank, scored, so the score stays the
        # log-probability of one alignment (as in beam search).
        lp = self.scorer.log_probs(enc_proj, [hyp.state])[0]
        return Beam([hyp.rescore(float(lp[blank]))])


class BeamSearch:
    """Time-synchronous beam search with label-prefix merging (see the module docstring)."""

    def __init__(self, scorer: TransducerScorer, cfg: SearchConfig) -> None:
        self.scorer = scorer
        self.beam = cfg.beam
        self.max_symbols = cfg.max_symbols_per_frame
        self.frame = 0  # frames stepped since start(): each label's emission frame

    def start(self) -> Beam:
        self.frame = 0
        return Beam([Hypothesis((), 0.0, self.scorer.start())])

    def step(self, beam: Beam, enc_proj: Tensor) -> Beam:
        blank = self.scorer.blank
        t, self.frame = self.frame, self.frame + 1
        finished = Beam()  # have consumed this frame (took blank)
        active = list(beam)  # still emitting on this frame
        for s in range(self.max_symbols + 1):
            if not active:
                break
            lp = self.scorer.log_probs(enc_proj, [h.state for h in active])
            blank_lp = lp[:, blank].tolist()
            for h, b in zip(active, blank_lp):
                finished.add(h.rescore(b))
            if s == self.max_symbols:
                break
            labels = Beam()
            k = min(self.beam, self.scorer.vocab_size - 1)
            nb = torch.cat([lp[:, :blank], lp[:, blank + 1:]], dim=1)  # non-blank columns
            vals, cols = nb.topk(k, dim=1)
            for h, vs, cs in zip(active, vals.tolist(), cols.tolist()):
                for v, col in zip(vs, cs):
                    tok = col + (col >= blank)
                    labels.add(h.extend(tok, v, h.state, time=t))
            finished, labels = topk_together([finished, labels], self.beam)
            survivors = list(labels)
            if survivors:
                # Only the survivors pay for a predictor step; until then state is the parent's.
                caches = self.scorer.extend([h.tokens[-1] for h in survivors], [h.state for h in survivors])
                survivors = [dataclasses.replace(h, state=c) for h, c in zip(survivors, caches)]
            active = survivors
        return finished.topk(self.beam)


SEARCHES: dict[str, Callable[[TransducerScorer, SearchConfig], Search]] = {
    "greedy": GreedySearch,
    "beam": BeamSearch,
}


def make_search(scorer: TransducerScorer, cfg: SearchConfig) -> Search:
    try:
        factory = SEARCHES[cfg.method]
    except KeyError:
        raise ConfigError(f"unknown search method {cfg.method!r}; choose one of {list(SEARCHES)}") from None
    return factory(scorer, cfg)


def run_frames(search: Search, beam: Beam, enc_proj: Tensor) -> Beam:
    """Advance ``search`` over enc_proj (T,J) frame by frame."""
    for t in range(enc_proj.shape[0]):
        beam = search.step(beam, enc_proj[t])
    return beam


def _row_languages(language: Language, batch: int) -> list[str | None]:
    if language is None or isinstance(language, str):
        return [language] * batch
    names = list(language)
    if len(names) != batch:
        raise DataError(f"got {len(names)} languages for a batch of {batch}")
    return names


@torch.inference_mode()
def decode(model: RNNT, x: Tensor, x_lens: Tensor, language: Language = None,
           cfg: SearchConfig = SearchConfig()) -> list[Hypothesis]:
    """Whole utterances: x (B,T,F), x_lens (B,) -> best hypothesis per row.

    ``language`` is one name, one per row, or None for models that need none (mono, vanilla).
    Token ids are local to the language for mono/multi-softmax models, union ids otherwise.
    Put the model in eval mode first (dropout).
    """
    enc, enc_lens = model.encode(x, x_lens, language)
    enc_proj = model.joiner.project_encoder(enc)
    out = []
    for b, lang in enumerate(_row_languages(language, x.shape[0])):
        search = make_search(TransducerScorer(model, lang), cfg)
        beam = run_frames(search, search.start(), enc_proj[b, : int(enc_lens[b])])
        out.append(beam.best())
    return out


class StreamingDecoder:
    """One utterance, one language, fed features chunk by chunk.

    Encoder state and search state are carried across chunks; since both are causal, the
    result equals :func:`decode` on the whole utterance for any chunking.
    """

    def __init__(self, model: RNNT, language: str | None = None, cfg: SearchConfig = SearchConfig()) -> None:
        self.model = model
        self.language = language
        self.search = make_search(TransducerScorer(model, language), cfg)
        self.state = model.init_state(1)
        self.beam = self.search.start()
        self.frames = 0  # encoder frames consumed

    @torch.inference_mode()
    def accept(self, feats: Tensor) -> tuple[int, ...]:
        """feats (T,F) the next chunk -> the best partial label sequence so far."""
        lens = torch.tensor([feats.shape[0]])
        enc, enc_lens, self.state = self.model.streaming_encode(feats[None], lens, self.state, self.language)
        enc_proj = self.model.joiner.project_encoder(enc[0, : int(enc_lens[0])])
        self.beam = run_frames(self.search, self.beam, enc_proj)
        self.frames += enc_proj.shape[0]
        return self.beam.best().tokens

    def result(self) -> Hypothesis:
        return self.beam.best()
