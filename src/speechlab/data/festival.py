"""Speech from festival's voices for the embedded corpus: one ``festival`` process per batch.

Debian packages four festival voices that speechlab trains on: the English kal and ked diphone
voices (``festvox-kallpc16k``, ``festvox-kdlpc16k``: two men, LPC diphones cut from recordings),
the SLT HTS voice (``festvox-us-slt-hts``: a woman, a statistical parametric voice) and the Hindi
NSK diphone voice (``festvox-hi-nsk``). They are speech of another kind than espeak-ng's formant
synthesis: what a model must hear to recognise more than one synthesizer. Seven more are
speakers of Czech, Finnish and Italian (three women, four men); they read English respelt in
their own spelling (:mod:`speechlab.text.respell`): English with their voices and accents, for
the accented-English checks (``benchmarks/accented_english.py``) and for a corpus that asks for
them (``en-dita`` ... in :data:`speechlab.data.corpus.BASE_VOICES`).

The SLT voice's model is made for 32 kHz. ``cmu_us_slt_arctic_hts_16k`` is the same voice through
a 16 kHz conversion of its model file (:mod:`speechlab.data.htsvoice`), which festival speaks
twice as fast; the corpus's ``en-slt`` is the voice as Debian ships it (``en-slt16`` the
conversion).

A batch is one Scheme script run by ``festival -b``: starting festival and loading a voice
costs about 0.2 s, synthesizing a sentence with a diphone voice about 10 ms per second of
speech. festival is deterministic (no state carries from one utterance to the next that changes
the samples), so a batch's audio depends only on its requests.

Failures: festival aborts a whole script at the first utterance it cannot speak (the Hindi
voice's letter-to-sound rules have no rule for a letter outside its table; some letters
crash it). A failed batch is therefore retried one utterance per process, and an utterance that
fails alone comes back empty, for the caller to skip, rather than stopping a corpus build.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import soundfile as sf

from speechlab.errors import DataError, MissingToolError
from speechlab.files import scratch_dir
from speechlab.processes import dies_with_parent

SAMPLE_RATE = 16000


@dataclass(frozen=True)
class FestivalVoice:
    """One of festival's voices: its Scheme name (``voice_<name>``), its Debian package, the
    sample rate of its waves, its language and the encoding it reads text in (the Czech and
    Finnish voices read 8-bit text). ``htsvoice``: an HTS voice's model file (under the voice's
    directory), spoken through its 16 kHz conversion (:mod:`speechlab.data.htsvoice`)."""

    name: str
    package: str
    sample_rate: int
    language: str = "en"
    encoding: str = "utf-8"
    htsvoice: str | None = None


VOICES: dict[str, FestivalVoice] = {
    "kal_diphone": FestivalVoice("kal_diphone", "festvox-kallpc16k", 16000),
    "ked_diphone": FestivalVoice("ked_diphone", "festvox-kdlpc16k", 16000),
    "cmu_us_slt_arctic_hts": FestivalVoice("cmu_us_slt_arctic_hts", "festvox-us-slt-hts", 32000),
    # the same voice through its model converted to 16 kHz: twice as fast, not the same sound
    # to a recognizer that learnt the voice above (docs/corpus.md, "Speed")
    "cmu_us_slt_arctic_hts_16k": FestivalVoice("cmu_us_slt_arctic_hts", "festvox-us-slt-hts",
                                               16000,
                                               htsvoice="hts/cmu_us_slt_arctic_hts.htsvoice"),
    "hindi_NSK_diphone": FestivalVoice("hindi_NSK_diphone", "festvox-hi-nsk", 16000, "hi"),
    # speakers of other languages (women: dita, lj, lp; men: machac, ph, mv, pc)
    "czech_dita": FestivalVoice("czech_dita", "festvox-czech-dita", 32000, "cs", "iso-8859-2"),
    "czech_machac": FestivalVoice("czech_machac", "festvox-czech-machac", 32000, "cs",
                                  "iso-8859-2"),
    "czech_ph": FestivalVoice("czech_ph", "festvox-czech-ph", 44100, "cs", "iso-8859-2"),
    "suo_fi_lj_diphone": FestivalVoice("suo_fi_lj_diphone", "festvox-suopuhe-lj", 22050, "fi",
                                       "iso-8859-1"),
    "hy_fi_mv_diphone": FestivalVoice("hy_fi_mv_diphone", "festvox-suopuhe-mv", 22050, "fi",
                                      "iso-8859-1"),
    "lp_diphone": FestivalVoice("lp_diphone", "festvox-italp16k", 16000, "it", "iso-8859-1"),
    "pc_diphone": FestivalVoice("pc_diphone", "festvox-itapc16k", 16000, "it", "iso-8859-1"),
}


@dataclass(frozen=True)
class FestivalItem:
    """One utterance for festival: ``text`` in ``voice`` (a key of :data:`VOICES`), durations
    scaled by ``stretch`` (festival's Duration_Stretch: 1.2 = 20% slower)."""

    text: str
    voice: str
    stretch: float = 1.0


_VOICE_ROOTS = (Path("/usr/share/festival/voices"), Path("/usr/lib/festival/voices"))


@functools.lru_cache(maxsize=1)
def _voice_dirs() -> dict[str, Path]:
    return {p.name: p for root in _VOICE_ROOTS if root.is_dir() for p in root.glob("*/*")
            if p.is_dir()}


def installed_voices() -> frozenset[str]:
    """The voices of :data:`VOICES` whose files are on this machine."""
    return frozenset(k for k, v in VOICES.items() if v.name in _voice_dirs())


def model_conversions(voices: Sequence[str]) -> dict[str, str]:
    """For a corpus's provenance: which of ``voices`` speak through a converted model file."""
    from speechlab.data.htsvoice import CONVERSION_VERSION, TARGET_RATE

    return {v: f"{VOICES[v].htsvoice} at {TARGET_RATE} Hz (speechlab.data.htsvoice, "
               f"conversion {CONVERSION_VERSION})" for v in voices if VOICES[v].htsvoice}


def _model_file(voice: FestivalVoice) -> Path:
    """The 16 kHz conversion of ``voice``'s HTS model file."""
    from speechlab.data.htsvoice import converted_voice

    assert voice.htsvoice is not None
    source = _voice_dirs()[voice.name] / voice.htsvoice
    if not source.is_file():
        raise MissingToolError(f"festival voice {voice.name} has no {voice.htsvoice}; "
                               f"reinstall the Debian package {voice.package}")
    return converted_voice(source)


def check_voices(voices: Sequence[str]) -> None:
    """MissingToolError naming the Debian packages to install, before any work, if festival or
    one of ``voices`` is not on this machine."""
    unknown = sorted(set(voices) - set(VOICES))
    if unknown:
        raise DataError(f"unknown festival voice(s) {unknown}; known: {sorted(VOICES)}")
    missing = sorted({VOICES[v].package for v in voices if v not in installed_voices()})
    if shutil.which("festival") is None:
        missing = ["festival", *missing]
    if missing:
        raise MissingToolError(f"festival voices missing; install the Debian package(s): "
                               f"apt-get install {' '.join(missing)}")


def _scheme_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _script(items: Sequence[FestivalItem], out_dir: Path) -> bytes:
    """The Scheme script speaking ``items``; each utterance's text in its voice's encoding (a
    character the encoding lacks becomes ``?``)."""
    lines, voice, stretch = [], None, None
    for i, item in enumerate(items):
        if item.voice != voice:
            v = VOICES[item.voice]
            lines.append(f"(voice_{v.name})".encode())
            if v.htsvoice:  # the voice's setup names its own model file: name another
                model = _scheme_string(str(_model_file(v)))
                lines.append(f'(set! hts_engine_params (list (list "-m" {model})))'.encode())
            voice, stretch = item.voice, None
        if item.stretch != stretch:
            lines.append(f"(Parameter.set 'Duration_Stretch {item.stretch:.4f})".encode())
            stretch = item.stretch
        text = _scheme_string(item.text).encode(VOICES[item.voice].encoding, errors="replace")
        lines.append(b"(set! u (utt.synth (Utterance Text " + text + b")))")
        lines.append(f"(utt.save.wave u {_scheme_string(str(out_dir / f'{i}.wav'))} 'riff)"
                     .encode())
    return b"\n".join(lines) + b"\n"


def _run(items: Sequence[FestivalItem], work: Path) -> list[np.ndarray | None]:
    """One festival process for ``items``: int16 waves at each voice's native rate, None for
    those it did not write (it stopped before them)."""
    script = work / "batch.scm"
    script.write_bytes(_script(items, work))
    subprocess.run(dies_with_parent(["festival", "-b", str(script)]), capture_output=True,
                   timeout=600)
    out: list[np.ndarray | None] = []
    for i in range(len(items)):
        path = work / f"{i}.wav"
        if path.exists():
            x, _ = sf.read(path, dtype="int16")
            path.unlink()
            out.append(x if x.ndim == 1 else x[:, 0])
        else:
            out.append(None)
    return out


def _to_16k(x: np.ndarray, rate: int) -> np.ndarray:
    if rate == SAMPLE_RATE:
        return x
    from scipy.signal import resample_poly

    y = resample_poly(x.astype(np.float64) / 32768.0, SAMPLE_RATE, rate)
    return np.clip(np.round(y * 32767.0), -32768, 32767).astype(np.int16)


def synthesize(items: Sequence[FestivalItem]) -> list[np.ndarray]:
    """Speak ``items`` with festival: int16 (T,) at 16 kHz each, in order; an utterance that
    festival cannot speak comes back empty (length 0)."""
    check_voices(sorted({it.voice for it in items}))
    with scratch_dir("speechlab-festival") as work:
        waves = _run(items, work)
        # A failed batch: retry what is missing one utterance at a time, so one sentence
        # festival cannot speak does not take the rest of its batch with it.
        for i, w in enumerate(waves):
            if w is None or len(w) == 0:
                waves[i] = _run([items[i]], work)[0]
    return [np.zeros(0, np.int16) if w is None else _to_16k(w, VOICES[it.voice].sample_rate)
            for it, w in zip(items, waves)]


# --------------------------------------------------------------------------------------------
# Text for the Hindi voice

# Unicode lays out the Indic scripts in parallel blocks, so a Gujarati or Tamil letter maps to
# the Devanagari letter at the same offset. What the Hindi voice has no rule for is mapped to
# its nearest Devanagari letter (Tamil's short e/o and its alveolar letters) or dropped.
_BLOCK_OFFSET = {range(0x0A80, 0x0B00): 0x180, range(0x0B80, 0x0C00): 0x280}
_NEAREST = {"\u0946": "\u0947", "\u094A": "\u094B", "\u0931": "\u0930", "\u0934": "\u0933",
            "\u0929": "\u0928", "\u090E": "\u090F", "\u0912": "\u0913", "\u0951": "",
            "\u0952": ""}
_DEVANAGARI = range(0x0900, 0x0980)
_KEPT_PUNCT = set(" ,.?!;:-'\"()\u0964\u0965")


def to_devanagari(text: str) -> str:
    """Gujarati or Tamil ``text`` letter by letter in Devanagari, as the Hindi voice reads it
    (an approximation of a Hindi speaker reading it aloud, not a transliteration standard);
    characters outside Devanagari and plain punctuation are dropped."""
    out = []
    for ch in text:
        cp = ord(ch)
        for block, offset in _BLOCK_OFFSET.items():
            if cp in block:
                ch = chr(cp - offset)
                break
        ch = _NEAREST.get(ch, ch)
        if (ch and ord(ch[0]) in _DEVANAGARI) or ch in _KEPT_PUNCT:
            out.append(ch)
    return " ".join("".join(out).split())
