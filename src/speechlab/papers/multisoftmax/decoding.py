"""Decoding sets of utterances with a trained multi-softmax-family RNN-T, and its output ids
as text.

- :func:`decode_known`: the language given (or not needed): one search per utterance,
  batched per language, scored per language.
- :func:`decode_without_language`: LID-free decoding (Sec. 4.2): every language's decoder on
  one encoder pass, the LID head picking, with early stopping (Sec. 6.3); the LID pick's and
  the oracle's hypotheses, the languages picked, T_avg (eq. 2) and the CPU time.

The search itself is :mod:`speechlab.asr.rnnt.search` (one language) and
:mod:`speechlab.asr.rnnt.multilingual_decode` (all).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from speechlab.asr.data import Utterance, collate
from speechlab.asr.rnnt.config import DecodeConfig, EarlyStopConfig, SearchConfig
from speechlab.asr.rnnt.model import RNNT, text_of
from speechlab.asr.rnnt.multilingual_decode import decode_lid_free
from speechlab.asr.rnnt.search import decode
from speechlab.experiment.scoring import Scored, score
from speechlab.processes import load_average
from speechlab.text.graphemes import GraphemeTokenizer


def decode_known(model: RNNT, utts: Sequence[Utterance], tokenizers: Mapping[str, GraphemeTokenizer],
                 search: SearchConfig, *, batch_size: int = 16) -> Scored:
    """Decode with the language known (or not needed): one search per utterance."""
    hyps: dict[str, str] = {}
    start = time.process_time()
    by_lang: dict[str, list[Utterance]] = {}
    for u in utts:
        by_lang.setdefault(u.language, []).append(u)
    for lang, group in by_lang.items():
        for i in range(0, len(group), batch_size):
            chunk = group[i : i + batch_size]
            batch = collate(chunk, lang)
            best = decode(model, batch.x, batch.x_lens, None if model.spec.single_language else lang, search)
            for u, h in zip(chunk, best):
                hyps[u.id] = text_of(model, h.tokens, lang, tokenizers)
    return score(utts, hyps, time.process_time() - start)


@dataclass
class LidFreeRun:
    """LID-free decoding of a set of utterances: the LID pick's and the oracle's hypotheses,
    the language picked (averaged posteriors) and the true one per utterance id, T_avg, CPU and
    audio seconds; ``picked_log``: the language the summed log-posteriors pick; ``load``: the
    machine's 1-minute load average when decoding ended (what else shared the CPU)."""

    lid: Scored
    oracle: Scored
    picked: dict[str, str]
    truth: dict[str, str]
    t_avg: float
    cpu_seconds: float
    audio_seconds: float
    picked_log: dict[str, str] = field(default_factory=dict)
    load: float | None = None


def decode_without_language(model: RNNT, utts: Sequence[Utterance], tokenizers: Mapping[str, GraphemeTokenizer],
                            search: SearchConfig, early_stop: EarlyStopConfig) -> LidFreeRun:
    """Every utterance through every language's decoder on one encoder pass (Table 4), the LID
    head's averaged posteriors picking; early stopping as ``early_stop`` says (Table 7)."""
    cfg = DecodeConfig(search=search, early_stop=early_stop, select="lid")
    hyps, oracle, picked, picked_log = {}, {}, {}, {}
    t_avgs, cpu = [], 0.0
    for u in utts:
        r = decode_lid_free(model, u.feats, cfg, true_language=u.language)
        picked[u.id] = r.language
        picked_log[u.id] = max(r.lid_log_scores, key=r.lid_log_scores.get)
        hyps[u.id] = tokenizers[r.language].decode(r.tokens)
        oracle[u.id] = tokenizers[u.language].decode(r.hypotheses[u.language])
        t_avgs.append(r.t_avg)
        cpu += r.cpu_seconds
    audio = sum(u.num_frames for u in utts) / 100
    return LidFreeRun(score(utts, hyps, cpu), score(utts, oracle), picked,
                      {u.id: u.language for u in utts}, sum(t_avgs) / max(len(t_avgs), 1), cpu, audio,
                      picked_log, load_average())
