"""CTC prefix beam search (S1-T1): full-sum decoding over all alignments (eq. 9 of the
CTC-topologies paper), optionally constrained by a lexicon and scored with a word LM.

A hypothesis is a label prefix (the collapsed token sequence) with two log-probabilities, the
sum over the alignments of the frames so far that end in blank (``pb``) and in the prefix's
last label (``pnb``) (Hannun et al. 2014, the paper's ref. [14]); all alignments of one prefix
are summed, not maxed, which is the difference from Viterbi decoding (eq. 8).

**On the beam core.** The search keeps the core's model (:mod:`speechlab.search.beam`):
hypotheses keyed by prefix, alignments of one key merged by log-add, the core's pruning rule
(``select``, compiled as ``select_kernel``), results as :class:`~speechlab.search.Hypothesis`
in a :class:`~speechlab.search.Beam` (:meth:`Frontier.beam`, and the final merge of a word
sequence's pronunciations). What it does not do is hold one Python object per hypothesis
per frame: at beam 32 that costs more than pyctcdecode. A :class:`Frontier` holds the
numbers as arrays, one row per hypothesis, and prefixes as interned ids. Most CTC frames try
no label (blank dominates): no prefix can change, and the frame is three numpy operations.
A frame that tries labels is one numba call (``_prefix_numba.step``): extensions whose prefix
is already a row are summed into it (exact), the others compete with the rows for the beam.

**Words.** With a :class:`LexiconTrie` (phone models: the paper's tokens are phones) a
hypothesis also carries its words and its position in the lexicon's prefix tree; labels may
only spell pronunciations, and a word is emitted (and scored by the LM) when the next word's
first phone arrives or the utterance ends, so one phone prefix may be segmented into several
word sequences, each its own hypothesis. The final scores are eq. 9 read as
``acoustic_scale * log sum_pi p(pi|X) + lm_weight * log p(W)``, with the alignments of every
pronunciation of W summed.

**LM.** Any object with ``score(history, word) -> log prob`` (:class:`WordLM`); ``word`` is
:data:`END` for the end of the sentence. ``lm_log10`` says the LM returns log10 (ARPA files
do). :class:`UnigramLM` is a trivial one for tests.

Pruning, as pyctcdecode's: a frame's labels below ``token_min_logp`` are not tried (the best
label always is), hypotheses more than ``beam_prune_logp`` below the best are dropped, then the
``beam`` best are kept; both on frames where labels are tried (on the others the set of
prefixes cannot change).

Shapes: T frames, V tokens (token 0 is blank by default).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from speechlab.search import _prefix_numba as K
from speechlab.errors import ConfigError, DataError
from speechlab.search import Beam, Hypothesis, merge_logadd

END = "</s>"  # the word an LM is asked about at the end of the sentence
NEG_INF = -math.inf
LN10 = math.log(10.0)


class WordLM(Protocol):
    """A word language model: ``score(history, word)`` is ``log p(word | history)`` (natural
    log, or log10 with ``PrefixSearchConfig.lm_log10``); ``word`` may be :data:`END`."""

    def score(self, history: tuple[Hashable, ...], word: Hashable) -> float: ...


@dataclass(frozen=True)
class UnigramLM:
    """``log p(word)`` from a table, whatever the history; :data:`END` costs ``end``."""

    log_probs: Mapping[Hashable, float]
    end: float = 0.0

    def score(self, history: tuple[Hashable, ...], word: Hashable) -> float:
        if word == END:
            return self.end
        return self.log_probs.get(word, NEG_INF)


@dataclass(frozen=True)
class PrefixSearchConfig:
    """Prefix beam search settings.

    ``beam`` hypotheses kept per frame; ``token_min_logp``, ``beam_prune_logp`` as in the
    module doc (``-inf``: no pruning); ``acoustic_scale`` is eq. 9's alpha; ``lm_weight``
    scales the LM, ``word_bonus`` is added per word (both used only with a lexicon);
    ``lm_log10``: the LM returns log10; ``blank`` the blank token.
    """

    beam: int = 32
    token_min_logp: float = -5.0
    beam_prune_logp: float = -10.0
    acoustic_scale: float = 1.0
    lm_weight: float = 1.0
    word_bonus: float = 0.0
    lm_log10: bool = False
    blank: int = 0

    def __post_init__(self) -> None:
        if self.beam < 1:
            raise ConfigError(f"prefix search beam must be >= 1, got {self.beam}")
        if self.acoustic_scale <= 0:
            raise ConfigError(f"acoustic_scale must be > 0, got {self.acoustic_scale}")
        if self.token_min_logp > 0 or self.beam_prune_logp > 0:
            raise ConfigError("token_min_logp and beam_prune_logp are log-probs: <= 0 "
                              f"(or -inf for none), got {self.token_min_logp}, "
                              f"{self.beam_prune_logp}")


class LexiconTrie:
    """Pronunciations as a prefix tree over tokens: node 0 is the root; ``children[n]`` maps
    a token to the next node; ``words[n]`` the words whose pronunciation ends at ``n``."""

    def __init__(self, entries: Iterable[tuple[Hashable, Sequence[int]]]) -> None:
        self.children: list[dict[int, int]] = [{}]
        self.words: list[tuple[Hashable, ...]] = [()]
        for word, pron in entries:
            if not pron:
                raise DataError(f"lexicon word {word!r} has an empty pronunciation")
            node = 0
            for tok in pron:
                nxt = self.children[node].get(int(tok))
                if nxt is None:
                    nxt = len(self.children)
                    self.children[node][int(tok)] = nxt
                    self.children.append({})
                    self.words.append(())
                node = nxt
            if word not in self.words[node]:
                self.words[node] = self.words[node] + (word,)

    def child_table(self, num_tokens: int | None = None) -> np.ndarray:
        """(nodes, V) the child of each node by each token (-1: none)."""
        V = num_tokens or 1 + max((t for ch in self.children for t in ch), default=0)
        table = np.full((len(self.children), V), -1, np.int64)
        for n, ch in enumerate(self.children):
            for t, m in ch.items():
                table[n, t] = m
        return table

    @classmethod
    def from_dict(cls, lexicon: Mapping[Hashable, Iterable[Sequence[int]]]) -> LexiconTrie:
        """From ``word -> pronunciations`` (token ids, e.g. S1-T1 phone tokens)."""
        return cls((w, p) for w, prons in lexicon.items() for p in prons)


@dataclass(frozen=True)
class PrefixResult:
    """One final hypothesis: its labels (with a lexicon, those of its most probable
    pronunciation sequence), its words (with a lexicon), its ranking score, the acoustic log-sum
    ``log sum_pi p(pi|X)`` over its alignments and its LM log-probability (natural log)."""

    tokens: tuple[int, ...]
    words: tuple[Hashable, ...]
    score: float
    log_prob: float
    lm_score: float


@dataclass
class Frontier:
    """The beam after some frames, one row per hypothesis (H rows), arrays (H,): ``pb``,
    ``pnb`` log-sums over the alignments ending in blank / in the last label, ``lm`` LM
    log-prob (scaled, bonuses included), ``last`` last label (-1: none), ``node`` lexicon
    trie node, ``hist`` interned word history, ``pid`` interned label prefix (both 0: empty);
    ``tables`` the search's intern tables, to read prefixes and words back."""

    pb: np.ndarray
    pnb: np.ndarray
    lm: np.ndarray
    last: np.ndarray
    node: np.ndarray
    hist: np.ndarray
    pid: np.ndarray
    tables: _Tables

    def __len__(self) -> int:
        return int(self.pb.shape[0])

    def tokens(self, row: int) -> tuple[int, ...]:
        return self.tables.tokens(int(self.pid[row]))

    def words(self, row: int) -> tuple[Hashable, ...]:
        return self.tables.words(int(self.hist[row]))

    def scores(self, acoustic_scale: float = 1.0) -> np.ndarray:
        """(H,) ranking scores: alpha log(p_b + p_nb) + LM."""
        return acoustic_scale * np.logaddexp(self.pb, self.pnb) + self.lm

    def beam(self, acoustic_scale: float = 1.0) -> Beam:
        """The hypotheses as a core :class:`Beam` of :class:`Hypothesis`: labels, score,
        state ``(pb, pnb, words)``, key (labels, words, trie node)."""
        out = Beam(merge=merge_logadd)
        for r, sc in enumerate(self.scores(acoustic_scale).tolist()):
            tokens, words = self.tokens(r), self.words(r)
            out.add(Hypothesis(tokens, sc, (float(self.pb[r]), float(self.pnb[r]), words),
                               (tokens, words, int(self.node[r]))))
        return out


