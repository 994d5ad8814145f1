"""Phones as the modelling units of the CTC-topologies paper: lexicons and phone tokenizers.

The paper models phonemes through a lexicon (CMUdict on WSJ, the official lexicon on
LibriSpeech). Here English words get CMUdict pronunciations (stress removed: 39 phones; words
CMUdict lacks get espeak-ng's, mapped onto the same ARPAbet phones) and every other language
espeak-ng's (:func:`lexicon_for`). A :class:`PhoneTokenizer` turns a
transcript into phone ids 1..P through each word's first pronunciation, the targets
``graph_loss`` takes; a word the lexicon lacks raises :class:`DataError` naming it, so
:func:`speechlab.asr.data.load_utterances` keeps such an utterance for scoring only and counts
it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from speechlab.errors import DataError, where
from speechlab.files import atomic_write_json
from speechlab.text.lexicon import Lexicon, english_lexicon, espeak_lexicon
from speechlab.text.normalize import normalize_text

# Language -> espeak-ng voice for the languages CMUdict does not cover.
ESPEAK_VOICES = {"hi": "hi", "ta": "ta", "gu": "gu"}


def lexicon_for(language: str, words: Iterable[str]) -> Lexicon:
    """Pronunciations of ``words``: CMUdict for English (with espeak-ng for the words it
    lacks, :func:`english_lexicon`), espeak-ng letter-to-sound rules for the other
    languages."""
    if language == "en":
        return english_lexicon(words)
    voice = ESPEAK_VOICES.get(language)
    if voice is None:
        raise DataError(f"no pronunciation source for language {language!r}; known: en, "
                        f"{', '.join(ESPEAK_VOICES)}")
    return espeak_lexicon(words, voice)


class PhoneTokenizer:
    """Transcript -> phone ids 1..P (0 is the topology's blank) via a lexicon."""

    def __init__(self, lexicon: Lexicon, language: str, phones: Sequence[str] | None = None) -> None:
        self.lexicon = lexicon
        self.language = language
        self.phones = tuple(phones if phones is not None else lexicon.phones)
        self._ids = {p: i + 1 for i, p in enumerate(self.phones)}

    @property
    def num_phones(self) -> int:
        return len(self.phones)

    def words(self, text: str) -> list[str]:
        return normalize_text(text, self.language).split()

    def encode(self, text: str, utt: str | None = None) -> list[int]:
        ids: list[int] = []
        for w in self.words(text):
            prons = self.lexicon.get(w)
            if not prons:
                raise DataError(f"{where('transcript', utt=utt)}: word {w!r} is not in the "
                                f"{self.language} lexicon")
            for p in prons[0]:
                if p not in self._ids:
                    raise DataError(f"{where('transcript', utt=utt)}: phone {p!r} of {w!r} is "
                                    f"not in the phone set")
                ids.append(self._ids[p])
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        return " ".join(self.phones[i - 1] for i in ids if i > 0)

    def save(self, path: str | Path) -> None:
        atomic_write_json(path, {"language": self.language, "phones": list(self.phones),
                                 "lexicon": {w: [list(p) for p in self.lexicon[w]]
                                             for w in self.lexicon.words}})

    @classmethod
    def load(cls, path: str | Path) -> PhoneTokenizer:
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(Lexicon(d["lexicon"]), d["language"], d["phones"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise DataError(f"{path}: not a phone tokenizer file ({e})") from None
