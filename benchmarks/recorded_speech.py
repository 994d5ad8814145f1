"""The shipped English recognizers on a person's recorded speech: the only recordings of a
person with known words on a Debian machine, alsa-utils' loudspeaker test sounds
(``/usr/share/sounds/alsa``: a woman saying "Front Center", "Rear Left", ...), and its
``Noise.wav``, where the right answer is no words at all.

No training utterance of any speechlab model is a recording of a person (the corpus is read
by espeak-ng and festival), so this is speech no model here has heard from a voice no model
here has heard. The references are the files' names (``Front_Center.wav`` -> "front
center"), nothing is copied into the repository, and the files are never used in training.
It is small (8 two-word utterances, 16 words): it says whether a model hears a person at
all, not how well to the point.

For each model (default: every shipped model that recognizes English) it prints each
hypothesis, the WER over the 16 words, how many words it put on the noise, and with ``--json``
writes them all; ``--vad`` reads each file as ``speechlab transcribe --vad`` does (only what
Silero VAD calls speech reaches the search).

    python benchmarks/recorded_speech.py [MODEL ...] [--dir /usr/share/sounds/alsa]
        [--vad] [--json out.json] [--joined person.wav]

``--joined WAV`` also writes the spoken sounds as one 16 kHz mono recording, 1.5 s of silence
between them, and beside it ``WAV.tsv`` (``WAV<TAB>words``), the ``--reference`` of
``benchmarks/serve_fake_mic.py``: a person speaking into ``speechlab serve``'s page with pauses.

Exit status 2 when the folder holds none of the sounds (alsa-utils is not installed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

DEFAULT_DIR = Path("/usr/share/sounds/alsa")
NOISE = "Noise.wav"
_SPOKEN = re.compile(r"^[A-Z][a-z]+(_[A-Z][a-z]+)+\.wav$")  # Front_Center.wav


def recordings(folder: Path) -> tuple[list[tuple[Path, str]], Path | None]:
    """(the spoken files with their words, from the names; the noise file or None)."""
    spoken = [(p, " ".join(p.stem.lower().split("_")))
              for p in sorted(folder.glob("*.wav")) if _SPOKEN.match(p.name)]
    noise = folder / NOISE
    return spoken, (noise if noise.is_file() else None)


PAUSE_S = 1.5


def write_joined(spoken: list[tuple[Path, str]], out: Path, rate: int = 16000) -> None:
    """The spoken sounds as one mono recording at ``rate``, :data:`PAUSE_S` of silence between
    them, and ``out.tsv`` with its words."""
    import numpy as np
    import soundfile as sf

    from speechlab.audio.io import load_audio, resample

    gap = np.zeros(int(PAUSE_S * rate), np.float32)
    parts: list = []
    for p, _ in spoken:
        samples = load_audio(p, None)
        parts += [resample(samples, sf.info(str(p)).samplerate, rate), gap]
    sf.write(out, np.concatenate(parts[:-1]), rate, subtype="PCM_16")
    Path(f"{out}.tsv").write_text(f"{out}\t{' '.join(r for _, r in spoken)}\n", encoding="utf-8")


def add_models_argument(ap: argparse.ArgumentParser) -> None:
    """The ``models`` argument of the benchmarks that read English (default: every shipped
    model that recognizes English, :func:`english_models`)."""
    ap.add_argument("models", nargs="*", help="shipped names or package paths "
                    "(default: the shipped models that recognize English)")


def english_models() -> list[str]:
    """The shipped models that recognize English, in ``speechlab serve``'s order."""
    from speechlab.package import read_card
    from speechlab.shipped import serve_order

    cards = {p.name: read_card(p) for p in serve_order()}
    return [n for n, c in cards.items() if c.kind == "asr" and "en" in c.languages]


def measure(name: str, spoken: list[tuple[Path, str]], noise: Path | None,
            vad: bool = False) -> dict:
    import speechlab
    from speechlab.inference import transcribe_speech
    from speechlab.metrics import wer

    model = speechlab.load(name)
    options = {"language": "en"} if len(model.languages) > 1 else {}

    def read(path: Path) -> str:
        if vad:  # as `transcribe --vad`: only what Silero VAD calls speech is searched
            return transcribe_speech(model, str(path), **options).text
        return model.transcribe(str(path), **options).text

    hyps = [read(p) for p, _ in spoken]
    score = wer([r for _, r in spoken], hyps)
    errors = score.substitutions + score.deletions + score.insertions
    out = {"model": name, "wer": round(100 * score.wer, 1), "words": score.ref_words,
           "errors": errors, "hypotheses": {p.name: h for (p, _), h in zip(spoken, hyps)}}
    if noise is not None:
        text = read(noise)
        out["noise"] = text
        out["noise_words"] = len(text.split())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    add_models_argument(ap)
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                    help=f"where the sounds are (default: {DEFAULT_DIR}, from alsa-utils)")
    ap.add_argument("--vad", action="store_true", help="cut each file by voice activity "
                    "first, as `speechlab transcribe --vad` does")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--joined", type=Path, metavar="WAV", help="also write the spoken sounds "
                    "joined with pauses (16 kHz mono) and WAV.tsv with their words")
    args = ap.parse_args(argv)
    spoken, noise = recordings(args.dir)
    if not spoken:
        print(f"recorded_speech: no spoken test sounds (Front_Center.wav, ...) in {args.dir}; "
              "install alsa-utils or pass --dir", file=sys.stderr)
        return 2
    if args.joined:
        write_joined(spoken, args.joined)
        print(f"wrote {args.joined} and {args.joined}.tsv")
    names = args.models or english_models()
    print(f"{len(spoken)} recordings of a person ({sum(len(r.split()) for _, r in spoken)} "
          f"words) from {args.dir}" + (f", and {NOISE}" if noise else ""))
    results = []
    for name in names:
        r = measure(name, spoken, noise, args.vad)
        results.append(r)
        print(f"\n{name}: WER {r['wer']}% ({r['errors']} errors in {r['words']} words)"
              + (f"; on the noise: {r['noise_words']} word(s) {r['noise']!r}" if noise else ""))
        for (p, ref), hyp in zip(spoken, r["hypotheses"].values()):
            print(f"  {ref:<14} -> {hyp}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
