"""Grapheme vocabularies of the multi-softmax RNN-T paper (Sec. 4, Table 1).

Per language the vocabulary is ``<blank>`` (id 0), the language's graphemes, and the same
graphemes with a ``B_`` prefix that marks the first grapheme of a word, so a grapheme sequence
can be turned back into words without a space symbol.

What a "grapheme" is: one Unicode code point after NFC normalisation (see
:mod:`speechlab.text.normalize`). Why code points and not user-perceived characters (extended
grapheme clusters / aksharas): every vocabulary size in Table 1 is odd (en 133, hi 59, ta 97,
gu 123), i.e. ``1 + 2 n`` -- blank plus ``n`` units plus their ``n`` ``B_`` copies -- with
``n`` = 66, 29, 48, 61. Those ``n`` are the size of a script's code-point inventory (Tamil's
letters, vowel signs and virama are ~48 code points; Gujarati's ~60), while aksharas (consonant
clusters with their vowel signs) number in the hundreds to thousands per script. Hindi's 29 is
below the full Devanagari code-point inventory, so the paper's Hindi data must have used a
restricted character set; building from our own transcripts gives whatever their code points are.

:class:`UnionTokenizer` pools the per-language vocabularies for the vanilla (single softmax)
model: one blank, then every language's non-blank symbols in language order, with maps between
union ids and ``(language, local id)`` that the multi-softmax model uses to route outputs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from speechlab.errors import DataError
from speechlab.files import atomic_write_json
from speechlab.text.normalize import normalize_text

BLANK = "<blank>"
WORD_START = "B_"


def _describe_char(ch: str) -> str:
    import unicodedata

    return f"{ch!r} (U+{ord(ch):04X} {unicodedata.name(ch, 'UNNAMED')})"


def join_symbols(symbols: Iterable[str]) -> str:
    """Turn grapheme symbols back into text: a ``B_`` symbol starts a new word.

    Blanks are skipped, so a CTC/RNN-T frame-level output can be passed after collapsing.
    """
    out: list[str] = []
    for sym in symbols:
        if sym == BLANK:
            continue
        if sym.startswith(WORD_START) and len(sym) > len(WORD_START):
            if out:
                out.append(" ")
            out.append(sym[len(WORD_START):])
        else:
            out.append(sym)
    return "".join(out)


class GraphemeTokenizer:
    """One language's ``<blank>`` + graphemes + ``B_`` graphemes vocabulary.

    Ids: 0 is ``<blank>``; ``1..n`` the graphemes in code-point order; ``n+1..2n`` their ``B_``
    forms in the same order, so ``id(B_g) == id(g) + n``.

    Args:
        language: language code (selects the normalisation rules).
        graphemes: the inventory; each entry must be one code point.
        normalize: apply :func:`normalize_text` in :meth:`encode` (turn off for text that is
            already normalised, or to check raw text against the inventory).
    """

    def __init__(self, language: str, graphemes: Iterable[str], normalize: bool = True) -> None:
        inventory = sorted(set(graphemes))
        for g in inventory:
            if len(g) != 1 or g.isspace():
                raise DataError(
                    f"grapheme inventory for {language!r}: {g!r} is not a single non-space "
                    "code point"
                )
        self.language = language
        self.normalize = normalize
        self.graphemes: tuple[str, ...] = tuple(inventory)
        self.symbols: tuple[str, ...] = (
            (BLANK,) + self.graphemes + tuple(WORD_START + g for g in self.graphemes)
        )
        self._plain = {g: i + 1 for i, g in enumerate(self.graphemes)}
        self._n = len(self.graphemes)

    blank_id = 0

    @classmethod
    def build(cls, texts: Iterable[str], language: str, normalize: bool = True) -> GraphemeTokenizer:
        """Inventory = every code point in the (normalised) ``texts``, spaces excluded."""
        seen: set[str] = set()
        for text in texts:
            if normalize:
                text = normalize_text(text, language)
            seen.update(ch for ch in text if not ch.isspace())
        if not seen:
            raise DataError(f"no graphemes found for language {language!r}: all transcripts empty")
        return cls(language, seen, normalize=normalize)

    def __len__(self) -> int:
        return len(self.symbols)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GraphemeTokenizer)
            and self.language == other.language
            and self.symbols == other.symbols
            and self.normalize == other.normalize
        )

    def __repr__(self) -> str:
        return f"GraphemeTokenizer(language={self.language!r}, size={len(self)})"

    def encode(self, text: str, utt: str | None = None) -> list[int]:
        """Text -> ids; the first grapheme of every word gets its ``B_`` id.

        Raises:
            DataError: naming the character (and ``utt`` if given) outside the inventory.
        """
        norm = normalize_text(text, self.language) if self.normalize else text
        ids: list[int] = []
        for word in norm.split():
            for k, ch in enumerate(word):
                i = self._plain.get(ch)
                if i is None:
                    where = f" (utterance {utt!r})" if utt is not None else ""
                    raise DataError(
                        f"character {_describe_char(ch)} in {text!r}{where} is not in the "
                        f"{self.language!r} grapheme inventory; rebuild the tokenizer including "
                        "this text or fix the transcript"
                    )
                ids.append(i + self._n if k == 0 else i)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; ``B_`` ids start words, blanks are skipped."""
        syms = []
        for i in ids:
            i = int(i)
            if not 0 <= i < len(self.symbols):
                raise DataError(f"id {i} outside the {self.language!r} vocabulary of {len(self)}")
            syms.append(self.symbols[i])
        return join_symbols(syms)

    def to_dict(self) -> dict:
        return {
            "type": "grapheme",
            "language": self.language,
            "normalize": self.normalize,
            "symbols": list(self.symbols),
        }

    @classmethod
    def from_dict(cls, data: Mapping, source: str = "<dict>") -> GraphemeTokenizer:
        try:
            if data["type"] != "grapheme":
                raise DataError(f"{source}: not a grapheme tokenizer (type {data['type']!r})")
            symbols = list(data["symbols"])
            language = str(data["language"])
            normalize = bool(data.get("normalize", True))
        except (KeyError, TypeError):
            raise DataError(f"{source}: not a speechlab grapheme tokenizer file") from None
        bad = DataError(
            f"{source}: symbol list is not <blank> + sorted graphemes + their B_ forms; "
            "rebuild it with `speechlab text build-tokenizers`"
        )
        n, rem = divmod(len(symbols) - 1, 2)
        if rem or n < 0:
            raise bad
        try:
            tok = cls(language, symbols[1 : 1 + n], normalize=normalize)
        except DataError:
            raise bad from None
        if list(tok.symbols) != symbols:
            raise bad
        return tok

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> GraphemeTokenizer:
        return cls.from_dict(_read_json(path), source=str(path))


