"""Word-level graphs of the CTC-topologies paper: the lexicon ``L``, the grammar ``G``, the decoding
graph ``S_dec = T o (L o G)`` (eq. 7) and the word training graph ``S_trn = T o (L o W)`` (eq. 4).

Labels (OpenFst/Kaldi conventions, 0 is epsilon everywhere):

- token side: ``token + 1`` for tokens 0..V-1 (0 is blank; layout of :mod:`.topology`), so
  ``kaldi_decoder.DecodableCtc`` reads ``logp[t, ilabel - 1]``;
- phone side: phone ids 1..P (``lang.phones[p - 1]``); then the disambiguation symbols
  ``#0 .. #K-1`` as ``P + 1 + k`` (only inside graph construction);
- word side: word ids 1..W (``lang.words[w - 1]``), then ``#0``, ``<s>``, ``</s>`` as
  ``W + 1 .. W + 3`` (the grammar's symbol table; ``<s>``/``</s>`` never label an arc).

Design decisions:

- **No silence phone.** The token inventory is blank + phone states (TOPOLOGIES.md), and every
  topology has the shared optional blank between phones and at both ends, which is where a
  network puts silence. An optional-silence arc in ``L`` would need a silence token the network
  does not have, so ``L`` has none.
- **Disambiguation symbols** (Kaldi's scheme, written anew): a pronunciation that is a proper
  prefix of another one, or that several words share (homophones), ends with ``#k``, numbered
  from 1 per distinct pronunciation; ``#0`` is the grammar's back-off label, passed through ``L``
  by a self-loop at its loop state. ``L o G`` is then functional and determinizable.
- **Determinization and minimization** (eq. 7 leaves them out "for simplicity"): three
  recipes, :data:`RECIPES`:

  ``"none"``  ``T o rmdisambig(L o G)``: the plain composition, for checking the others;
  ``"lg"``    ``T o rmdisambig(min(det(L o G)))`` (the k2/EESEN ``HLG`` recipe);
  ``"full"``  ``rmdisambig(min(det(T' o min(det(L o G)))))`` (Kaldi's ``HCLG`` recipe), where
              ``T'`` is ``T`` with the disambiguation symbols passed through at phone boundaries.

  Determinization is in the tropical semiring (Kaldi's ``DeterminizeStar``), so every string
  keeps its best weight: every hypothesis' best path of eq. (8) scores the same in all three
  graphs, up to the quantization below (tests).
  Minimization is Kaldi's ``MinimizeEncoded`` (labels and weights encoded, no weight pushing;
  weights are quantized to ``1/1024``). ``"full"`` needs ``T``'s token -> phone map to be a
  function: a topology whose phone-initial state has a self-loop *and* may end the phone
  (S2-T1★: ``p0 p0`` is one phone ``p`` or two) makes ``T o L o G`` non-functional, which no
  determinization handles; for such a topology ``"full"`` falls back to ``"lg"`` (logged).
  ``T'`` has a boundary state (one per phone under CTC's rule, which must remember the phone)
  where the disambiguation self-loops live, reached by an
  epsilon arc from every state a phone may end in, so each ``#k`` has one place in a token
  sequence (loops anywhere else would multiply the strings determinization keeps apart);
  determinization removes those epsilons again.
- After the disambiguation symbols become epsilons the graph has input-epsilon arcs;
  kaldi-decoder's decoders follow them without consuming a frame.

Missing symbols: an ARPA word without a pronunciation is skipped with a logged count or is an
error (``missing="skip" | "error"``), as is a transcript word in :func:`word_ids`; a lexicon
phone outside the phone list is a :class:`~speechlab.errors.DataError` naming word and phone; a
lexicon with more phones than the token graph ``T`` has is a
:class:`~speechlab.errors.ConfigError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from speechlab.asr.ctc import topology as topo_mod
from speechlab.errors import ConfigError, DataError
from speechlab.files import atomic_path, atomic_write_json, file_lock
from speechlab.text.lexicon import Lexicon
from speechlab.text.ngram import BOS, EOS, arpa_bytes, arpa_vocab, plain_arpa, read_arpa

log = logging.getLogger(__name__)

# Bump when graph construction changes: cached graphs of older versions are then not found.
GRAPH_VERSION = 1

MISSING = ("skip", "error")


# --------------------------------------------------------------------------------------------
# Symbols


@dataclass(frozen=True)
class Lang:
    """A lexicon as integer ids, with disambiguation symbols (Kaldi's ``data/lang``).

    ``phones[p - 1]`` is phone id ``p`` (1..P); ``words[w - 1]`` is word id ``w`` (1..W);
    ``prons`` holds ``(word id, phone ids, k)`` per pronunciation, ``k > 0`` meaning it ends
    with disambiguation symbol ``#k``; ``num_disambig`` is K, counting ``#0``.
    """

    phones: tuple[str, ...]
    words: tuple[str, ...]
    prons: tuple[tuple[int, tuple[int, ...], int], ...]
    num_disambig: int

    @property
    def num_phones(self) -> int:
        return len(self.phones)

    @property
    def num_words(self) -> int:
        return len(self.words)

    def phone_disambig(self, k: int) -> int:
        """Phone-side label of ``#k``."""
        return self.num_phones + 1 + k

    @property
    def word_disambig(self) -> int:
        """Word-side label of ``#0`` (the grammar's back-off arcs)."""
        return self.num_words + 1

    def phone_table(self) -> str:
        """Kaldi ``phones.txt`` text: ``<eps>``, phones, ``#0..#K-1``."""
        syms = ["<eps>", *self.phones, *(f"#{k}" for k in range(self.num_disambig))]
        return "".join(f"{s} {i}\n" for i, s in enumerate(syms))

    def word_table(self) -> str:
        """Kaldi ``words.txt`` text: ``<eps>``, words, ``#0``, ``<s>``, ``</s>``."""
        syms = ["<eps>", *self.words, "#0", BOS, EOS]
        return "".join(f"{s} {i}\n" for i, s in enumerate(syms))

    def word_index(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words, 1)}

    def fingerprint(self) -> str:
        """sha256 of everything that shapes the graphs built from this lang."""
        text = json.dumps([self.phones, self.words, self.prons, self.num_disambig],
                          ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


def make_lang(lexicon: Lexicon, phones: Sequence[str] | None = None) -> Lang:
    """Number the lexicon's phones and words and add disambiguation symbols.

    Args:
        lexicon: word -> pronunciations.
        phones: the phone inventory in id order (id = position + 1): it must match the
            network's token layout. ``None`` takes ``lexicon.phones`` (sorted).

    Raises:
        DataError: a pronunciation uses a phone not in ``phones`` (naming word and phone), or
            the lexicon is empty.
    """
    if len(lexicon) == 0:
        raise DataError("the lexicon is empty")
    phones = tuple(lexicon.phones if phones is None else phones)
    if len(set(phones)) != len(phones):
        raise ConfigError("the phone list has duplicates")
    phone_id = {p: i for i, p in enumerate(phones, 1)}
    words = tuple(sorted(lexicon.words))
    word_id = {w: i for i, w in enumerate(words, 1)}

    entries = list(lexicon.items())
    for word, pron in entries:
        for p in pron:
            if p not in phone_id:
                raise DataError(f"lexicon word {word!r} uses phone {p!r}, which is not in the "
                                f"phone list ({len(phones)} phones); add it to the phone list "
                                "(and the model's outputs) or fix the lexicon")
    # Disambiguation: homophones and prefixes of other pronunciations get #1, #2, ...
    shared = Counter(pron for _, pron in entries)
    prefixes = {pron[:i] for _, pron in entries for i in range(1, len(pron))}
    next_k: dict[tuple[str, ...], int] = {}
    prons = []
    for word, pron in sorted(entries, key=lambda e: (word_id[e[0]], e[1])):
        k = 0
        if shared[pron] > 1 or pron in prefixes:
            k = next_k[pron] = next_k.get(pron, 0) + 1
        prons.append((word_id[word], tuple(phone_id[p] for p in pron), k))
    num_disambig = 1 + max((k for *_, k in prons), default=0)
    return Lang(phones, words, tuple(prons), num_disambig)


def word_ids(words: Iterable[str], lang: Lang, missing: str = "error",
             index: dict[str, int] | None = None) -> tuple[list[int], list[str]]:
    """A transcript's word ids, and the words skipped for having no pronunciation.

    Args:
        missing: ``"error"`` raises :class:`DataError` naming the first missing word;
            ``"skip"`` leaves missing words out (returned, so callers can count them).
        index: ``lang.word_index()``, to avoid rebuilding it per utterance.
    """
    _check_missing(missing)
    index = lang.word_index() if index is None else index
    ids, skipped = [], []
    for w in words:
        i = index.get(w)
        if i is not None:
            ids.append(i)
        elif missing == "error":
            raise DataError(f"word {w!r} is not in the lexicon; add a pronunciation or decode "
                            "with missing='skip'")
        else:
            skipped.append(w)
    return ids, skipped


def _check_missing(missing: str) -> None:
    if missing not in MISSING:
        raise ConfigError(f"missing must be one of {MISSING}, got {missing!r}")


# --------------------------------------------------------------------------------------------
# L, G, W


def _new_fst(num_states: int, start: int = 0):
    import kaldifst

    fst = kaldifst.StdVectorFst()
    for _ in range(num_states):
        fst.add_state()
    fst.start = start
    return fst


def lexicon_fst(lang: Lang, disambig: bool = True):
    """The lexicon FST ``L``: phone ids in, word ids out (a ``kaldifst.StdVectorFst``).

    One loop state (start and final); each pronunciation is a chain from it back to it whose
    first arc outputs the word. With ``disambig``, chains end with their ``#k`` and the loop
    state has a ``#0:#0`` self-loop for the grammar's back-off arcs; without, ``L`` is
    input-epsilon-free (the form eq. 4's training graph needs). Arc-sorted on output labels.
    """
    import kaldifst

    fst = _new_fst(1)
    fst.set_final(0, 0.0)
    for word, phones, k in lang.prons:
        labels = list(phones) + ([lang.phone_disambig(k)] if disambig and k else [])
        src = 0
        for i, lab in enumerate(labels):
            dst = 0 if i == len(labels) - 1 else fst.add_state()
            fst.add_arc(src, kaldifst.StdArc(lab, word if i == 0 else 0, 0.0, dst))
            src = dst
    if disambig:
        fst.add_arc(0, kaldifst.StdArc(lang.phone_disambig(0), lang.word_disambig, 0.0, 0))
    kaldifst.arcsort(fst, sort_type="olabel")
    return fst


@contextlib.contextmanager
def _stderr_to_log(what: str) -> Iterator[None]:
    """Send what C++ code writes to fd 2 into the debug log (kaldilm reports every section)."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace").strip()
            if text:
                log.debug("%s:\n%s", what, text)


def grammar_fst(arpa: str | Path, lang: Lang, missing: str = "skip"):
    """The grammar ``G`` of an ARPA LM over ``lang``'s words, back-off arcs labelled ``#0``.

    The ARPA file is validated first (:func:`speechlab.text.ngram.read_arpa`). Costs are
    ``-ln p`` (kaldilm converts the file's log10). Arc-sorted on input labels.

    Args:
        missing: what to do with ARPA words that are not in ``lang``: ``"skip"`` drops their
            n-grams (logging how many words), ``"error"`` raises naming them.
    """
    import kaldifst
    import kaldilm

    _check_missing(missing)
    arpa = Path(arpa)
    vocab = [w for w in read_arpa(arpa).vocab if w not in (BOS, EOS)]
    known = set(lang.words)
    absent = [w for w in vocab if w not in known]
    if absent:
        if missing == "error":
            raise DataError(f"{arpa}: {len(absent)} LM word(s) have no pronunciation, e.g. "
                            f"{absent[:5]}; add them to the lexicon or use missing='skip'")
        log.warning("%s: skipping %d of %d LM words that have no pronunciation, e.g. %s",
                    arpa, len(absent), len(vocab), absent[:5])
    with tempfile.TemporaryDirectory(prefix="speechlab-G-") as tmp:
        words_txt = Path(tmp) / "words.txt"
        words_txt.write_text(lang.word_table(), encoding="utf-8")
        out = Path(tmp) / "G.fst"
        with _stderr_to_log(f"kaldilm.arpa2fst {arpa}"), plain_arpa(arpa) as text:
            kaldilm.arpa2fst(str(text), str(out), disambig_symbol="#0",
                             read_symbol_table=str(words_txt), max_arpa_warnings=0)
        g = kaldifst.StdVectorFst.read(str(out))
    kaldifst.arcsort(g, sort_type="ilabel")
    return g


def word_fst(ids: Sequence[int]):
    """The linear word FST ``W`` of eq. (4): word ids in and out."""
    import kaldifst

    return kaldifst.make_linear_acceptor(list(ids))


# --------------------------------------------------------------------------------------------
# Token graphs with disambiguation symbols


def is_functional(name: str) -> bool:
    """Whether topology ``name`` maps every token sequence to at most one phone sequence.

    A phone always starts in state 0, so the only ambiguity is a token ``p0`` that could
    either continue phone ``p`` (a within-phone arc into state 0, i.e. its self-loop) or start a
    new ``p`` from a state where ``p`` may end; CTC's rule forbids the latter.
    """
    topo = topo_mod.get(name)
    if topo.ctc_rule:
        return True
    return not any(b == 0 and a in topo.exit_states for a, b in topo.within())


def token_fst_with_disambig(name: str, num_phones: int, num_disambig: int):
    """``T'``: the token FST ``T`` of topology ``name`` with disambiguation symbols passed
    through at phone boundaries (for determinizing ``T' o LG``; see the module doc).

    States: 0 start (disambiguation loops), 1 blank, then a boundary state per phone under
    CTC's rule (state 0 is the one boundary otherwise), then the phone states. A phone's exit
    states go to its boundary by an epsilon arc; the boundary continues to a blank or to any
    phone (not the same one under CTC's rule). Input label of ``#k``: ``V + 1 + k``; output:
    ``P + 1 + k``.
    """
    import kaldifst

    topo = topo_mod.get(name)
    x, V = topo.states, topo_mod.num_tokens(name, num_phones)
    phones = range(1, num_phones + 1)
    nb = num_phones if topo.ctc_rule else 0
    first_phone_state = 2 + nb

    def boundary(p: int) -> int:
        return 1 + p if topo.ctc_rule else 0

    def state(p: int, s: int) -> int:
        return first_phone_state + (p - 1) * x + s

    fst = _new_fst(first_phone_state + num_phones * x)
    blank = 1

    def leave_boundary(b: int, after: int | None) -> None:
        for k in range(num_disambig):
            fst.add_arc(b, kaldifst.StdArc(V + 1 + k, num_phones + 1 + k, 0.0, b))
        fst.add_arc(b, kaldifst.StdArc(1, 0, 0.0, blank))
        for q in phones:
            if not (topo.ctc_rule and q == after):
                fst.add_arc(b, kaldifst.StdArc(topo_mod.token(topo, q, 0) + 1, q, 0.0,
                                               state(q, 0)))
        fst.set_final(b, 0.0)

    leave_boundary(0, None)
    fst.add_arc(blank, kaldifst.StdArc(1, 0, 0.0, blank))
    for q in phones:
        fst.add_arc(blank, kaldifst.StdArc(topo_mod.token(topo, q, 0) + 1, q, 0.0, state(q, 0)))
    fst.set_final(blank, 0.0)
    for p in phones:
        if topo.ctc_rule:
            leave_boundary(boundary(p), p)
        for a, b in topo.within():
            fst.add_arc(state(p, a), kaldifst.StdArc(topo_mod.token(topo, p, b) + 1, 0, 0.0,
                                                     state(p, b)))
        for s in topo.exit_states:
            fst.add_arc(state(p, s), kaldifst.StdArc(0, 0, 0.0, boundary(p)))
    kaldifst.arcsort(fst, sort_type="olabel")
    return fst


def _drop_labels(fst, keep: int, drop: int):
    """``fst`` with input labels ``keep+1 .. keep+drop`` replaced by epsilon (labels 1..keep
    kept): composition with a one-state relabelling FST on the left, done in C++."""
    import kaldifst

    r = _new_fst(1)
    r.set_final(0, 0.0)
    for lab in range(1, keep + 1):
        r.add_arc(0, kaldifst.StdArc(lab, lab, 0.0, 0))
    for lab in range(keep + 1, keep + drop + 1):
        r.add_arc(0, kaldifst.StdArc(0, lab, 0.0, 0))
    kaldifst.arcsort(r, sort_type="olabel")
    if not fst.is_ilabel_sorted:
        fst = fst.copy()
        kaldifst.arcsort(fst, sort_type="ilabel")
    return kaldifst.compose(r, fst)


def _determinize_minimize(fst, what: str):
    import kaldifst

    start = time.perf_counter()
    fst = fst.copy()
    if kaldifst.determinize_star(fst):
        raise DataError(f"determinizing {what} stopped early")
    kaldifst.minimize_encoded(fst)
    log.debug("%s: determinized and minimized in %.1f s (%d states)", what,
              time.perf_counter() - start, fst.num_states)
    return fst


def compose_lg(L, G, optimize: bool = True):
    """``L o G`` (``L`` with disambiguation symbols), determinized and minimized when
    ``optimize``. Phone ids and ``#k`` in, word ids out; arc-sorted on input labels."""
    import kaldifst

    if not L.is_olabel_sorted:
        L = L.copy()
        kaldifst.arcsort(L, sort_type="olabel")
    lg = kaldifst.compose(L, G)
    if optimize:
        lg = _determinize_minimize(lg, "L o G")
    kaldifst.arcsort(lg, sort_type="ilabel")
    return lg


def _t_phones(T) -> int:
    """The number of phones a token FST ``T`` outputs (its largest output label)."""
    import kaldifst

    top = 0
    for s in kaldifst.StateIterator(T):
        for arc in kaldifst.ArcIterator(T, s):
            top = max(top, arc.olabel)
    return top


def _check_phones(lang: Lang, num_phones: int, what: str) -> None:
    if lang.num_phones > num_phones:
        raise ConfigError(f"the lexicon has {lang.num_phones} phones but {what} has only "
                          f"{num_phones}: phone {lang.phones[num_phones]!r} (id "
                          f"{num_phones + 1}) and later ones have no tokens; build T with "
                          f"num_phones={lang.num_phones}")


# --------------------------------------------------------------------------------------------
# Decoding graph (eq. 7)


@dataclass(frozen=True, eq=False)
class DecodingGraph:
    """``S_dec`` of eq. (7) with what a decoder needs to read it.

    ``fst``: kaldifst ``StdVectorFst``, input label ``token + 1`` (0: epsilon), output label a
    word id of ``lang`` (0: none), costs ``-ln p(W)`` of the LM. ``num_tokens``: V, the
    network outputs the graph expects. ``recipe``: the one applied (:data:`RECIPES`).
    """

    fst: object
    num_tokens: int
    lang: Lang
    topology: str
    recipe: str
    info: dict = field(default_factory=dict)
    # the cache file the FST was read from or written to (:func:`cached_decoding_graph`), where
    # what is derived from it (the lattice search's arrays) may be kept beside it
    source: Path | None = None

    def words(self, ids: Iterable[int]) -> list[str]:
        """Word strings of word ids."""
        return [self.lang.words[i - 1] for i in ids]


def _t_after_lg(name: str, lang: Lang, G, optimize_lg: bool):
    import kaldifst

    lg = compose_lg(lexicon_fst(lang), G, optimize=optimize_lg)
    lg = _drop_labels(lg, lang.num_phones, lang.num_disambig)
    T = topo_mod.build(name, lang.num_phones)
    kaldifst.arcsort(T, sort_type="olabel")
    return kaldifst.compose(T, lg)


def _recipe_none(name: str, lang: Lang, G):
    return _t_after_lg(name, lang, G, optimize_lg=False)


def _recipe_lg(name: str, lang: Lang, G):
    return _t_after_lg(name, lang, G, optimize_lg=True)


def _recipe_full(name: str, lang: Lang, G):
    import kaldifst

    lg = compose_lg(lexicon_fst(lang), G, optimize=True)
    t = token_fst_with_disambig(name, lang.num_phones, lang.num_disambig)
    tlg = _determinize_minimize(kaldifst.compose(t, lg), "T o LG")
    return _drop_labels(tlg, topo_mod.num_tokens(name, lang.num_phones), lang.num_disambig)


RECIPES: dict[str, Callable] = {"none": _recipe_none, "lg": _recipe_lg, "full": _recipe_full}


def decoding_graph(name: str, lang: Lang, G, recipe: str = "full") -> DecodingGraph:
    """``S_dec = T o (L o G)`` (eq. 7) for topology ``name``, built by ``recipe``.

    Args:
        name: the topology (``★`` may be written ``*``).
        lang: from :func:`make_lang`; ``T`` gets one phone per ``lang`` phone.
        G: from :func:`grammar_fst` over the same ``lang``.
        recipe: ``"full"``, ``"lg"`` or ``"none"`` (module doc); ``"full"`` becomes ``"lg"``
            for a topology that is not :func:`is_functional`.
    """
    import kaldifst

    name = topo_mod.get(name).name
    if recipe not in RECIPES:
        raise ConfigError(f"unknown graph recipe {recipe!r}; choose one of {list(RECIPES)}")
    if recipe == "full" and not is_functional(name):
        log.info("%s maps some token sequences to two phone sequences; T o L o G cannot be "
                 "determinized, so only L o G is (recipe 'lg')", name)
        recipe = "lg"
    start = time.perf_counter()
    fst = RECIPES[recipe](name, lang, G)
    kaldifst.arcsort(fst, sort_type="ilabel")
    info = {"states": fst.num_states, "arcs": _num_arcs(fst),
            "build_seconds": round(time.perf_counter() - start, 3)}
    return DecodingGraph(fst, topo_mod.num_tokens(name, lang.num_phones), lang, name, recipe,
                         info)


def _num_arcs(fst) -> int:
    return sum(fst.num_arcs(s) for s in range(fst.num_states))


# --------------------------------------------------------------------------------------------
# Training graph (eq. 4)


def training_graph(T, L, ids: Sequence[int]):
    """``S_trn = T o (L o W)`` (eq. 4) for the word-id sequence ``ids``.

    Args:
        T: the token FST (:func:`speechlab.asr.ctc.topology.build`), arc-sorted on outputs.
        L: :func:`lexicon_fst` with ``disambig=False`` (arc-sorted on outputs).
        ids: word ids (:func:`word_ids`).

    Returns:
        A kaldifst ``StdVectorFst``: input ``token + 1`` (never epsilon: every arc takes one
        frame), output the word id on a word's first token, weights 0. Empty (no states) when
        no token sequence spells ``ids``.
    """
    import kaldifst

    lw = kaldifst.compose(L, word_fst(ids))
    if not T.is_olabel_sorted:
        T = T.copy()
        kaldifst.arcsort(T, sort_type="olabel")
    kaldifst.arcsort(lw, sort_type="ilabel")
    return kaldifst.compose(T, lw)


def check_token_fst(T, lang: Lang) -> None:
    """Raise :class:`ConfigError` if the token FST ``T`` has fewer phones than ``lang`` (those
    phones would silently make every transcript that uses them unreachable)."""
    _check_phones(lang, _t_phones(T), "the token FST T")


class TrainingGraphCompiler:
    """``S_trn = T o (L o W)`` (eq. 4) for transcripts over one lang and topology; ``T`` and
    ``L`` (without disambiguation symbols) are built once.

    Args:
        name: the topology.
        lang: from :func:`make_lang`.
        missing: transcript words without a pronunciation: ``"error"`` or ``"skip"``
            (:func:`word_ids`).
    """

    def __init__(self, name: str, lang: Lang, missing: str = "error") -> None:
        import kaldifst

        _check_missing(missing)
        self.topology = topo_mod.get(name).name
        self.lang = lang
        self.missing = missing
        self.num_tokens = topo_mod.num_tokens(name, lang.num_phones)
        self.T = topo_mod.build(name, lang.num_phones)
        kaldifst.arcsort(self.T, sort_type="olabel")
        self.L = lexicon_fst(lang, disambig=False)
        self._index = lang.word_index()

    def __call__(self, words: Sequence[str]):
        """``(S_trn, skipped words)`` for one transcript (see :func:`training_graph`)."""
        ids, skipped = word_ids(words, self.lang, self.missing, self._index)
        return training_graph(self.T, self.L, ids), skipped


def to_arcs(fst) -> topo_mod.Arcs:
    """An FST whose input labels are ``token + 1`` as :class:`~.topology.Arcs` arrays (token
    ``ilabel - 1``, label the output label), for graph losses.

    Raises:
        ValueError: an input-epsilon arc (no frame to consume) or a non-zero weight.
    """
    import kaldifst
    import numpy as np

    rows = []
    n = fst.num_states
    final = np.zeros(n, dtype=bool)
    for s in range(n):
        w = fst.final(s).value
        if w != float("inf"):
            if w != 0.0:
                raise ValueError(f"state {s} has final weight {w}; Arcs holds unweighted graphs")
            final[s] = True
        for arc in kaldifst.ArcIterator(fst, s):
            if arc.ilabel == 0:
                raise ValueError(f"state {s} has an input-epsilon arc; Arcs needs one token "
                                 "per arc")
            if arc.weight.value != 0.0:
                raise ValueError(f"state {s} has an arc of weight {arc.weight.value}")
            rows.append((s, arc.nextstate, arc.ilabel - 1, arc.olabel))
    table = np.array(rows, dtype=np.int64).reshape(-1, 4)
    start = fst.start if n else 0
    return topo_mod.Arcs(n, table[:, 0], table[:, 1], table[:, 2], table[:, 3], start, final)


# --------------------------------------------------------------------------------------------
# Cache


def graph_key(name: str, lang: Lang, arpa: str | Path, recipe: str, missing: str) -> str:
    """Content address of a decoding graph: sha256 over the graph version, topology, lang
    (phones, words, pronunciations), the ARPA text (the same compressed or not) and the
    options."""
    import kaldifst

    arpa_hash = hashlib.sha256(arpa_bytes(arpa)).hexdigest()  # compressed or not
    parts = [GRAPH_VERSION, topo_mod.get(name).name, lang.fingerprint(), arpa_hash, recipe,
             missing, kaldifst.__version__]
    return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()


def cached_decoding_graph(cache_dir: str | Path, name: str, lexicon: Lexicon, arpa: str | Path,
                          *, phones: Sequence[str] | None = None, recipe: str = "full",
                          missing: str = "skip") -> DecodingGraph:
    """:func:`decoding_graph` for an ARPA LM and a lexicon, built once and kept in
    ``cache_dir`` under its content address (:func:`graph_key`).

    The lexicon is first restricted to the LM's words (no other word can be decoded). Two
    processes asking for the same graph build it once (file lock); files are written
    atomically, so a crash leaves no half-written graph.

    Args:
        phones: the phone inventory in id order (the network's); ``None``: the lexicon's.
        missing: for LM words without a pronunciation, see :func:`grammar_fst`.
    """
    import kaldifst

    _check_missing(missing)
    lm_words = arpa_vocab(arpa)  # the file is checked in full when its graph is built
    lex = lexicon.subset(lm_words)
    if len(lex) == 0:
        raise DataError(f"{arpa}: none of the LM's {len(lm_words)} words is in the lexicon")
    lang = make_lang(lex, phones if phones is not None else lexicon.phones)
    key = graph_key(name, lang, arpa, recipe, missing)
    cache_dir = Path(cache_dir)
    fst_path, meta_path = cache_dir / f"{key}.fst", cache_dir / f"{key}.json"
    with file_lock(cache_dir / f"{key}.lock"):
        if fst_path.exists() and meta_path.exists():
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            fst = kaldifst.StdVectorFst.read(str(fst_path))
            return DecodingGraph(fst, meta["num_tokens"], lang, meta["topology"],
                                 meta["recipe"], meta["info"], source=fst_path)
        graph = decoding_graph(name, lang, grammar_fst(arpa, lang, missing), recipe)
        with atomic_path(fst_path) as tmp:
            graph.fst.write(str(tmp))
        atomic_write_json(meta_path, {"num_tokens": graph.num_tokens, "topology": graph.topology,
                                      "recipe": graph.recipe, "info": graph.info,
                                      "arpa": str(arpa), "words": lang.num_words})
        return replace(graph, source=fst_path)
