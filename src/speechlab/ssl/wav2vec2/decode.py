"""Decoding a fine-tuned model (Sec. 4.1.3 of the local-attention paper): Viterbi (greedy CTC:
the best label per frame, repeats merged, blanks dropped) and CTC beam search with a word
n-gram LM at beam 50 and 1500.

The beam search is the shared CTC prefix search (:mod:`speechlab.search.prefix`) with
a lexicon of character spellings: each LM word spelled in the model's labels (its first
grapheme in its word-initial form), so a word ends exactly where the next word's first label
arrives and the LM (:class:`ArpaWordLM`, an ARPA file from :mod:`speechlab.text.ngram`) scores
it then. ``lm_weight`` and ``word_bonus`` are eq. 9's weights of that search.

:func:`decode_with_lm` decodes named sets of waveforms (dev and test) with a fine-tuned model
the way Table 1 does: the log-probs once (:func:`log_probs`), Viterbi, then the LM search at
each beam of an :class:`LmSearchConfig`, with the LM weight chosen on dev at its first beam.

Shapes: S samples, T frames, V labels.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from speechlab.search.prefix import END, LexiconTrie, PrefixBeamSearch, PrefixSearchConfig
from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError, DataError
from speechlab.metrics import wer
from speechlab.search.tuning import pick_on_dev
from speechlab.ssl.wav2vec2.model import Wav2Vec2CTC
from speechlab.text.ngram import BOS, EOS, ArpaLM


def greedy_ids(log_probs: Tensor | np.ndarray, blank: int = 0) -> list[int]:
    """(T, V) -> label ids of the best path, repeats merged and blanks removed."""
    best = torch.as_tensor(log_probs).argmax(-1).tolist()
    out, prev = [], None
    for t in best:
        if t != prev and t != blank:
            out.append(t)
        prev = t
    return out


@dataclass(frozen=True)
class ArpaWordLM:
    """An ARPA LM as the prefix search's word LM (log10, so the search sets ``lm_log10``)."""

    lm: ArpaLM

    def score(self, history: tuple[Hashable, ...], word: Hashable) -> float:
        return self.lm.logprob(EOS if word == END else str(word), (BOS,) + tuple(map(str, history)))


def spelling_lexicon(words: Iterable[str], tokenizer) -> LexiconTrie:
    """A trie of each word's label ids under ``tokenizer`` (a GraphemeTokenizer); words with a
    character outside its inventory are left out (the search cannot spell them)."""
    entries = []
    for w in words:
        if w in (BOS, EOS):
            continue
        try:
            ids = tokenizer.encode(w)
        except DataError:
            continue
        if ids:
            entries.append((w, ids))
    if not entries:
        raise DataError("no LM word can be spelled with the model's characters")
    return LexiconTrie(entries)


class LmBeamDecoder:
    """CTC prefix beam search with a word LM over one utterance's (T, V) log-probs."""

    def __init__(self, lm: ArpaLM, tokenizer, beam: int, *, lm_weight: float = 0.5,
                 word_bonus: float = 0.0, token_min_logp: float = -8.0,
                 beam_prune_logp: float = -20.0) -> None:
        cfg = PrefixSearchConfig(beam=beam, lm_weight=lm_weight, word_bonus=word_bonus,
                                 lm_log10=True, token_min_logp=token_min_logp,
                                 beam_prune_logp=beam_prune_logp)
        self.search = PrefixBeamSearch(cfg, spelling_lexicon(lm.vocab, tokenizer), ArpaWordLM(lm))

    def __call__(self, log_probs) -> str:
        results = self.search.decode(log_probs)
        return " ".join(map(str, results[0].words)) if results else ""

    def ranked(self, log_probs) -> list[tuple[str, float]]:
        """Every final hypothesis's text and ranking score (natural log), best first."""
        return [(" ".join(map(str, r.words)), float(r.score))
                for r in self.search.decode(log_probs)]


def decode_all(log_probs: Sequence[np.ndarray], decoder) -> list[str]:
    return [decoder(lp) for lp in log_probs]


def log_probs(model: Wav2Vec2CTC, wavs: Sequence[Tensor]) -> list[np.ndarray]:
    """Each (S,) 16 kHz waveform's (T, V) CTC log-probs, one utterance at a time (no padding
    enters the front end)."""
    out = []
    with torch.no_grad():
        for wav in wavs:
            lp, _ = model(wav[None])
            out.append(lp[0].numpy())
    return out


