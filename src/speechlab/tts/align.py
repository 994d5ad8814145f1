"""Phone-aligned HTS labels for recorded English speech: festival's front end, timed by DTW.

SALAD and its LSTM baseline read phone-aligned full-context labels (:mod:`.labels`). The
embedded corpus has them from the HTS engine that spoke it; a corpus of recordings (LJSpeech,
CMU ARCTIC, after ``speechlab data prepare``) has only text. :func:`align_tts_corpus`
(``speechlab data align-tts CORPUS --out DIR``) gives each recorded utterance its labels:

1. festival speaks the utterance's text (the corpus's own text, punctuation included, so that
   its phrasing places the pauses) with a reference voice, and dumps the full-context labels of
   that utterance with the reference voice's phone times (as the embedded corpus does);
2. both waveforms become 5 ms frames of low-order mel-cepstra (c0..c5 of a 40-band log-mel
   filter bank: energy and the coarse spectral envelope, which two speakers share more than the
   fine detail) and their deltas, each normalised over its own utterance, and dynamic time
   warping pairs every reference frame with a recorded one (steps (1,1), (1,0), (0,1),
   Euclidean distance). The number of cepstra was chosen on the first 40 sentences of
   ``benchmarks/tts_alignment.py`` (c1..c19: 58 ms mean boundary error, c0..c12: 22 ms, c0..c5:
   15 ms); the benchmark scores other sentences;
3. each phone boundary of the reference moves to the recorded frame the warp pairs it with
   (:func:`retime`); every phone keeps at least one frame, and the last ends with the recording.

The labels' contexts are festival's, so they fit the question set the models read; only the
times come from the recording. This is the text-to-speech-then-align approach of subtitle and
audiobook aligners; speaker differences between the reference voice and the reader cost
accuracy (``benchmarks/tts_alignment.py`` measures the boundary error where the truth is
known). A pause festival puts at a comma that the reader did not make is squeezed to a few
frames, and a pause the reader made that festival did not is shared by its neighbours.

Utterances whose recording and reference differ in length by more than ``max_ratio`` (text and
audio do not belong together) or last more than ``max_seconds`` (the warp is quadratic in time)
are refused, or with ``on_error="skip"`` left out and counted. The work is resumable: aligned
utterances are kept in ``DIR/.align-work`` until every split is done, and the same command
picks up where a killed run stopped.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numba
import numpy as np

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError, DataError
from speechlab.files import atomic_write_json, atomic_write_text
from speechlab.tts.acoustic import SAMPLE_RATE
from speechlab.tts.labels import FRAME_SHIFT, Labels, parse_labels

log = logging.getLogger(__name__)

#: ``--voice`` -> festival's voice: a female (SLT, HTS) and a male (KAL, diphone) US voice.
REFERENCE_VOICES = {"slt": "cmu_us_slt_arctic_hts", "kal": "kal_diphone"}
WORK = ".align-work"
ON_ERROR = ("raise", "skip")
# Mel-cepstra per frame for the warp (c0..c5; the module docstring says how it was chosen).
CEPSTRA = 6
# Samples per 5 ms label frame.
HOP = round(FRAME_SHIFT * 1e-7 * SAMPLE_RATE)


@dataclass(frozen=True)
class AlignConfig:
    """How recorded speech is aligned (``speechlab data align-tts`` options).

    ``voice``: the reference voice (:data:`REFERENCE_VOICES`; pick the one nearer the reader);
    ``speaker``: the one speaker to take from a corpus of several (a TTS corpus is one voice);
    ``max_seconds``: the longest utterance aligned; ``max_ratio``: the most the recording and
    the reference may differ in length; ``batch_size`` utterances per festival process and
    ``workers`` at a time; ``on_error``: ``raise`` stops at an utterance that cannot be
    aligned, ``skip`` leaves it out and counts it.
    """

    voice: str = "slt"
    speaker: str | None = None
    max_seconds: float = ranged(30.0, gt=0, le=120,
                                why="the warp holds (seconds * 200)^2 costs; segment longer audio")
    max_ratio: float = ranged(2.5, gt=1, le=10, why="a reader is at most a few times slower")
    batch_size: int = ranged(16, ge=1, le=1000, why="utterances per festival process")
    workers: int = ranged(2, ge=1, le=64, why="one festival process each")
    on_error: str = "raise"

    def __post_init__(self) -> None:
        check_fields(self)
        if self.voice not in REFERENCE_VOICES:
            raise ConfigError(f"--voice {self.voice!r} is not a reference voice; choose one of "
                              f"{sorted(REFERENCE_VOICES)}")
        if self.on_error not in ON_ERROR:
            raise ConfigError(f"--on-error {self.on_error!r}: choose one of {list(ON_ERROR)}")


# ---------------------------------------------------------------------------------------------
# Features and the warp


def warp_features(audio: np.ndarray) -> np.ndarray:
    """(T, 2 * CEPSTRA) float32: mel-cepstra c0..c5 of 5 ms frames and their deltas,
    z-normalised over the utterance (so level and channel differences between two voices
    cancel)."""
    from scipy.fft import dct

    from speechlab.audio.features import FbankConfig, fbank

    cfg = FbankConfig(num_mel_bins=40, frame_shift_ms=FRAME_SHIFT * 1e-4, frame_length_ms=25.0)
    cep = dct(fbank(np.asarray(audio, dtype=np.float32), cfg), type=2, norm="ortho",
              axis=1)[:, :CEPSTRA]
    x = np.concatenate([cep, np.gradient(cep, axis=0)], axis=1) if len(cep) > 1 else \
        np.concatenate([cep, np.zeros_like(cep)], axis=1)
    x = (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-5)
    return np.ascontiguousarray(x, dtype=np.float32)


@numba.njit(cache=True, nogil=True)
def _warp(ref: np.ndarray, rec: np.ndarray) -> tuple[np.ndarray, float]:
    n, m = ref.shape[0], rec.shape[0]
    acc = np.full((n + 1, m + 1), np.inf, dtype=np.float32)
    acc[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d = 0.0
            for k in range(ref.shape[1]):
                t = ref[i - 1, k] - rec[j - 1, k]
                d += t * t
            best = acc[i - 1, j - 1]
            if acc[i - 1, j] < best:
                best = acc[i - 1, j]
            if acc[i, j - 1] < best:
                best = acc[i, j - 1]
            acc[i, j] = np.sqrt(d) + best
    first = np.empty(n + 1, dtype=np.int64)
    first[n] = m
    i, j = n, m
    while i > 0 and j > 0:
        first[i - 1] = j - 1
        diag, up, left = acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1]
        if diag <= up and diag <= left:
            i -= 1
            j -= 1
        elif up <= left:
            i -= 1
        else:
            j -= 1
    while i > 0:
        first[i - 1] = 0
        i -= 1
    return first, float(acc[n, m]) / (n + m)


def warp(ref: np.ndarray, rec: np.ndarray) -> tuple[np.ndarray, float]:
    """Dynamic time warping of two (T, D) feature sequences: ``first`` (len(ref) + 1,), the
    first recorded frame paired with each reference frame (``first[len(ref)] = len(rec)``),
    and the path's mean cost per step (the distance of the two; about 4-6 between voices
    saying the same text)."""
    if ref.ndim != 2 or rec.ndim != 2 or ref.shape[1] != rec.shape[1]:
        raise DataError(f"warp needs two (T, D) sequences with one D, got {ref.shape} and "
                        f"{rec.shape}")
    if not len(ref) or not len(rec):
        raise DataError("warp needs frames on both sides")
    return _warp(np.ascontiguousarray(ref, np.float32), np.ascontiguousarray(rec, np.float32))


def retime(labels: Labels, first: np.ndarray, num_frames: int) -> Labels:
    """The reference's labels with each phone boundary moved through the warp ``first``
    (:func:`warp`) onto a recording of ``num_frames`` 5 ms frames: the first phone starts at 0,
    the last ends at ``num_frames``, and every phone keeps at least one frame."""
    n = len(labels.contexts)
    if num_frames < n:
        raise DataError(f"{labels.source}: {n} phones do not fit in {num_frames} frames "
                        f"({num_frames * FRAME_SHIFT * 1e-7:.2f} s)")
    limit = len(first) - 1
    inner = np.array([first[min(int(e), limit)] for e in labels.ends[:-1]], dtype=np.int64)
    bounds = np.concatenate([[0], inner, [num_frames]])
    for k in range(1, n):  # at least one frame each, forwards ...
        bounds[k] = max(bounds[k], bounds[k - 1] + 1)
    for k in range(n - 1, 0, -1):  # ... and backwards from the recording's end
        bounds[k] = min(bounds[k], bounds[k + 1] - 1)
    return Labels(bounds[:-1].copy(), bounds[1:].copy(), labels.contexts, labels.source)


def label_lines(labels: Labels) -> list[str]:
    """``start end context`` lines in HTK's 100 ns units."""
    return [f"{int(s) * FRAME_SHIFT} {int(e) * FRAME_SHIFT} {c}"
            for s, e, c in zip(labels.starts, labels.ends, labels.contexts)]


