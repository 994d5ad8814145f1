"""Test helpers for WFST decoding: tiny ``T o L o G`` graphs written by hand and brute-force
enumeration of every path of ``E o S`` (emission o decoding graph).

Brute force is the reference the lattice metrics and full-sum searches are checked against:
on graphs of a few states and T <= 6 frames there are at most a few thousand paths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


def fst_from_text(text: str):
    """A ``kaldifst.StdVectorFst`` from OpenFst text form."""
    import kaldifst

    return kaldifst.compile(text)


def lexicon_fst(lexicon: Mapping[int, Sequence[Sequence[int]]]):
    """L: phones in, words out (the word on the first phone), loop state 0 is start and
    final. ``lexicon`` maps word id -> pronunciations (phone ids)."""
    lines, n = [], 1
    for word, prons in lexicon.items():
        for pron in prons:
            s = 0
            for i, p in enumerate(pron):
                d = 0 if i == len(pron) - 1 else n
                lines.append(f"{s} {d} {p} {word if i == 0 else 0}")
                if d:
                    s, n = d, n + 1
    lines.append("0")
    return fst_from_text("\n".join(lines))


def unigram_fst(probs: Mapping[int, float], end: float = 1.0):
    """G: any word sequence, each word costing ``-log probs[word]``; ending costs ``-log end``."""
    lines = [f"0 0 {w} {w} {-math.log(p)}" for w, p in probs.items()]
    lines.append(f"0 {-math.log(end)}")
    return fst_from_text("\n".join(lines))


def bigram_fst(unigram: Mapping[int, float], bigram: Mapping[tuple[int, int], float],
               backoff: float = 0.5):
    """G with backoff: state 0 is the unigram (backoff) state and the start, state ``w`` the
    history ``w``. Seen bigrams have an explicit arc *and* are reachable through the backoff
    epsilon arc, as in an ARPA G, so such a G has two paths for one word sequence."""
    words = sorted(unigram)
    lines = [f"0 {w} {w} {w} {-math.log(unigram[w])}" for w in words]
    for (h, w), p in bigram.items():
        lines.append(f"{h} {w} {w} {w} {-math.log(p)}")
    for h in words:
        lines.append(f"{h} 0 0 0 {-math.log(backoff)}")
        lines.append(f"{h}")
    lines.append("0")
    return fst_from_text("\n".join(lines))


def decoding_graph(topology: str, num_phones: int, lexicon: Mapping[int, Sequence[Sequence[int]]],
                   grammar):
    """``T o (L o G)`` for ``topology`` over phones 1..``num_phones`` (eq. 7), arc-sorted on
    input labels, no determinisation (tiny graphs need none)."""
    import kaldifst

    from speechlab.asr.ctc import topology as topo

    L = lexicon_fst(lexicon)
    kaldifst.arcsort(L, sort_type="olabel")
    kaldifst.arcsort(grammar, sort_type="ilabel")
    LG = kaldifst.compose(L, grammar)
    T = topo.build(topology, num_phones)
    kaldifst.arcsort(T, sort_type="olabel")
    kaldifst.arcsort(LG, sort_type="ilabel")
    TLG = kaldifst.compose(T, LG)
    kaldifst.arcsort(TLG, sort_type="ilabel")
    return TLG


@dataclass(frozen=True)
class Path:
    """One path of ``E o S``: one token per frame, its words, graph cost, log p(pi|X), and its
    non-epsilon arc labels as (token or -1, word or 0) pairs (where the words sit)."""

    tokens: tuple[int, ...]
    words: tuple[int, ...]
    graph_cost: float
    loglik: float
    labels: tuple[tuple[int, int], ...] = ()

    def total(self, acoustic_scale: float = 1.0) -> float:
        """log p(W) + alpha log p(pi|X) of this path (eq. 8's score)."""
        return acoustic_scale * self.loglik - self.graph_cost


def enumerate_paths(fst, log_probs: np.ndarray) -> list[Path]:
    """Every path of the decoding graph ``fst`` that consumes exactly the T frames of
    ``log_probs`` (T, V) and ends in a final state (input label k consumes token k-1)."""
    arcs: dict[int, list[tuple[int, int, int, float]]] = {}
    finals: dict[int, float] = {}
    for line in fst.to_str().splitlines():
        f = line.split()
        if len(f) >= 4:
            arcs.setdefault(int(f[0]), []).append(
                (int(f[1]), int(f[2]), int(f[3]), float(f[4]) if len(f) > 4 else 0.0))
        elif f:
            finals[int(f[0])] = float(f[1]) if len(f) > 1 else 0.0
    num_frames = log_probs.shape[0]
    out: list[Path] = []

    def walk(s, t, toks, words, labels, cost, ll):
        if t == num_frames and s in finals:
            out.append(Path(tuple(toks), tuple(words), cost + finals[s], ll, tuple(labels)))
        for d, i, o, w in arcs.get(s, ()):
            if i > 0 and t == num_frames:
                continue
            pair = [(i - 1, o)] if (i or o) else []
            walk(d, t + (i > 0), toks + [i - 1] * (i > 0), words + [o] * (o != 0),
                 labels + pair, cost + w, ll + (float(log_probs[t, i - 1]) if i > 0 else 0.0))

    walk(int(fst.start), 0, [], [], [], 0.0, 0.0)
    return out


def unique(paths: Sequence[Path]) -> list[Path]:
    """One path per (token sequence, word sequence), wherever its words sit: the one with the
    lowest graph cost."""
    best: dict[tuple, Path] = {}
    for p in paths:
        key = (p.tokens, p.words)
        if key not in best or p.graph_cost < best[key].graph_cost:
            best[key] = p
    return list(best.values())


def logsumexp(xs: Sequence[float]) -> float:
    xs = list(xs)
    if not xs:
        return -math.inf
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def lattice_paths(lat) -> list[Path]:
    """Every start-to-final path of a :class:`speechlab.asr.ctc.lattice.Lattice` (tiny ones)."""
    by_src: dict[int, list[int]] = {}
    for a in range(lat.num_arcs):
        by_src.setdefault(int(lat.src[a]), []).append(a)
    out: list[Path] = []

    def walk(s, toks, words, labels, cost, ll):
        if math.isfinite(lat.final_cost[s]):
            out.append(Path(tuple(toks), tuple(words), cost + float(lat.final_cost[s]), ll,
                            tuple(labels)))
        for a in by_src.get(s, ()):
            tok, word = int(lat.token[a]), int(lat.word[a])
            pair = [(tok, word)] if (tok >= 0 or word) else []
            walk(int(lat.dst[a]), toks + [tok] * (tok >= 0), words + [word] * (word != 0),
                 labels + pair, cost + float(lat.graph_cost[a]), ll + float(lat.loglik[a]))

    walk(0, [], [], [], 0.0, 0.0)
    return out
