"""RNN-T greedy and beam search, frame-synchronous, batched over every hypothesis of every
decoder, whole-utterance and streaming.

One :class:`TransducerSearch` advances several *decoders* at once, frame by frame: the
decoders of every language of a LID-free multi-softmax model (Sec. 4.2 of the paper, on one
encoder pass), or one decoder per utterance of a batch. On each emission step of a frame it
makes one prediction-network call for every hypothesis that emitted a label, followed by the
joint network on their rows (:meth:`TransducerScorer.extend`; the hypotheses a frame starts
with are scored by :meth:`TransducerScorer.log_probs`); the prediction network's outputs are
cached by label prefix: a prefix reached again (two alignments of the same labels) costs
nothing. Python only keeps the
bookkeeping: which label sequences are alive and their scores.

``modified_beam`` (:class:`ModifiedBeamSearch`) is the search icefall and sherpa-onnx call
modified beam search: a label *consumes* its frame, so a frame is one joint step for the beam's
hypotheses, ranked over every (hypothesis, label or blank) pair at once, and one
prediction-network step for those that emitted; at most one label a frame, whatever
``max_symbols_per_frame`` says. It costs about half of ``beam`` a frame (one joint step and
one ranking) and can drop a label where speech has more labels than frames.

Beam search is time-synchronous with label-prefix merging (in the spirit of Saon et al. 2020,
ref. [9] of the multi-softmax paper): on each frame, hypotheses either take blank (they have
consumed the frame) or emit a label and stay on it, at most ``max_symbols_per_frame`` times.
Hypotheses reaching the same label sequence by different alignments are merged by log-add,
keeping the more probable path's alignment. Label sequences and alignments are ids into
append-only tables (:class:`Sequences`), so a step costs the same at the thousandth label as
at the first. Both kinds share one budget of ``beam``
hypotheses per emission step, so with ``beam=1`` it makes exactly the greedy choices: each step
keeps the single most probable extension, blank winning ties; greedy search *is* beam 1.

A decoder decodes with its language's softmax only: a multi-softmax model can never emit
another language's label, and its output ids are local to that language.

Shapes: T frames, J joint dim, V vocabulary, N hypotheses, D decoders, F feature dim.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numba
import numpy as np
import torch
from torch import Tensor

from speechlab.asr.rnnt.config import SearchConfig
from speechlab.asr.rnnt.model import RNNT, Language
from speechlab.asr.rnnt.networks import (PredictionJoint, RnntNetworks, TorchPredictionJoint,
                                         networks_of, rows_of)
from speechlab.errors import ConfigError, DataError
from speechlab.search.lm_fusion import TokenLM
from speechlab.search import log_add
from speechlab.search.context import ContextGraph

#: search method -> the beam width it searches with (greedy is beam search of width 1).
SEARCHES: dict[str, Callable[[SearchConfig], int]] = {
    "greedy": lambda cfg: 1,
    "beam": lambda cfg: cfg.beam,
    "modified_beam": lambda cfg: cfg.beam,
}


def beam_width(cfg: SearchConfig) -> int:
    try:
        return SEARCHES[cfg.method](cfg)
    except KeyError:
        raise ConfigError(f"unknown search method {cfg.method!r}; choose one of "
                          f"{list(SEARCHES)}") from None


class Sequences:
    """The label sequences and emission times of a search's hypotheses as ids into append-only
    tables, so that a hypothesis one label longer costs one entry, not a copy of its labels,
    and merging compares ids, not sequences (whose length grows with the audio).

    Label sequences are interned: id 0 is the empty one, ``child(i, label)`` the id of sequence
    ``i`` followed by ``label``, the same id for the same sequence however it was reached.
    Emission times are a tree of nodes: ``emitted(node, t, lp)`` is a new node, ``node``'s
    frames followed by ``t`` (node 0: none), where the label had log probability ``lp`` (the
    joint's own, without hotword or LM deltas; a word's confidence reads them). Tuples are
    built only when asked for. A table is never changed but by appending: :meth:`kept` makes a smaller one for the ids still in use, and
    hypotheses made before it keep reading the old one."""

    __slots__ = ("_ids", "_parent", "_label", "_t_parent", "_t_frame", "_t_lp")

    def __init__(self) -> None:
        self._ids: dict[tuple[int, int], int] = {}  # (parent id, label) -> id
        self._parent, self._label = [-1], [-1]
        self._t_parent, self._t_frame, self._t_lp = [-1], [-1], [0.0]

    def child(self, parent: int, label: int) -> int:
        key = (parent, label)
        i = self._ids.get(key)
        if i is None:
            i = self._ids[key] = len(self._parent)
            self._parent.append(parent)
            self._label.append(label)
        return i

    def last_label(self, i: int) -> int:
        return self._label[i]

    def emitted(self, node: int, t: int, lp: float = 0.0) -> int:
        self._t_parent.append(node)
        self._t_frame.append(t)
        self._t_lp.append(lp)
        return len(self._t_parent) - 1

    def labels(self, i: int) -> tuple[int, ...]:
        return _walk(i, self._parent, self._label)

    def times(self, node: int) -> tuple[int, ...]:
        return _walk(node, self._t_parent, self._t_frame)

    def label_log_probs(self, node: int) -> tuple[float, ...]:
        return _walk(node, self._t_parent, self._t_lp)

    def kept(self, ids: Sequence[int], nodes: Sequence[int]
             ) -> tuple[Sequences, dict[int, int], dict[int, int]]:
        """A table holding only ``ids`` and ``nodes`` and what they extend, with the new id of
        each old id and node."""
        new = Sequences()
        id_of: dict[int, int] = {0: 0}
        node_of: dict[int, int] = {0: 0}
        for i in ids:
            _copy_path(i, id_of, self._parent, lambda p, j: new.child(p, self._label[j]))
        for n in nodes:
            _copy_path(n, node_of, self._t_parent,
                       lambda p, j: new.emitted(p, self._t_frame[j], self._t_lp[j]))
        return new, id_of, node_of


def _walk(i: int, parent: Sequence[int], value: Sequence[Any]) -> tuple[Any, ...]:
    """The values on the path from the root (entry 0, no value) to entry ``i``."""
    out = []
    while i > 0:
        out.append(value[i])
        i = parent[i]
    return tuple(reversed(out))


def _copy_path(i: int, new_of: dict[int, int], parent: Sequence[int],
               make: Callable[[int, int], int]) -> None:
    """Give entry ``i`` and its ancestors not yet in ``new_of`` their new ids, root first:
    ``make(new parent id, old id)`` makes each."""
    path = []
    while i not in new_of:
        path.append(i)
        i = parent[i]
    for j in reversed(path):
        new_of[j] = make(new_of[parent[j]], j)


class Hyp:
    """One label sequence alive in a decoder: ``score`` its log probability (summed over the
    alignments merged into it), ``tokens`` its labels, ``times`` the encoder frame each label
    was emitted on (of the most probable alignment), ``row`` where the scorer keeps the
    prediction network's output after its labels. ``key`` and ``node`` are the labels' and
    the times' ids in the search's :class:`Sequences`; ``tokens`` and ``times`` are built from
    them when read."""

    __slots__ = ("key", "score", "node", "row", "seqs")

    def __init__(self, key: int, score: float, node: int, row: int, seqs: Sequences) -> None:
        self.key = key
        self.score = score
        self.node = node
        self.row = row
        self.seqs = seqs

    @property
    def tokens(self) -> tuple[int, ...]:
        return self.seqs.labels(self.key)

    @property
    def times(self) -> tuple[int, ...]:
        return self.seqs.times(self.node)

    @property
    def label_log_probs(self) -> tuple[float, ...]:
        """Each label's log probability where it was emitted (of the alignment ``times``)."""
        return self.seqs.label_log_probs(self.node)

    def __repr__(self) -> str:
        return f"Hyp(tokens={self.tokens}, score={self.score}, times={self.times}, row={self.row})"


