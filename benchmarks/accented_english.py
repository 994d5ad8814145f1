"""English recognizers on accented English: the corpus's English test sentences read by
festival's Czech, Finnish and Italian speakers (English respelt in their spelling,
``speechlab.text.respell``), voices and accents no shipped model was trained on.

For each model this prints the WER on the run corpus's ``test`` split (the voices of training),
its ``unseen`` split (festival's ked: a native voice training never heard), and each accented
voice reading the same sentences (clean: no room, noise or line), with the accented voices'
mean. The accented audio is made here, by the corpus's synthesizer (``speechlab.data.synth``),
and is the same every run.

    python benchmarks/accented_english.py [MODEL ...] [--corpus exp/shipped-topologies/corpus]
        [--utterances 100] [--voices en-dita,en-lp] [--json out.json] [--wav-dir DIR]

MODEL: shipped names or package paths (default: the shipped models that recognize English).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))
from recorded_speech import add_models_argument, english_models  # noqa: E402

# festival's speakers of other languages (speechlab.data.corpus.BASE_VOICES)
ACCENTED = ("en-dita", "en-machac", "en-ph", "en-lj", "en-mv", "en-lp", "en-pc")
DEFAULT_CORPUS = Path("exp/shipped-topologies/corpus")


def english_cuts(corpus: Path, split: str, n: int) -> list:
    from lhotse import CutSet

    path = corpus / f"{split}_cuts.jsonl.gz"
    if not path.is_file():
        return []
    cuts = [c for c in CutSet.from_file(path) if c.supervisions[0].language == "en"]
    return cuts[:n] if n else cuts


def accented_audio(texts: list[str], family: str) -> list:
    """``texts`` read by one accented family, clean, at 16 kHz (float32 in [-1, 1])."""
    import numpy as np

    from speechlab.data.corpus import BASE_VOICES
    from speechlab.data.synth import SynthRequest, synthesize_batch

    base = BASE_VOICES[family]
    reqs = [SynthRequest(text=t, voice=base.voice, engine=base.engine, accent=base.accent)
            for t in texts]
    return [x.astype(np.float32) / 32768.0 for x in synthesize_batch(reqs)]


def wer_of(model, refs: list[str], audio: list) -> float | None:
    from speechlab.metrics import wer

    pairs = [(r, a) for r, a in zip(refs, audio) if len(a)]
    if not pairs:
        return None
    # a multilingual model is told the language, as the corpus's English figures are measured
    options = {"language": "en"} if len(model.languages) > 1 else {}
    hyps = [model.transcribe(a, 16000, **options).text for _, a in pairs]
    return round(100 * wer([r for r, _ in pairs], hyps).wer, 1)


def measure(names: list[str], corpus: Path, n: int, families: list[str],
            wav_dir: Path | None = None) -> list[dict]:
    """Each model's WER on the test and unseen splits and on ``families`` reading the test
    sentences, with their mean as ``accented mean``."""
    readers = {fam: (lambda texts, fam=fam: accented_audio(texts, fam)) for fam in families}
    return measure_voices(names, corpus, n, readers, "accented mean", wav_dir)


def measure_voices(names: list[str], corpus: Path, n: int, readers: dict, mean: str,
                   wav_dir: Path | None = None, mean_over: list[str] | None = None) -> list[dict]:
    """Each model's WER on the run corpus's first ``n`` English test (and unseen) utterances
    and on each reader's audio of the test sentences; ``readers``: name -> a function from the
    texts to their 16 kHz audio. ``mean``: the key of the mean over ``mean_over`` (default:
    every reader)."""
    import speechlab
    from speechlab.text.normalize import normalize_text

    test = english_cuts(corpus, "test", n)
    if not test:
        raise SystemExit(f"{Path(sys.argv[0]).stem}: no English test cuts in {corpus}")
    unseen = english_cuts(corpus, "unseen", n)
    texts = [c.supervisions[0].text for c in test]
    refs = [normalize_text(t, "en") for t in texts]
    sets: dict[str, tuple[list[str], list]] = {
        "test": (refs, [c.load_audio()[0] for c in test]),
    }
    if unseen:
        sets["unseen"] = ([normalize_text(c.supervisions[0].text, "en") for c in unseen],
                          [c.load_audio()[0] for c in unseen])
    for key, read in readers.items():
        audio = read(texts)
        sets[key] = (refs, audio)
        if wav_dir is not None:
            import soundfile as sf

            (wav_dir / key).mkdir(parents=True, exist_ok=True)
            for cut, a in zip(test, audio):
                sf.write(wav_dir / key / f"{cut.id}.wav", a, 16000)
        print(f"{key}: {len(audio)} sentences, "
              f"{sum(len(a) for a in audio) / 16000 / 60:.1f} min", file=sys.stderr)
    over = list(readers) if mean_over is None else mean_over
    rows = []
    for name in names:
        model = speechlab.load(name)
        row = {"model": name}
        for key, (r, audio) in sets.items():
            row[key] = wer_of(model, r, audio)
        values = [row[k] for k in over if row.get(k) is not None]
        row[mean] = round(sum(values) / len(values), 1) if values else None
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    return rows


def markdown(rows: list[dict], families: list[str], mean: str = "accented mean") -> str:
    cols = ["test", "unseen", *families, mean]
    head = "| model | " + " | ".join(cols) + " |"
    lines = [head, "|---|" + "---:|" * len(cols)]
    for r in rows:
        cells = ["" if r.get(c) is None else f"{r[c]:.1f}" for c in cols]
        lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def voices_cli(argv: list[str] | None, doc: str, known: tuple[str, ...], what: str
               ) -> tuple[argparse.Namespace, list[str]] | int:
    """The command line of a script that reads the corpus's English test sentences with
    ``known`` voices (``what``: what a voice is, for the help): its arguments and the voices
    chosen, or exit status 2 after a one-line error."""
    prog = Path(sys.argv[0]).stem
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_models_argument(ap)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                    help=f"a run corpus with English test (and unseen) cuts (default: "
                    f"{DEFAULT_CORPUS})")
    ap.add_argument("--utterances", type=int, default=100,
                    help="the first N English test sentences (0: all; default 100)")
    ap.add_argument("--voices", default=",".join(known),
                    help=f"{what}, comma-separated (default: {','.join(known)})")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--wav-dir", type=Path, help="also write the voices' audio here")
    args = ap.parse_args(argv)
    voices = [f for f in args.voices.split(",") if f]
    unknown = sorted(set(voices) - set(known))
    if unknown or not voices:
        print(f"{prog}: unknown voice(s) {unknown}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    if not args.corpus.is_dir():
        print(f"{prog}: no corpus at {args.corpus}; pass --corpus", file=sys.stderr)
        return 2
    return args, voices


def main(argv: list[str] | None = None) -> int:
    parsed = voices_cli(argv, __doc__, ACCENTED, "accented families")
    if isinstance(parsed, int):
        return parsed
    args, families = parsed
    from speechlab.data import festival
    from speechlab.data.corpus import BASE_VOICES
    from speechlab.errors import MissingToolError

    try:
        festival.check_voices([BASE_VOICES[f].voice for f in families])
    except MissingToolError as e:
        print(f"accented_english: {e}", file=sys.stderr)
        return 2
    names = args.models or english_models()
    rows = measure(names, args.corpus, args.utterances, families, args.wav_dir)
    print(markdown(rows, families))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
