"""What every loaded model is, whatever its family: the contract ``speechlab.load`` returns.

One contract per kind of model (``kind``):

- ``asr`` -> :class:`Recognizer`: ``transcribe(audio, sample_rate, language, **options)`` gives
  a :class:`Transcript`; a streaming recognizer also gives a :class:`Stream` (``stream()``:
  ``accept_waveform``, ``partial`` and its ``partial_words``, ``active``, ``lid``,
  ``is_endpoint``, ``reset``, ``finish``), sherpa-onnx's one stream API;
- ``tts`` -> :class:`Synthesizer`: ``synthesize(text=..., labels=...)`` gives :class:`Speech`;
- ``ssl`` -> :class:`Encoder`: a wav2vec 2.0 encoder to diagnose (``waveform``, ``model``).

Every model also says what it is and can do (:class:`Model`): ``family`` (the name its card
carries), ``title`` (how a message names it), ``languages``, ``sample_rate``, ``backend``
(``torch`` or ``onnx``) and ``capabilities``, a set of :data:`CAPABILITIES` that the CLI and the
server read instead of asking for attributes or classes: ``transcribe``, ``stream``,
``early_stop`` (decoders switched off by the LID head), ``lattice`` (the topology panel),
``attention`` (an :class:`Encoder` to diagnose: ``encoder``), ``synthesize``, ``onnx`` (runs
on onnxruntime: ``onnx()``, ``to_onnx_package()``), ``hotwords``, ``lm_fusion`` and
``new_words`` (hotwords outside the vocabulary are added to it; ``new_words = False`` on the
model turns that off), ``word_lm`` (``use_word_lm``: decode with another word LM). :class:`ModelBase` gives a family's class
the defaults for what it does not offer (each refuses with one clear error).

The families implement these (:mod:`speechlab.asr.rnnt.recognizer`,
:mod:`speechlab.asr.ctc.recognizer`, :mod:`speechlab.ssl.wav2vec2.recognizer`,
:mod:`speechlab.tts.synthesis`); the type checker holds each of them to its protocol
(``make typecheck``, ``tests/test_contract.py``). :func:`as_recognizer`,
:func:`as_synthesizer` and :func:`as_encoder` narrow a loaded model to its kind with one error
for the wrong kind.

Also here, shared by the recognizers: :class:`Word`, :class:`Transcript` and
:func:`words_from_tokens`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from speechlab.errors import ConfigError, DataError

if TYPE_CHECKING:
    import torch

    from speechlab.endpoint import EndpointConfig
    from speechlab.package import PackageCard

#: The most alternatives ``transcribe(..., nbest=N)`` is asked for through the CLI or the server.
MAX_NBEST = 100
#: The most hotwords one request may bias a search with.
MAX_HOTWORDS = 1000
#: What a model can be asked for (:attr:`Model.capabilities`).
CAPABILITIES = ("transcribe", "stream", "early_stop", "lattice", "attention", "synthesize",
                "onnx", "hotwords", "lm_fusion", "new_words", "word_lm")
KINDS = ("asr", "tts", "ssl")
#: A package's parts as a model writes them: its card, its weights (None for ONNX graphs, which
#: hold them) and its side files by name.
PackageParts = tuple["PackageCard", "dict[str, torch.Tensor] | None", dict[str, Any]]
Progress = Callable[[float], None]


# ---------------------------------------------------------------------------------------------
# What recognition gives back


@dataclass(frozen=True)
class Word:
    """One recognized word and when it was spoken (seconds from the start of the audio);
    ``confidence``: the probability the recognizer gives it, from its competing hypotheses
    (:mod:`speechlab.confidence`; None where it gives none)."""

    word: str
    start: float
    end: float
    confidence: float | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"word", "start", "end"[, "confidence"]}``, as ``transcribe --json`` writes it."""
        out: dict[str, Any] = {"word": self.word, "start": round(self.start, 3),
                               "end": round(self.end, 3)}
        if self.confidence is not None:
            out["confidence"] = round(self.confidence, 4)
        return out


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
    #: the n best distinct texts with their posterior probabilities, best first (when asked
    #: for: ``transcribe(..., nbest=N)``)
    nbest: tuple[tuple[str, float], ...] | None = field(default=None, compare=False)

    def to_json(self, file: str | None = None) -> dict[str, Any]:
        """The JSON object of ``speechlab transcribe --json`` (and of the server)."""
        out: dict[str, Any] = {} if file is None else {"file": file}
        out.update(text=self.text, language=self.language,
                   lid=None if self.lid is None else {k: round(float(v), 6)
                                                      for k, v in self.lid.items()},
                   words=None if self.words is None else [w.to_json() for w in self.words])
        if self.nbest is not None:
            out["nbest"] = self.nbest_json()
        return out

    def nbest_json(self) -> list[dict[str, Any]] | None:
        """The n-best as JSON lists it (``[{"text", "p"}, ...]``), None when not asked for."""
        if self.nbest is None:
            return None
        return [{"text": t, "p": round(p, 4)} for t, p in self.nbest]


