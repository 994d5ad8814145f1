"""Word n-gram language models: interpolated Kneser-Ney estimation, ARPA writing and reading.

The grammar ``G`` of the decoding graph (eq. 7 of the CTC-topologies paper) comes from an ARPA
file; :mod:`speechlab.asr.ctc.graphs` turns it into an FST. This module makes the ARPA file from
sentences and reads ARPA files back with validation (any ARPA, ours or a downloaded one).

Estimation (Chen & Goodman's interpolated Kneser-Ney, the scheme of SRILM ``-interpolate
-kndiscount`` and KenLM), for an order-N model over sentences padded as ``<s> w1 .. wn </s>``:

- counts ``a(g)``: raw counts for N-grams and for n-grams starting with ``<s>`` (nothing can
  precede ``<s>``); for every other lower-order n-gram the *continuation* count, the number of
  distinct words seen immediately before it;
- discounts per order n from the counts-of-counts ``t_k`` (n-grams of order n with ``a = k``):
  modified KN, ``Y = t1/(t1+2 t2)``, ``D1 = 1-2Y t2/t1``, ``D2 = 2-3Y t3/t2``, ``D3+ = 3-4Y t4/t3``;
  plain KN, one ``D = Y``. When the counts-of-counts cannot give valid discounts (tiny corpora:
  a ``t_k`` is 0, or a ``D_k`` falls outside ``(0, k)``) that order falls back to plain KN, or to
  ``D = 0.5`` when even ``Y`` is undefined, with a warning;
- ``p(w|h) = max(a(hw) - D(a(hw)), 0) / S(h) + gamma(h) p(w|h')`` with ``S(h) = sum_w a(hw)``,
  ``gamma(h) = sum_k D_k N_k(h) / S(h)`` (``N_k(h)``: words with ``a(hw) = k``, 3 meaning 3+) and
  ``h'`` the history without its first word. Unigrams interpolate with the uniform distribution
  over the vocabulary (every word seen plus ``</s>``; ``<s>`` is never predicted). So for every
  history, the probabilities of all vocabulary words sum to 1.

The ARPA file lists, per order, every n-gram seen with ``log10 p(w|h)`` and, for n-grams that are
histories of longer ones, ``log10 gamma``: ARPA back-off then reproduces the interpolated model
exactly (``p(w|h) = gamma(h) p(w|h')`` for an unseen ``hw``). No ``<unk>``: a decoder can only
output words it has pronunciations for, so unknown words get no probability mass.

The LM must never see the sentences it will be evaluated on: :func:`lm_training_sentences`
drops every dev/test sentence (compared case- and punctuation-blind, like the corpus splits).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from speechlab.errors import ConfigError, DataError, where
from speechlab.files import atomic_write_text
from speechlab.text.normalize import sentence_key

log = logging.getLogger(__name__)

BOS, EOS = "<s>", "</s>"
LOG10_ZERO = -99.0  # the ARPA convention for "probability 0" (used for <s>)

Ngram = tuple[str, ...]


# Longer n-grams than this only add memory: every n-gram of the text is stored, and speech
# LMs stop at 3-5.
MAX_ORDER = 10
MAX_ORDER_WHY = "speech LMs use 3-5; each order stores every n-gram of the text"


@dataclass(frozen=True)
class NgramConfig:
    """How to estimate an n-gram LM.

    Args:
        order: N, the longest n-gram (3 for the Librispeech-style trigram, 4 for WSJ's).
        modified: three discounts per order (modified KN) instead of one (plain KN).
        discount: a fixed plain-KN discount for every order, in (0, 1]; ``None`` estimates
            discounts from the counts-of-counts.
    """

    order: int = 3
    modified: bool = True
    discount: float | None = None

    def __post_init__(self) -> None:
        if self.order < 1:
            raise ConfigError(f"n-gram order must be >= 1, got {self.order}")
        if self.order > MAX_ORDER:
            raise ConfigError(f"n-gram order must be <= {MAX_ORDER} ({MAX_ORDER_WHY}), got "
                              f"{self.order}")
        if self.discount is not None and not 0 < self.discount <= 1:
            raise ConfigError(f"a fixed Kneser-Ney discount must be in (0, 1], got {self.discount}")


@dataclass
class ArpaLM:
    """A back-off n-gram LM as an ARPA file holds it.

    ``ngrams[n - 1]`` maps each listed n-gram to ``(log10 p, log10 backoff or None)``.
    """

    ngrams: list[dict[Ngram, tuple[float, float | None]]] = field(default_factory=list)

    @property
    def order(self) -> int:
        return len(self.ngrams)

    @property
    def vocab(self) -> list[str]:
        """Every unigram, ``<s>`` and ``</s>`` included, in file order."""
        return [g[0] for g in self.ngrams[0]] if self.ngrams else []

    def logprob(self, word: str, history: Sequence[str] = ()) -> float:
        """``log10 p(word | history)`` by ARPA back-off; only the last ``order - 1`` words of
        ``history`` matter. A word that is not a unigram gets ``-inf``."""
        h = tuple(history)[max(0, len(history) - self.order + 1):]
        penalty = 0.0
        while True:
            entry = self.ngrams[len(h)].get(h + (word,))
            if entry is not None:
                return penalty + entry[0]
            if not h:
                return -math.inf
            ctx = self.ngrams[len(h) - 1].get(h)
            if ctx is not None and ctx[1] is not None:
                penalty += ctx[1]
            h = h[1:]

    def score(self, history: Sequence[str], word: str) -> float:
        """``log10 p(word | <s> history)``: the word-LM interface of the CTC prefix search
        (:class:`speechlab.search.prefix.WordLM`, with ``lm_log10=True``); ``word``
        ``</s>`` asks for the end of the sentence."""
        return self.logprob(word, ("<s>",) + tuple(history))

    def to_text(self) -> str:
        lines = ["", "\\data\\"]
        lines += [f"ngram {n}={len(g)}" for n, g in enumerate(self.ngrams, 1)]
        for n, grams in enumerate(self.ngrams, 1):
            lines += ["", f"\\{n}-grams:"]
            for gram, (lp, bow) in grams.items():
                text = f"{lp:.7f}\t{' '.join(gram)}"
                lines.append(text if bow is None else f"{text}\t{bow:.7f}")
        lines += ["", "\\end\\", ""]
        return "\n".join(lines)

    def write(self, path: str | Path) -> None:
        """Write the ARPA file (atomically)."""
        atomic_write_text(path, self.to_text())


# --------------------------------------------------------------------------------------------
# Estimation


def lm_training_sentences(sentences: Iterable[str], held_out: Iterable[str],
                          normalize=None) -> list[list[str]]:
    """Word lists for LM training: ``sentences`` minus every one of ``held_out`` (the dev and
    test transcripts), compared case- and punctuation-blind
    (:func:`speechlab.text.normalize.sentence_key`).

    Args:
        normalize: ``str -> str`` applied before splitting into words (e.g.
            ``lambda s: normalize_text(s, "en")``); ``None`` splits the text as it is.
    """
    banned = {sentence_key(s) for s in held_out}
    out = []
    for s in sentences:
        if sentence_key(s) in banned:
            continue
        words = (normalize(s) if normalize else s).split()
        if words:
            out.append(words)
    return out


def lm_vocabulary(sentences: Iterable[str], size: int) -> set[str]:
    """The ``size`` most frequent words of the text (ties broken by first occurrence)."""
    from collections import Counter

    counts = Counter(w for s in sentences for w in s.split())
    return {w for w, _ in counts.most_common(size)}


def write_lm(sentences: Sequence[str], path: str | Path, *, order: int, vocab_size: int) -> None:
    """An ARPA file at ``path``: Kneser-Ney of ``order`` over the sentences (words separated by
    spaces) whose every word is among the ``vocab_size`` most frequent, since a decoder can
    only output the LM's words and a sentence with an unknown word would teach it nothing."""
    path = Path(path)
    vocab = lm_vocabulary(sentences, vocab_size)
    kept = [words for words in (s.split() for s in sentences if s.strip())
            if all(w in vocab for w in words)]
    if not kept:
        raise DataError(f"no LM text left for {path.stem} after restricting it to "
                        f"{vocab_size} words")
    estimate(kept, NgramConfig(order=order)).write(path)
    log.info("%s: %d-gram LM over %d sentences, %d words", path, order, len(kept),
             len({w for words in kept for w in words}))


def _count(sentences: Iterable[Sequence[str]], order: int) -> list[dict[Ngram, int]]:
    """Kneser-Ney counts ``a(g)`` per order (see the module doc)."""
    raw: list[dict[Ngram, int]] = [defaultdict(int) for _ in range(order)]
    for i, words in enumerate(sentences):
        for w in words:
            if w in (BOS, EOS) or not w or any(c.isspace() for c in w):
                raise DataError(f"LM sentence {i}: word {w!r} is empty, has whitespace or is "
                                f"reserved ({BOS}, {EOS})")
        padded = (BOS, *words, EOS)
        for n in range(1, order + 1):
            for j in range(len(padded) - n + 1):
                raw[n - 1][padded[j:j + n]] += 1
    raw[0].pop((BOS,), None)  # <s> is a context only
    counts: list[dict[Ngram, int]] = [dict() for _ in range(order)]
    counts[order - 1] = dict(raw[order - 1])
    for n in range(order - 1, 0, -1):
        cont: dict[Ngram, int] = defaultdict(int)
        for gram in raw[n]:  # (n+1)-grams: each gives one left extension of gram[1:]
            cont[gram[1:]] += 1
        counts[n - 1] = {g: (c if g[0] == BOS else cont[g]) for g, c in raw[n - 1].items()}
    return counts


def discounts(counts_of_counts: Sequence[int], modified: bool = True) -> tuple[float, float, float]:
    """Kneser-Ney discounts ``(D1, D2, D3+)`` from ``t1..t4`` (n-grams seen 1..4 times).

    Modified KN (Chen & Goodman eq. 26) when ``modified`` and the result is valid (every
    ``t_k > 0`` and ``0 < D_k < k``); otherwise plain KN ``D = t1 / (t1 + 2 t2)`` for all three,
    or 0.5 when ``t1`` or ``t2`` is 0.
    """
    t1, t2, t3, t4 = (list(counts_of_counts) + [0, 0, 0, 0])[:4]
    if t1 == 0 or t2 == 0:
        return (0.5, 0.5, 0.5)
    y = t1 / (t1 + 2 * t2)
    if modified and t3 > 0 and t4 > 0:
        d = (1 - 2 * y * t2 / t1, 2 - 3 * y * t3 / t2, 3 - 4 * y * t4 / t3)
        if all(0 < dk < k for k, dk in enumerate(d, 1)):
            return d
    return (y, y, y)


def estimate(sentences: Iterable[Sequence[str]], config: NgramConfig = NgramConfig()) -> ArpaLM:
    """An interpolated Kneser-Ney LM from word lists (one per sentence, no ``<s>``/``</s>``).

    Raises:
        DataError: no sentences, or a word that is empty, has whitespace or is ``<s>``/``</s>``.
    """
    order = config.order
    counts = _count(sentences, order)
    if not counts[0]:
        raise DataError("no LM training sentences")
    disc: list[tuple[float, float, float]] = []
    for n, grams in enumerate(counts, 1):
        if config.discount is not None:
            disc.append((config.discount,) * 3)
            continue
        coc = [0, 0, 0, 0]
        for c in grams.values():
            if c <= 4:
                coc[c - 1] += 1
        d = discounts(coc, config.modified)
        if config.modified and d[0] == d[1] == d[2]:
            log.warning("%d-grams: counts-of-counts %s give no valid modified Kneser-Ney "
                        "discounts; using plain D=%.3f", n, coc, d[0])
        disc.append(d)

    # Per history: S(h), and the back-off weight gamma(h).
    gamma: list[dict[Ngram, float]] = []
    total: list[dict[Ngram, float]] = []
    for n, grams in enumerate(counts, 1):
        s: dict[Ngram, float] = defaultdict(float)
        freed: dict[Ngram, float] = defaultdict(float)
        d = disc[n - 1]
        for g, c in grams.items():
            s[g[:-1]] += c
            freed[g[:-1]] += d[min(c, 3) - 1]
        total.append(dict(s))
        gamma.append({h: freed[h] / s[h] for h in s})

    vocab_size = len(counts[0])  # every seen word and </s>; <s> was removed
    probs: list[dict[Ngram, float]] = []
    for n, grams in enumerate(counts, 1):
        d = disc[n - 1]
        p: dict[Ngram, float] = {}
        for g, c in grams.items():
            h = g[:-1]
            lower = 1.0 / vocab_size if n == 1 else probs[n - 2][g[1:]]
            p[g] = max(c - d[min(c, 3) - 1], 0.0) / total[n - 1][h] + gamma[n - 1][h] * lower
        probs.append(p)

    lm = ArpaLM()
    for n in range(1, order + 1):
        out: dict[Ngram, tuple[float, float | None]] = {}
        if n == 1:
            out[(BOS,)] = (LOG10_ZERO, None)
        for g in sorted(probs[n - 1]):
            out[g] = (_log10(probs[n - 1][g]), None)
        if n < order:  # back-off weights of the n-grams that are histories of (n+1)-grams
            for h, gam in gamma[n].items():
                lp, _ = out[h]
                out[h] = (lp, _log10(gam))
        lm.ngrams.append(out)
    return lm


def _log10(x: float) -> float:
    return math.log10(x) if x > 0 else LOG10_ZERO


def interpolate(a: ArpaLM, b: ArpaLM, weight: float) -> ArpaLM:
    """The mixture ``weight * a + (1 - weight) * b`` as one back-off LM (static interpolation,
    as SRILM's ``-mix-lm`` writes it). Every n-gram either LM lists gets the mixed probability
    of its word after its history, each LM's by its own back-off (0 from an LM that lacks the
    word); each history's back-off weight then makes its distribution sum to one again over
    the mixed lower order. The vocabulary is the union; ``<s>`` keeps its never-predicted
    ``-99``."""
    if not 0 < weight < 1:
        raise ConfigError(f"interpolation weight must be in (0, 1), got {weight}")
    order = max(a.order, b.order)

    def prob(lm: ArpaLM, word: str, history: Ngram) -> float:
        lp = lm.logprob(word, history)
        return 0.0 if lp == -math.inf else 10.0 ** lp

    mixed = ArpaLM([{} for _ in range(order)])
    for n in range(1, order + 1):
        grams = sorted({g for lm in (a, b) if n <= lm.order for g in lm.ngrams[n - 1]})
        for g in grams:
            h, w = g[:-1], g[-1]
            p = 0.0 if w == BOS else weight * prob(a, w, h) + (1 - weight) * prob(b, w, h)
            mixed.ngrams[n - 1][g] = (_log10(p), None)
    followers: dict[Ngram, list[str]] = defaultdict(list)
    for n in range(2, order + 1):
        for g in mixed.ngrams[n - 1]:
            followers[g[:-1]].append(g[-1])
    # Back-off weights order by order: a history's lower-order distribution is the mixed
    # model's own, whose back-off weights of lower orders are set by then.
    for n in range(1, order):
        for h, (lp, _) in list(mixed.ngrams[n - 1].items()):
            ws = followers.get(h)
            if not ws:
                continue
            here = sum(10.0 ** mixed.ngrams[n][h + (w,)][0] for w in ws)
            lower = sum(10.0 ** mixed.logprob(w, h[1:]) for w in ws)
            left, lower_left = max(1.0 - here, 1e-12), max(1.0 - lower, 1e-12)
            mixed.ngrams[n - 1][h] = (lp, math.log10(left / lower_left))
    return mixed


# --------------------------------------------------------------------------------------------
# Reading


GZIP_MAGIC = b"\x1f\x8b"


def arpa_bytes(path: str | Path) -> bytes:
    """The ARPA text of ``path``, a plain file or a gzip-compressed one (told by its first
    bytes, whatever its name)."""
    import gzip
    import zlib

    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"ARPA file {path} does not exist") from None
    if raw[:2] != GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: a gzip-compressed ARPA file that does not decompress "
                        f"({e})") from None


