"""Word and character error rates, pooled the way the papers report them.

Every ASR number in speechlab comes from here: :func:`wer` / :func:`cer` align each
reference/hypothesis pair with ``kaldialign`` (Levenshtein edit distance with S/D/I counts) and
return an :class:`ErrorRate` that keeps both the pooled counts and one
:class:`UtteranceErrors` per utterance (the bootstrap in :mod:`speechlab.metrics.stats` resamples
those). ``ErrorRate`` objects add with ``+``, which pools counts, so per-language results combine
into the "word weighted WER" the multi-softmax paper averages with (Table 2 caption), see
:func:`word_weighted_average`. :func:`werr` is that paper's relative WER reduction.

Conventions (chosen once here so every table agrees):

* Both sides are put in Unicode normal form NFC before anything is counted (``normalization``,
  default ``"NFC"``; ``None`` scores the code points as given). One written text has several
  code-point spellings: Latin "é" precomposed or as "e" + U+0301; Devanagari "क़" as U+0958 or
  "क" + nukta U+093C; Tamil "கொ" with the two-part vowel sign U+0BCA or U+0BC6 + U+0BBE.
  Without normalisation a reference typed one way and a hypothesis decoded the other would
  score as all wrong. NFC (not NFKC) keeps compatibility characters such as ligatures and
  full-width forms distinct, as a transcriber wrote them.
* Words are whitespace-separated tokens; no case folding or punctuation removal is done here
  (normalise text before scoring).
* Characters are Unicode code points (after NFC). By default whitespace is dropped
  before counting characters (``spaces=False``), so the CER measures the symbols only; with
  ``spaces=True`` each run of whitespace between words counts as one ``" "`` symbol and word
  boundary errors are scored too (this matches ``jiwer.cer``).
* An empty reference is allowed: its hypothesis words all count as insertions. The *rate* of a
  result whose references hold no words at all is undefined: reading ``ErrorRate.wer`` then
  raises :class:`~speechlab.errors.DataError` instead of returning ``inf``, because an infinite
  or zero rate would silently poison every average built on top of it. The counts stay readable.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kaldialign

from speechlab.errors import DataError

UNITS = ("word", "char")
# Unicode normal forms scoring may apply (None: none).
NORMALIZATIONS = ("NFC", "NFKC", "NFD", "NFKD")


@dataclass(frozen=True)
class UtteranceErrors:
    """Edit counts of one reference/hypothesis pair (lengths in words or characters)."""

    utt_id: str | None
    ref_len: int
    hyp_len: int
    substitutions: int
    deletions: int
    insertions: int

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions


@dataclass(frozen=True)
class ErrorRate:
    """Pooled edit counts over a set of utterances; ``wer`` is errors / reference length.

    For a character error rate (``unit == "char"``) the ``*_words`` fields count characters;
    the field names stay the same so that one object serves both rates.
    ``per_utterance`` is empty when the object was built from counts alone.
    """

    substitutions: int
    deletions: int
    insertions: int
    ref_words: int
    hyp_words: int
    sentences: int
    sentence_errors: int
    unit: str = "word"
    per_utterance: tuple[UtteranceErrors, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        counts = (self.substitutions, self.deletions, self.insertions, self.ref_words,
                  self.hyp_words, self.sentences, self.sentence_errors)
        if any(not isinstance(c, int) or c < 0 for c in counts):
            raise ValueError(f"ErrorRate counts must be non-negative integers, got {counts}")
        if self.unit not in UNITS:
            raise ValueError(f"ErrorRate unit must be one of {UNITS}, got {self.unit!r}")
        # Every alignment consumes each reference token once (match, substitution or deletion)
        # and each hypothesis token once (match, substitution or insertion); counts that break
        # this identity cannot come from an alignment.
        if self.hyp_words != self.ref_words - self.deletions + self.insertions:
            raise ValueError(
                f"inconsistent ErrorRate counts: hyp_words={self.hyp_words} but ref_words - "
                f"deletions + insertions = {self.ref_words - self.deletions + self.insertions}"
            )
        if self.substitutions + self.deletions > self.ref_words:
            raise ValueError("inconsistent ErrorRate counts: more substitutions + deletions than "
                             "reference tokens")
        if self.sentence_errors > self.sentences:
            raise ValueError("inconsistent ErrorRate counts: sentence_errors > sentences")

    @classmethod
    def of(cls, per_utterance: Sequence[UtteranceErrors], unit: str = "word") -> ErrorRate:
        """The pooled counts of ``per_utterance``, keeping the entries."""
        per_utt = tuple(per_utterance)
        return cls(
            substitutions=sum(u.substitutions for u in per_utt),
            deletions=sum(u.deletions for u in per_utt),
            insertions=sum(u.insertions for u in per_utt),
            ref_words=sum(u.ref_len for u in per_utt),
            hyp_words=sum(u.hyp_len for u in per_utt),
            sentences=len(per_utt),
            sentence_errors=sum(1 for u in per_utt if u.errors > 0),
            unit=unit,
            per_utterance=per_utt,
        )

    @classmethod
    def empty(cls, unit: str = "word") -> ErrorRate:
        """The neutral element of ``+`` (no utterances)."""
        return cls(0, 0, 0, 0, 0, 0, 0, unit=unit)

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def wer(self) -> float:
        """Errors / reference tokens, as a fraction (multiply by 100 for the papers' WER[%])."""
        if self.ref_words == 0:
            raise DataError(
                f"the {self.unit} error rate is undefined: the references of these "
                f"{self.sentences} utterance(s) hold no {self.unit}s (all references are empty); "
                "check that the reference transcripts were read correctly"
            )
        return self.errors / self.ref_words

    @property
    def percent(self) -> float:
        return 100.0 * self.wer

    @property
    def sentence_error_rate(self) -> float:
        if self.sentences == 0:
            raise DataError("the sentence error rate is undefined: no utterances were scored")
        return self.sentence_errors / self.sentences

    def __add__(self, other: ErrorRate) -> ErrorRate:
        if not isinstance(other, ErrorRate):
            return NotImplemented
        if other.unit != self.unit:
            raise ValueError(f"cannot pool a {self.unit} error rate with a {other.unit} error rate")
        return ErrorRate(
            substitutions=self.substitutions + other.substitutions,
            deletions=self.deletions + other.deletions,
            insertions=self.insertions + other.insertions,
            ref_words=self.ref_words + other.ref_words,
            hyp_words=self.hyp_words + other.hyp_words,
            sentences=self.sentences + other.sentences,
            sentence_errors=self.sentence_errors + other.sentence_errors,
            unit=self.unit,
            per_utterance=self.per_utterance + other.per_utterance,
        )

    def __radd__(self, other: Any) -> ErrorRate:
        # Lets ``sum(results)`` work: sum() starts from the integer 0.
        if isinstance(other, int) and other == 0:
            return self
        return NotImplemented

    def __str__(self) -> str:
        name = "WER" if self.unit == "word" else "CER"
        rate = f"{self.percent:.2f}" if self.ref_words else "undefined"
        return (f"%{name} {rate} [ {self.errors} / {self.ref_words}, {self.insertions} ins, "
                f"{self.deletions} del, {self.substitutions} sub ]")

    def to_dict(self, per_utterance: bool = False) -> dict[str, Any]:
        """JSON-ready summary; ``wer`` is ``None`` where the rate is undefined (no ref tokens)."""
        out: dict[str, Any] = {
            "unit": self.unit,
            "wer": self.wer if self.ref_words else None,
            "errors": self.errors,
            "substitutions": self.substitutions,
            "deletions": self.deletions,
            "insertions": self.insertions,
            "ref_words": self.ref_words,
            "hyp_words": self.hyp_words,
            "sentences": self.sentences,
            "sentence_errors": self.sentence_errors,
        }
        if per_utterance:
            out["per_utterance"] = [
                {"utt_id": u.utt_id, "ref_len": u.ref_len, "hyp_len": u.hyp_len,
                 "substitutions": u.substitutions, "deletions": u.deletions,
                 "insertions": u.insertions}
                for u in self.per_utterance
            ]
        return out


def _words(text: str) -> list[str]:
    return text.split()


def _chars_without_spaces(text: str) -> list[str]:
    return [c for c in text if not c.isspace()]


def _chars_with_spaces(text: str) -> list[str]:
    return list(" ".join(text.split()))


def _normalizer(normalization: str | None) -> Callable[[str], str]:
    if normalization is None or normalization == "none":
        return lambda s: s
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization must be one of {NORMALIZATIONS} or None, got "
                         f"{normalization!r}")
    return lambda s: unicodedata.normalize(normalization, s)


