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


def audio_seconds(audio: Any, sample_rate: int) -> float:
    """How long ``audio`` (a path, or samples at ``sample_rate``) lasts, without reading it."""
    if isinstance(audio, (str, bytes)) or hasattr(audio, "__fspath__"):
        from speechlab.audio.io import audio_info

        info = audio_info(audio)
        return info.frames / info.sample_rate
    return len(audio) / sample_rate


def iter_pieces(audio: Any, sample_rate: int, target_rate: int, max_seconds: float,
                *, what: str = "audio") -> Any:
    """``(offset seconds, mono float32 samples at target_rate)`` pieces of ``audio`` (a path,
    or samples at ``sample_rate``), each at most ``max_seconds``, cut at the quietest moment
    before the limit (:func:`split_points`). A file is read block by block, so a recording of
    any length never sits in memory whole."""
    from speechlab.audio.io import as_samples

    if not (isinstance(audio, (str, bytes)) or hasattr(audio, "__fspath__")):
        samples = as_samples(audio, sample_rate, target_rate, what=what)
        cuts = [0, *split_points(samples, target_rate, max_seconds), len(samples)]
        for a, b in zip(cuts[:-1], cuts[1:]):
            yield a / target_rate, samples[a:b]
        return
    import soundfile as sf

    from speechlab.audio.io import audio_info, resample

    info = audio_info(audio)
    block = int(max_seconds * info.sample_rate)
    carry = np.zeros(0, np.float32)
    done = 0  # samples (at target_rate) already yielded
    with sf.SoundFile(str(audio)) as f:
        while True:
            raw = f.read(block, dtype="float32", always_2d=True)
            last = len(raw) < block
            if len(raw):
                x = raw.mean(axis=1) if raw.shape[1] > 1 else raw[:, 0]
                as_samples(x, info.sample_rate, info.sample_rate, what=str(audio))  # finite?
                carry = np.concatenate([carry, resample(x, info.sample_rate, target_rate)])
            limit = int(max_seconds * target_rate)
            while len(carry) > limit or (last and len(carry)):
                cut = (split_points(carry, target_rate, max_seconds) or [len(carry)])[0]
                if not last and cut == len(carry):
                    break
                yield done / target_rate, carry[:cut]
                done += cut
                carry = carry[cut:]
            if last:
                return


def iter_blocks(audio: Any, sample_rate: int, target_rate: int, seconds: float) -> Any:
    """``(offset seconds, samples at target_rate)`` consecutive blocks of ``audio`` (a path,
    read a block at a time, or samples at ``sample_rate``), ``seconds`` long but the last:
    what a streaming model is fed."""
    from speechlab.audio.io import as_samples

    if not (isinstance(audio, (str, bytes)) or hasattr(audio, "__fspath__")):
        samples = as_samples(audio, sample_rate, target_rate)
        step = max(1, int(seconds * target_rate))
        for i in range(0, len(samples), step):
            yield i / target_rate, samples[i : i + step]
        return
    import soundfile as sf

    from speechlab.audio.io import audio_info

    info = audio_info(audio)
    done = 0.0
    with sf.SoundFile(str(audio)) as f:
        for raw in f.blocks(blocksize=max(1, int(seconds * info.sample_rate)), dtype="float32",
                            always_2d=True):
            x = raw.mean(axis=1) if raw.shape[1] > 1 else raw[:, 0]
            x = as_samples(x, info.sample_rate, target_rate, what=str(audio))
            yield done, x
            done += len(x) / target_rate
