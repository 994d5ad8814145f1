"""Lattices for one utterance: every path of ``E o S_dec`` within a beam of the best (Sec. 2.3 of
the CTC-topologies paper), as small arrays.

**How a lattice is made.** :func:`generate` runs our own frame-synchronous Viterbi beam search
over a decoding graph (``S_dec = T o L o G``, eq. 7, as an OpenFst FST) and the network's
(T, V) log-probabilities, recording every arc between surviving (frame, graph state) tokens,
then keeps the arcs on some path within ``lattice_beam`` of the best path: Kaldi's lattice
generation (Povey et al. 2012, the paper's ref. [22]) with the search settings of the
paper's Sec. 3.2 (beam 32, max-active 2000; lattice beam: see :class:`LatticeConfig`). We do
not use kaldi-decoder's ``LatticeSimpleDecoder``: it has no max-active, so at beam 32 it
keeps the whole graph active (4-60 s for a 500-frame utterance on a 3,000-word T o L o G,
against milliseconds here), and its raw lattices come back unsorted as an FST to be walked
arc by arc from Python. Its paths are a reference our tests compare with.

**What a path is.** The paper sums ``p(pi|X)`` over the alignments ``pi`` in ``Pi(W; L)``, a
*set* (eq. 1). A decoding graph may hold several paths for one alignment and one word
sequence: an n-gram G's backoff arc beside the explicit n-gram, a determinised ``L o G`` that
emits a word as soon as it is known (later behind a backoff arc than after an explicit
bigram, so the duplicates carry the word on different frames), S2-T1★'s ``p0`` self-loop
beside a repeated phone. Counted once per graph path, an alignment's probability is
multiplied: on a 3,000-word backoff bigram ``T o det(L o G)`` the BPP of a 500-frame
utterance drops from ~10^-1 to ~10^-6. So by default (``LatticeConfig.unique_paths``) the
lattice keeps one path per (token sequence, word sequence), the one with the best graph
cost (:func:`unique_paths`: states split by word history, then tropical determinisation).
``unique_paths=False`` keeps every graph path, i.e. the sums of k2's ``TotalScore`` over a
lattice.

**What is stored.** Per arc the word (graph output label), the graph cost (LM, lexicon,
final weights; ``-log``) and the acoustic log-likelihood ``log p_t(pi_t|X)`` unscaled, so the
metrics can use ``p(pi|X)`` alone (eqs. 10-11 as written) or the decoder's combined score
``log p(W) + alpha log p(pi|X)`` (eq. 8).

Shapes: T frames, V tokens (network outputs), S lattice states, A lattice arcs.
"""

from __future__ import annotations

import contextlib
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speechlab.asr.ctc import _lattice_numba as K
from speechlab.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# Bump when DecodingGraph's arrays change meaning: a cached file of another version is not read.
ARRAYS_VERSION = 1
_ARRAY_FIELDS = ("e_off", "e_tok", "e_word", "e_w", "e_dst", "n_off", "n_word", "n_w", "n_dst")