@dataclass(frozen=True)
class LmSearchConfig:
    """The LM beam search of Table 1: the ``beams`` searched, the ``lm_weights`` tried on dev
    at the first beam, eq. 9's ``word_bonus``, and the pruning (:class:`PrefixSearchConfig`:
    labels below ``token_min_logp`` in a frame are not extended, prefixes more than
    ``beam_prune_logp`` below the best are dropped)."""

    beams: tuple[int, ...] = ranged((50, 1500), ge=1)
    lm_weights: tuple[float, ...] = ranged((0.3, 0.6, 1.0), ge=0)
    word_bonus: float = ranged(0.0)
    token_min_logp: float = ranged(-8.0, le=0)
    beam_prune_logp: float = ranged(-20.0, le=0)

    def __post_init__(self) -> None:
        check_fields(self)
        for key in ("beams", "lm_weights"):  # the LM search needs a beam and an LM weight
            if not getattr(self, key):
                raise ConfigError(f"{key}: give at least one value")

    def decoder(self, lm: ArpaLM, tokenizer, beam: int, lm_weight: float) -> LmBeamDecoder:
        return LmBeamDecoder(lm, tokenizer, beam, lm_weight=lm_weight, word_bonus=self.word_bonus,
                             token_min_logp=self.token_min_logp,
                             beam_prune_logp=self.beam_prune_logp)


def tune_lm_weight(lm: ArpaLM, tokenizer, dev: Sequence[np.ndarray], refs: Sequence[str],
                   search: LmSearchConfig) -> tuple[float, dict[float, float]]:
    """The weight of ``search.lm_weights`` whose search at the first beam has the lowest WER on
    the dev log-probs ``dev`` (their references ``refs``), the first of equal ones; and each
    weight's WER."""
    def dev_wer(weight: float) -> float:
        decoder = search.decoder(lm, tokenizer, search.beams[0], weight)
        return wer(list(refs), [decoder(lp) for lp in dev]).wer

    return pick_on_dev(search.lm_weights, dev_wer)


@dataclass
class LmDecoding:
    """A fine-tuned model's transcripts of named sets of utterances: ``hyps[beam][set][utt id]``,
    beam ``None`` for Viterbi, then each beam of the LM search, every one at ``lm_weight``, the
    weight chosen on dev (``dev_wer``: each candidate's WER)."""

    hyps: dict[int | None, dict[str, dict[str, str]]]
    lm_weight: float
    dev_wer: dict[float, float]


def decode_with_lm(model: Wav2Vec2CTC, tokenizer, lm: ArpaLM,
                   sets: Mapping[str, Mapping[str, Tensor]], tune: Mapping[str, str],
                   search: LmSearchConfig, *, tune_set: str = "dev") -> LmDecoding:
    """Decode every waveform of ``sets`` (``{set: {utt id: (S,) 16 kHz waveform}}``) with Viterbi
    and with the LM search at each beam (Sec. 4.1.3). The LM weight is chosen on the utterances
    of ``sets[tune_set]`` that ``tune`` gives references for (``{utt id: text}``), at the first
    beam (:func:`tune_lm_weight`)."""
    lps = {name: dict(zip(wavs, log_probs(model, list(wavs.values()))))
           for name, wavs in sets.items()}
    missing = [i for i in tune if i not in lps.get(tune_set, {})]
    if missing:
        raise DataError(f"LM weight tuning: utterance(s) {missing[:3]} are not in the "
                        f"{tune_set!r} set decoded")
    weight, dev_wer = tune_lm_weight(lm, tokenizer, [lps[tune_set][i] for i in tune],
                                     list(tune.values()), search)
    hyps: dict[int | None, dict[str, dict[str, str]]] = {None: {
        name: {i: tokenizer.decode(greedy_ids(lp)) for i, lp in by_id.items()}
        for name, by_id in lps.items()}}
    for beam in search.beams:
        decoder = search.decoder(lm, tokenizer, beam, weight)
        hyps[beam] = {name: {i: decoder(lp) for i, lp in by_id.items()}
                      for name, by_id in lps.items()}
    return LmDecoding(hyps, weight, dev_wer)