@contextlib.contextmanager
def plain_arpa(path: str | Path) -> Iterator[Path]:
    """A path to the plain ARPA text of ``path``: itself, or for a gzip-compressed file a
    temporary uncompressed copy (for tools that read plain ARPA only, e.g. kaldilm)."""
    import tempfile

    path = Path(path)
    with open(path, "rb") as f:
        compressed = f.read(2) == GZIP_MAGIC
    if not compressed:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="speechlab-arpa-") as tmp:
        text = Path(tmp) / "lm.arpa"
        text.write_bytes(arpa_bytes(path))
        yield text


def read_arpa(path: str | Path, *, unigrams_only: bool = False) -> ArpaLM:
    """Parse and validate an ARPA file.

    Checks: the ``\\data\\`` header and its ``ngram n=count`` lines (orders 1..N in sequence),
    sections ``\\n-grams:`` in order, each entry ``log10p w1 .. wn [log10backoff]`` with finite
    numbers, ``log10p <= 0`` and no back-off on the highest order, no duplicate n-gram, every
    word of a longer n-gram listed as a unigram, each section's entry count equal to its
    declared count, and a final ``\\end\\``. ``unigrams_only``: stop after the unigram
    section (the LM holds only it; the rest of the file is not read or checked).

    Raises:
        DataError: naming ``file:line`` and what is wrong.
    """
    path = Path(path)
    raw = arpa_bytes(path)
    if unigrams_only:  # the unigram section ends where the bigram one starts
        one = raw.find(b"\\1-grams:")
        cut = raw.find(b"\n\\2-grams:", one) if one >= 0 else -1
        raw = raw if cut < 0 else raw[:cut + 1] + b"\\end\\\n"
    lines = raw.split(b"\n")

    def fail(lineno: int, msg: str) -> DataError:
        return DataError(f"{where(path, lineno)}: {msg}")

    declared: list[int] = []
    lm = ArpaLM()
    state = "start"  # start -> data -> grams -> end
    section_line = 0
    n = 0
    for lineno, line in enumerate(lines, 1):
        try:
            text = line.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise fail(lineno, "line is not UTF-8 text") from None
        if "\0" in text:
            raise fail(lineno, "line holds a NUL byte (binary data, not ARPA text)")
        if state == "start":
            if not text:
                continue
            if text != "\\data\\":
                raise fail(lineno, f"expected the ARPA header '\\data\\', found {text[:40]!r}")
            state = "data"
            continue
        if state == "end":
            if text:
                raise fail(lineno, f"text after '\\end\\': {text[:40]!r}")
            continue
        if not text:
            continue
        if text.startswith("\\"):
            if n:
                _check_count(lm, declared, n, section_line, fail)
            if text == "\\end\\":
                if not declared:
                    raise fail(lineno, "'\\end\\' before any n-gram section")
                if n != len(declared) and not (unigrams_only and n == 1):
                    raise fail(lineno, f"'\\end\\' after the {n}-grams, but \\data\\ declares "
                                       f"orders up to {len(declared)}")
                state = "end"
                continue
            expected = f"\\{n + 1}-grams:"
            if text != expected:
                raise fail(lineno, f"expected section '{expected}', found '{text[:40]}'")
            if n + 1 > len(declared):
                raise fail(lineno, f"section {text} is not declared in \\data\\")
            n += 1
            section_line = lineno
            lm.ngrams.append({})
            state = "grams"
            continue
        if state == "data":
            key, eq, value = text.partition("=")
            fields = key.split()
            if not eq or len(fields) != 2 or fields[0] != "ngram":
                raise fail(lineno, f"expected 'ngram N=COUNT' in \\data\\, found {text[:40]!r}")
            try:
                order, count = int(fields[1]), int(value)
            except ValueError:
                raise fail(lineno, f"bad number in {text[:40]!r}") from None
            if order != len(declared) + 1:
                raise fail(lineno, f"expected 'ngram {len(declared) + 1}=...', found order {order}")
            if count < 0:
                raise fail(lineno, f"negative n-gram count {count}")
            declared.append(count)
            continue
        _parse_entry(text, n, len(declared), lm, lineno, fail)
    if state != "end":
        last = len(lines) - 1 if lines[-1] == b"" else len(lines)
        raise DataError(f"{where(path, last)}: missing '\\end\\' (file truncated?)")
    # An LM of sentences starts them with <s> and ends them with </s>; without them a decoding
    # graph has no start or no final state (Kaldi's arpa2fst aborts the process on a missing
    # <s>), so they are required here rather than found missing inside native code.
    for marker, role in ((BOS, "beginning"), (EOS, "end")):
        if not lm.ngrams or (marker,) not in lm.ngrams[0]:
            raise DataError(f"{path}: no {marker} unigram (the {role}-of-sentence word); an LM "
                            "of sentences needs <s> and </s>: estimate it with sentence markers "
                            "(speechlab ctc lm, or SRILM/KenLM defaults)")
    return lm