def words_from_tokens(symbols: Sequence[str], frames: Sequence[int], frame_seconds: float, *,
                      starts_word: Callable[[str], bool], strip: Callable[[str], str] | None = None,
                      end_frames: Sequence[int] | None = None,
                      spans: list[tuple[int, int]] | None = None) -> tuple[Word, ...]:
    """Words from emitted symbols and the frame each was emitted on.

    ``starts_word(symbol)`` says whether a symbol begins a new word (a ``B_`` grapheme, a
    space's successor, ...); ``strip(symbol)`` gives the symbol's written form (default: the
    symbol; an empty string for a word-boundary symbol such as ``|``). A word lasts from its
    first symbol's frame to the end of its last symbol's frame (``end_frames`` where the
    alignment knows them, else the next frame). ``spans``, when given, receives each word's
    symbols as (first index, one past the last) into ``symbols``.
    """
    written = strip or (lambda s: s)
    words: list[Word] = []
    found: list[tuple[int, int]] = []
    text, start, end, first = "", 0, 0, 0
    for i, (sym, frame) in enumerate(zip(symbols, frames)):
        last = end_frames[i] if end_frames is not None else frame + 1
        if starts_word(sym) or not text:
            if text:
                words.append(Word(text, start * frame_seconds, end * frame_seconds))
                found.append((first, i))
            text, start, first = "", frame, i
        text += written(sym)
        end = last
        if not text:  # a boundary symbol alone starts nothing
            start, first = last, i + 1
    if text:
        words.append(Word(text, start * frame_seconds, end * frame_seconds))
        found.append((first, len(symbols)))
    if spans is not None:
        spans += found
    return tuple(words)


# ---------------------------------------------------------------------------------------------
# The contracts


class Model(Protocol):
    """What every loaded model says of itself and offers whatever its kind."""

    @property
    def kind(self) -> str: ...            # "asr", "tts" or "ssl"
    @property
    def family(self) -> str: ...          # the family name its card and checkpoints carry
    @property
    def title(self) -> str: ...           # how a message names it: "a CTC-topology model"
    @property
    def languages(self) -> tuple[str, ...]: ...
    @property
    def sample_rate(self) -> int: ...
    @property
    def backend(self) -> str: ...         # "torch" or "onnx"
    @property
    def capabilities(self) -> frozenset[str]: ...
    #: a recognizer's map to calibrated word confidences (:class:`ModelBase`); None: raw
    confidence_map: Any

    def to_package(self) -> PackageParts:
        """The package's parts (:mod:`speechlab.package`) with PyTorch weights."""
        ...

    def to_onnx_package(self) -> PackageParts:
        """The package's parts with the networks as ONNX graphs ("onnx" capability)."""
        ...

    def onnx(self, threads: int = 1) -> Model:
        """The same model run by onnxruntime ("onnx" capability)."""
        ...

    def to(self, device: Any) -> Model:
        """This model with its networks on ``device`` (a name or ``torch.device``); searches,
        lattices and vocoders stay on the CPU."""
        ...


class Stream(Protocol):
    """Live recognition: samples in as they arrive, the partial text after each piece."""

    def accept_waveform(self, samples: Any, sample_rate: int = 16000) -> None: ...

    @property
    def partial(self) -> str: ...

    @property
    def partial_words(self) -> tuple[Word, ...]: ...  # partial's words: times, confidences

    @property
    def active(self) -> tuple[str, ...]: ...   # the languages still decoded

    @property
    def lid(self) -> dict[str, float] | None: ...

    def finish(self) -> Transcript: ...

    @property
    def is_endpoint(self) -> bool: ...        # the current utterance has ended (speechlab.endpoint)

    def reset(self) -> Transcript: ...        # close it: its transcript; the next one starts


