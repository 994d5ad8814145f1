"""English recognizers on a synthesizer that no training here uses: flite (Debian's ``flite``),
CMU's small engine, reading the run corpus's English test sentences.

Two of its voices are speakers no speechlab corpus has: ``awb`` (a Scottish man) and ``rms``
(an American man). Two are speakers training hears through festival, made by another engine
here: ``slt`` (flite's own statistical voice; festival's SLT is an HTS voice) and ``kal16``
(the same diphones as festival's kal, flite's signal processing). So the table separates a new
speaker (``new speakers mean``: awb, rms) from a known speaker through a new synthesizer.
flite is never a training voice (``speechlab.data`` cannot call it); this script is its only
user, and the audio is made afresh by it each run (deterministic).

Beside them, each model's WER on the run corpus's ``test`` split (the voices of training) and
``unseen`` split (festival's ked), over the same first N sentences.

    python benchmarks/heldout_voices.py [MODEL ...] [--corpus exp/shipped-topologies/corpus]
        [--utterances 100] [--voices awb,rms,slt,kal16] [--json out.json] [--wav-dir DIR]

MODEL: shipped names, package paths or runs' ``OUT/models/NAME`` (default: the shipped models
that recognize English). Exit status 2 when flite is missing (``apt install flite``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))
from accented_english import markdown, measure_voices, voices_cli  # noqa: E402
from recorded_speech import english_models  # noqa: E402

NEW_SPEAKERS = ("awb", "rms")
KNOWN_SPEAKERS = ("slt", "kal16")
VOICES = NEW_SPEAKERS + KNOWN_SPEAKERS
MEAN = "new speakers mean"


def flite_audio(texts: list[str], voice: str) -> list:
    """``texts`` read by flite's ``voice``, as 16 kHz float32 arrays."""
    import numpy as np

    from speechlab.audio.io import load_audio

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "x.wav"
        for text in texts:
            # the text as an argument, never through a shell
            subprocess.run(["flite", "-voice", voice, "-t", text, "-o", str(wav)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out.append(np.asarray(load_audio(wav, 16000), dtype=np.float32))
    return out


def check_flite(voices: list[str]) -> str | None:
    """Why flite cannot read ``voices`` here, or None."""
    if shutil.which("flite") is None:
        return "flite is not installed (Debian: apt install flite)"
    listed = subprocess.run(["flite", "-lv"], capture_output=True, text=True).stdout
    have = set(listed.split(":", 1)[-1].split())
    missing = [v for v in voices if v not in have]
    return f"flite here has no voice {', '.join(missing)} (it has {' '.join(sorted(have))})" \
        if missing else None


def main(argv: list[str] | None = None) -> int:
    parsed = voices_cli(argv, __doc__, VOICES, "flite voices")
    if isinstance(parsed, int):
        return parsed
    args, voices = parsed
    why = check_flite(voices)
    if why:
        print(f"heldout_voices: {why}", file=sys.stderr)
        return 2
    readers = {v: (lambda texts, v=v: flite_audio(texts, v)) for v in voices}
    over = [v for v in voices if v in NEW_SPEAKERS]
    rows = measure_voices(args.models or english_models(), args.corpus, args.utterances,
                          readers, MEAN, args.wav_dir, mean_over=over)
    print(markdown(rows, voices, MEAN))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
