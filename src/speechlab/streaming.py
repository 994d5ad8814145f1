"""Live recognition with a model that reads whole recordings: utterances cut by voice activity.

A CTC-topology or wav2vec 2.0 model decodes a whole recording at once, so it cannot give text
while someone speaks. :class:`VadStream` gives it the stream API all the same
(:class:`speechlab.contract.Stream`): the Silero VAD (:mod:`speechlab.audio.vad`) listens to
the audio as it arrives; ``is_endpoint`` holds by the rules of :mod:`speechlab.endpoint`, with
*trailing silence* the time since the detector last heard speech and *text* standing for
"speech was heard"; ``reset()`` then transcribes the utterance's speech (the audio from just
before the detector first heard it) and starts the next. ``partial`` is empty until an
utterance is closed (``partial_words`` too): the model gives nothing earlier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from speechlab.audio.io import as_samples
from speechlab.audio.vad import SAMPLE_RATE, Vad, VadConfig
from speechlab.contract import Transcript, Word
from speechlab.endpoint import EndpointConfig
from speechlab.errors import ConfigError


class VadStream:
    """A stream over ``transcribe`` (16 kHz samples -> :class:`Transcript`; e.g. a bound
    ``model.transcribe`` with its options), cut into utterances by voice activity (module
    doc). ``languages``: what ``active`` reports."""

    def __init__(self, transcribe: Callable[[np.ndarray], Transcript],
                 endpoint: EndpointConfig | None = None, vad: VadConfig | None = None,
                 languages: tuple[str, ...] = ()) -> None:
        self.transcribe = transcribe
        self.endpoint = endpoint or EndpointConfig()
        self.cfg = vad or VadConfig()
        self.languages = languages
        self.vad = Vad.of(self.cfg)
        self._audio: list[np.ndarray] = []  # the current utterance's samples
        self._samples = 0  # in the current utterance
        self._start = 0  # samples before the current utterance
        self._windows = 0  # VAD windows of the current utterance
        self._first_speech: int | None = None  # window of the utterance first heard as speech
        self._last_speech: int | None = None
        self._utterances = 0
        self._finished: Transcript | None = None

    # ------------------------------------------------------------------------------------------

    def accept_waveform(self, samples: Any, sample_rate: int = SAMPLE_RATE) -> None:
        if self._finished is not None:
            raise ConfigError("this stream is finished; start a new one")
        x = as_samples(samples, sample_rate, SAMPLE_RATE, what="stream audio")
        self._audio.append(x)
        self._samples += len(x)
        for p in self.vad.accept(x):
            if p >= self.cfg.threshold:
                if self._first_speech is None:
                    self._first_speech = self._windows
                self._last_speech = self._windows
            self._windows += 1

    @property
    def buffered_seconds(self) -> float:
        """Seconds of audio kept for the current utterance."""
        return self._samples / SAMPLE_RATE

    @property
    def endpoint_rule(self) -> str | None:
        if self._finished is not None:
            return None
        heard = self._last_speech is not None
        step = self.vad.seconds
        trailing = (self._windows - (self._last_speech + 1 if heard else 0)) * step
        return self.endpoint.rule(trailing, self._windows * step, heard)

    @property
    def is_endpoint(self) -> bool:
        return self.endpoint_rule is not None

    @property
    def partial(self) -> str:
        return self._finished.text if self._finished is not None else ""

    @property
    def partial_words(self) -> tuple[Word, ...]:
        return (self._finished.words or ()) if self._finished is not None else ()

    @property
    def active(self) -> tuple[str, ...]:
        return self.languages

    @property
    def lid(self) -> dict[str, float] | None:
        return None

    def reset(self) -> Transcript:
        """Close the current utterance: its transcript (``extra``: ``utterance`` k, ``start``,
        ``end``, ``endpoint``), word times from the start of the stream."""
        if self._finished is not None:
            raise ConfigError("this stream is finished; start a new one")
        rule = self.endpoint_rule
        result = self._close()
        result.extra["endpoint"] = rule
        return result

    def finish(self) -> Transcript:
        """The last utterance; the stream takes no more audio."""
        if self._finished is None:
            last = self._close()
            last.extra["endpoint"] = None
            self._finished = last
        return self._finished

    def _close(self) -> Transcript:
        audio = np.concatenate(self._audio) if self._audio else np.zeros(0, np.float32)
        start = self._start / SAMPLE_RATE
        end = (self._start + self._samples) / SAMPLE_RATE
        if self._first_speech is None:  # nothing heard: no text, in the one language it has
            result = Transcript("", self.languages[0] if len(self.languages) == 1 else None,
                                None, ())
        else:
            pad = int(self.cfg.pad * SAMPLE_RATE)
            window = self.vad.window
            a = max(0, self._first_speech * window - pad)
            b = min(len(audio), (self._last_speech + 1) * window + pad)
            heard = self.transcribe(audio[a:b])
            offset = start + a / SAMPLE_RATE
            words = None if heard.words is None else tuple(
                Word(w.word, w.start + offset, w.end + offset, w.confidence) for w in heard.words)
            result = Transcript(heard.text, heard.language, heard.lid, words,
                                extra=dict(heard.extra))
        result.extra.update(utterance=self._utterances, start=round(start, 3),
                            end=round(end, 3))
        self._utterances += 1
        self._start += self._samples
        self._audio, self._samples, self._windows = [], 0, 0
        self._first_speech = self._last_speech = None
        return result