Beam = dict[int, Hyp]  # label sequence (its Sequences id) -> its hypothesis, in insertion order


class Scorer(Protocol):
    """What the search needs of a model, for all decoders at once."""

    blank: int
    vocab_sizes: tuple[int, ...]  # per decoder

    def start(self) -> list[int]:
        """Per decoder, the row of the prediction network after the start symbol."""
        ...

    def log_probs_array(self, frames: np.ndarray, rows: Sequence[int],
                        decoders: Sequence[int]) -> np.ndarray:
        """frames (D, J) each decoder's current projected encoder frame -> (N, V_max)
        log P(label) of hypothesis i (prediction row ``rows[i]``, decoder ``decoders[i]``);
        columns beyond a decoder's vocabulary are -inf."""
        ...

    def extend(self, rows: Sequence[int], tokens: Sequence[int], decoders: Sequence[int],
               frames: Tensor) -> tuple[list[int], Tensor]:
        """Rows after feeding ``tokens[i]`` to the hypothesis at ``rows[i]`` (of decoder
        ``decoders[i]``), and their :meth:`log_probs_array` on ``frames``: a label
        hypothesis stays on its frame, so its next joint step is always on the same frame
        (one call of the networks' work where they can fuse it)."""
        ...

    def predict(self, rows: Sequence[int], tokens: Sequence[int], decoders: Sequence[int]
                ) -> list[int]:
        """:meth:`extend` without the joint step: the rows after feeding ``tokens[i]``."""
        ...

    def compact(self, beams: list[Beam]) -> list[Beam]:
        """Forget the rows no hypothesis of ``beams`` uses; the beams with their rows
        renumbered."""
        ...