def _read_json(path: str | Path) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"tokenizer file {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"tokenizer file {path} is not valid JSON: {e}") from None


@dataclass(frozen=True)
class TokenizerBuildConfig:
    """Options of ``speechlab text build-tokenizers``.

    Args:
        languages: union order; empty means every language in the data, sorted by code.
        normalize: normalise transcripts (NFC, case, punctuation) before collecting graphemes.
    """

    languages: tuple[str, ...] = ()
    normalize: bool = True


@dataclass(frozen=True)
class UnionMap:
    """The id layout of a union vocabulary, from vocabulary sizes alone: one blank, then each
    language's non-blank ids in order (what :class:`UnionTokenizer` and the pooled RNN-T
    softmax use). Union id of language l's local id i > 0 is ``offset(l) + i``; size
    ``sum(V_l - 1) + 1``.
    """

    languages: tuple[str, ...]
    vocab_sizes: tuple[int, ...]

    @property
    def size(self) -> int:
        return sum(v - 1 for v in self.vocab_sizes) + 1

    def offset(self, language: str) -> int:
        if language not in self.languages:
            raise DataError(f"unknown language {language!r}; this union has {list(self.languages)}")
        i = self.languages.index(language)
        return sum(v - 1 for v in self.vocab_sizes[:i])

    def to_union(self, language: str, local_ids: Iterable[int]) -> list[int]:
        """Local ids of ``language`` -> union ids (local blank -> union blank)."""
        off = self.offset(language)
        return [0 if i == 0 else off + int(i) for i in local_ids]

    def to_local(self, union_id: int) -> tuple[str | None, int]:
        """``(language, local id)``; blank is ``(None, 0)``."""
        if union_id == 0:
            return None, 0
        rest = int(union_id)
        if rest > 0:
            for lang, v in zip(self.languages, self.vocab_sizes):
                if rest <= v - 1:
                    return lang, rest
                rest -= v - 1
        raise DataError(f"union id {union_id} is outside the union vocabulary of size {self.size}")

    def language_of(self, union_ids: Sequence[int]) -> str | None:
        """The language most of the non-blank labels belong to (the script of a vanilla model's
        output, Table 5); ties go to the earlier language, None for an empty output."""
        counts = Counter(self.to_local(i)[0] for i in union_ids if i != 0)
        if not counts:
            return None
        return max(self.languages, key=lambda lang: (counts.get(lang, 0), -self.languages.index(lang)))


