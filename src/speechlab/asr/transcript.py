"""What recognizing speech gives back, for every ASR model speechlab has: a :class:`Transcript`
(text, language, LID posteriors, words with times), and the pieces every recognizer shares.

- :class:`Word`, :class:`Transcript`: the result of ``transcribe``, as ``speechlab transcribe
  --json`` and the server write it (:meth:`Transcript.to_json`).
- :class:`Recognizer`, :class:`Stream`: what a loaded ASR model offers (``speechlab.load``):
  ``transcribe`` for a whole recording, and for streaming models ``stream()`` with
  ``accept_waveform``, ``partial`` and ``finish``.
- :func:`words_from_tokens`: words and their times from the frames at which a model emitted
  each token (CTC and transducer alignments).
- :func:`split_points`: where to cut a long recording for a model that reads whole
  utterances: near every ``max_seconds``, at the quietest moment around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Word:
    """One recognized word and when it was spoken (seconds from the start of the audio)."""

    word: str
    start: float
    end: float


@dataclass(frozen=True)
class Transcript:
    """One recording recognized.

    ``language``: the language of the text (given, the model's only one, or the one its LID
    head picked); ``lid``: the LID head's posterior per language (None for models without
    one); ``words``: words with times where the model's alignment gives them (None where it
    does not).
    """

    text: str
    language: str | None = None
    lid: dict[str, float] | None = None
    words: tuple[Word, ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_json(self, file: str | None = None) -> dict[str, Any]:
        """The JSON object of ``speechlab transcribe --json`` (and of the server)."""
        out: dict[str, Any] = {} if file is None else {"file": file}
        out.update(text=self.text, language=self.language,
                   lid=None if self.lid is None else {k: round(float(v), 6)
                                                      for k, v in self.lid.items()},
                   words=None if self.words is None else [
                       {"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3)}
                       for w in self.words])
        return out


class Stream(Protocol):
    """Live recognition: samples in as they arrive, the partial text after each piece."""

    def accept_waveform(self, samples: Any, sample_rate: int = 16000) -> None: ...

    @property
    def partial(self) -> str: ...

    def finish(self) -> Transcript: ...


class Recognizer(Protocol):
    """A loaded ASR model."""

    kind: str                    # "asr"
    languages: tuple[str, ...]
    streaming: bool
    sample_rate: int

    def transcribe(self, audio: Any, sample_rate: int = 16000,
                   language: str | None = None) -> Transcript: ...


def words_from_tokens(symbols: Sequence[str], frames: Sequence[int], frame_seconds: float, *,
                      starts_word: Any, strip: Any = None, end_frames: Sequence[int] | None = None
                      ) -> tuple[Word, ...]:
    """Words from emitted symbols and the frame each was emitted on.

    ``starts_word(symbol)`` says whether a symbol begins a new word (a ``B_`` grapheme, a
    space's successor, ...); ``strip(symbol)`` gives the symbol's written form (default: the
    symbol; an empty string for a word-boundary symbol such as ``|``). A word lasts from its
    first symbol's frame to the end of its last symbol's frame (``end_frames`` where the
    alignment knows them, else the next frame).
    """
    strip = strip or (lambda s: s)
    words: list[Word] = []
    text, start, end = "", 0, 0
    for i, (sym, frame) in enumerate(zip(symbols, frames)):
        last = end_frames[i] if end_frames is not None else frame + 1
        if starts_word(sym) or not text:
            if text:
                words.append(Word(text, start * frame_seconds, end * frame_seconds))
            text, start = "", frame
        text += strip(sym)
        end = last
        if not text:  # a boundary symbol alone starts nothing
            start = last
    if text:
        words.append(Word(text, start * frame_seconds, end * frame_seconds))
    return tuple(words)


def split_points(samples: np.ndarray, sample_rate: int, max_seconds: float,
                 search_seconds: float = 2.0) -> list[int]:
    """Sample indices that cut ``samples`` into pieces of at most ``max_seconds``: each cut
    is at the quietest 20 ms within the last ``search_seconds`` before the limit, so that a
    word is rarely cut in two. Returns the starts of the pieces after the first."""
    n = len(samples)
    limit = int(max_seconds * sample_rate)
    if n <= limit:
        return []
    hop = max(1, sample_rate // 50)
    cuts, start = [], 0
    while n - start > limit:
        lo = start + max(hop, limit - int(search_seconds * sample_rate))
        hi = start + limit
        windows = samples[lo:hi][: (hi - lo) // hop * hop].reshape(-1, hop)
        quietest = int(np.argmin((windows.astype(np.float64) ** 2).sum(axis=1))) if len(windows) else 0
        cut = lo + quietest * hop + hop // 2
        cuts.append(cut)
        start = cut
    return cuts