@dataclass(frozen=True)
class Aligned:
    """One recorded utterance aligned: its labels, the warp's mean cost, and the length of the
    recording over the reference's."""

    labels: Labels
    cost: float
    ratio: float


def align_recording(audio: np.ndarray, ref_audio: np.ndarray, ref_labels: Labels,
                    max_ratio: float = 2.5) -> Aligned:
    """Labels for ``audio`` (16 kHz float) from a reference utterance of the same text and its
    labels. DataError if the two differ in length by more than ``max_ratio``."""
    num_frames = len(audio) // HOP
    ratio = len(audio) / max(len(ref_audio), 1)
    if not 1 / max_ratio <= ratio <= max_ratio:
        raise DataError(f"{ref_labels.source}: the recording lasts {len(audio) / SAMPLE_RATE:.2f}"
                        f" s and the reference {len(ref_audio) / SAMPLE_RATE:.2f} s (ratio "
                        f"{ratio:.2f}, at most {max_ratio:g} allowed); do text and audio belong "
                        "together?")
    first, cost = warp(warp_features(ref_audio), warp_features(audio))
    return Aligned(retime(ref_labels, first, num_frames), cost, ratio)


# ---------------------------------------------------------------------------------------------
# A corpus


@dataclass(frozen=True)
class _Item:
    split: str
    id: str
    text: str
    cut: object


