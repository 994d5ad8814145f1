"""Brute-force references for graph and decoder tests: exhaustive, unpruned, slow, obvious.

- :func:`best_by_output`: for every output sequence of an FST, the max (or log-sum) over the
  paths that consume a (T, V) emission matrix of ``-cost + alpha * sum_t logp[t, ilabel - 1]``
  (eq. 8's objective, or eq. 9's sum, per hypothesis);
- :func:`accepted_sequences`: every (token sequence, output sequence) of exactly T frames;
  :func:`outputs_of`: the output sequences of one token sequence;
- :func:`reference_viterbi`: eq. (8) from first principles, without any composed graph: token
  sequences from the topology's arrays, phones parsed into words by the lexicon, ``log p(W)``
  from the ARPA file as a back-off grammar scores it (:func:`grammar_logprob`).

Exhaustive over ``(state, outputs so far)`` pairs, so only for tiny graphs and T <= ~8.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

LN10 = math.log(10.0)


def _arcs(fst) -> list[list[tuple[int, int, float, int]]]:
    import kaldifst

    return [[(a.ilabel, a.olabel, float(a.weight.value), a.nextstate)
             for a in kaldifst.ArcIterator(fst, s)] for s in range(fst.num_states)]


def _combine(semiring: str):
    if semiring == "max":
        return max
    if semiring == "sum":
        return lambda a, b: float(np.logaddexp(a, b))
    raise ValueError(f"semiring must be 'max' or 'sum', got {semiring!r}")


def best_by_output(fst, log_probs: np.ndarray, acoustic_weight: float = 1.0,
                   semiring: str = "max") -> dict[tuple[int, ...], float]:
    """``{output sequence: score}`` over all complete paths consuming all T frames.

    ``log_probs`` (T, V); an arc with input label ``i > 0`` takes one frame and scores
    ``acoustic_weight * log_probs[t, i - 1]``; input-epsilon arcs take none; arc and final
    costs are subtracted. ``semiring="sum"`` log-adds the paths instead of taking the best.
    """
    plus = _combine(semiring)
    arcs = _arcs(fst)
    num_frames = log_probs.shape[0]

    def add(table, key, score):
        table[key] = plus(table[key], score) if key in table else score

    def closure(frontier: dict) -> dict:
        # Follow input-epsilon arcs, in waves: a path may take several in a row (graphs here
        # are epsilon-acyclic; a wave cap guards against a cycle).
        out = dict(frontier)
        wave = frontier
        for _ in range(len(arcs) + 1):
            nxt: dict = {}
            for (s, words), score in wave.items():
                for i, o, w, d in arcs[s]:
                    if i == 0:
                        add(nxt, (d, words + (o,) if o else words), score - w)
            if not nxt:
                return out
            for k, v in nxt.items():
                add(out, k, v)
            wave = nxt
        raise ValueError("input-epsilon cycle in the graph")

    if fst.start < 0:
        return {}
    frontier = closure({(fst.start, ()): 0.0})
    for t in range(num_frames):
        nxt: dict = {}
        for (s, words), score in frontier.items():
            for i, o, w, d in arcs[s]:
                if i > 0:
                    add(nxt, (d, words + (o,) if o else words),
                        score - w + acoustic_weight * float(log_probs[t, i - 1]))
        frontier = closure(nxt)
    result: dict[tuple[int, ...], float] = {}
    for (s, words), score in frontier.items():
        final = float(fst.final(s).value)
        if final != math.inf:
            add(result, words, score - final)
    return result


def accepted_sequences(fst, num_frames: int) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every ``(tokens, outputs)`` of a complete path taking exactly ``num_frames`` frames
    (token = input label - 1; input-epsilon arcs take no frame)."""
    arcs = _arcs(fst)
    out: set = set()
    if fst.start < 0:
        return out

    def walk(s: int, tokens: tuple, words: tuple, depth: int) -> None:
        if depth > num_frames + len(arcs):
            raise ValueError("input-epsilon cycle in the graph")
        if len(tokens) == num_frames and fst.final(s).value != math.inf:
            out.add((tokens, words))
        for i, o, _, d in arcs[s]:
            if i == 0:
                walk(d, tokens, words + (o,) if o else words, depth + 1)
            elif len(tokens) < num_frames:
                walk(d, tokens + (i - 1,), words + (o,) if o else words, depth + 1)

    walk(fst.start, (), (), 0)
    return out