def _check_inputs(refs: Sequence[str], hyps: Sequence[str], ids: Sequence[str] | None) -> None:
    # A bare string is a sequence of characters: scoring it would silently give a character
    # rate over one "utterance" per character, so refuse it.
    for name, seq in (("refs", refs), ("hyps", hyps)):
        if isinstance(seq, str):
            raise TypeError(f"{name} must be a list of transcripts, not a single string")
    if len(refs) != len(hyps):
        raise DataError(f"{len(refs)} references but {len(hyps)} hypotheses: score the same "
                        "utterances on both sides")
    if ids is not None and len(ids) != len(refs):
        raise DataError(f"{len(ids)} utterance ids for {len(refs)} references")


def _score(refs: Sequence[str], hyps: Sequence[str], ids: Sequence[str] | None,
           tokenize: Callable[[str], list[str]], unit: str,
           normalization: str | None) -> ErrorRate:
    _check_inputs(refs, hyps, ids)
    norm = _normalizer(normalization)
    per_utt = []
    for i, (ref, hyp) in enumerate(zip(refs, hyps)):
        utt = ids[i] if ids is not None else None
        if not isinstance(ref, str) or not isinstance(hyp, str):
            label = utt if utt is not None else f"#{i}"
            raise DataError(f"utterance {label}: reference and hypothesis must be strings, got "
                            f"{type(ref).__name__} and {type(hyp).__name__}")
        r, h = tokenize(norm(ref)), tokenize(norm(hyp))
        d = kaldialign.edit_distance(r, h)
        per_utt.append(UtteranceErrors(utt, len(r), len(h), d["sub"], d["del"], d["ins"]))
    return ErrorRate.of(per_utt, unit)