class _Tables:
    """Intern tables of one utterance's search: prefix id -> (parent id, label), word history
    id -> (parent id, word id); typed dicts for the kernel, growable arrays, memos."""

    def __init__(self, word_list: list[Hashable]) -> None:
        self.prefixes, self.hists = K.new_tables()
        self.p_parent = np.full(1024, -1, np.int64)
        self.p_label = np.full(1024, -1, np.int64)
        self.h_parent = np.full(256, -1, np.int64)
        self.h_word = np.full(256, -1, np.int64)
        self.word_list = word_list
        self._words: dict[int, tuple[Hashable, ...]] = {0: ()}

    def tokens(self, pid: int) -> tuple[int, ...]:
        return self.tokens_of([pid])[0]

    def tokens_of(self, pids: Iterable[int]) -> list[tuple[int, ...]]:
        parent, label = self.p_parent.tolist(), self.p_label.tolist()
        res = []
        for pid in pids:
            out = []
            while pid > 0:
                out.append(label[pid])
                pid = parent[pid]
            res.append(tuple(reversed(out)))
        return res

    def words(self, hist: int) -> tuple[Hashable, ...]:
        got = self._words.get(hist)
        if got is None:
            got = self.words(int(self.h_parent[hist])) + (self.word_list[int(self.h_word[hist])],)
            self._words[hist] = got
        return got


