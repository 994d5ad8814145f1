"""How well a recognizer understands a synthesizer: the TTS corpus's test sentences spoken by
each given TTS model, transcribed by one ASR model, WER against the sentences' text, beside the
WER of the corpus's own recordings of the same sentences (the voice the synthesizer learnt).

A sentence is spoken from its text (the model's own front end, festival, makes the labels and
durations, as the page does; in the embedded corpus these are the recordings' labels too). The
references are the sentences normalized as the ASR corpus normalizes its text. The gap between
the recordings' WER and a synthesizer's is what it loses in intelligibility to that recognizer;
the recognizer's own errors on the voice and its vocabulary are in both. Every TTS model reads
the same sentences, so the rows compare.

    python benchmarks/tts_intelligibility.py TTS [TTS ...] --asr en_ctc_t2
        [--corpus exp/shipped-salad/corpus] [--utterances 60] [--json out.json] [--wavs DIR]

``TTS`` is a shipped model's name, a package or a run's model folder ``RUN/models/NAME``;
``--corpus`` defaults to the first such folder's ``RUN/corpus`` and is needed when none is one.
``--wavs DIR`` keeps the spoken sentences to listen to.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def run_corpus(model: str) -> Path | None:
    """``RUN/corpus`` of a run's model folder ``RUN/models/NAME``, if it is one."""
    p = Path(model)
    corpus = p.parent.parent / "corpus"
    return corpus if p.parent.name == "models" and corpus.is_dir() else None


def measure(asr: object, tts_models: list[str], corpus: Path, utterances: int,
            wavs: Path | None) -> dict:
    import soundfile as sf

    import speechlab
    from speechlab.metrics import wer
    from speechlab.text.normalize import normalize_text
    from speechlab.tts.corpus import load_tts_split

    utts = [u for u in load_tts_split(corpus, "test") if u.text][: utterances or None]
    if not utts:
        raise SystemExit(f"{corpus}: no test utterance with its text")
    refs = [normalize_text(u.text, "en") for u in utts]

    def score(hyps: list[str]) -> dict:
        s = wer(refs, hyps)
        return {"wer": round(100 * s.wer, 1), "errors": s.errors, "words": s.ref_words}

    rows = {"recordings": score([asr.transcribe(str(u.wav)).text for u in utts])}
    print(f"  recordings: WER {rows['recordings']['wer']}%", file=sys.stderr, flush=True)
    for name in tts_models:
        tts = speechlab.load(name)
        hyps = []
        for u in utts:
            speech = tts.synthesize(text=u.text)
            if wavs is not None:
                (wavs / Path(name).name).mkdir(parents=True, exist_ok=True)
                sf.write(wavs / Path(name).name / f"{u.id}.wav", speech.waveform,
                         speech.sample_rate)
            hyps.append(asr.transcribe(speech.waveform, speech.sample_rate).text)
        key = Path(name).name
        rows[key] = score(hyps)
        print(f"  {key}: WER {rows[key]['wer']}%", file=sys.stderr, flush=True)
    return {"corpus": str(corpus), "utterances": len(utts), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tts", nargs="+", help="TTS models: shipped names, packages or run folders")
    p.add_argument("--asr", default="en_ctc_t2", help="the recognizer (default en_ctc_t2)")
    p.add_argument("--corpus", type=Path, help="the TTS corpus (default: the first run "
                   "folder's RUN/corpus)")
    p.add_argument("--utterances", type=int, default=60, help="test sentences (0: all)")
    p.add_argument("--json", type=Path, help="write the figures here")
    p.add_argument("--wavs", type=Path, help="keep the spoken sentences here")
    args = p.parse_args(argv)

    import speechlab

    corpus = args.corpus or next((c for c in map(run_corpus, args.tts) if c), None)
    if corpus is None:
        p.error("--corpus is needed: no TTS model given is a run's RUN/models/NAME")
    out = measure(speechlab.load(args.asr), args.tts, corpus, args.utterances, args.wavs)
    out["asr"] = args.asr
    print(f"\n{out['utterances']} test sentences of {corpus}, transcribed by {args.asr}:")
    print("| speech | WER [%] | errors / words |\n|---|---:|---:|")
    for key, r in out["rows"].items():
        print(f"| {key} | {r['wer']} | {r['errors']} / {r['words']} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