def outputs_of(fst, tokens: Sequence[int]) -> set[tuple[int, ...]]:
    """The output sequences of the complete paths whose frames read exactly ``tokens``."""
    V = max([max(tokens, default=0) + 1] + [i for arcs in _arcs(fst) for i, *_ in arcs])
    one_hot = np.full((len(tokens), V), -math.inf)
    one_hot[np.arange(len(tokens)), list(tokens)] = 0.0
    return {words for words, score in best_by_output(fst, one_hot).items()
            if score > -math.inf}


def topology_phone_scores(name: str, num_phones: int, log_probs: np.ndarray,
                          acoustic_weight: float = 1.0) -> dict[tuple[int, ...], float]:
    """``{phone sequence: best alpha * log p(pi|X)}`` over the token sequences the topology's
    arrays (:func:`speechlab.asr.ctc.topology.arcs`) accept in T frames."""
    from speechlab.asr.ctc import topology

    g = topology.arcs(name, num_phones)
    frontier = {(g.start, ()): 0.0}
    for t in range(log_probs.shape[0]):
        nxt: dict = {}
        for (s, phones), score in frontier.items():
            for a in np.flatnonzero(g.src == s):
                key = (int(g.dst[a]), phones + ((int(g.label[a]),) if g.label[a] else ()))
                value = score + acoustic_weight * float(log_probs[t, g.token[a]])
                if value > nxt.get(key, -math.inf):
                    nxt[key] = value
        frontier = nxt
    out: dict[tuple[int, ...], float] = {}
    for (s, phones), score in frontier.items():
        if g.final[s] and score > out.get(phones, -math.inf):
            out[phones] = score
    return out


def parses(phones: tuple[int, ...], prons: Sequence[tuple[int, tuple[int, ...], int]]
           ) -> list[tuple[int, ...]]:
    """Every word-id sequence whose pronunciations concatenate to ``phones``."""
    if not phones:
        return [()]
    out = []
    for word, pron, _ in prons:
        if phones[:len(pron)] == pron:
            out += [(word,) + rest for rest in parses(phones[len(pron):], prons)]
    return out


def grammar_logprob(lm, words: Sequence[str]) -> float:
    """``log10 p(W)`` of ``words`` (then ``</s>``) as a back-off grammar FST scores its best
    path: at each word, the max over taking a listed n-gram now or backing off first (paying
    the back-off weight). A back-off path lands in a shorter history, so this can exceed the
    ARPA probability (:meth:`ArpaLM.logprob`): the usual tropical-semiring approximation that
    ``S_dec`` and eq. (8) inherit.

    ``lm``: :class:`speechlab.text.ngram.ArpaLM`; states are the listed n-grams with a back-off
    weight (the histories), as in Kaldi's ``arpa2fst``.
    """
    def is_history(h: tuple) -> bool:
        return not h or (len(h) < lm.order and lm.ngrams[len(h) - 1].get(h, (0, None))[1]
                         is not None)

    def state_of(gram: tuple) -> tuple:
        while not is_history(gram):
            gram = gram[1:]
        return gram

    frontier = {state_of(("<s>",)): 0.0}
    for w in list(words) + ["</s>"]:
        nxt: dict[tuple, float] = {}
        for h, score in frontier.items():
            penalty, hh = 0.0, h
            while True:
                entry = lm.ngrams[len(hh)].get(hh + (w,)) if len(hh) < lm.order else None
                if entry is not None:
                    dest = () if w == "</s>" else state_of(hh + (w,))
                    value = score + penalty + entry[0]
                    if value > nxt.get(dest, -math.inf):
                        nxt[dest] = value
                if not hh:
                    break
                penalty += lm.ngrams[len(hh) - 1][hh][1] or 0.0
                hh = hh[1:]
        frontier = nxt
    return max(frontier.values(), default=-math.inf)


def reference_viterbi(name: str, lang, lm, log_probs: np.ndarray,
                      acoustic_weight: float = 1.0) -> dict[tuple[int, ...], float]:
    """``{word ids: ln p(W) + alpha * max_pi log p(pi|X)}`` for every word sequence that some
    token sequence of T frames spells: eq. (8) before its argmax, with no composed graph.

    ``lang``: :class:`speechlab.asr.ctc.graphs.Lang`; ``lm``: :class:`speechlab.text.ngram.
    ArpaLM`, scored as the grammar FST scores it (:func:`grammar_logprob`, natural log).
    """
    out: dict[tuple[int, ...], float] = {}
    for phones, am in topology_phone_scores(name, lang.num_phones, log_probs,
                                            acoustic_weight).items():
        for words in parses(phones, lang.prons):
            lp = grammar_logprob(lm, [lang.words[w - 1] for w in words])
            score = LN10 * lp + am
            if score > out.get(words, -math.inf):
                out[words] = score
    return out
