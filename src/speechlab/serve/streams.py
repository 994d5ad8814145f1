"""Live recognition over a WebSocket: ``/ws/asr?model=NAME[&language=L][&tau=T&s_th=S]``
``[&silence_before_text=S&silence_after_text=S&max_utterance=S]`` (the endpoint rules of
:mod:`speechlab.endpoint`, seconds).

The client sends binary frames of float32 little-endian mono PCM at 16 kHz and, at the end,
the text frame ``done``. The server answers with JSON text frames:

- ``{"type": "partial", "text", "words", "lid", "active", "seconds"}`` as audio is decoded:
  the best text so far and its words (times and confidences as the search stands now: a later
  piece may change them), the LID head's posteriors (None without one), the languages whose
  decoders still run under early stopping (Sec. 6.3 of the multi-softmax paper), and the
  seconds of audio decoded;
- ``{"type": "final", "text", "language", "lid", "words", "segment", "start", "end",
  "last": false}`` each time a streaming model's utterance ends (an endpoint): that
  utterance's :class:`~speechlab.contract.Transcript` as ``speechlab transcribe --json``
  writes it, ``segment`` its number from 0, ``start``/``end`` its seconds in the stream; the
  stream goes on with the next utterance, and the partials speak of that one;
- one ``{"type": "final", ..., "segment", "last": true}`` after ``done``: the last utterance
  (the whole recording when no endpoint came, and for a model that reads whole recordings);
- with ``vad=1``, a model that reads whole recordings is given utterances cut by voice activity
  (:class:`speechlab.streaming.VadStream`): a final for each as its pause ends it, partials
  without text in between;
- ``{"type": "error", "message"}`` for anything malformed. A bad frame is skipped and the
  stream goes on; a stream that cannot go on (unknown model, bad settings, the server busy,
  audio arriving far faster than it is decoded, a recording too long to keep) is closed after
  its error.

A streaming model decodes as audio arrives, at most a second per step so that a large frame
still gives partial results; a model that reads whole recordings keeps the audio (up to
``max_buffered_seconds``) and decodes it at ``done``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np

from speechlab.endpoint import EndpointConfig
from speechlab.errors import ConfigError, DataError, SpeechlabError
from speechlab.serve.models import ServedModel
from speechlab.serve.runtime import Busy, NotFound, Runtime
from speechlab.serve.uploads import pcm_frame

log = logging.getLogger(__name__)

SAMPLE_RATE = 16000
#: Samples decoded per step: a step never holds a worker for long.
STEP_SAMPLES = SAMPLE_RATE
#: Within a step, endpoints are looked for after every piece of this many samples (100 ms).
PIECE_SAMPLES = SAMPLE_RATE // 10

# WebSocket close codes (RFC 6455): normal, policy violation (bad request), internal error,
# try again later.
NORMAL, BAD_REQUEST, INTERNAL, TRY_LATER = 1000, 1008, 1011, 1013


class Fatal(Exception):
    """An error after which the stream cannot go on."""

    def __init__(self, message: str, code: int = BAD_REQUEST) -> None:
        super().__init__(message)
        self.code = code


class AsrSession:
    """One WebSocket recognition stream (module doc)."""

    def __init__(self, ws: Any, runtime: Runtime) -> None:
        self.ws = ws
        self.runtime = runtime
        self.served: ServedModel | None = None
        self.opts: dict[str, Any] = {}
        self.stream: Any = None
        self.pending: list[np.ndarray] = []
        self.pending_samples = 0
        self.received_samples = 0  # in all, against max_audio_seconds
        self.decoded_samples = 0
        self.done = False
        self.closed = False
        self.wake = asyncio.Event()
        self.send_lock = asyncio.Lock()
        self.segments = 0  # utterances finished by an endpoint
        self.by_voice = False  # a model that reads whole recordings, cut by voice activity

    # -----------------------------------------------------------------------------------------
    # The connection

    async def run(self) -> None:
        ws = self.ws
        await ws.accept()
        try:
            self._open()
        except (SpeechlabError, Busy, NotFound) as e:
            await self._fail(str(e), TRY_LATER if isinstance(e, Busy) else BAD_REQUEST)
            return
        except Exception:
            log.exception("opening a stream failed")
            await self._fail("the server could not open this stream (an internal error, "
                             "logged on the server)", INTERNAL)
            return
        try:
            decoder = asyncio.create_task(self._decode())
            try:
                await self._receive()
            finally:
                self.closed = True
                self.wake.set()
                try:
                    await decoder
                except Exception:  # already reported to the client, or the client is gone
                    log.debug("stream decoder ended with an error", exc_info=True)
        finally:
            self.runtime.streams.give_back()

    def _open(self) -> None:
        query = self.ws.query_params
        self.served = self.runtime.model(query.get("model"), "asr")
        self.opts = self.served.options(query)
        vad = query.get("vad", "") in ("1", "true", "yes")
        if self.served.streaming:
            if vad:
                raise ConfigError(f"vad=1 is for models that read whole recordings; "
                                  f"{self.served.name} streams and ends its utterances itself")
            endpoint = EndpointConfig.from_options(query)
            self.stream = self.served.model.stream(**self.opts, endpoint=endpoint)
        elif vad:
            self.stream = self._vad_stream(EndpointConfig.from_options(query))
            self.by_voice = True
        self.runtime.streams.take()  # last: nothing after it can fail and keep the slot

    def _vad_stream(self, endpoint: EndpointConfig) -> Any:
        """A stream of utterances cut by voice activity for a model that reads whole
        recordings (:class:`speechlab.streaming.VadStream`); each utterance is transcribed on
        the stream's worker under the model's lock, as a job would be."""
        from speechlab.streaming import VadStream

        model, lock = self.served.model, self.runtime.locks[self.served.name]
        opts = dict(self.opts)
        language = opts.pop("language", None)

        def transcribe(samples: np.ndarray) -> Any:
            with lock:
                return model.transcribe(samples, SAMPLE_RATE, language, **opts)

        return VadStream(transcribe, endpoint, languages=tuple(model.languages))

    async def _receive(self) -> None:
        limits = self.runtime.limits
        while True:
            try:
                # Before 'done' a stream that sends nothing holds a slot for nobody: closed
                # after idle_seconds. After 'done' the decoder finishes and closes it.
                message = await asyncio.wait_for(
                    self.ws.receive(), None if self.done else limits.idle_seconds)
            except asyncio.TimeoutError:
                await self._fail(f"no audio for {limits.idle_seconds:g} s: the stream is closed "
                                 "(--idle-s); open a new one", TRY_LATER)
                return
            if message["type"] == "websocket.disconnect":
                return
            data, text = message.get("bytes"), message.get("text")
            try:
                if data is not None:
                    if self.done:
                        raise DataError("audio after 'done': the stream is finished")
                    samples = pcm_frame(data)
                    self.received_samples += len(samples)
                    if self.received_samples > limits.max_audio_seconds * SAMPLE_RATE:
                        raise Fatal(f"the stream passed {limits.max_audio_seconds:g} s, the most "
                                    "this server takes in one stream (--max-audio-s); open "
                                    "another")
                    self.pending.append(samples)
                    self.pending_samples += len(samples)
                    behind = self.pending_samples / SAMPLE_RATE
                    if self.stream is not None and behind > limits.max_pending_seconds:
                        raise Fatal(f"audio arrives faster than it is decoded ({behind:.0f} s "
                                    "waiting); send it at most at real-time pace")
                    if self.stream is None and behind > limits.max_buffered_seconds:
                        raise Fatal(f"the recording passed {limits.max_buffered_seconds:g} s, "
                                    f"the most this server keeps for {self.served.name} (which "
                                    "decodes whole recordings); send shorter ones")
                    self.wake.set()
                elif text is not None:
                    if text.strip() != "done":
                        raise DataError(f"unknown text frame {text[:40]!r}: the only text frame "
                                        "is 'done'")
                    if self.done:
                        raise DataError("'done' twice: the stream is finished")
                    self.done = True
                    self.wake.set()
            except Fatal as e:
                await self._fail(str(e), e.code)
                return
            except DataError as e:
                await self._send({"type": "error", "message": str(e)})
            if self.closed:
                return

    async def _send(self, message: dict[str, Any]) -> None:
        async with self.send_lock:
            try:
                await self.ws.send_json(message)
            except Exception:  # the client went away; the receive loop will see it
                self.closed = True
                self.wake.set()

    async def _fail(self, message: str, code: int) -> None:
        await self._send({"type": "error", "message": message})
        await self._close(code)

    async def _close(self, code: int) -> None:
        self.closed = True
        self.wake.set()
        async with self.send_lock:
            try:
                await self.ws.close(code)
            except Exception:
                pass  # already closed by the client

    # -----------------------------------------------------------------------------------------
    # Decoding

    async def _decode(self) -> None:
        try:
            while not self.closed:
                await self.wake.wait()
                self.wake.clear()
                if self.stream is not None:
                    while self.pending and not self.closed:
                        messages = await self.runtime.step(self._step, self._take(STEP_SAMPLES))
                        for message in messages:
                            await self._send(message)
                if self.done and not self.closed and (not self.pending or self.stream is None):
                    await self._send(await self._final())
                    await self._close(NORMAL)
        except SpeechlabError as e:
            await self._fail(str(e), BAD_REQUEST)
        except Exception:
            log.exception("decoding a stream of %s failed", self.served.name)
            await self._fail("the server could not decode this stream (an internal error, "
                             "logged on the server)", INTERNAL)

    def _take(self, limit: int) -> np.ndarray:
        """Up to ``limit`` of the oldest pending samples."""
        taken, n = [], 0
        while self.pending and n < limit:
            piece = self.pending[0]
            if n + len(piece) > limit:
                taken.append(piece[: limit - n])
                self.pending[0] = piece[limit - n:]
                n = limit
                break
            taken.append(self.pending.pop(0))
            n += len(piece)
        self.pending_samples -= n
        return np.concatenate(taken) if len(taken) > 1 else taken[0]

    def _step(self, samples: np.ndarray) -> list[dict[str, Any]]:
        """On a worker thread: decode ``samples`` a piece at a time, closing an utterance at
        each endpoint; the finals of the utterances closed, then the partial result."""
        stream = self.stream
        out = []
        for at in range(0, len(samples), PIECE_SAMPLES):
            piece = samples[at:at + PIECE_SAMPLES]
            stream.accept_waveform(piece, SAMPLE_RATE)
            self.decoded_samples += len(piece)
            if stream.is_endpoint:
                out.append(self._utterance(stream.reset(), last=False))
        kept = self.stream.buffered_seconds if self.by_voice else 0.0
        if kept > self.runtime.limits.max_buffered_seconds:
            raise DataError(f"{kept:.0f} s of one utterance without a pause, the most this "
                            f"server keeps for {self.served.name} (which decodes whole "
                            "recordings); lower max_utterance")
        lid = stream.lid
        out.append({"type": "partial", "text": stream.partial, "segment": self.segments,
                    "words": [w.to_json() for w in stream.partial_words],
                    "lid": None if lid is None else {k: round(float(v), 6)
                                                     for k, v in lid.items()},
                    "active": list(stream.active),
                    "seconds": round(self.decoded_samples / SAMPLE_RATE, 3)})
        return out

    def _utterance(self, result: Any, last: bool) -> dict[str, Any]:
        message = {"type": "final", **result.to_json(), "segment": self.segments,
                   "start": result.extra.get("start", 0.0),
                   "end": result.extra.get("end", round(self.decoded_samples / SAMPLE_RATE, 3)),
                   "last": last}
        self.segments += 1
        return message

    async def _final(self) -> dict[str, Any]:
        served = self.served
        if self.stream is not None:
            result = await self.runtime.step(self.stream.finish)
        else:
            if not self.pending:
                raise DataError("no audio was sent before 'done'")
            samples = np.concatenate(self.pending)
            self.pending, self.pending_samples = [], 0
            self.decoded_samples = len(samples)
            result = await self.runtime.job(served, _transcribe, served.model, samples,
                                            self.opts)
        return self._utterance(result, last=True)


def _transcribe(model: Any, samples: np.ndarray, opts: dict[str, Any]) -> Any:
    return model.transcribe(samples, SAMPLE_RATE, **opts)