@dataclass(frozen=True)
class DecodingGraph:
    """A decoding graph FST as arrays, arcs grouped by source state (built once per graph).

    Input labels follow ``topology``: 0 is epsilon, label ``k`` consumes token ``k - 1`` (the
    column of the log-prob matrix). ``e_*`` are the emitting arcs, ``n_*`` the input-epsilon
    ones; ``*_off`` (S+1,) CSR offsets; weights are ``-log`` costs; ``final`` (S,) the final
    costs (``inf``: not final).
    """

    start: int
    final: np.ndarray
    e_off: np.ndarray
    e_tok: np.ndarray
    e_word: np.ndarray
    e_w: np.ndarray
    e_dst: np.ndarray
    n_off: np.ndarray
    n_word: np.ndarray
    n_w: np.ndarray
    n_dst: np.ndarray

    @property
    def num_states(self) -> int:
        return int(self.final.shape[0])

    @property
    def num_tokens(self) -> int:
        """The smallest V a log-prob matrix for this graph may have."""
        return int(self.e_tok.max()) + 1 if self.e_tok.size else 0

    @classmethod
    def from_fst(cls, fst) -> DecodingGraph:
        """From a ``kaldifst.StdVectorFst`` (or any FST with ``to_str`` in OpenFst text form)."""
        if fst.start < 0:
            raise DataError("the decoding graph has no start state (is it empty?)")
        return cls.from_text(fst.to_str(), int(fst.start), int(fst.num_states))

    @classmethod
    def from_fst_cached(cls, fst, source: Path | None) -> DecodingGraph:
        """:meth:`from_fst`, kept beside ``source`` (the FST's own cache file) so that the next
        process reads the arrays instead of printing and parsing the FST again (2 s for
        en_ctc_t2's 3.2 million arcs). Without ``source`` (a graph read from a package), or
        when the cache cannot be written, it is :meth:`from_fst`."""
        if source is None:
            return cls.from_fst(fst)
        path = source.with_name(f"{source.stem}.lattice-v{ARRAYS_VERSION}.npz")
        if path.exists():
            try:
                return cls.load(path)
            except (OSError, ValueError, KeyError, IndexError, EOFError, zipfile.BadZipFile,
                    DataError) as e:
                log.warning("%s: unreadable (%s); made again", path, e)
        graph = cls.from_fst(fst)
        with contextlib.suppress(OSError):
            graph.save(path)
        return graph

    def save(self, path: str | Path) -> None:
        """The arrays to ``path`` (``.npz``, no pickled objects; written atomically), indices
        as int32 where they fit."""
        from speechlab.files import atomic_path

        arrays = {"start": np.array([self.start], np.int64), "final": self.final}
        for name in _ARRAY_FIELDS:
            x = getattr(self, name)
            small = x.dtype.kind == "i" and (x.size == 0 or (x.min() >= -2**31 and
                                                            x.max() < 2**31))
            arrays[name] = x.astype(np.int32) if small else x
        with atomic_path(path, durable=False) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **arrays)

    @classmethod
    def load(cls, path: str | Path) -> DecodingGraph:
        """What :meth:`save` wrote."""
        with np.load(path, allow_pickle=False) as z:
            missing = [n for n in ("start", "final", *_ARRAY_FIELDS) if n not in z]
            if missing:
                raise DataError(f"{path}: no {missing[0]} array")
            parts = {n: z[n].astype(np.int64) if z[n].dtype.kind == "i" else z[n]
                     for n in _ARRAY_FIELDS}
            return cls(int(z["start"][0]), z["final"], **parts)

    @classmethod
    def from_text(cls, text: str, start: int = 0, num_states: int | None = None) -> DecodingGraph:
        """From OpenFst text form (``src dst ilabel olabel [weight]`` / ``state [weight]``;
        the start state is the first line's source unless given)."""
        arr, fin = fst_lines(text)
        src, dst, ilab, olab = (arr[:, i].astype(np.int64) for i in range(4))
        w = arr[:, 4]
        fin_state = fin[:, 0].astype(np.int64)
        n = num_states if num_states is not None else 1 + max(
            int(src.max(initial=0)), int(dst.max(initial=0)), int(fin_state.max(initial=0)), start)
        final = np.full(n, np.inf)
        for s, fw in zip(fin_state.tolist(), fin[:, 1].tolist()):  # a few; the last line wins
            final[s] = fw
        emit = ilab > 0
        e_off, e_ids = K.csr(n, src[emit])
        n_off, n_ids = K.csr(n, src[~emit])
        e = np.flatnonzero(emit)[e_ids]
        e0 = np.flatnonzero(~emit)[n_ids]
        return cls(start, final, e_off, ilab[e] - 1, olab[e], w[e], dst[e],
                   n_off, olab[e0], w[e0], dst[e0])


def fst_lines(text: str) -> tuple[np.ndarray, np.ndarray]:
    """OpenFst text form as arrays: the arcs ``(src, dst, ilabel, olabel, weight)`` (E, 5)
    and the final states ``(state, weight)`` (F, 2), float64. A line of four fields or more
    is an arc (weight 0 if it has none), one of one to three a final state (weight 0 if it has
    none). Compiled (``_lattice_numba.fst_text``: en_ctc_t2's 3.3 million arcs in a fraction of
    a second, where Python's loop took seconds), with the same numbers as Python's ``float``;
    text it cannot read is read by Python."""
    try:
        data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        data = None
    if data is not None:
        arcs, fins, ok = K.fst_text(data, K._EXACT_TENS)
        if ok:
            return arcs, fins
    return python_fst_lines(text)