def _items(corpus_dir: Path, cfg: AlignConfig) -> tuple[dict[str, list[_Item]], str]:
    """The utterances of each split of a prepared corpus, and the one speaker they are of."""
    from speechlab.data.corpus import load_cuts, read_corpus_json

    info = read_corpus_json(corpus_dir)
    if not info:
        raise DataError(f"{corpus_dir}: no corpus.json; not a corpus (speechlab data prepare "
                        "ljspeech|cmu-arctic SRC --out DIR makes one)")
    if info.get("kind") == "tts":
        raise DataError(f"{corpus_dir}: already a TTS corpus with labels")
    splits: dict[str, list[_Item]] = {}
    speakers: set[str] = set()
    for split in info["splits"]:
        rows = []
        for cut in load_cuts(corpus_dir, split):
            sup = cut.supervisions[0]
            if (sup.language or "en") != "en":
                raise DataError(f"{corpus_dir}: utterance {cut.id} is in {sup.language!r}; the "
                                "aligner's front end (festival's US English) speaks English only")
            speaker = sup.speaker or "speaker"
            speakers.add(speaker)
            if cfg.speaker is not None and speaker != cfg.speaker:
                continue
            text = (sup.custom or {}).get("raw_text") or sup.text or ""
            rows.append(_Item(split, cut.id, " ".join(str(text).split()), cut))
        splits[split] = rows
    if cfg.speaker is None and len(speakers) > 1:
        raise DataError(f"{corpus_dir}: the corpus holds {len(speakers)} speakers "
                        f"({', '.join(sorted(speakers)[:6])}); a TTS corpus is one voice: "
                        "choose one with --speaker")
    if cfg.speaker is not None and cfg.speaker not in speakers:
        raise DataError(f"{corpus_dir}: no speaker {cfg.speaker!r}; it holds "
                        f"{', '.join(sorted(speakers)[:10])}")
    speaker = cfg.speaker or next(iter(speakers), "speaker")
    return {s: rows for s, rows in splits.items() if rows}, speaker


def _job_record(corpus_dir: Path, cfg: AlignConfig) -> dict:
    return {"source": str(corpus_dir.resolve()), "voice": cfg.voice, "speaker": cfg.speaker,
            "max_ratio": cfg.max_ratio, "max_seconds": cfg.max_seconds}


def _work_dir(out: Path, record: dict) -> Path:
    """``out/.align-work``, kept from a killed run of the same job, started afresh otherwise."""
    work = out / WORK
    job = work / "job.json"
    if work.exists():
        try:
            same = json.loads(job.read_text(encoding="utf-8")) == record
        except (OSError, ValueError):
            same = False
        if same:
            log.info("resuming the alignment kept in %s", work)
            return work
        shutil.rmtree(work)
    work.mkdir(parents=True)
    atomic_write_json(job, record)
    return work


def _done(work: Path, split: str) -> dict[str, dict]:
    path = work / split / "done.jsonl"
    if not path.exists():
        return {}
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill
        if (work / split / "lab" / f"{row['id']}.lab").exists():
            rows[row["id"]] = row
    return rows


