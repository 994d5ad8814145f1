"""Per-language transcript normalisation applied before any tokenizer sees the text.

The output inventory of the multi-softmax paper is "unique graphemes from the respective
language"; punctuation is not something an acoustic model can hear, so it is mapped to word
boundaries here rather than becoming output units. Steps, in order:

1. Unicode NFC, so that one written character has one spelling (e.g. a Devanagari letter with
   nukta typed as one precomposed code point or as two code points ends up the same);
2. typographic apostrophes (U+2019, U+2018, U+02BC) become ASCII ``'``;
3. lowercasing (only affects cased scripts, i.e. Latin in our languages);
4. letters (L*), combining marks (M*) and digits (N*) are kept; format characters (Cf: zero-width
   joiner/non-joiner, which change only the rendering of Indic conjuncts) are dropped; every other
   character (punctuation such as the danda, symbols, controls) becomes a space -- except the
   language's word-internal characters (the English apostrophe in "don't"), which are kept when
   they stand between two kept characters;
5. whitespace is collapsed and trimmed.

Rules are looked up per language in :data:`LANGUAGE_RULES`; a language not listed gets
:data:`DEFAULT_RULES`, which are the same steps without word-internal characters.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

_APOSTROPHES = {"\u2019": "'", "\u2018": "'", "\u02bc": "'"}


@dataclass(frozen=True)
class TextRules:
    """How one language's transcripts are normalised.

    Args:
        lowercase: lowercase cased letters (Latin here; Indic scripts have no case).
        word_internal: characters kept only between two letters/marks/digits (e.g. ``"'"``).
    """

    lowercase: bool = True
    word_internal: str = ""


DEFAULT_RULES = TextRules()

# English keeps the apostrophe of contractions/possessives as a grapheme ("don't" is one word
# whose spelling differs from "dont"); Indic scripts have no such character.
LANGUAGE_RULES: dict[str, TextRules] = {
    "en": TextRules(lowercase=True, word_internal="'"),
    "hi": TextRules(lowercase=True),
    "ta": TextRules(lowercase=True),
    "gu": TextRules(lowercase=True),
}


def _is_word_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


def normalize_text(text: str, language: str) -> str:
    """Normalise one transcript for ``language`` (see the module docstring for the steps)."""
    rules = LANGUAGE_RULES.get(language, DEFAULT_RULES)
    s = unicodedata.normalize("NFC", text)
    s = "".join(_APOSTROPHES.get(ch, ch) for ch in s)
    if rules.lowercase:
        s = s.lower()
    chars: list[str] = []
    for ch in s:
        cat = unicodedata.category(ch)
        if cat[0] in "LMN":
            chars.append(ch)
        elif cat == "Cf":
            continue
        elif ch in rules.word_internal:
            chars.append(ch)  # decided below, once both neighbours are known
        else:
            chars.append(" ")
    # A word-internal character survives only between two word characters: "don't" keeps it,
    # "'quoted'" and "dogs' " lose it.
    for i, ch in enumerate(chars):
        if ch in rules.word_internal and ch != " ":
            left = chars[i - 1] if i > 0 else " "
            right = chars[i + 1] if i + 1 < len(chars) else " "
            if not (_is_word_char(left) and _is_word_char(right)):
                chars[i] = " "
    # Lowercasing can decompose (e.g. U+0130), so NFC once more after the character filter.
    return unicodedata.normalize("NFC", " ".join("".join(chars).split()))


def sentence_key(text: str) -> str:
    """Case- and punctuation-blind identity of a sentence, used for dedup, split disjointness
    and keeping dev and test sentences out of language-model text."""
    s = unicodedata.normalize("NFC", text).casefold()
    s = "".join(ch if unicodedata.category(ch)[0] in "LM" else " " for ch in s)
    return " ".join(s.split())
