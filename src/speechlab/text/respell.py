"""English respelt in another language's spelling, for a voice of that language to read aloud.

Debian packages festival voices of Czech, Finnish and Italian speakers (women and men, recorded
for diphone voices). Given English respelt in their language's own spelling, they read English
as speakers of those languages do: their voices, their vowels, their accent. That is speaker
variety the English voices (two festival men and one woman, espeak-ng's formant voices) lack,
and accented English is what a recognizer meets. :func:`respell` writes one sentence so:
each word's first pronunciation (:func:`speechlab.text.lexicon.english_lexicon`: CMUdict,
espeak-ng for the words it lacks) phone by phone in the target spelling, with the phones the
language lacks replaced by its nearest (TH -> t, DH -> d, AE -> e, W -> u or v ...), and the
sentence's commas and full stops kept for the voice's phrasing. A word without a pronunciation
is left out (the same words are left out of a recognizer's training targets).

The spellings are read by the voices' own letter-to-sound rules, so they follow what those
rules expect: Czech writes ``dy``/``ty``/``ny`` for the plain consonants before i (``di`` would
be read palatal), Italian writes ``ch``/``gh`` before front vowels (``ci``/``gi`` would be read
as affricates). A voice of Czech or Finnish reads the text in its own 8-bit encoding
(:data:`ENCODINGS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from speechlab.errors import DataError
from speechlab.text.lexicon import english_lexicon
from speechlab.text.normalize import normalize_text

_FRONT = frozenset({"EH", "IH", "IY", "EY", "AE"})

# ARPAbet (stress removed) -> its spelling in (Czech, Finnish, Italian); the phones a language
# lacks get its nearest. Finnish writes long vowels doubled and has no sh, zh or affricates (its
# voices have none: the sibilants fall together on s, the affricates on ts). Italian drops HH (h
# is silent) and spells K, G, CH, JH and SH by what follows (_ITALIAN_BY_NEXT; here: elsewhere).
_SPELLINGS: dict[str, tuple[str, str, str]] = {
    "AA": ("á", "aa", "a"), "AE": ("e", "ä", "e"), "AH": ("a", "a", "a"), "AO": ("ó", "oo", "o"),
    "AW": ("au", "au", "au"), "AY": ("aj", "ai", "ai"), "EH": ("e", "e", "e"),
    "ER": ("er", "ör", "er"), "EY": ("ej", "ei", "ei"), "IH": ("i", "i", "i"),
    "IY": ("í", "ii", "i"), "OW": ("ou", "ou", "ou"), "OY": ("oj", "oi", "oi"),
    "UH": ("u", "u", "u"), "UW": ("ú", "uu", "u"),
    "B": ("b", "b", "b"), "CH": ("č", "ts", "ci"), "D": ("d", "d", "d"), "DH": ("d", "d", "d"),
    "F": ("f", "f", "f"), "G": ("g", "g", "g"), "HH": ("h", "h", ""), "JH": ("dž", "ts", "gi"),
    "K": ("k", "k", "c"), "L": ("l", "l", "l"), "M": ("m", "m", "m"), "N": ("n", "n", "n"),
    "NG": ("ng", "ng", "ng"), "P": ("p", "p", "p"), "R": ("r", "r", "r"), "S": ("s", "s", "s"),
    "SH": ("š", "s", "sci"), "T": ("t", "t", "t"), "TH": ("t", "t", "t"), "V": ("v", "v", "v"),
    "W": ("u", "v", "u"), "Y": ("j", "j", "i"), "Z": ("z", "s", "s"), "ZH": ("ž", "s", "sc"),
}
_CZECH = {p: v[0] for p, v in _SPELLINGS.items()}
_FINNISH = {p: v[1] for p, v in _SPELLINGS.items()}
_ITALIAN = {p: v[2] for p, v in _SPELLINGS.items()}
# Italian phones spelt by whether a front vowel follows: (before a front vowel, elsewhere).
_ITALIAN_BY_NEXT = {"K": ("ch", "c"), "G": ("gh", "g"), "CH": ("c", "ci"), "JH": ("g", "gi"),
                    "SH": ("sc", "sci")}
_VOWELS = frozenset({"AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW",
                     "OY", "UH", "UW"})


def _czech(phones: Sequence[str]) -> str:
    out = []
    for i, p in enumerate(phones):
        s = _CZECH[p]
        if p in ("IH", "IY") and i and phones[i - 1] in ("D", "T", "N"):
            s = "y" if p == "IH" else "ý"  # "di" would be read with a palatal d
        out.append(s)
    return "".join(out)


def _finnish(phones: Sequence[str]) -> str:
    return "".join(_FINNISH[p] for p in phones)


def _italian(phones: Sequence[str]) -> str:
    out = []
    for i, p in enumerate(phones):
        after = phones[i + 1] if i + 1 < len(phones) else None
        if p == "K" and after not in _VOWELS:
            out.append("k")  # before a consonant or at the end: no vowel decides
        elif p in _ITALIAN_BY_NEXT:
            out.append(_ITALIAN_BY_NEXT[p][0 if after in _FRONT else 1])
        else:
            out.append(_ITALIAN[p])
    return "".join(out)


# target language -> ARPAbet phones of one word -> its spelling
SPELLERS: dict[str, Callable[[Sequence[str]], str]] = {
    "cs": _czech, "fi": _finnish, "it": _italian,
}
# The encoding a voice of the language reads its text in (festival's Czech and Finnish voices
# read 8-bit text).
ENCODINGS = {"cs": "iso-8859-2", "fi": "iso-8859-1", "it": "iso-8859-1"}

_PUNCT = ",.;:?!"
_TOKEN = re.compile(r"[,.;:?!]|[^\s,.;:?!]+")


# normalised English word -> its first pronunciation (None: it has none); filled as needed
_PRONUNCIATIONS: dict[str, tuple[str, ...] | None] = {}


def _pronounce(words: Sequence[str]) -> None:
    """Look up the ``words`` not yet known, all at once (one espeak-ng process for those
    CMUdict lacks)."""
    todo = [w for w in dict.fromkeys(words) if w not in _PRONUNCIATIONS]
    if todo:
        lex = english_lexicon(todo)
        for w in todo:
            _PRONUNCIATIONS[w] = tuple(lex[w][0]) if w in lex else None


def prime(texts: Sequence[str]) -> None:
    """Look up the words of all ``texts`` at once, so that :func:`respell` of each of them
    starts no espeak-ng process of its own."""
    _pronounce([w for t in texts for _, ws in _tokens(t) for w in ws])


def _tokens(text: str) -> list[tuple[str, list[str]]]:
    """``text``'s tokens, each with its normalised words (none for phrasing punctuation)."""
    return [(t, [] if t in _PUNCT else normalize_text(t, "en").split())
            for t in _TOKEN.findall(text)]


def respell(text: str, language: str) -> str:
    """English ``text`` respelt for a voice of ``language`` (a key of :data:`SPELLERS`): words
    lowercased and respelt, punctuation that phrases a sentence (``, . ; : ? !``) kept, words
    without a pronunciation left out."""
    speller = SPELLERS.get(language)
    if speller is None:
        raise DataError(f"no respelling of English for language {language!r}; known: "
                        f"{sorted(SPELLERS)}")
    tokens = _tokens(text)
    _pronounce([w for _, ws in tokens for w in ws])
    out: list[str] = []
    for token, ws in tokens:
        if token in _PUNCT:
            if out and out[-1][-1] not in _PUNCT:
                out[-1] += token
            continue
        for w in ws:
            pron = _PRONUNCIATIONS[w]
            spelt = speller(pron) if pron is not None else ""
            if spelt:
                out.append(spelt)
    return " ".join(out)