def _speak(batch: Sequence[_Item], voice: str, tmp: Path) -> dict[str, tuple | str]:
    """id -> (reference audio, label lines), or the reason festival could not speak it. A
    failed batch is retried one utterance at a time, so one text does not sink the rest."""
    from speechlab.tts.corpus import festival_synthesize

    pairs = [(f"u{k}", it.text) for k, it in enumerate(batch)]
    try:
        spoken = festival_synthesize(pairs, tmp / "batch", voice)
        return {it.id: spoken[k] for it, (k, _) in zip(batch, pairs)}
    except DataError:
        pass
    out: dict[str, tuple | str] = {}
    for it, (k, text) in zip(batch, pairs):
        if not text.strip():
            out[it.id] = "it has no text"
            continue
        try:
            out[it.id] = festival_synthesize([(k, text)], tmp / f"one-{k}", voice)[k]
        except DataError as e:
            out[it.id] = f"festival could not speak it ({e})"
    return out


def _align_batch(batch: Sequence[_Item], cfg: AlignConfig, work: Path, tmp: Path
                 ) -> list[tuple[_Item, dict | str]]:
    """Align a batch: per item the done-row written, or why it was not aligned."""
    from speechlab.tts.synthesis import write_wav

    spoken = _speak(batch, REFERENCE_VOICES[cfg.voice], tmp)
    results: list[tuple[_Item, dict | str]] = []
    for it in batch:
        got = spoken[it.id]
        if isinstance(got, str):
            results.append((it, got))
            continue
        ref_audio, lines = got
        try:
            ref_labels = parse_labels(lines, f"{it.id} (festival's labels)")
            audio = np.asarray(it.cut.load_audio(), dtype=np.float32).reshape(-1)
            if len(audio) > cfg.max_seconds * SAMPLE_RATE:
                raise DataError(f"it lasts {len(audio) / SAMPLE_RATE:.1f} s, more than "
                                f"--max-seconds {cfg.max_seconds:g}")
            done = align_recording(audio, ref_audio, ref_labels, cfg.max_ratio)
        except DataError as e:
            results.append((it, str(e)))
            continue
        d = work / it.split
        write_wav(d / "wav" / f"{it.id}.wav", audio)
        atomic_write_text(d / "lab" / f"{it.id}.lab", "\n".join(label_lines(done.labels)) + "\n")
        row = {"id": it.id, "seconds": round(len(audio) / SAMPLE_RATE, 5), "text": it.text,
               "cost": round(done.cost, 4), "ratio": round(done.ratio, 4)}
        results.append((it, row))
    return results


def align_tts_corpus(corpus_dir: str | Path, out_dir: str | Path, cfg: AlignConfig = AlignConfig(),
                     *, overwrite: bool = False, progress: bool = True) -> dict:
    """Write the TTS corpus of ``corpus_dir``'s recordings with labels (module docstring) into
    ``out_dir``: ``wav/{split}/``, ``lab/{split}/``, the manifests, ``alignment.tsv`` (each
    utterance's warp cost and length ratio, worst first, to listen to) and ``corpus.json``,
    written last. Splits ``out_dir`` already holds are replaced only with ``overwrite``.
    Returns corpus.json's contents."""
    from speechlab.data.festival import check_voices
    from speechlab.data.importers import check_split_free
    from speechlab.progress import WorkProgress

    corpus_dir, out = Path(corpus_dir), Path(out_dir)
    if out.resolve() == corpus_dir.resolve():
        raise DataError(f"--out {out} is the source corpus; write the TTS corpus elsewhere")
    splits, speaker = _items(corpus_dir, cfg)
    if not splits:
        raise DataError(f"{corpus_dir}: no utterance to align")
    check_voices([REFERENCE_VOICES[cfg.voice]])
    for split in splits:
        check_split_free(out.resolve(), split, SAMPLE_RATE, overwrite)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    work = _work_dir(out, _job_record(corpus_dir, cfg))
    done = {s: _done(work, s) for s in splits}
    todo = [it for rows in splits.values() for it in rows if it.id not in done[it.split]]
    skipped: dict[str, str] = {}
    total = sum(it.cut.duration for it in todo)
    log.info("aligning %d utterances (%.1f min; %d done before) with festival's %s",
             len(todo), total / 60, sum(map(len, done.values())), REFERENCE_VOICES[cfg.voice])
    batches = [todo[k:k + cfg.batch_size] for k in range(0, len(todo), cfg.batch_size)]
    try:
        with tempfile.TemporaryDirectory(prefix="speechlab-align-") as tmp, \
                WorkProgress("aligning", total, enabled=progress) as bar:
            pool = ThreadPoolExecutor(cfg.workers)
            try:
                jobs = [pool.submit(_align_batch, b, cfg, work, Path(tmp) / str(k))
                        for k, b in enumerate(batches)]
                _collect(jobs, cfg, work, done, skipped, corpus_dir, bar)
            finally:
                # On failure the batches under way finish, no other starts, and only then is
                # their scratch directory removed.
                pool.shutdown(cancel_futures=True)
    except BaseException:
        if created and not any(done.values()):
            shutil.rmtree(out, ignore_errors=True)
        else:
            log.warning("%d aligned utterances are kept in %s: the same command resumes",
                        sum(map(len, done.values())), work)
        raise
    for reason in sorted(set(skipped.values()))[:5]:
        log.warning("left out: %s", reason)
    summary = _commit(out, splits, done, speaker, skipped, corpus_dir, cfg, work)
    shutil.rmtree(work, ignore_errors=True)
    return summary