def _better(scores: list[float], k: int) -> list[int]:
    """Indices of the ``k`` best ``scores``, best first, ties by position (the rule of
    :func:`speechlab.search.select`, a stable sort, here on a few Python floats)."""
    return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:k]


class TransducerSearch:
    """Greedy (``beam=1``) or beam search over several decoders of one :class:`Scorer`."""

    def __init__(self, scorer: Scorer, beam: int, max_symbols_per_frame: int) -> None:
        if beam < 1 or max_symbols_per_frame < 1:
            raise ConfigError(f"beam and max_symbols_per_frame must be >= 1, got {beam}, "
                              f"{max_symbols_per_frame}")
        self.scorer = scorer
        self.beam = beam
        self.max_symbols = max_symbols_per_frame
        self.seqs = Sequences()
        #: decoder -> its hotwords' context graph (:meth:`bias`); a hypothesis's state in it
        #: follows from its labels, kept by (decoder, label sequence id)
        self.context: dict[int, ContextGraph] = {}
        self._states: dict[tuple[int, int], int] = {}
        #: decoder -> the token LM fused into it (:meth:`fuse`); states by label sequence id
        self.lms: dict[int, TokenLM] = {}
        self._lm_states: dict[tuple[int, int], tuple[int, ...]] = {}

    def bias(self, decoder: int, graph: ContextGraph) -> None:
        """Bias ``decoder`` towards the hotwords of ``graph`` (:mod:`speechlab.search.context`):
        every label a hypothesis emits changes its score by the graph's delta."""
        self.context[decoder] = graph

    def fuse(self, decoder: int, lm: TokenLM) -> None:
        """Fuse ``lm`` into ``decoder`` (:mod:`speechlab.search.lm_fusion`): every label a
        hypothesis emits adds the LM's weighted log-probability of it."""
        self.lms[decoder] = lm

    def _lm_state(self, d: int, tokens: int) -> tuple[int, ...]:
        key = (d, tokens)
        state = self._lm_states.get(key)
        if state is None:
            state = self._lm_states[key] = self.lms[d].state(self.seqs.labels(tokens))
        return state

    def _state(self, d: int, tokens: int) -> int:
        key = (d, tokens)
        state = self._states.get(key)
        if state is None:
            graph, state = self.context[d], 0
            for label in self.seqs.labels(tokens):
                state = graph.next_state(state, label)
            self._states[key] = state
        return state

    def _bias(self, row: np.ndarray, d: int, key: int) -> None:
        """Add the hotword and LM deltas of decoder ``d``'s hypothesis ``key`` (its label
        sequence) to its labels' log-probabilities ``row``, in place; the blank keeps its
        own."""
        size, blank = self.scorer.vocab_sizes[d], self.scorer.blank
        own = row[blank]
        graph = self.context.get(d)
        if graph is not None:
            row[:size] += graph.deltas(self._state(d, key), size)
        lm = self.lms.get(d)
        if lm is not None:
            row[:size] += lm.deltas(self._lm_state(d, key), size)
        row[blank] = own

    def start(self) -> list[Beam]:
        """One beam per decoder, holding the empty label sequence."""
        return [{0: Hyp(0, 0.0, 0, row, self.seqs)} for row in self.scorer.start()]

    def compact(self, beams: list[Beam]) -> list[Beam]:
        """Keep only the prediction rows (:meth:`TransducerScorer.compact`) and the label and
        time entries the beams use: a long stream would otherwise keep everything it ever
        saw. Returns the beams renumbered (hypotheses taken from earlier beams stay valid)."""
        beams = self.scorer.compact(beams)
        self._states.clear()  # label sequence ids are renumbered; states follow again
        self._lm_states.clear()
        hyps = [h for b in beams for h in b.values()]
        self.seqs, id_of, node_of = self.seqs.kept([h.key for h in hyps],
                                                   [h.node for h in hyps])
        return [{id_of[k]: Hyp(id_of[k], h.score, node_of[h.node], h.row, self.seqs)
                 for k, h in b.items()} for b in beams]

    def run(self, beams: list[Beam], frames: Tensor, t: int) -> list[Beam]:
        """Frames ``t, t+1, ...`` of every decoder: frames (T, D, J)."""
        for i in range(frames.shape[0]):
            beams = self.step(beams, frames[i], t + i)
        return beams

    def step(self, beams: list[Beam], frames: Tensor, t: int,
             running: Sequence[bool] | None = None) -> list[Beam]:
        """Consume encoder frame ``t`` (frames (D, J): each decoder's projection of it) in
        the decoders that are ``running`` (all if None); the others keep their beams."""
        live = range(len(beams)) if running is None else [d for d, r in enumerate(running) if r]
        if not live:
            return list(beams)
        blank, beam, sizes = self.scorer.blank, self.beam, self.scorer.vocab_sizes
        seqs = self.seqs
        # Within the frame a hypothesis is a list [score, times, row, tokens, kept] (a Hyp
        # only once it lands in a beam; times and tokens as their ids in ``seqs``): the work
        # per hypothesis is what a search step costs in Python. Per decoder, ``finished``
        # holds those that have consumed the frame (took blank), in rank order, and ``merge``
        # finds them by label sequence; one pruned from ``finished`` stays in ``merge`` with
        # kept=False.
        finished: dict[int, list[list]] = {d: [] for d in live}
        merge: dict[int, dict[int, list]] = {d: {} for d in live}
        # The active hypotheses of every decoder, grouped by decoder: (decoder, hypothesis).
        active = [(d, [h.score, h.node, h.row, h.key, True])
                  for d in live for h in beams[d].values()]
        # (N, V_max) log P(label) of each active hypothesis on this frame
        lp: Tensor | np.ndarray = self.scorer.log_probs_array(
            frames.detach().numpy(), [h[2] for _, h in active], [d for d, _ in active])
        for s in range(self.max_symbols + 1):
            # the same memory as a tensor's; small reads and writes cost less in numpy
            lp_np = lp if isinstance(lp, np.ndarray) else lp.detach().numpy()
            for (d, h), b in zip(active, lp_np[:, blank].tolist()):
                score, times, row, tokens, _ = h
                new = [score + b, times, row, tokens, True]
                old = merge[d].setdefault(tokens, new)
                if old is new:
                    finished[d].append(new)
                elif not old[4]:  # pruned earlier in this frame: no longer there to merge with
                    merge[d][tokens] = new
                    finished[d].append(new)
                else:  # log-add into it, keeping the alignment and row of the more probable
                    if new[0] > old[0]:
                        old[1], old[2] = times, row
                    old[0] = log_add(old[0], new[0])
            if s == self.max_symbols:
                break
            # Each hypothesis's best labels; a label sequence arises once per step (active
            # hypotheses differ), so the candidates need no merging: they are ranked with the
            # finished hypotheses by score (ties: finished first, then by position), and only
            # the kept ones become hypotheses.
            lp_np[:, blank] = -np.inf
            joint = lp_np  # the labels' own log probabilities, which the times tree keeps
            if self.context or self.lms:  # hotwords, LM: each label's delta joins its score
                joint = lp_np.copy()
                for i, (d, h) in enumerate(active):
                    self._bias(lp_np[i], d, h[3])
            vals, cols = _row_best(lp_np, min(beam, max(sizes) - 1))
            vals, cols = vals.tolist(), cols.tolist()
            survivors: list[tuple[int, list]] = []
            first = 0  # the active hypotheses of decoder d are active[first:last]
            for d in live:
                last = first
                while last < len(active) and active[last][0] == d:
                    last += 1
                done = finished[d]
                if not done and first == last:
                    continue
                k = min(beam, sizes[d] - 1)
                scores = [h[0] for h in done]
                for i in range(first, last):
                    score = active[i][1][0]  # a float64 sum, as the scores are
                    scores += [score + v for v in vals[i][:k]]
                kept = []
                for j in _better(scores, beam):
                    if j < len(done):
                        kept.append(done[j])
                    else:
                        i, m = divmod(j - len(done), k)
                        score, times, row, tokens, _ = active[first + i][1]
                        v = cols[first + i][m]
                        lp_label = float(joint[first + i, v])
                        survivors.append((d, [scores[j], seqs.emitted(times, t, lp_label), row,
                                              seqs.child(tokens, v), True]))
                for h in done:
                    h[4] = False
                for h in kept:
                    h[4] = True
                finished[d] = kept
                first = last
            # Only the survivors pay for a prediction-network step; until then a label
            # hypothesis points at its parent's row.
            if not survivors:
                break
            rows, lp = self.scorer.extend([h[2] for _, h in survivors],
                                          [seqs.last_label(h[3]) for _, h in survivors],
                                          [d for d, _ in survivors], frames)
            for (_, h), row in zip(survivors, rows):
                h[2] = row
            active = survivors
        out = list(beams)
        for d in live:
            done = finished[d]
            if len(done) > beam:
                done = [done[j] for j in _better([h[0] for h in done], beam)]
            out[d] = {h[3]: Hyp(h[3], h[0], h[1], h[2], seqs) for h in done}
        return out