class UnionTokenizer:
    """Per-language grapheme tokenizers plus their pooled (union) vocabulary.

    Union ids: 0 is the one shared ``<blank>``; then, for each language in order, that language's
    non-blank symbols in its local order. So local id ``j > 0`` of language ``l`` is union id
    ``offset[l] + j - 1``. A symbol string used by several languages (e.g. a digit) keeps one
    entry per language; its union name is then qualified as ``"sym@lang"`` so that
    :attr:`symbols` stays a valid (duplicate-free) symbol table.
    """

    def __init__(self, tokenizers: Mapping[str, GraphemeTokenizer]) -> None:
        if not tokenizers:
            raise DataError("a union tokenizer needs at least one language")
        self.tokenizers: dict[str, GraphemeTokenizer] = dict(tokenizers)
        for lang, tok in self.tokenizers.items():
            if tok.language != lang:
                raise DataError(f"tokenizer for {tok.language!r} registered under {lang!r}")
        self.languages: tuple[str, ...] = tuple(self.tokenizers)
        self.map = UnionMap(self.languages, tuple(len(t) for t in self.tokenizers.values()))
        counts: dict[str, int] = {}
        for tok in self.tokenizers.values():
            for s in tok.symbols[1:]:
                counts[s] = counts.get(s, 0) + 1
        names = [BLANK]
        for lang, tok in self.tokenizers.items():
            names.extend(s if counts[s] == 1 else f"{s}@{lang}" for s in tok.symbols[1:])
        self.symbols: tuple[str, ...] = tuple(names)

    blank_id = 0

    @classmethod
    def build(
        cls,
        texts: Iterable[tuple[str, str]],
        languages: Sequence[str] = (),
        normalize: bool = True,
    ) -> UnionTokenizer:
        """Build every language's tokenizer from ``(language, text)`` pairs.

        Args:
            languages: union order; empty means all languages seen, sorted. Pairs in a language
                not listed raise :class:`DataError` (a silent drop would hide a typo).
        """
        by_lang: dict[str, list[str]] = {lang: [] for lang in languages}
        for lang, text in texts:
            if languages and lang not in by_lang:
                raise DataError(
                    f"transcript in language {lang!r} but the union lists only {list(languages)}"
                )
            by_lang.setdefault(lang, []).append(text)
        order = list(languages) if languages else sorted(by_lang)
        return cls({lang: GraphemeTokenizer.build(by_lang[lang], lang, normalize) for lang in order})

    def __len__(self) -> int:
        return len(self.symbols)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{lang}={len(t)}" for lang, t in self.tokenizers.items())
        return f"UnionTokenizer(size={len(self)}, {sizes})"

    def _check_language(self, language: str) -> GraphemeTokenizer:
        tok = self.tokenizers.get(language)
        if tok is None:
            raise DataError(f"unknown language {language!r}; this union has {list(self.languages)}")
        return tok

    def to_union(self, language: str, local_id: int) -> int:
        """``(language, local id) -> union id``; local blank maps to the union blank."""
        tok = self._check_language(language)
        if not 0 <= local_id < len(tok):
            raise DataError(f"local id {local_id} outside the {language!r} vocabulary of {len(tok)}")
        return self.map.to_union(language, [local_id])[0]

    def to_local(self, union_id: int) -> tuple[str | None, int]:
        """``union id -> (language, local id)``; the blank is ``(None, 0)``."""
        if not 0 <= union_id < len(self):
            raise DataError(f"union id {union_id} outside the vocabulary of {len(self)}")
        return self.map.to_local(union_id)

    def language_of(self, union_id: int) -> str | None:
        """The language a union id belongs to (``None`` for the shared blank)."""
        return self.to_local(union_id)[0]

    def union_ids(self, language: str) -> list[int]:
        """Union id of every local id of ``language``: ``out[local] == union`` (out[0] == 0).

        This is the gather index that scatters a language's softmax (size ``V_l``) into the
        union vocabulary (size ``V``).
        """
        tok = self._check_language(language)
        return self.map.to_union(language, range(len(tok)))

    def encode(self, text: str, language: str, utt: str | None = None) -> list[int]:
        """Text in ``language`` -> union ids."""
        tok = self._check_language(language)
        ids = self.union_ids(language)
        return [ids[i] for i in tok.encode(text, utt=utt)]

    def decode(self, ids: Iterable[int]) -> str:
        """Union ids (any mix of languages) -> text."""
        syms = []
        for u in ids:
            lang, j = self.to_local(int(u))
            syms.append(BLANK if lang is None else self.tokenizers[lang].symbols[j])
        return join_symbols(syms)

    def to_dict(self) -> dict:
        return {
            "type": "grapheme-union",
            "languages": list(self.languages),
            "tokenizers": {lang: tok.to_dict() for lang, tok in self.tokenizers.items()},
            # Stored for readers outside speechlab; rebuilt (and checked) on load.
            "symbols": list(self.symbols),
        }

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> UnionTokenizer:
        data = _read_json(path)
        try:
            if data["type"] != "grapheme-union":
                raise DataError(f"{path}: not a union tokenizer (type {data['type']!r})")
            toks = {
                lang: GraphemeTokenizer.from_dict(data["tokenizers"][lang], f"{path} [{lang}]")
                for lang in data["languages"]
            }
        except (KeyError, TypeError):
            raise DataError(f"{path}: not a speechlab union tokenizer file") from None
        union = cls(toks)
        if "symbols" in data and list(union.symbols) != list(data["symbols"]):
            raise DataError(f"{path}: stored union symbols disagree with its tokenizers")
        return union
