"""Speech synthesis for the embedded corpus: espeak-ng through ctypes and festival's voices,
16 kHz mono 16-bit out.

Why ctypes rather than the ``espeak-ng`` program: starting the program costs ~11 ms (it loads
phoneme tables and a dictionary), more than synthesizing a short sentence, while the library
synthesizes at several hundred times real time per core once loaded.

Determinism: libespeak-ng carries wave-generator state (pitch flutter, glottal phase) from one
utterance to the next, and cannot be re-initialised within a process. So an utterance's exact
samples depend on what the same process synthesized before it. :class:`BatchSynthesizer` therefore
runs every batch in a *fresh* worker process (``max_tasks_per_child=1``): the audio of a batch
depends only on the batch's own requests, whichever worker runs it, and a corpus built from a
fixed list of batches is byte-identical for a seed.

Voices are ``<espeak voice>+<variant>`` (variants ``m1..m8``, ``f1..f5`` change formants and pitch
register); each request also sets speed, pitch, pitch range and word gap. "Accents" pick how the
text is turned into espeak input (:data:`ACCENTS`): ``native`` passes it through; ``indian_english``
is our *approximation* of Indian English: the English text is converted to phonemes by espeak's
American English rules, each phoneme is replaced by its usual Indian-English realisation in
espeak's Hindi inventory (retroflex /t d/, dental aspirated /θ/ -> थ, /w/ -> व, monophthong
/eɪ oʊ/ -> /eː oː/, rhotic r...), and the result is spoken by the Hindi voice with Hindi prosody.
It is not a recording of Indian English and is documented as such.

festival's voices (``engine="festival"``, :mod:`speechlab.data.festival`) are spoken by one
festival process per batch, beside espeak-ng's in the same batch.

Optional degradations: additive white/pink/brown noise at a given SNR (numpy, seeded per
request), a sox ``tempo`` change, and any chain of speaker and channel effects
(:mod:`speechlab.audio.augment`), applied last.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import multiprocessing
import shutil
import subprocess
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from speechlab.audio.augment import NOISE_COLORS, Effect, add_noise, apply_effects
from speechlab.data import festival
from speechlab.errors import DataError, MissingToolError
from speechlab.text.respell import prime, respell

__all__ = ["NOISE_COLORS", "add_noise", "SynthRequest", "render", "synthesize_batch",
           "BatchSynthesizer", "ENGINES"]

SAMPLE_RATE = 16000
ESPEAK_SAMPLE_RATE = 22050
# 16000 / 22050 reduced: resample_poly(up=320, down=441).
_RESAMPLE_UP, _RESAMPLE_DOWN = 320, 441

# espeak-ng API constants (speak_lib.h).
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_PHONEMES = 0x100
_PARAM = {"rate": 1, "volume": 2, "pitch": 3, "range": 4, "wordgap": 7}

VARIANTS = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "f1", "f2", "f3", "f4", "f5")


@dataclass(frozen=True)
class SynthRequest:
    """One utterance to synthesize.

    Args:
        text: what to say (UTF-8, any script espeak-ng reads).
        voice: espeak-ng voice name with optional variant, e.g. ``"hi+f2"``, ``"en-gb+m3"``;
            for festival, one of :data:`speechlab.data.festival.VOICES`.
        engine: key of :data:`ENGINES` (``"espeak-ng"`` or ``"festival"``).
        accent: key of :data:`ACCENTS` (``"native"``, ``"indian_english"``; for festival, a
            key of :data:`FESTIVAL_ACCENTS`: ``"native"``, ``"devanagari"`` (Gujarati/Tamil
            text read by the Hindi voice) or ``"respelt"`` (English respelt for a voice of
            another language, :mod:`speechlab.text.respell`).
        rate: speaking rate in words per minute (espeak 80..450, default 175; festival
            stretches its durations by 175 / rate).
        pitch: base pitch 0..100 (50 = voice default).
        pitch_range: intonation range 0..100 (0 = monotone, 50 = default).
        word_gap: extra pause between words, in 10 ms units.
        noise_snr_db: add noise at this SNR (dB, relative to speech RMS); None = clean.
        noise_color: key of :data:`NOISE_COLORS`.
        tempo: sox tempo factor (1.0 = unchanged; needs sox).
        seed: seed of this request's noise generator.
        effects: speaker and channel effects applied last (:mod:`speechlab.audio.augment`);
            a ``babble`` effect mixes in the other utterances of the same batch.
    """

    text: str
    voice: str
    engine: str = "espeak-ng"
    accent: str = "native"
    rate: int = 175
    pitch: int = 50
    pitch_range: int = 50
    word_gap: int = 0
    noise_snr_db: float | None = None
    noise_color: str = "white"
    tempo: float = 1.0
    seed: int = 0
    effects: tuple[Effect, ...] = ()


class _Espeak:
    """Thin ctypes binding of libespeak-ng in synchronous mode (one per process)."""

    _CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                                 ctypes.c_void_p)

    def __init__(self) -> None:
        name = ctypes.util.find_library("espeak-ng") or "libespeak-ng.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            raise MissingToolError("libespeak-ng not found; install the Debian packages "
                                   "'espeak-ng' and 'libespeak-ng1'") from None
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                     ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                                              ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        # 500 ms buffers: fewer Python callbacks than the 60 ms default.
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 500, None, 0)
        if rate != ESPEAK_SAMPLE_RATE:
            raise MissingToolError(f"libespeak-ng failed to initialise (returned {rate}); "
                                   "reinstall the Debian package 'espeak-ng-data'")
        self._lib = lib
        self._chunks: list[bytes] = []
        # Keep a reference: ctypes callbacks are freed when the Python object is.
        self._cb = self._CALLBACK(self._collect)
        lib.espeak_SetSynthCallback(self._cb)

    def _collect(self, wav, n, _events) -> int:  # noqa: ANN001 (ctypes pointer types)
        if n > 0:
            self._chunks.append(ctypes.string_at(wav, 2 * n))
        return 0

    def set_voice(self, voice: str) -> None:
        if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise DataError(f"espeak-ng has no voice {voice!r}; list them with "
                            "'espeak-ng --voices' (variants: 'espeak-ng --voices=variant')")

    def synthesize(self, text: str, voice: str, *, rate: int, pitch: int, pitch_range: int,
                   word_gap: int, phonemes: bool) -> np.ndarray:
        """int16 samples at 22050 Hz; ``phonemes`` enables ``[[...]]`` phoneme input."""
        self.set_voice(voice)
        params = {"rate": rate, "pitch": pitch, "range": pitch_range, "wordgap": word_gap,
                  "volume": 100}
        for key, value in params.items():
            self._lib.espeak_SetParameter(_PARAM[key], int(value), 0)
        data = text.encode("utf-8") + b"\0"
        self._chunks = []
        flags = _CHARS_UTF8 | (_PHONEMES if phonemes else 0)
        err = self._lib.espeak_Synth(data, len(data), 0, _POS_CHARACTER, 0, flags, None, None)
        if err != 0:
            raise DataError(f"espeak-ng failed (error {err}) on text {text[:60]!r}")
        return np.frombuffer(b"".join(self._chunks), dtype=np.int16)

    def phonemes(self, text: str, voice: str, separator: str = "|") -> list[str]:
        """espeak phoneme mnemonics of ``text``: one string per clause, ``separator`` between
        phonemes, spaces between words."""
        self.set_voice(voice)
        buf = ctypes.c_char_p(text.encode("utf-8"))
        ptr = ctypes.pointer(buf)
        mode = ord(separator) << 8
        clauses = []
        while buf.value:
            out = self._lib.espeak_TextToPhonemes(ptr, _CHARS_UTF8, mode)
            clauses.append(out.decode("utf-8", "replace") if out else "")
        return clauses


_ENGINE: _Espeak | None = None


def engine() -> _Espeak:
    """The process's espeak-ng engine (initialised on first use)."""
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = _Espeak()
    return _ENGINE


# --------------------------------------------------------------------------------------------
# Accents: how a request's text becomes espeak input.

# espeak en-us phoneme -> Hindi-inventory phoneme(s) as an Indian English speaker would say it.
# Consonants: alveolar stops become retroflex (t. d.), the dental fricatives become dental stops
# (theta -> aspirated t#, eth -> d), /w/ and /v/ merge into the labiodental approximant v,
# /ʒ/ -> z, affricates -> Hindi c/J, h -> H. Vowels: diphthongs /eɪ oʊ/ are monophthongs e: o:,
# /æ/ -> E, the r-coloured and centring vowels are rhotic ("bird" -> b@rd.). Phonemes absent
# from the table pass through (espeak's Hindi table inherits the base inventory).
EN_TO_INDIAN: dict[str, str] = {
    "t": "t.", "t#": "t.", "t2": "t.", "d": "d.", "T": "t#", "D": "d", "w": "v", "Z": "z",
    "tS": "c", "dZ": "J", "h": "H", "r-": "r", "n-": "n", "@L": "@l", "?": "t.",
    "I#": "I", "I2": "I", "E": "E", "a": "E", "aa": "a:", "A:": "a:", "A@": "a:r", "0": "O",
    "O2": "O", "O@": "O:r", "o@": "o:r", "@2": "@", "@-": "@", "a#": "@", "3": "@r", "3:": "@r",
    "eI": "e:", "oU": "o:", "aI": "a:I", "aU": "a:U", "OI": "O:I", "i@": "i:@r", "i@3": "i:r",
    "e@": "e:r", "U@": "u:r", "aI@": "a:I@r", "aI3": "a:I@r", ";": "",
}
_STRESS = "',"
_PAUSES = ("_:", "_!", "_")


def _map_phoneme(ph: str) -> str:
    lead = ""
    while ph and ph[0] in _STRESS:
        lead, ph = lead + ph[0], ph[1:]
    for pause in _PAUSES:
        # A pause is glued to the phoneme after it ("_:r"): keep it, map the rest.
        if ph.startswith(pause) and ph != pause:
            return lead + pause + _map_phoneme(ph[len(pause):])
    return lead + EN_TO_INDIAN.get(ph, ph)


def indian_english_phonemes(text: str, eng: _Espeak | None = None) -> str:
    """English ``text`` as espeak Hindi-inventory phonemes (without the ``[[ ]]``)."""
    eng = eng or engine()
    words = []
    for clause in eng.phonemes(text, "en-us", separator="|"):
        for word in clause.split():
            words.append("".join(_map_phoneme(p) for p in word.split("|")))
        words.append("_:")  # keep the clause break as a short pause
    return " ".join(words[:-1])


def _native(text: str, eng: _Espeak) -> tuple[str, bool]:
    return text, False


def _indian_english(text: str, eng: _Espeak) -> tuple[str, bool]:
    return f"[[{indian_english_phonemes(text, eng)}]]", True


# accent name -> (text, engine) -> (espeak input, whether it is [[phoneme]] input)
ACCENTS: dict[str, Callable[[str, _Espeak], tuple[str, bool]]] = {
    "native": _native,
    "indian_english": _indian_english,
}


# --------------------------------------------------------------------------------------------
# Degradations (the noise itself is speechlab.audio.augment's)


def sox_tempo(x: np.ndarray, factor: float, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Change tempo (not pitch) by ``factor`` with sox; ``x`` is int16 (T,)."""
    if shutil.which("sox") is None:
        raise MissingToolError("'sox' not found (needed for tempo changes); install the Debian "
                               "package 'sox'")
    raw = ["-t", "raw", "-r", str(sample_rate), "-e", "signed", "-b", "16", "-c", "1"]
    r = subprocess.run(["sox", *raw, "-", *raw, "-", "tempo", f"{factor:.4f}"],
                       input=x.astype("<i2").tobytes(), capture_output=True)
    if r.returncode != 0:
        raise DataError(f"sox tempo {factor} failed: {r.stderr.decode(errors='replace').strip()}")
    return np.frombuffer(r.stdout, dtype="<i2").astype(np.int16)


# --------------------------------------------------------------------------------------------
# Rendering


@functools.lru_cache(maxsize=1)
def _resample_filter() -> np.ndarray:
    """scipy's default resample_poly low-pass for 22050 -> 16000, designed once, not per call."""
    from scipy.signal import firwin

    max_rate = max(_RESAMPLE_UP, _RESAMPLE_DOWN)
    return firwin(2 * 10 * max_rate + 1, 1.0 / max_rate, window=("kaiser", 5.0))


def _to_16k(x: np.ndarray) -> np.ndarray:
    from scipy.signal import resample_poly

    return resample_poly(x.astype(np.float64) / 32768.0, _RESAMPLE_UP, _RESAMPLE_DOWN,
                         window=_resample_filter())


def _to_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)


def _espeak_raw(req: SynthRequest, eng: _Espeak) -> np.ndarray:
    """espeak-ng's audio for ``req`` at 16 kHz, before degradations."""
    text, phonemes = ACCENTS[req.accent](req.text, eng)
    raw = eng.synthesize(text, req.voice, rate=req.rate, pitch=req.pitch,
                         pitch_range=req.pitch_range, word_gap=req.word_gap, phonemes=phonemes)
    if len(raw) == 0:
        raise DataError(f"espeak-ng produced no audio for {req.text[:60]!r} (voice {req.voice})")
    return _to_int16(_to_16k(raw))


def _respelt(text: str, voice: str) -> str:
    return respell(text, festival.VOICES[voice].language)


# accent -> how festival's input is made from the request's text and voice
FESTIVAL_ACCENTS: dict[str, Callable[[str, str], str]] = {
    "native": lambda text, voice: text,
    "devanagari": lambda text, voice: festival.to_devanagari(text),
    "respelt": _respelt,
}


def _festival_items(reqs: Sequence[SynthRequest]) -> list[festival.FestivalItem]:
    for req in reqs:
        if req.accent not in FESTIVAL_ACCENTS:
            raise DataError(f"unknown festival accent {req.accent!r}; choose one of "
                            f"{list(FESTIVAL_ACCENTS)}")
    # the respelt sentences' words looked up together (one espeak-ng process for the words
    # CMUdict lacks), then each sentence respelt from them
    prime([r.text for r in reqs if r.accent == "respelt"])
    return [festival.FestivalItem(FESTIVAL_ACCENTS[r.accent](r.text, r.voice), r.voice,
                                  round(175.0 / max(r.rate, 1), 4)) for r in reqs]


def _degrade(req: SynthRequest, audio: np.ndarray, others: Sequence[np.ndarray]) -> np.ndarray:
    """The request's tempo, noise and effects on its clean 16 kHz audio (int16 in and out)."""
    if len(audio) == 0:
        return audio
    if req.tempo != 1.0:
        audio = sox_tempo(audio, req.tempo)
    if req.noise_snr_db is not None:
        rng = np.random.default_rng(req.seed)
        audio = _to_int16(add_noise(audio.astype(np.float64) / 32768.0, req.noise_snr_db,
                                    req.noise_color, rng))
    if req.effects:
        audio = _to_int16(apply_effects(audio.astype(np.float64) / 32768.0, req.effects,
                                        [o.astype(np.float64) / 32768.0 for o in others]))
    return audio


ENGINES = ("espeak-ng", "festival")


def _check(req: SynthRequest) -> None:
    if req.engine not in ENGINES:
        raise DataError(f"unknown synthesis engine {req.engine!r}; choose one of {ENGINES}")
    if req.engine == "espeak-ng" and req.accent not in ACCENTS:
        raise DataError(f"unknown accent {req.accent!r}; choose one of {list(ACCENTS)}")


def render(req: SynthRequest, eng: _Espeak | None = None) -> np.ndarray:
    """Synthesize one request in this process: int16 samples (T,) at 16 kHz mono.

    The exact samples of an espeak-ng request depend on what this process synthesized before
    (see the module docstring); use :class:`BatchSynthesizer` when byte-reproducibility matters.
    """
    return synthesize_batch([req], eng)[0]


def synthesize_batch(requests: Sequence[SynthRequest],
                     eng: _Espeak | None = None) -> list[np.ndarray]:
    """Render ``requests`` in order in this process; each result is int16 (T,) at 16 kHz.

    festival's requests are spoken by one festival process; one that festival cannot speak
    comes back empty (length 0). A ``babble`` effect mixes in the batch's other utterances
    (clean), so the batch, fixed by the caller, fixes the babble.
    """
    for r in requests:
        _check(r)
    clean: list[np.ndarray] = [np.zeros(0, np.int16)] * len(requests)
    fest = [i for i, r in enumerate(requests) if r.engine == "festival"]
    if fest:
        for i, audio in zip(fest, festival.synthesize(_festival_items([requests[i]
                                                                        for i in fest]))):
            clean[i] = audio
    if len(fest) < len(requests):
        eng = eng or engine()
        for i, r in enumerate(requests):
            if r.engine == "espeak-ng":
                clean[i] = _espeak_raw(r, eng)
    return [_degrade(r, clean[i], [c for j, c in enumerate(clean) if j != i][:3])
            for i, r in enumerate(requests)]


def _respelt_here(requests: Sequence[SynthRequest]) -> list[SynthRequest]:
    """``requests`` with their respelt English resolved in this process, as festival will read
    it (the same audio): each batch's worker is a fresh process, which would load CMUdict again
    (0.7 s) for every batch; this process keeps it."""
    if not any(r.accent == "respelt" for r in requests):
        return list(requests)
    prime([r.text for r in requests if r.accent == "respelt"])
    return [replace(r, text=_respelt(r.text, r.voice), accent="native")
            if r.accent == "respelt" else r for r in requests]


class BatchSynthesizer:
    """Synthesizes batches in fresh worker processes so results do not depend on scheduling.

    Use as a context manager; :meth:`submit` returns a future of ``list[np.ndarray]``.
    """

    def __init__(self, workers: int = 2) -> None:
        ctx = multiprocessing.get_context("forkserver")
        # Workers fork from a server that already imported this module (and numpy/scipy), so a
        # fresh process per batch costs milliseconds, not an interpreter start.
        # ("__main__" is multiprocessing's default preload: keeping it means the server, not
        # every worker, re-imports the main module.)
        ctx.set_forkserver_preload(["__main__", "speechlab.data.synth", "scipy.signal"])
        self._pool = ProcessPoolExecutor(max_workers=max(1, workers), mp_context=ctx,
                                         max_tasks_per_child=1)

    def submit(self, requests: Sequence[SynthRequest]) -> Future:
        return self._pool.submit(synthesize_batch, _respelt_here(requests))

    def close(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=True, cancel_futures=cancel)

    def __enter__(self) -> BatchSynthesizer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        self.close(cancel=exc_type is not None)