def python_fst_lines(text: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fst_lines` read line by line with Python's ``int`` and ``float`` (the text the
    compiled reader leaves to Python, and its tests' reference)."""
    rows, finals = [], []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 4:
            rows.append((int(f[0]), int(f[1]), int(f[2]), int(f[3]),
                         float(f[4]) if len(f) > 4 else 0.0))
        elif f:
            finals.append((int(f[0]), float(f[1]) if len(f) > 1 else 0.0))
    return (np.array(rows, dtype=np.float64).reshape(-1, 5),
            np.array(finals, dtype=np.float64).reshape(-1, 2))


@dataclass(frozen=True)
class LatticeConfig:
    """Lattice generation: the paper's search (Sec. 3.2: beam 32, max-active 2000).

    ``beam``, ``lattice_beam`` are in cost units of the search score ``graph cost -
    acoustic_scale x log p(pi|X)`` (``acoustic_scale`` is eq. 8's alpha); ``max_active``
    bounds the tokens kept per frame (0: no bound); ``unique_paths``: one path per (token
    sequence, word sequence), see the module doc.

    ``lattice_beam`` is 8, the default of the paper's lattice-analysis script (Waterfall,
    ``egs/icmc/asr_py/decode/lattice_analysis.sh``); Sec. 3.3 says 32. At 32 a 500-frame
    utterance on a 3,000-word bigram graph holds millions of (state, word history) pairs, too
    many for unique paths; 12-16 cost about twice 8 (``benchmarks/ctc_lattice.py``), and 32
    works with ``unique_paths=False`` (graph paths, as k2 would sum them).
    """

    beam: float = 32.0
    max_active: int = 2000
    lattice_beam: float = 8.0
    acoustic_scale: float = 1.0
    unique_paths: bool = True

    def __post_init__(self) -> None:
        if not (self.beam > 0 and self.lattice_beam >= 0 and self.acoustic_scale > 0
                and self.max_active >= 0):
            raise ConfigError(f"lattice config needs beam > 0, lattice_beam >= 0, "
                              f"acoustic_scale > 0 and max_active >= 0; got {self}")


@dataclass(frozen=True)
class Lattice:
    """An acyclic lattice, topologically sorted: state 0 is the start, every arc goes from a
    lower to a higher state, arcs are sorted by source.

    ``frame`` (S,) frames consumed on reaching each state; ``src``, ``dst`` (A,); ``token``
    (A,) the token consumed (-1: none); ``word`` (A,) the word label (0: none); ``graph_cost``
    (A,) ``-log`` graph weight; ``loglik`` (A,) ``log p_t(token|X)`` (0 on epsilon arcs);
    ``final_cost`` (S,) graph cost of ending in the state (``inf``: not final; only states at
    the last frame are final). ``acoustic_scale`` is the alpha the lattice was pruned with.
    """

    utt: str
    num_frames: int
    frame: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    token: np.ndarray
    word: np.ndarray
    graph_cost: np.ndarray
    loglik: np.ndarray
    final_cost: np.ndarray
    acoustic_scale: float = 1.0

    @property
    def num_states(self) -> int:
        return int(self.frame.shape[0])

    @property
    def num_arcs(self) -> int:
        return int(self.src.shape[0])

    def log_weights(self, score: str = "acoustic") -> tuple[np.ndarray, np.ndarray]:
        """Per-arc (A,) and final (S,) log weights under ``score`` (see :data:`SCORES`)."""
        try:
            fn = SCORES[score]
        except KeyError:
            raise ConfigError(
                f"unknown lattice score {score!r}; choose one of {list(SCORES)}") from None
        return fn(self)

    def best_path(self) -> BestPath:
        """The Viterbi path (eq. 8): the best ``log p(W) + alpha log p(pi|X)`` in the lattice."""
        w, fw = self.log_weights("total")
        score, arcs = K.viterbi_sorted(self.num_states, self.src, self.dst, w, fw)
        if arcs.size == 0 and not np.isfinite(score):
            raise DataError(f"utterance {self.utt!r}: the lattice has no complete path")
        words = tuple(int(x) for x in self.word[arcs] if x != 0)
        tokens = tuple(int(x) for x in self.token[arcs] if x >= 0)
        # the frame each word is on: the token arcs before the arc that emits it
        before = np.cumsum(self.token[arcs] >= 0) - (self.token[arcs] >= 0)
        frames = tuple(int(f) for f in before[self.word[arcs] != 0])
        return BestPath(words, tokens, float(score), float(self.loglik[arcs].sum()), frames)


@dataclass(frozen=True)
class BestPath:
    """One path: its words, its tokens (one per frame), its total log score, its acoustic
    log-likelihood ``log p(pi|X)`` (eq. 2) and the frame each word is on (the tokens before
    the arc that emits it, as :class:`~speechlab.asr.ctc.decode.ViterbiResult` counts them)."""

    words: tuple[int, ...]
    tokens: tuple[int, ...]
    score: float
    loglik: float
    word_frames: tuple[int, ...] = ()


def _acoustic(lat: Lattice) -> tuple[np.ndarray, np.ndarray]:
    final = np.where(np.isfinite(lat.final_cost), 0.0, -np.inf)
    return lat.loglik, final


def _total(lat: Lattice) -> tuple[np.ndarray, np.ndarray]:
    return lat.acoustic_scale * lat.loglik - lat.graph_cost, -lat.final_cost


# The path scores the metrics can sum. "acoustic": log p(pi|X), eqs. 10-11 as written;
# "total": the decoder's score, log p(W) + alpha log p(pi|X) (eq. 8), graph costs included.
SCORES = {"acoustic": _acoustic, "total": _total}


def generate(graph: DecodingGraph, log_probs, cfg: LatticeConfig = LatticeConfig(),
             utt: str = "utt") -> Lattice:
    """The lattice of one utterance.

    Args:
        graph: the decoding graph (:meth:`DecodingGraph.from_fst`).
        log_probs: (T, V) log-probabilities (numpy or torch), V >= ``graph.num_tokens``.
        cfg: beams, max-active, acoustic scale.
        utt: the utterance's name, for error messages.

    Raises:
        DataError: naming ``utt`` when the log-probs are malformed or no path survives to a
            final state at the last frame (the lattice would be empty).
    """
    loglik = _as_loglik(log_probs, graph, utt)
    out = K.search(graph.start, graph.final, graph.e_off, graph.e_tok, graph.e_word, graph.e_w,
                   graph.e_dst, graph.n_off, graph.n_word, graph.n_w, graph.n_dst, loglik,
                   float(cfg.acoustic_scale), float(cfg.beam), int(cfg.max_active))
    tok_state, tok_cost, frame_lo, cutoff, a_src, a_dst, a_tok, a_word, a_w, a_ac = out
    num_frames = loglik.shape[0]
    ntok = tok_state.shape[0]
    frame = np.repeat(np.arange(num_frames + 1), np.diff(frame_lo[: num_frames + 2]))
    final_cost = np.full(ntok, np.inf)
    last = np.arange(frame_lo[num_frames], frame_lo[num_frames + 1])
    alive = last[tok_cost[last] <= cutoff[num_frames]]
    final_cost[alive] = graph.final[tok_state[alive]]
    if not np.isfinite(final_cost).any():
        raise DataError(f"utterance {utt!r}: no path reaches a final state of the decoding graph "
                        f"after {num_frames} frames within beam {cfg.beam}; the lattice is empty "
                        "(raise the beam or check the graph and the log-probs)")
    cost = a_w - cfg.acoustic_scale * a_ac
    new_id, kept, _best, ok = K.prune_sort(ntok, 0, final_cost, a_src, a_dst, cost,
                                           float(cfg.lattice_beam))
    if not ok:
        raise DataError(f"utterance {utt!r}: the decoding graph has an epsilon cycle")
    states = np.flatnonzero(new_id >= 0)
    order = np.argsort(new_id[states])
    states = states[order]
    lat = Lattice(utt, num_frames, frame[states], new_id[a_src[kept]], new_id[a_dst[kept]],
                  a_tok[kept], a_word[kept], a_w[kept], a_ac[kept],
                  final_cost[states],
                  float(cfg.acoustic_scale))
    return unique_paths(lat) if cfg.unique_paths else lat


def _as_loglik(log_probs, graph: DecodingGraph, utt: str) -> np.ndarray:
    if hasattr(log_probs, "detach"):
        log_probs = log_probs.detach().cpu().numpy()
    x = np.ascontiguousarray(log_probs, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1:
        raise DataError(f"utterance {utt!r}: log-probs must be a (T, V) matrix with T >= 1, "
                        f"got shape {x.shape}")
    if x.shape[1] < graph.num_tokens:
        raise DataError(f"utterance {utt!r}: log-probs have {x.shape[1]} columns but the graph "
                        f"uses {graph.num_tokens} tokens (wrong topology or phone set?)")
    if np.isnan(x).any():
        raise DataError(f"utterance {utt!r}: log-probs contain NaN")
    return x


def unique_paths(lat: Lattice, delta: float = 1e-9, max_states: int = 1_000_000) -> Lattice:
    """The same lattice with one path per (token sequence, word sequence), the one with the
    lowest graph cost, wherever its arcs carried the words (see the module doc).

    How: split the states by the word history reaching them, so that a path's words are
    known from its end; close every path with one arc labelled by its history; remove
    epsilons and determinise this acceptor over (token | history) labels in the tropical
    semiring (our own, for acyclic lattices); then spell each history arc back as a chain
    of word arcs. Acoustic log-likelihoods are unchanged, as they depend on (frame, token)
    only; graph costs move along a path but each path keeps its total; the words of every
    path sit on its last arcs.

    Raises:
        DataError: naming the utterance, if the split lattice would exceed ``max_states``
            (too many word histories: prune with a smaller lattice beam).
    """
    if lat.num_arcs == 0:
        return lat
    e_src, e_dst, e_arc, st_orig, st_hist, h_parent, h_word, ok = K.expand_histories(
        lat.num_states, lat.src, lat.dst, lat.word, max_states)
    if not ok:
        raise DataError(f"utterance {lat.utt!r}: more than {max_states} (state, word history) "
                        "pairs; use a smaller lattice beam for unique paths, or "
                        "unique_paths=False (graph paths)")
    n = st_orig.shape[0]
    # labels: token + 1 (0: epsilon), history h -> base + h on the arcs into the super-final
    base = int(lat.token.max()) + 2
    ends = np.flatnonzero(np.isfinite(lat.final_cost[st_orig]))
    src = np.concatenate([e_src, ends])
    dst = np.concatenate([e_dst, np.full(ends.shape, n)])
    lab = np.concatenate([lat.token[e_arc] + 1, base + st_hist[ends]])
    w = np.concatenate([lat.graph_cost[e_arc], lat.final_cost[st_orig[ends]]])
    final = np.full(n + 1, np.inf)
    final[n] = 0.0
    order = K.topo_order(n + 1, src, dst)
    rank = np.empty(n + 1, np.int64)
    rank[order] = np.arange(n + 1)
    src, dst = rank[src], rank[dst]
    by_src = np.argsort(src, kind="stable")
    src, dst, lab, w = src[by_src], dst[by_src], lab[by_src], w[by_src]
    off, dst, lab, w, final = K.remove_epsilons_sorted(n + 1, src, dst, lab, w, final[order])
    src, dst, lab, w, final = K.determinize_acyclic(rank[0], off, dst, lab, w, final, delta)
    # history arcs -> chains of word arcs (epsilon tokens) spelling the history
    hist_arc = np.flatnonzero(lab >= base)
    tok = np.where(lab >= base, -1, lab - 1)
    word = np.zeros(lab.shape, np.int64)
    extra_src, extra_dst, extra_word = [], [], []
    next_state = final.shape[0]
    for a in hist_arc.tolist():
        words = _history(int(lab[a] - base), h_parent, h_word)
        if not words:
            continue
        target = int(dst[a])
        word[a] = words[0]
        prev = next_state if len(words) > 1 else target
        if len(words) > 1:
            dst[a] = next_state
        for i, wd in enumerate(words[1:], start=1):
            cur = prev
            nxt = target if i == len(words) - 1 else cur + 1
            extra_src.append(cur)
            extra_dst.append(nxt)
            extra_word.append(wd)
            prev = nxt
        next_state += len(words) - 1
    m = len(extra_src)
    src = np.concatenate([src, np.array(extra_src, np.int64)])
    dst = np.concatenate([dst, np.array(extra_dst, np.int64)])
    tok = np.concatenate([tok, np.full(m, -1, np.int64)])
    word = np.concatenate([word, np.array(extra_word, np.int64)])
    w = np.concatenate([w, np.zeros(m)])
    final = np.concatenate([final, np.full(next_state - final.shape[0], np.inf)])
    S = next_state
    order = K.topo_order(S, src, dst)
    if order.shape[0] != S:
        raise DataError(f"utterance {lat.utt!r}: determinised lattice has a cycle")
    rank = np.empty(S, np.int64)
    rank[order] = np.arange(S)
    src, dst = rank[src], rank[dst]
    by_src = np.argsort(src, kind="stable")
    src, dst, tok, word, w = src[by_src], dst[by_src], tok[by_src], word[by_src], w[by_src]
    final = final[order]
    frame = K.frames_sorted(S, src, dst, tok)
    # log p_t(token) looked up from the original arcs: it depends on (frame, token) only.
    table = np.zeros((lat.num_frames + 1, int(lat.token.max()) + 2))
    emit = lat.token >= 0
    table[lat.frame[lat.src[emit]], lat.token[emit]] = lat.loglik[emit]
    loglik = np.where(tok >= 0, table[frame[src], np.maximum(tok, 0)], 0.0)
    return Lattice(lat.utt, lat.num_frames, frame, src, dst, tok, word, w, loglik, final,
                   lat.acoustic_scale)


def _history(h: int, parent: np.ndarray, word: np.ndarray) -> list[int]:
    out = []
    while h > 0:
        out.append(int(word[h]))
        h = int(parent[h])
    return out[::-1]
