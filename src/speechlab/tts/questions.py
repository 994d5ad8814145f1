"""HTS question sets: what each dimension of the linguistic input asks of a full-context label.

A question file has one question per line (``#`` comments and blank lines are skipped):

- ``QS "C-Vowel" {*-aa+*,*-ae+*}``: a binary feature, 1 if any HTK pattern matches the label;
- ``CQS "Pos_Syl_Fw" {@(\\d+)_}``: a numeric feature, the number the group captures.

:func:`english_questions` writes this project's question set for festival's (and CMU ARCTIC's)
English labels, ``pp^p-c+n=nn@p6_p7/A:.../B:.../C:...``: the identity of the five phones, their
phonetic classes, the part-of-speech and ToBI fields, and every numeric field that a pattern
with unique delimiters can reach. :func:`load_questions` parses any such file, naming the line
of a malformed question, and compiles the patterns (:func:`htk_regex`);
:meth:`QuestionSet.answers` evaluates them on labels, as Merlin's front end does (and
nnmnkwii's, which the tests hold it to), with nothing compiled to install: a GPU machine that
can only take wheels needs it too. :meth:`QuestionSet.nnmnkwii_dicts` gives the dictionaries
nnmnkwii's feature extractor takes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speechlab.errors import DataError

# Festival's "radio" phone set (the SLT voice) plus ARCTIC's "sil". "x": no phone there.
VOWELS = ("aa", "ae", "ah", "ao", "aw", "ax", "axr", "ay", "eh", "er", "ey", "ih", "ix", "iy",
          "ow", "oy", "uh", "uw")
CONSONANTS = ("b", "ch", "d", "dh", "dx", "el", "em", "en", "f", "g", "hh", "hv", "jh", "k", "l",
              "m", "n", "ng", "nx", "p", "r", "s", "sh", "t", "th", "v", "w", "y", "z", "zh")
SILENCES = ("pau", "sil", "h#", "brth")
PHONES = VOWELS + CONSONANTS + SILENCES
NO_PHONE = "x"

# Phonetic classes asked of every context position (this project's grouping).
CLASSES: dict[str, tuple[str, ...]] = {
    "Vowel": VOWELS,
    "Consonant": CONSONANTS,
    "Silence": SILENCES,
    "Stop": ("b", "d", "dx", "g", "k", "p", "t"),
    "Fricative": ("dh", "f", "hh", "hv", "s", "sh", "th", "v", "z", "zh"),
    "Affricate": ("ch", "jh"),
    "Nasal": ("em", "en", "m", "n", "ng", "nx"),
    "Liquid": ("el", "l", "r"),
    "Glide": ("w", "y"),
    "Voiced_Consonant": ("b", "d", "dh", "dx", "el", "em", "en", "g", "jh", "l", "m", "n", "ng",
                         "nx", "r", "v", "w", "y", "z", "zh"),
    "Labial": ("b", "em", "f", "m", "p", "v", "w"),
    "Dental_Alveolar": ("d", "dh", "dx", "el", "en", "l", "n", "nx", "s", "t", "th", "z"),
    "Postalveolar": ("ch", "jh", "r", "sh", "y", "zh"),
    "Velar": ("g", "k", "ng"),
    "Front_Vowel": ("ae", "eh", "ey", "ih", "iy"),
    "Central_Vowel": ("ah", "ax", "axr", "er", "ix"),
    "Back_Vowel": ("aa", "ao", "ow", "uh", "uw"),
    "High_Vowel": ("ih", "ix", "iy", "uh", "uw"),
    "Low_Vowel": ("aa", "ae", "ao", "aw", "ay"),
    "Diphthong": ("aw", "ay", "ey", "ow", "oy"),
    "Rounded_Vowel": ("ao", "ow", "oy", "uh", "uw"),
}

# Context position -> (text before the phone, text after it) in the label.
CONTEXTS: dict[str, tuple[str, str]] = {
    "LL": ("", "^"), "L": ("^", "-"), "C": ("-", "+"), "R": ("+", "="), "RR": ("=", "@"),
}

# Festival's part-of-speech classes (the B/E/F "gpos" fields) and phrase-final ToBI tones.
GPOS = ("content", "det", "in", "to", "md", "cc", "wp", "pps", "aux", "punc")
TOBI = ("L-L%", "L-H%", "H-H%", "H-L%", "NONE")

# Numeric fields, each with delimiters that occur once in a label.
NUMERIC: tuple[tuple[str, str], ...] = (
    ("Phone_Pos_In_Syl_Fw", "@(\\d+)_"), ("Phone_Pos_In_Syl_Bw", "_(\\d+)/A:"),
    ("L_Syl_Stress", "/A:(\\d+)_"), ("L_Syl_Num_Phones", "_(\\d+)/B:"),
    ("C_Syl_Stress", "/B:(\\d+)-"), ("C_Syl_Num_Phones", "-(\\d+)@"),
    ("C_Syl_Pos_In_Word_Fw", "@(\\d+)-"), ("C_Syl_Pos_In_Word_Bw", "-(\\d+)&"),
    ("C_Syl_Pos_In_Phrase_Fw", "&(\\d+)-"), ("C_Syl_Pos_In_Phrase_Bw", "-(\\d+)#"),
    ("Stressed_Syls_Before_In_Phrase", "#(\\d+)-"), ("Stressed_Syls_After_In_Phrase", "-(\\d+)$"),
    ("Accented_Syls_Before_In_Phrase", "$(\\d+)-"), ("Accented_Syls_After_In_Phrase", "-(\\d+)!"),
    ("Syls_From_Prev_Stressed", "!(\\d+)-"), ("Syls_To_Next_Stressed", "-(\\d+);"),
    ("Syls_From_Prev_Accented", ";(\\d+)-"), ("Syls_To_Next_Accented", "-(\\d+)|"),
    ("R_Syl_Stress", "/C:(\\d+)+"), ("R_Syl_Num_Phones", "+(\\d+)/D:"),
    ("L_Word_Num_Syls", "_(\\d+)/E:"), ("C_Word_Num_Syls", "+(\\d+)@"),
    ("C_Word_Pos_In_Phrase_Fw", "@(\\d+)+"), ("C_Word_Pos_In_Phrase_Bw", "+(\\d+)&"),
    ("Content_Words_Before_In_Phrase", "&(\\d+)+"), ("Content_Words_After_In_Phrase", "+(\\d+)#"),
    ("Words_From_Prev_Content", "#(\\d+)+"), ("Words_To_Next_Content", "+(\\d+)/F:"),
    ("R_Word_Num_Syls", "_(\\d+)/G:"),
    ("L_Phrase_Num_Syls", "/G:(\\d+)_"), ("L_Phrase_Num_Words", "_(\\d+)/H:"),
    ("C_Phrase_Num_Syls", "/H:(\\d+)="), ("C_Phrase_Num_Words", "=(\\d+)@"),
    ("C_Phrase_Pos_In_Utt_Fw", "@(\\d+)="), ("C_Phrase_Pos_In_Utt_Bw", "=(\\d+)|"),
    ("R_Phrase_Num_Syls", "/I:(\\d+)="), ("R_Phrase_Num_Words", "=(\\d+)/J:"),
    ("Utt_Num_Syls", "/J:(\\d+)+"), ("Utt_Num_Words", "+(\\d+)-"),
)


def _phone_pattern(ctx: str, phone: str) -> str:
    """The HTK pattern of ``phone`` at context position ``ctx``; LL is anchored at the start
    of the label (a pattern not starting with ``*`` must match from the first character)."""
    before, after = CONTEXTS[ctx]
    return f"{phone}{after}*" if ctx == "LL" else f"*{before}{phone}{after}*"


def english_questions() -> str:
    """This project's question set for English HTS labels, as the text of a question file."""
    lines = ["# speechlab English question set: phone identities and classes of the five",
             "# context phones, part of speech, ToBI, and the numeric label fields."]
    for ctx in CONTEXTS:
        for phone in PHONES:
            lines.append(f'QS "{ctx}-{phone}" {{{_phone_pattern(ctx, phone)}}}')
    for ctx in CONTEXTS:
        for name, phones in CLASSES.items():
            pats = ",".join(_phone_pattern(ctx, p) for p in phones)
            lines.append(f'QS "{ctx}-{name}" {{{pats}}}')
    for field, (before, after) in (("C-Word_GPOS", ("/E:", "+")), ("L-Word_GPOS", ("/D:", "_")),
                                   ("R-Word_GPOS", ("/F:", "_"))):
        for pos in GPOS:
            lines.append(f'QS "{field}=={pos}" {{*{before}{pos}{after}*}}')
    for tone in TOBI:
        lines.append(f'QS "C-Phrase_ToBI=={tone}" {{*|{tone}/I:*}}')
    for name, pattern in NUMERIC:
        lines.append(f'CQS "{name}" {{{pattern}}}')
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class QuestionSet:
    """Parsed questions: names and compiled patterns of the binary and numeric ones, in file
    order within each kind (binary features come first in the feature vector)."""

    binary_names: tuple[str, ...]
    binary: tuple[tuple[re.Pattern, ...], ...]
    numeric_names: tuple[str, ...]
    numeric: tuple[re.Pattern, ...]
    source: str

    @property
    def dim(self) -> int:
        return len(self.binary) + len(self.numeric)

    def answers(self, contexts: Sequence[str]) -> np.ndarray:
        """(N, Q) float32: each label's answers, the binary questions first (1 where any of a
        question's patterns occurs in the label), then the numeric ones (the number the group
        captures; where the pattern does not match, -50 for a signed group and -1 otherwise,
        Merlin's values for a field that is absent, ``xx``)."""
        out = np.zeros((len(contexts), self.dim), dtype=np.float32)
        nb = len(self.binary)
        absent = [-50.0 if _SIGNED in p.pattern else -1.0 for p in self.numeric]
        for i, label in enumerate(contexts):
            for j, patterns in enumerate(self.binary):
                if any(p.search(label) for p in patterns):
                    out[i, j] = 1.0
            for j, p in enumerate(self.numeric):
                m = p.search(label)
                try:
                    out[i, nb + j] = float(m.group(1)) if m else absent[j]
                except ValueError:
                    raise DataError(f"{self.source}: question {self.numeric_names[j]!r} "
                                    f"captures {m.group(1)!r} in {label!r}, not a number"
                                    ) from None
        return out

    def nnmnkwii_dicts(self) -> tuple[dict, dict]:
        """``(binary_dict, numeric_dict)`` as ``nnmnkwii.io.hts.load_question_set`` makes them."""
        return ({i: (n, list(q)) for i, (n, q) in enumerate(zip(self.binary_names, self.binary))},
                {i: (n, q) for i, (n, q) in enumerate(zip(self.numeric_names, self.numeric))})