class Encoder(Model, Protocol):
    """A wav2vec 2.0 encoder to diagnose: its network and its input for some audio."""

    @property
    def model(self) -> Any: ...

    def waveform(self, audio: Any, sample_rate: int = 16000) -> torch.Tensor: ...


class Recognizer(Model, Protocol):
    """A speech recognizer (``kind == "asr"``)."""

    @property
    def streaming(self) -> bool: ...
    @property
    def methods(self) -> tuple[str, ...]: ...   # what transcribe's ``method`` takes, default first

    def transcribe(self, audio: Any, sample_rate: int = 16000, language: str | None = None,
                   *, method: str | None = None, beam: int | None = None, nbest: int = 0,
                   progress: Progress | None = None) -> Transcript:
        """``audio`` (a path, or mono samples at ``sample_rate``) -> its :class:`Transcript`:
        in ``language`` (None: the model's, or its LID head's pick), searched by ``method``
        (one of :attr:`methods`; None: the first) with ``beam`` (None: the model's);
        ``nbest`` > 0: ``Transcript.nbest`` holds that many distinct texts with their
        posteriors; ``progress`` is called with the seconds of audio done. A family may take
        more keywords (the RNN-T's early stopping, ``tau`` and ``s_th``)."""
        ...

    def stream(self, language: str | None = None, *, method: str | None = None,
               beam: int | None = None, tau: float = math.inf,
               s_th: float = math.inf, endpoint: EndpointConfig | None = None) -> Stream:
        """A live stream ("stream" capability); ``tau`` and ``s_th`` switch decoders off early
        ("early_stop" capability)."""
        ...

    def use_lm(self, language: str, arpa: Any, weight: float, bonus: float = 0.0) -> None:
        """Fuse the token n-gram LM ``arpa`` (a path or an ARPA LM over the model's tokens) into
        ``language``'s search with ``weight`` and ``bonus`` per label from now on
        ("lm_fusion" capability)."""
        ...

    def use_word_lm(self, arpa: Any) -> None:
        """Decode with the word n-gram LM ``arpa`` (a path) instead of the model's own from now
        on, its vocabulary the LM's ("word_lm" capability)."""
        ...

    @property
    def encoder(self) -> Encoder:
        """The wav2vec 2.0 encoder inside ("attention" capability)."""
        ...


class Speech(Protocol):
    """What synthesis gives: a waveform at a sample rate."""

    @property
    def waveform(self) -> np.ndarray: ...
    @property
    def sample_rate(self) -> int: ...


class Synthesizer(Model, Protocol):
    """A speech synthesizer (``kind == "tts"``)."""

    def synthesize(self, text: str | None = None, labels: Any = None, *,
                   window: int | None | str = "model") -> Speech:
        """Speech for ``text`` or phone-aligned ``labels``; ``window`` (frames of attention,
        None: the whole utterance) as the model was trained by default."""
        ...