def arpa_vocab(path: str | Path) -> list[str]:
    """The words of an ARPA LM (its unigrams, ``<s>`` and ``</s>`` left out), in file order:
    the header and the unigram section are read and checked as :func:`read_arpa` checks them,
    the longer n-grams (most of a large LM's file) are not."""
    return [w for w in read_arpa(path, unigrams_only=True).vocab if w not in (BOS, EOS)]


def _check_count(lm: ArpaLM, declared: list[int], n: int, line: int, fail) -> None:
    if len(lm.ngrams[n - 1]) != declared[n - 1]:
        raise fail(line, f"\\data\\ declares {declared[n - 1]} {n}-grams but the section has "
                         f"{len(lm.ngrams[n - 1])}")


def _parse_entry(text: str, n: int, order: int, lm: ArpaLM, lineno: int, fail) -> None:
    fields = text.split()
    if len(fields) not in (n + 1, n + 2) or (n == order and len(fields) == n + 2):
        expect = "log10p + {n} words" + ("" if n == order else " [+ back-off]")
        raise fail(lineno, f"{n}-gram entry has {len(fields)} fields, expected "
                           f"{expect.format(n=n)}: {text[:60]!r}")
    lp = _number(fields[0], "log10 probability", lineno, fail)
    if lp > 0:
        raise fail(lineno, f"log10 probability {fields[0]} > 0")
    bow = _number(fields[-1], "log10 back-off", lineno, fail) if len(fields) == n + 2 else None
    gram = tuple(fields[1:n + 1])
    for i, w in enumerate(gram):
        if (w == BOS and i > 0) or (w == EOS and i < n - 1):
            # Kaldi's arpa2fst drops such an n-gram with a warning nobody sees.
            raise fail(lineno, f"{w} inside {n}-gram {' '.join(gram)!r}: <s> may only start an "
                               "n-gram and </s> only end one")
    grams = lm.ngrams[n - 1]
    if gram in grams:
        raise fail(lineno, f"duplicate {n}-gram {' '.join(gram)!r}")
    if n > 1:
        unigrams = lm.ngrams[0]
        for w in gram:
            if (w,) not in unigrams:
                raise fail(lineno, f"word {w!r} of {n}-gram {' '.join(gram)!r} is not a unigram")
    grams[gram] = (lp, bow)


def _number(token: str, what: str, lineno: int, fail) -> float:
    try:
        x = float(token)
    except ValueError:
        raise fail(lineno, f"{what} {token!r} is not a number") from None
    if not math.isfinite(x):
        raise fail(lineno, f"{what} {token!r} is not finite")
    return x