class PrefixBeamSearch:
    """CTC prefix beam search over one utterance's (T, V) log-probs (module doc).

    ``lexicon`` constrains labels to pronunciations and yields words; ``lm`` (needs a lexicon)
    scores them. ``start()`` then ``step()`` per frame (streaming), ``finish()``; or
    ``decode()`` for a whole utterance.
    """

    def __init__(self, cfg: PrefixSearchConfig = PrefixSearchConfig(),
                 lexicon: LexiconTrie | None = None, lm: WordLM | None = None) -> None:
        if lm is not None and lexicon is None:
            raise ConfigError("a word LM needs a lexicon to find the words of a label prefix")
        self.cfg = cfg
        self.lexicon = lexicon
        self.lm = lm
        self._lm_scale = cfg.lm_weight * (LN10 if cfg.lm_log10 else 1.0)
        self._lm_cache: dict[tuple, float] = {}
        self._threshold = -cfg.beam_prune_logp  # inf: no threshold
        if lexicon is None:
            self._word_list: list[Hashable] = []
            self._child = np.full((1, 1), -1, np.int64)
            self._has_words = np.zeros(1, bool)
        else:
            self._child = lexicon.child_table()
            self._has_words = np.array([bool(w) for w in lexicon.words])
            self._word_list = list(dict.fromkeys(w for ws in lexicon.words for w in ws))
            ids = {w: i for i, w in enumerate(self._word_list)}
            self._node_words = [[ids[w] for w in ws] for ws in lexicon.words]
        self._tables = _Tables(self._word_list)

    # -- scoring -------------------------------------------------------------------------
    def _word_score(self, history: tuple[Hashable, ...], word: Hashable) -> float:
        """What emitting ``word`` (or END) after ``history`` adds to a hypothesis' LM score."""
        bonus = self.cfg.word_bonus if word != END else 0.0
        if self.lm is None:
            return bonus
        key = (history, word)
        s = self._lm_cache.get(key)
        if s is None:
            s = self._lm_scale * self.lm.score(history, word)
            self._lm_cache[key] = s
        return s + bonus

    # -- search --------------------------------------------------------------------------
    def start(self) -> Frontier:
        self._lm_cache.clear()
        self._tables = _Tables(self._word_list)
        zero = np.zeros(1, np.int64)
        return Frontier(np.zeros(1), np.full(1, NEG_INF), np.zeros(1), np.full(1, -1, np.int64),
                        zero, zero.copy(), zero.copy(), self._tables)

    def step(self, fr: Frontier, logp: np.ndarray) -> Frontier:
        """Advance every hypothesis by one frame; logp (V,) this frame's log-probs."""
        row = np.append(np.asarray(logp, dtype=np.float64), NEG_INF)
        return self._step(fr, row, self._labels(row[None, :-1])[0])

    def _labels(self, x: np.ndarray) -> list[np.ndarray]:
        """The labels tried on each frame of x (T, V): those not below ``token_min_logp``
        and the best token, blank excluded."""
        blank = self.cfg.blank
        tried = x >= self.cfg.token_min_logp
        tried[np.arange(x.shape[0]), np.argmax(x, axis=1)] = True
        tried[:, blank] = False
        if self.lexicon is not None and self._child.shape[1] < x.shape[1] + 1:
            # tokens no pronunciation uses (and the padding column) have no children
            pad = np.full((self._child.shape[0], x.shape[1] + 1 - self._child.shape[1]), -1)
            self._child = np.ascontiguousarray(np.concatenate([self._child, pad], axis=1))
        empty = np.zeros(0, np.int64)
        return [np.flatnonzero(r) if r.any() else empty for r in tried]

    def _word_ends(self, fr: Frontier) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows at a word end, each word that ends there, and what its LM score adds."""
        rows, words, scores = [], [], []
        if self.lexicon is not None:
            for p in np.flatnonzero(self._has_words[fr.node]).tolist():
                history = fr.words(p)
                for w in self._node_words[int(fr.node[p])]:
                    rows.append(p)
                    words.append(w)
                    scores.append(self._word_score(history, self._word_list[w]))
        return (np.array(rows, np.int64), np.array(words, np.int64),
                np.array(scores, np.float64))

    def _step(self, fr: Frontier, row: np.ndarray, labels: np.ndarray) -> Frontier:
        """One frame: row (V+1,) log-probs with -inf appended (read by rows with no label)."""
        cfg = self.cfg
        tb = self._tables
        if not labels.size:  # no prefix can change, only the sums move: no kernel call
            pb = np.logaddexp(fr.pb, fr.pnb) + row[cfg.blank]
            return Frontier(pb, fr.pnb + row[fr.last], fr.lm, fr.last, fr.node, fr.hist, fr.pid,
                            tb)
        we_row, we_word, we_lm = self._word_ends(fr)
        out = K.step(fr.pb, fr.pnb, fr.lm, fr.last, fr.node, fr.hist, fr.pid, row, cfg.blank,
                     labels, self.lexicon is not None, self._child, we_row, we_word, we_lm,
                     cfg.acoustic_scale, cfg.beam, self._threshold, row.shape[0],
                     len(self._word_list) + 1, tb.prefixes, tb.p_parent, tb.p_label, tb.hists,
                     tb.h_parent, tb.h_word)
        tb.p_parent, tb.p_label, tb.h_parent, tb.h_word = out[7:]
        return Frontier(*out[:7], tb)

    def finish(self, fr: Frontier) -> list[PrefixResult]:
        """Final hypotheses, best first: with a lexicon only those at a word end (or at the
        root), their last word and the LM's end of sentence scored, and the pronunciation
        variants of one word sequence summed (the core's log-add merge)."""
        alpha = self.cfg.acoustic_scale
        ac = np.logaddexp(fr.pb, fr.pnb).tolist()
        lms = fr.lm.tolist()
        if self.lexicon is None:
            tokens = fr.tables.tokens_of(fr.pid.tolist())
            res = [PrefixResult(tokens[r], (), alpha * ac[r] + lms[r], ac[r], lms[r])
                   for r in range(len(fr))]
            return sorted(res, key=lambda r: -r.score)
        # one Beam keyed by words: acoustic log-sums add up, the LM score is shared
        merged = Beam(merge=merge_logadd)
        best: dict[tuple, tuple[float, int]] = {}
        lm_of: dict[tuple, float] = {}
        for r, nd in enumerate(fr.node.tolist()):
            words = fr.words(r)
            ends = [(words, lms[r])] if nd == 0 else [
                (words + (w,), lms[r] + self._word_score(words, w)) for w in self.lexicon.words[nd]]
            for ws, s in ends:
                if self.lm is not None:
                    s += self._word_score(ws, END)
                if s == NEG_INF or ac[r] == NEG_INF:
                    continue
                merged.add(Hypothesis(ws, ac[r]))
                lm_of[ws] = s
                if ac[r] > best.get(ws, (NEG_INF, -1))[0]:
                    best[ws] = (ac[r], r)
        res = [PrefixResult(fr.tokens(best[h.tokens][1]), h.tokens,
                            alpha * h.score + lm_of[h.tokens], h.score, lm_of[h.tokens])
               for h in merged]
        return sorted(res, key=lambda r: -r.score)

    def decode(self, log_probs) -> list[PrefixResult]:
        """Search a whole utterance: log_probs (T, V) -> final hypotheses, best first.

        Raises:
            DataError: if log_probs is not a (T, V) matrix with T >= 1 or holds NaN.
        """
        x = _as_matrix(log_probs)
        labels = self._labels(x)
        rows = np.concatenate([x, np.full((x.shape[0], 1), NEG_INF)], axis=1)
        fr = self.start()
        for t in range(x.shape[0]):
            fr = self._step(fr, rows[t], labels[t])
        return self.finish(fr)


def _as_matrix(log_probs) -> np.ndarray:
    if hasattr(log_probs, "detach"):
        log_probs = log_probs.detach().cpu().numpy()
    x = np.asarray(log_probs, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 2:
        raise DataError(f"prefix search needs (T, V) log-probs with T >= 1, V >= 2; got {x.shape}")
    if np.isnan(x).any():
        raise DataError("prefix search: log-probs contain NaN")
    return x


def prefix_beam_search(log_probs, cfg: PrefixSearchConfig = PrefixSearchConfig(),
                       lexicon: LexiconTrie | None = None,
                       lm: WordLM | None = None) -> list[PrefixResult]:
    """CTC prefix beam search of one utterance (module doc): log_probs (T, V) -> final
    hypotheses, best first."""
    return PrefixBeamSearch(cfg, lexicon, lm).decode(log_probs)