def wer(refs: Sequence[str], hyps: Sequence[str], ids: Sequence[str] | None = None, *,
        normalization: str | None = "NFC") -> ErrorRate:
    """Word error rate of ``hyps`` against ``refs`` (parallel lists, words split on whitespace).

    ``ids`` (optional, same length) label the per-utterance entries; ``normalization`` is the
    Unicode normal form both sides are put in first (module doc; None: none).
    """
    return _score(refs, hyps, ids, _words, "word", normalization)


def cer(refs: Sequence[str], hyps: Sequence[str], ids: Sequence[str] | None = None, *,
        spaces: bool = False, normalization: str | None = "NFC") -> ErrorRate:
    """Character (code point) error rate; whitespace is dropped unless ``spaces`` (module doc)."""
    tokenize = _chars_with_spaces if spaces else _chars_without_spaces
    return _score(refs, hyps, ids, tokenize, "char", normalization)


def align_words(ref: str, hyp: str, *,
                normalization: str | None = "NFC") -> list[tuple[str | None, str | None]]:
    """One minimum-edit alignment of two transcripts as ``(ref_word, hyp_word)`` pairs.

    ``None`` marks the empty side of an insertion (ref) or deletion (hyp). Words are mapped to
    integers first so that no word can collide with the epsilon symbol.
    """
    norm = _normalizer(normalization)
    r, h = norm(ref).split(), norm(hyp).split()
    vocab: dict[str, int] = {}
    ri = [vocab.setdefault(w, len(vocab)) for w in r]
    hi = [vocab.setdefault(w, len(vocab)) for w in h]
    words = {i: w for w, i in vocab.items()}
    eps = -1
    return [(words.get(a) if a != eps else None, words.get(b) if b != eps else None)
            for a, b in kaldialign.align(ri, hi, eps)]


def pool_runs(results: Sequence[ErrorRate]) -> ErrorRate:
    """One system's results on the same utterances from several runs (seeds) as one result
    whose per-utterance entries sum the runs' counts on that utterance.

    ``+`` pools *different* utterances (a test set's parts); this pools *repeats* of the same
    ones, so a paired bootstrap of two pooled systems (:func:`~speechlab.metrics.stats.
    paired_bootstrap`, :func:`~speechlab.metrics.stats.werr_interval`) still resamples
    utterances, each carrying every run's errors on it: the interval of a difference between
    systems averaged over the runs. The pooled rate is the runs' word-weighted mean.
    """
    if not results:
        raise DataError("pool_runs needs at least one result")
    first = results[0]
    ids = [u.utt_id for u in first.per_utterance]
    for k, r in enumerate(results):
        if r.unit != first.unit:
            raise DataError(f"run {k} is a {r.unit} error rate, run 0 a {first.unit} one")
        got = [u.utt_id for u in r.per_utterance]
        if not got or got != ids or None in got:
            raise DataError(f"run {k} does not list the same named utterances as run 0 "
                            f"(pooling runs needs each result's per-utterance entries, with ids, "
                            f"in one order)")
        for u, v in zip(first.per_utterance, r.per_utterance):
            if u.ref_len != v.ref_len:
                raise DataError(f"utterance {u.utt_id}: {u.ref_len} reference {first.unit}s in "
                                f"run 0 but {v.ref_len} in run {k}; the runs need the same "
                                "references")
    per_utt = tuple(UtteranceErrors(
        utt_id=entries[0].utt_id,
        ref_len=sum(e.ref_len for e in entries),
        hyp_len=sum(e.hyp_len for e in entries),
        substitutions=sum(e.substitutions for e in entries),
        deletions=sum(e.deletions for e in entries),
        insertions=sum(e.insertions for e in entries),
    ) for entries in zip(*(r.per_utterance for r in results)))
    return ErrorRate.of(per_utt, first.unit)


def word_weighted_average(results: Mapping[str, ErrorRate]) -> float:
    """Average WER over test sets weighted by their reference words, as a fraction.

    This is the "average WER obtained using word weighted WER" of the multi-softmax paper
    (Table 2 caption): total errors / total reference words, i.e. the WER of the pooled sets,
    not the mean of the per-set rates.
    """
    if not results:
        raise DataError("word_weighted_average needs at least one result")
    return sum(results.values(), ErrorRate.empty(next(iter(results.values())).unit)).wer


def werr(baseline_wer: float, system_wer: float) -> float:
    """Relative WER reduction in percent, ``100 * (baseline - system) / baseline``.

    The WERR column of the multi-softmax paper (Tables 2-4): positive means the system is
    better than the baseline. Both rates must be in the same unit (fractions or percents).
    """
    if not math.isfinite(baseline_wer) or baseline_wer <= 0:
        raise DataError(f"WERR needs a positive finite baseline WER, got {baseline_wer!r}")
    return 100.0 * (baseline_wer - system_wer) / baseline_wer