_LINE = re.compile(r'^(QS|CQS)\s+"([^"]+)"\s+\{([^{}]*)\}\s*$')
_GROUPS = ("(\\d+)", "([-\\d]+)", "([\\d\\.]+)")
_SIGNED = _GROUPS[1]


def htk_regex(pattern: str, numeric: bool = False) -> str:
    """The regular expression of an HTK question pattern, for ``re.search``: ``*`` matches any
    run of characters; a pattern with a ``*`` is anchored at each end that has none (``*-a+*``
    finds ``-a+`` anywhere, ``sil^*`` only at the start), one without is found anywhere. Every
    other character is literal, ``?`` too (as Merlin's front end reads these files), except, in
    a ``numeric`` (CQS) pattern, the number groups ``(\\d+)``, ``([-\\d]+)`` and
    ``([\\d\\.]+)``, kept as groups."""
    start = "\\A" if "*" in pattern and not pattern.startswith("*") else ""
    end = "\\Z" if "*" in pattern and not pattern.endswith("*") else ""
    body = pattern.strip("*")
    pieces = re.split("(" + "|".join(map(re.escape, _GROUPS)) + ")", body) if numeric else [body]
    out = [p if p in _GROUPS else re.escape(p).replace("\\*", ".*") for p in pieces]
    return start + "".join(out) + end


