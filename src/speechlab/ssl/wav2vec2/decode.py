"""Decoding a fine-tuned model (Sec. 4.1.3 of the local-attention paper): Viterbi (greedy CTC:
the best label per frame, repeats merged, blanks dropped) and CTC beam search with a word
n-gram LM at beam 50 and 1500.

The beam search is the shared CTC prefix search (:mod:`speechlab.asr.ctc.prefix_search`) with
a lexicon of character spellings: each LM word spelled in the model's labels (its first
grapheme in its word-initial form), so a word ends exactly where the next word's first label
arrives and the LM (:class:`ArpaWordLM`, an ARPA file from :mod:`speechlab.text.ngram`) scores
it then. ``lm_weight`` and ``word_bonus`` are eq. 9's weights of that search.

Shapes: T frames, V labels.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from speechlab.asr.ctc.prefix_search import END, LexiconTrie, PrefixBeamSearch, PrefixSearchConfig
from speechlab.errors import DataError
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


def decode_all(log_probs: Sequence[np.ndarray], decoder) -> list[str]:
    return [decoder(lp) for lp in log_probs]