def _collect(jobs: list, cfg: AlignConfig, work: Path, done: dict[str, dict[str, dict]],
             skipped: dict[str, str], corpus_dir: Path, bar) -> None:  # noqa: ANN001
    """Record each batch's results in order: a done-row per aligned utterance (appended to
    its split's ``done.jsonl``, which a rerun reads), or the reason it was not aligned."""
    seconds = 0.0
    for job in jobs:
        for it, got in job.result():
            seconds += it.cut.duration
            if isinstance(got, str):
                if cfg.on_error == "raise":
                    raise DataError(f"{corpus_dir}: utterance {it.id} ({it.split}) was not "
                                    f"aligned: {got} (--on-error skip leaves such utterances "
                                    "out; the aligned ones are kept for a rerun)")
                skipped[it.id] = got
                continue
            with open(work / it.split / "done.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(got) + "\n")
            done[it.split][it.id] = got
        bar.update(seconds)


def _commit(out: Path, splits: dict[str, list[_Item]], done: dict[str, dict[str, dict]],
            speaker: str, skipped: dict[str, str], corpus_dir: Path, cfg: AlignConfig,
            work: Path) -> dict:
    """Move each aligned split into place and write corpus.json last."""
    from speechlab.data.corpus import read_corpus_json
    from speechlab.data.importers import commit_split, staging
    from speechlab.tts.corpus import split_manifests

    info = read_corpus_json(out) or {"splits": {}, "sample_rate": SAMPLE_RATE, "kind": "tts"}
    info["kind"] = "tts"
    costs = []
    for split, items in splits.items():
        rows = [done[split][it.id] for it in items if it.id in done[split]]
        if not rows:
            log.warning("%s: no utterance aligned; the split is left out", split)
            continue
        with staging(out.resolve(), split) as stage:
            for medium in ("wav", "lab"):
                (stage / medium).mkdir(parents=True, exist_ok=True)
                shutil.move(str(work / split / medium), str(stage / medium / split))
            utts = [(r["id"], r["seconds"], r["text"], f"lab/{split}/{r['id']}.lab")
                    for r in rows]
            commit_split(stage, out.resolve(), split,
                         *split_manifests(stage, split, utts, speaker), media=("wav", "lab"))
        hours = round(sum(r["seconds"] for r in rows) / 3600, 4)
        info["splits"][split] = {"utterances": len(rows), "hours": hours,
                                 "origin": str(corpus_dir),
                                 "languages": {"en": {"utterances": len(rows), "hours": hours,
                                                      "speakers": [speaker]}}}
        costs += [(r["cost"], r["ratio"], split, r["id"]) for r in rows]
    if not costs:
        raise DataError(f"{corpus_dir}: no utterance could be aligned "
                        f"({next(iter(skipped.values()), 'none to align')})")
    costs.sort(reverse=True)
    atomic_write_text(out / "alignment.tsv", "cost\tratio\tsplit\tid\n" + "".join(
        f"{c:.4f}\t{r:.4f}\t{s}\t{u}\n" for c, r, s, u in costs))
    values = np.array([c[0] for c in costs])
    info["aligned"] = {
        "source": str(corpus_dir), "speaker": speaker,
        "method": "festival front end and reference voice, DTW over mel-cepstra "
                  "(speechlab.tts.align)",
        "config": asdict(cfg), "utterances": len(costs), "left_out": len(skipped),
        "cost": {"mean": round(float(values.mean()), 4),
                 "p95": round(float(np.quantile(values, 0.95)), 4),
                 "max": round(float(values.max()), 4)}}
    atomic_write_json(out / "corpus.json", info)
    return info
