"""Word error rate and decoding cost of one long recording against the length of the segments
``RnntStream`` cuts it into, for a trained RNN-T whose encoder state grows with the audio (the
causal Transformer of the ``fast`` preset, with its key/value cache).

A run's test utterances of one language, in corpus order, are joined with 0.4 s of low noise
into one recording of about ``--minutes``; it is transcribed with the language given and
``segment_seconds`` set to each of ``--bounds`` (0: one segment, however long). Longer segments
cut fewer words and sentences apart but reach encoder positions no training utterance had, and
cost more per chunk (each chunk attends to every cached frame of its segment). With
``--per-utterance`` each utterance is also transcribed on its own: the WER without joining.

Needs a trained run (``speechlab reproduce multisoftmax``: ``RUN/corpus``, ``RUN/lang``,
``RUN/models/NAME``), so ``run_all.py`` does not run it. RTF is process CPU time over audio
time, one thread.

    OMP_NUM_THREADS=1 python benchmarks/rnnt_segments.py exp/ms-converged multisoftmax \\
        --language en --minutes 10 --bounds 20,60,120,300,0 --per-utterance --wav ten.wav
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

from speechlab.asr.rnnt.recognizer import RnntRecognizer
from speechlab.files import atomic_write_json
from speechlab.metrics.error_rate import wer
from speechlab.text.normalize import normalize_text


def joined_test_set(corpus: Path, language: str, minutes: float
                    ) -> tuple[list[np.ndarray], list[str]]:
    """The first test utterances of ``language`` making ``minutes`` of audio with their 0.4 s
    gaps: each utterance's samples and normalized reference."""
    with gzip.open(corpus / "test_recordings.jsonl.gz", "rt") as f:
        recordings = {r["id"]: r for r in map(json.loads, f)}
    with gzip.open(corpus / "test_supervisions.jsonl.gz", "rt") as f:
        supervisions = [s for s in map(json.loads, f) if s["language"] == language]
    audio, refs, seconds = [], [], 0.0
    for s in supervisions:
        x, rate = sf.read(recordings[s["recording_id"]]["sources"][0]["source"], dtype="float32")
        audio.append(x)
        refs.append(normalize_text(s["text"], language))
        seconds += len(x) / rate + 0.4
        if seconds >= minutes * 60:
            break
    return audio, refs


def run(run_dir: Path, model: str, language: str, minutes: float, bounds: list[float],
        per_utterance: bool, wav: Path | None = None) -> dict[str, object]:
    torch.set_num_threads(1)
    audio, refs = joined_test_set(run_dir / "corpus", language, minutes)
    rng = np.random.default_rng(0)
    gaps = [(1e-3 * rng.standard_normal(6400)).astype(np.float32) for _ in audio]
    joined = np.concatenate([x for pair in zip(audio, gaps) for x in pair])
    seconds = len(joined) / 16000
    if wav is not None:  # the recording, for the decoding commands
        sf.write(wav, joined, 16000)
    rec = RnntRecognizer.from_run(run_dir / "models" / model)
    out: dict[str, object] = {"settings": {"run": str(run_dir), "model": model,
                                           "language": language, "seconds": seconds,
                                           "utterances": len(refs),
                                           "ref_words": sum(len(r.split()) for r in refs)}}
    if per_utterance:
        start = time.process_time()
        hyps = [rec.transcribe(x, language=language).text for x in audio]
        out["per_utterance"] = {"wer": wer(refs, hyps).wer,
                                "rtf": (time.process_time() - start) / seconds}
        print("per utterance", out["per_utterance"], flush=True)
    for bound in bounds:
        rec.segment_seconds = bound or None
        start = time.process_time()
        r = rec.transcribe(joined, language=language)
        out[f"segments_{bound:g}s" if bound else "one_segment"] = row = {
            "wer": wer([" ".join(refs)], [r.text]).wer,
            "rtf": (time.process_time() - start) / seconds,
            "segments": len(r.extra["segment_starts"])}
        print(f"bound {bound:g} s", row, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path, help="output dir of `speechlab reproduce multisoftmax`")
    p.add_argument("model", help="model name under RUN_DIR/models (a fast-preset one)")
    p.add_argument("--language", default="en")
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--bounds", default="20,60,120",
                   help="segment lengths in seconds, comma-separated; 0: one segment")
    p.add_argument("--per-utterance", action="store_true")
    p.add_argument("--wav", type=Path, default=None, help="also write the recording here")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = p.parse_args()
    out = run(a.run_dir, a.model, a.language, a.minutes,
              [float(b) for b in a.bounds.split(",")], a.per_utterance, a.wav)
    print(json.dumps(out, indent=2))
    if a.json:
        atomic_write_json(a.json, out)


if __name__ == "__main__":
    main()