def parse_questions(lines: Sequence[str], source: str = "<questions>") -> QuestionSet:
    """Parse question-file lines; a malformed one is a DataError naming ``source:line``."""
    bnames, binary, nnames, numeric = [], [], [], []
    seen: set[str] = set()
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        loc = f"{source}:{lineno}"
        if m is None:
            raise DataError(f"{loc}: not a question ({line[:60]!r}); expected "
                            'QS "name" {pattern,...} or CQS "name" {pattern}')
        kind, name, body = m.groups()
        patterns = [p.strip() for p in body.split(",")]
        if not all(patterns):
            raise DataError(f"{loc}: question {name!r} has an empty pattern")
        if name in seen:
            raise DataError(f"{loc}: question {name!r} is defined twice")
        seen.add(name)
        try:
            if kind == "QS":
                binary.append(tuple(re.compile(htk_regex(p)) for p in patterns))
                bnames.append(name)
                continue
            if len(patterns) != 1 or sum(g in patterns[0] for g in _GROUPS) != 1:
                raise DataError(f"{loc}: CQS {name!r} needs exactly one pattern with one "
                                "number group, (\\d+), ([-\\d]+) or ([\\d\\.]+)")
            numeric.append(re.compile(htk_regex(patterns[0], numeric=True)))
            nnames.append(name)
        except re.error as e:
            raise DataError(f"{loc}: pattern of {name!r} does not compile ({e})") from None
    if not binary and not numeric:
        raise DataError(f"{source}: no question in it")
    return QuestionSet(tuple(bnames), tuple(binary), tuple(nnames), tuple(numeric), source)


def load_questions(path: str | Path | None = None) -> QuestionSet:
    """The question file ``path``, or this project's English set when None."""
    if path is None:
        return parse_questions(english_questions().splitlines(), "<speechlab English questions>")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: a question file must be UTF-8 text") from None
    return parse_questions(text.splitlines(), str(path))