class ModelBase:
    """The defaults of :class:`Model` for what a family's class does not offer; each refuses
    with one error naming the model. A class sets ``kind``, ``family``, ``title`` and
    ``CAPABILITIES`` (or overrides :attr:`capabilities`)."""

    kind: str
    family: str
    title: str
    CAPABILITIES: frozenset[str] = frozenset()
    streaming: bool = False
    methods: tuple[str, ...] = ()
    #: The map from the family's raw word confidences to calibrated ones
    #: (:class:`speechlab.confidence.ConfidenceMap`, fitted by ``speechlab calibrate --fit``
    #: and kept in the package's card); None: the raw ones.
    confidence_map: Any = None

    def calibrated(self, confidences: Sequence[float | None]) -> list[float | None]:
        """``confidences`` through :attr:`confidence_map` (as they are without one)."""
        if self.confidence_map is None:
            return list(confidences)
        return cast(list[float | None], self.confidence_map.apply(confidences))

    @property
    def capabilities(self) -> frozenset[str]:
        return self.CAPABILITIES

    @property
    def backend(self) -> str:
        return "torch"

    def to_onnx_package(self) -> PackageParts:
        raise ConfigError(f"{self.title} does not export to ONNX")

    def onnx(self, threads: int = 1) -> Model:
        raise ConfigError(f"{self.title} does not run on onnxruntime")

    def to(self, device: Any) -> Model:
        """This model with its networks on ``device`` (module :mod:`speechlab.devices` names);
        the CPU is where every model starts. A family moves its networks in
        ``_networks_to``; an ONNX model runs on onnxruntime's CPU build only."""
        from speechlab.devices import resolve

        target = resolve(device)
        if target.type == "cpu":
            return cast(Model, self)
        if self.backend == "onnx":
            raise ConfigError(f"{self.title} runs its ONNX graphs with onnxruntime's CPU build; "
                              f"load it with backend='torch' to run it on {target}")
        move = getattr(self, "_networks_to", None)
        if move is None:
            raise ConfigError(f"{self.title} runs on the CPU only")
        move(target)
        return cast(Model, self)

    def stream(self, language: str | None = None, *, method: str | None = None,
               beam: int | None = None, tau: float = math.inf,
               s_th: float = math.inf, endpoint: EndpointConfig | None = None) -> Stream:
        raise ConfigError(f"{self.title} reads whole recordings and does not stream")

    def use_lm(self, language: str, arpa: Any, weight: float, bonus: float = 0.0) -> None:
        raise ConfigError(f"{self.title} takes no token LM for shallow fusion (it decodes with "
                          "the LM its package holds, or none)")

    def use_word_lm(self, arpa: Any) -> None:
        raise ConfigError(f"{self.title} decodes with no word LM of yours (a CTC-topology model "
                          "does)")

    @property
    def encoder(self) -> Encoder:
        raise ConfigError(f"{self.title} has no wav2vec 2.0 encoder to diagnose")

    def package_parts(self, network: Any, data: dict[str, Any],
                      files: dict[str, tuple[str, Any]] | None = None, *,
                      onnx: dict[str, tuple[str, bytes]] | None = None) -> PackageParts:
        """What ``to_package`` / ``to_onnx_package`` return, made one way for every family:
        the card (this model's family, kind and languages; ``network.config``, the config its
        family's builder rebuilds it from; ``data``, what the family reads back in
        ``from_package``), the weights, and the side files. ``files`` and ``onnx`` map a role
        to (file name, bytes or a file to copy); with ``onnx`` (the networks as ONNX graphs)
        the package's backend is onnx and it has no weights."""
        from speechlab.config import to_dict
        from speechlab.package import PackageCard

        sides = {**(files or {}), **(onnx or {})}
        if self.confidence_map is not None:
            data = {**data, "confidence_map": self.confidence_map.to_json()}
        card = PackageCard(family=self.family, kind=self.kind, config=to_dict(network.config),
                           languages=tuple(cast(Model, self).languages),
                           files={role: name for role, (name, _) in sides.items()}, data=data,
                           backend="onnx" if onnx else "torch")
        weights = None if onnx else network.state_dict()
        return card, weights, {name: content for name, content in sides.values()}