@numba.njit(cache=True, nogil=True)
def _row_best(lp: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``k`` largest values, largest first, ties by column (``topk`` of a stable
    sort): values (N, k) and their columns (N, k)."""
    n, V = lp.shape
    val = np.empty((n, k), lp.dtype)
    col = np.empty((n, k), np.int64)
    for i in range(n):
        m = 0
        for v in range(V):
            x = lp[i, v]
            if m < k:
                p = m
                m += 1
            elif x > val[i, k - 1]:
                p = k - 1
            else:
                continue
            while p > 0 and val[i, p - 1] < x:
                val[i, p] = val[i, p - 1]
                col[i, p] = col[i, p - 1]
                p -= 1
            val[i, p] = x
            col[i, p] = v
    return val, col


@numba.njit(cache=True, nogil=True)
def _best_pairs(lp: np.ndarray, scores: np.ndarray, vocab: int, k: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best pairs (i, v), v < ``vocab``, by ``scores[i] + lp[i, v]`` (float64), best
    first, ties by position (``i * vocab + v``, as a stable sort of all pairs): their positions
    and totals. One pass, each pair tried against the worst kept: a beam's few rows cost
    less so than any sort of them."""
    k = min(k, lp.shape[0] * vocab)
    pos = np.empty(k, np.int64)
    val = np.empty(k, np.float64)
    m = 0
    for i in range(lp.shape[0]):
        s = scores[i]
        for v in range(vocab):
            x = s + np.float64(lp[i, v])
            if m < k:
                p = m
                m += 1
            elif x > val[k - 1]:
                p = k - 1
            else:
                continue
            while p > 0 and val[p - 1] < x:
                val[p] = val[p - 1]
                pos[p] = pos[p - 1]
                p -= 1
            val[p] = x
            pos[p] = i * vocab + v
    return pos[:m], val[:m]


class ModifiedBeamSearch(TransducerSearch):
    """Modified beam search (module doc): on each frame every hypothesis of a decoder's beam
    takes blank or one label, the ``beam`` best of all those pairs are kept, pairs reaching the
    same label sequence merged by log-add, and the frame is consumed. With ``beam=1`` it is
    greedy search with one label a frame.

    Between frames a decoder's hypotheses are plain lists ``[score, node, row, key]``
    (:meth:`_frame`); :meth:`step` makes them :class:`Hyp` beams after each frame, :meth:`run`
    only after the last frame of a chunk."""

    def step(self, beams: list[Beam], frames: Tensor, t: int,
             running: Sequence[bool] | None = None) -> list[Beam]:
        live = list(range(len(beams))) if running is None else \
            [d for d, r in enumerate(running) if r]
        if not live:
            return list(beams)
        hyps = self._frame({d: _plain(beams[d]) for d in live}, frames.detach().numpy(), t)
        out = list(beams)
        for d, kept in hyps.items():
            out[d] = self._beam(kept)
        return out

    def run(self, beams: list[Beam], frames: Tensor, t: int) -> list[Beam]:
        """Frames ``t, t+1, ...`` of every decoder: frames (T, D, J)."""
        hyps = {d: _plain(b) for d, b in enumerate(beams)}
        chunk = frames.detach().numpy()
        for i in range(chunk.shape[0]):
            hyps = self._frame(hyps, chunk[i], t + i)
        return [self._beam(hyps[d]) for d in range(len(beams))]

    def _beam(self, hyps: list[list]) -> Beam:
        seqs = self.seqs
        return {h[3]: Hyp(h[3], h[0], h[1], h[2], seqs) for h in hyps}

    def _frame(self, hyps: dict[int, list[list]], frames: np.ndarray, t: int
               ) -> dict[int, list[list]]:
        """One frame (frames (D, J)) of the decoders in ``hyps`` (decoder -> its hypotheses,
        in beam order)."""
        blank, beam, sizes, seqs = self.scorer.blank, self.beam, self.scorer.vocab_sizes, self.seqs
        rows, decoders = [], []
        for d, hs in hyps.items():
            rows += [h[2] for h in hs]
            decoders += [d] * len(hs)
        lp_np = joint = self.scorer.log_probs_array(frames, rows, decoders)
        if self.context or self.lms:  # hotwords, LM: each label's delta joins its score
            lp_np = lp_np.copy()
            keys = [(d, h[3]) for d, hs in hyps.items() for h in hs]
            for i, (d, key) in enumerate(keys):
                self._bias(lp_np[i], d, key)
        out: dict[int, list[list]] = {}
        # kept label pairs, [score, node, row, key, parent row]: they need a prediction step
        emitted: list[list] = []
        emitted_by: list[int] = []
        first = 0
        for d, hs in hyps.items():
            V, last = sizes[d], first + len(hs)
            top, totals = _best_pairs(lp_np[first:last], np.array([h[0] for h in hs]), V, beam)
            kept: dict[int, list] = {}  # label sequence -> its hypothesis
            for j, score in zip(top.tolist(), totals.tolist()):
                i, v = divmod(j, V)
                _, node, row, key = hs[i][:4]
                if v == blank:
                    new = [score, node, row, key]
                else:
                    new = [score, seqs.emitted(node, t, float(joint[first + i, v])), -1,
                           seqs.child(key, v), row]
                old = kept.get(new[3])
                if old is None:
                    kept[new[3]] = new
                    if v != blank:
                        emitted.append(new)
                        emitted_by.append(d)
                else:  # log-add, keeping the alignment (and row) of the more probable
                    old[0] = log_add(old[0], score)
            out[d] = list(kept.values())
            first = last
        if emitted:
            new_rows = self.scorer.predict([h[4] for h in emitted],
                                           [seqs.last_label(h[3]) for h in emitted], emitted_by)
            for h, row in zip(emitted, new_rows):
                h[2] = row
        return out


def _plain(beam: Beam) -> list[list]:
    """A beam's hypotheses as :class:`ModifiedBeamSearch` keeps them between frames."""
    return [[h.score, h.node, h.row, h.key] for h in beam.values()]


def best(beam: Beam) -> Hyp:
    """The most probable hypothesis of a beam (the first of equals)."""
    if not beam:
        raise ValueError("best() of an empty beam")
    return max(beam.values(), key=lambda h: h.score)


# ---------------------------------------------------------------------------------------------
# The model as a scorer


class TransducerScorer:
    """The search's view of an RNN-T's prediction and joint networks for a set of decoders, one
    per ``languages`` entry (a language, or None for a model that needs none), each with its
    own softmax.

    The networks (a :class:`~speechlab.asr.rnnt.networks.PredictionJoint`: PyTorch's, or
    ONNX graphs) compute; this class keeps the rows: the prediction network's projected output
    and LSTM state after each label prefix a hypothesis reached, kept by (decoder, label
    prefix), looked up as (the parent prefix's row, the label), so that a prefix reached again
    (another alignment of the same labels) costs nothing. A joint step for all hypotheses of
    all decoders is one call of the networks, and so is a prediction step for all hypotheses
    that emitted a label.
    """

    def __init__(self, networks: PredictionJoint | RNNT, languages: Sequence[str | None]) -> None:
        nets = TorchPredictionJoint(networks) if isinstance(networks, RNNT) else networks
        self.networks = nets
        self.blank = nets.blank
        self._slots = rows_of([nets.slot(lang) for lang in languages])
        self.vocab_sizes = tuple(nets.vocab_sizes[s] for s in self._slots.tolist())
        layers, H = nets.state_shape
        self._proj = np.empty((0, nets.joint_dim), dtype=np.float32)
        self._h = np.empty((layers, 0, H), dtype=np.float32)
        self._c = np.empty((layers, 0, H), dtype=np.float32)
        self._size = 0
        self._cache: dict[tuple[int, int], int] = {}  # (parent row, label) -> row
        self._decoder_index: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._log_probs_array = getattr(nets, "log_probs_array", None)

    def _append(self, proj: np.ndarray, h: np.ndarray, c: np.ndarray) -> list[int]:
        n = proj.shape[0]
        if self._size + n > self._proj.shape[0]:  # grow by doubling
            cap = max(64, 2 * (self._size + n))
            grown = np.empty((cap, proj.shape[1]), dtype=np.float32)
            grown[: self._size] = self._proj[: self._size]
            self._proj = grown
            for name in ("_h", "_c"):
                old = getattr(self, name)
                new = np.empty((old.shape[0], cap, old.shape[2]), dtype=np.float32)
                new[:, : self._size] = old[:, : self._size]
                setattr(self, name, new)
        rows = list(range(self._size, self._size + n))
        self._proj[self._size: self._size + n] = proj
        self._h[:, self._size: self._size + n] = h
        self._c[:, self._size: self._size + n] = c
        self._size += n
        return rows

    def start(self) -> list[int]:
        D = len(self.vocab_sizes)
        zero = np.zeros((self._h.shape[0], D, self._h.shape[2]), dtype=np.float32)
        proj, h, c = self.networks.step(np.full(D, self.blank, dtype=np.int64), self._slots,
                                        zero, zero.copy())
        return self._append(proj, h, c)

    def log_probs_array(self, frames: np.ndarray, rows: Sequence[int],
                        decoders: Sequence[int]) -> np.ndarray:
        """frames (D, J) each decoder's current projected encoder frame -> float32 (N, V_max)
        log P(label) of hypothesis i (prediction row ``rows[i]``, decoder ``decoders[i]``),
        -inf beyond a decoder's vocabulary; arrays throughout where the networks take them
        (the ONNX graphs)."""
        key = tuple(decoders)
        index = self._decoder_index.get(key)
        if index is None:  # each set of rows' decoders and slots, made once
            dec = rows_of(decoders)
            index = (dec, self._slots[dec])
            if len(self._decoder_index) < 4096:
                self._decoder_index[key] = index
        dec, slots = index
        pred = self._proj[rows_of(rows)]
        if self._log_probs_array is not None:
            return self._log_probs_array(frames, dec, pred, slots)
        return self.networks.log_probs(torch.from_numpy(frames), dec, pred, slots).numpy()

    def extend(self, rows: Sequence[int], tokens: Sequence[int], decoders: Sequence[int],
               frames: Tensor) -> tuple[list[int], Tensor]:
        out, proj = self._step(rows, tokens, decoders)
        decs = rows_of(decoders)
        if proj is None:
            proj = self._proj[rows_of(out)]
        return out, self.networks.log_probs(frames, decs, proj, self._slots[decs])

    def predict(self, rows: Sequence[int], tokens: Sequence[int], decoders: Sequence[int]
                ) -> list[int]:
        return self._step(rows, tokens, decoders)[0]

    def _step(self, rows: Sequence[int], tokens: Sequence[int], decoders: Sequence[int]
              ) -> tuple[list[int], np.ndarray | None]:
        """The rows after feeding ``tokens[i]``, a prediction step for the prefixes not yet
        reached, and those rows' projections when every one is new (the usual case: no
        gather needed), else None."""
        # A row is one (decoder, label prefix), so (parent row, label) names the prefix
        # reached, without hashing the labels.
        keys = list(zip(rows, tokens))
        out = [self._cache.get(key, -1) for key in keys]
        todo = [i for i, r in enumerate(out) if r < 0]
        if not todo:
            return out, None
        every = len(todo) == len(out)
        pick = (lambda xs: list(xs)) if every else (lambda xs: [xs[i] for i in todo])
        parent = rows_of(pick(rows))
        proj, h, c = self.networks.step(rows_of(pick(tokens)),
                                        self._slots[rows_of(pick(decoders))],
                                        self._h[:, parent], self._c[:, parent])
        for i, row in zip(todo, self._append(proj, h, c)):
            out[i] = row
            self._cache[keys[i]] = row
        return out, proj if every else None

    def compact(self, beams: list[Beam]) -> list[Beam]:
        """Keep only the rows the beams use (a long stream would otherwise keep every prefix
        it ever saw); returns the beams with their rows renumbered."""
        live = sorted({h.row for b in beams for h in b.values()})
        new_of = {old: new for new, old in enumerate(live)}
        idx = rows_of(live)
        # In place: the buffers keep their size, so the rows of the next chunks go to memory
        # already in use (fresh memory costs a page fault per few rows).
        n = len(live)
        self._proj[:n] = self._proj[idx]
        self._h[:, :n], self._c[:, :n] = self._h[:, idx], self._c[:, idx]
        self._size = n
        # A prefix whose parent's row is gone cannot be reached again: no beam holds the parent.
        self._cache = {(new_of[p], tok): new_of[r] for (p, tok), r in self._cache.items()
                       if p in new_of and r in new_of}
        return [{k: Hyp(h.key, h.score, h.node, new_of[h.row], h.seqs) for k, h in b.items()}
                for b in beams]

    @property
    def rows(self) -> int:
        return self._size


def search_for(networks: PredictionJoint | RNNT, languages: Sequence[str | None],
               cfg: SearchConfig) -> TransducerSearch:
    """The search ``cfg`` asks for over one decoder per ``languages`` entry, on ``networks``
    (a PyTorch model's, when given the model)."""
    kind = ModifiedBeamSearch if cfg.method == "modified_beam" else TransducerSearch
    return kind(TransducerScorer(networks, languages), beam_width(cfg), cfg.max_symbols_per_frame)


def _row_languages(language: Language, batch: int) -> list[str | None]:
    if language is None or isinstance(language, str):
        return [language] * batch
    names = list(language)
    if len(names) != batch:
        raise DataError(f"got {len(names)} languages for a batch of {batch}")
    return names


@torch.inference_mode()
def decode(model: RNNT, x: Tensor, x_lens: Tensor, language: Language = None,
           cfg: SearchConfig = SearchConfig()) -> list[Hyp]:
    """Whole utterances: x (B,T,F), x_lens (B,) -> best hypothesis per row, all rows searched
    together (one decoder each).

    ``language`` is one name, one per row, or None for models that need none (mono, vanilla).
    Token ids are local to the language for mono/multi-softmax models, union ids otherwise.
    Put the model in eval mode first (dropout).
    """
    enc, enc_lens = model.encode(x, x_lens, language)
    enc_proj = model.joiner.project_encoder(enc)
    search = search_for(model, _row_languages(language, x.shape[0]), cfg)
    beams = search.start()
    lens = enc_lens.tolist()
    for t in range(max(lens, default=0)):
        beams = search.step(beams, enc_proj[:, t], t, [t < n for n in lens])
    return [best(b) for b in beams]


class StreamingDecoder:
    """One utterance, one language, fed features chunk by chunk, on a PyTorch model or on
    :class:`~speechlab.asr.rnnt.networks.RnntNetworks` (e.g. ONNX graphs).

    Encoder state and search state are carried across chunks; since both are causal, the
    result equals :func:`decode` on the whole utterance for any chunking.
    """

    def __init__(self, model: RNNT | RnntNetworks, language: str | None = None,
                 cfg: SearchConfig = SearchConfig()) -> None:
        self.networks = networks_of(model)
        self.model = self.networks.model
        self.language = language
        self.search = search_for(self.networks.prediction_joint, [language], cfg)
        self.state = self.networks.encoder.init_state(language)
        self.beams = self.search.start()
        self.frames = 0  # encoder frames consumed

    @torch.inference_mode()
    def accept(self, feats: Tensor) -> tuple[int, ...]:
        """feats (T,F) the next chunk -> the best partial label sequence so far."""
        enc_proj, _, self.state = self.networks.encoder(feats, self.state)
        self.beams = self.search.run(self.beams, enc_proj[:, None], self.frames)
        self.frames += enc_proj.shape[0]
        if self.search.scorer.rows > 64 * max(1, sum(len(b) for b in self.beams)):
            self.beams = self.search.compact(self.beams)
        return best(self.beams[0]).tokens

    @property
    def partial(self) -> Hyp:
        return best(self.beams[0])

    def result(self) -> Hyp:
        return best(self.beams[0])