def recognition_options(model: Recognizer, *, language: str | None = None,
                        method: str | None = None, beam: int | None = None,
                        tau: float | str | None = None, s_th: float | str | None = None,
                        languages: Sequence[str] | str | None = None,
                        nbest: int | str | None = None,
                        hotwords: Sequence[str] | str | None = None,
                        hotword_score: float | str | None = None,
                        name: str = "this model", flag: str = "") -> dict[str, Any]:
    """The keywords of ``model.transcribe`` / ``model.stream`` a request asks for (None: not
    given), each checked against the model: ``language`` one it knows, ``method`` one of its
    :attr:`~Recognizer.methods`, ``beam`` >= 1, ``tau`` / ``s_th`` numbers >= 0 or ``inf`` (text
    from a query string is parsed) for a model with the "early_stop" capability, ``languages``
    an allowlist (a sequence, or comma-separated text) of languages it knows, for a model with
    a LID head (the "early_stop" capability) and no ``language`` given. The CLI
    (``flag="--"``) and the server share it; ``name`` says which model in the errors. Returns
    ``{"language": ..., **options}``."""
    biased: dict[str, Any] = {}
    if hotwords is not None and hotwords != "":
        words = [w.strip() for w in hotwords.split(",")] if isinstance(hotwords, str) \
            else [str(w).strip() for w in hotwords]
        if not all(words) or len(words) > MAX_HOTWORDS:
            raise ConfigError(f"{flag}hotwords: 1 to {MAX_HOTWORDS} non-empty words or "
                              f"phrases, comma-separated, got {hotwords!r}")
        if "hotwords" not in model.capabilities:
            raise ConfigError(f"{flag}hotwords: {name} does not take hotwords (the RNN-T with "
                              "a softmax per language and the CTC-topology models do)")
        biased["hotwords"] = words
        if hotword_score is not None and hotword_score != "":
            try:
                score = float(hotword_score)
            except (TypeError, ValueError):
                score = math.nan
            if not 0 < score <= 100:
                raise ConfigError(f"{flag}hotword{'-' if flag else '_'}score must be a number "
                                  f"in (0, 100], got {hotword_score!r}")
            biased["hotword_score"] = score
    if nbest is not None and nbest != "":
        try:
            count = int(nbest)
        except (TypeError, ValueError):
            raise ConfigError(f"{flag}nbest must be a whole number from 0 to {MAX_NBEST}, got "
                              f"{nbest!r}") from None
        if not 0 <= count <= MAX_NBEST:
            raise ConfigError(f"{flag}nbest must be a whole number from 0 to {MAX_NBEST}, got "
                              f"{nbest!r}")
    else:
        count = 0
    if languages is not None and languages != "":
        listed = [lang.strip() for lang in languages.split(",")] if isinstance(languages, str) \
            else list(languages)
        option = flag + "languages"
        unknown = [lang for lang in listed if lang not in model.languages]
        if unknown or not listed:
            raise ConfigError(f"{option} {','.join(listed)!r}: {name} knows "
                              f"{', '.join(model.languages)}")
        if "early_stop" not in model.capabilities:
            raise ConfigError(f"{option}: an allowlist is for the multi-softmax models with a "
                              f"LID head; {name} is not one (give --language instead)"
                              if flag else f"{option}: an allowlist is for the multi-softmax "
                              f"models with a LID head; {name} is not one")
        if language is not None:
            raise ConfigError(f"{flag}language and {option}: give one of them")
        allowed: dict[str, Any] = {"languages": tuple(dict.fromkeys(listed))}
    else:
        allowed = {}
    if language is not None and language not in model.languages:
        raise ConfigError(f"{flag}language {language!r}: {name} knows "
                          f"{', '.join(model.languages)}")
    opts: dict[str, Any] = {"language": language}
    if beam is not None:
        if beam < 1:
            raise ConfigError(f"{flag}beam must be >= 1, got {beam}")
        opts["beam"] = beam
    if method is not None:
        if method not in model.methods:
            raise ConfigError(f"{flag}method {method!r}: {name} decodes with "
                              f"{', '.join(model.methods)}")
        opts["method"] = method
    for key, given in (("tau", tau), ("s_th", s_th)):
        option = flag + (key.replace("_", "-") if flag else key)
        if given is None or given == "":
            continue
        try:
            value = float(given)
        except ValueError:
            raise ConfigError(f"{option} must be a number >= 0 (or inf), got {given!r}") from None
        if not value >= 0:  # NaN too
            raise ConfigError(f"{option} must be a number >= 0 (or inf), got {given!r}")
        if value == math.inf:
            continue
        if "early_stop" not in model.capabilities:
            raise ConfigError(f"{option}: early stopping is for the streaming multi-softmax "
                              f"models with a LID head; {name} is not one")
        opts[key] = value
    return {**opts, **allowed, **({"nbest": count} if count else {}), **biased}


def _narrow(model: Model, kind: str, what: str, source: object) -> Any:
    if model.kind != kind:
        raise DataError(f"{source}: {model.title} ({model.kind}), not {what}")
    return model


def as_recognizer(model: Model, source: object = "the model") -> Recognizer:
    """``model`` as a :class:`Recognizer`; DataError naming what it is otherwise."""
    return cast(Recognizer, _narrow(model, "asr", "a speech recognizer", source))


def as_synthesizer(model: Model, source: object = "the model") -> Synthesizer:
    """``model`` as a :class:`Synthesizer`; DataError naming what it is otherwise."""
    return cast(Synthesizer, _narrow(model, "tts", "a speech synthesizer", source))


def as_encoder(model: Model, source: object = "the model") -> Encoder:
    """The wav2vec 2.0 encoder of ``model`` (itself, or a recognizer's with "attention")."""
    if model.kind == "ssl":
        return cast(Encoder, model)
    if "attention" in model.capabilities:
        return as_recognizer(model, source).encoder
    raise DataError(f"{source}: {model.title} has no wav2vec 2.0 encoder to diagnose")
