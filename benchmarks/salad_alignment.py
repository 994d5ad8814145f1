"""What aligned labels cost SALAD: the same speech trained once with its true phone times and
once with the times ``speechlab data align-tts`` finds.

festival's KAL diphone voice (male) reads harvested English sentences, with its labels: that is
the "true" corpus. The "aligned" corpus has the same recordings and the labels
:func:`speechlab.tts.align.align_recording` gives them against festival's SLT reading of the
same text (the reference voice a user of ``align-tts`` gets by default). Both are split alike
(train/dev/test) and the SALAD paper runs on each at ``--scale`` (demo by default) with its two
small models (the LSTM and SALAD), without the scale's time limits (so that a busy machine
trains both alike) and with latency timed on the trained models only; Table 2 of both is
printed. Each
is scored against its own test labels' durations, so the numbers say how well a model learns
from the aligned times, not how far they are from the truth (``tts_alignment.py``).

    python benchmarks/salad_alignment.py [--minutes 7] [--scale demo] [--out DIR] [--json F]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

FRACTIONS = {"train": 0.77, "dev": 0.115, "test": 0.115}
OFFSET = 200  # past the sentences tts_alignment.py reads


def _write(root: Path, split: str, rows: list[tuple[str, object, list[str]]]) -> None:
    from speechlab.files import atomic_write_text
    from speechlab.tts.synthesis import write_wav

    for utt, audio, lines in rows:
        write_wav(root / split / "wav" / f"{utt}.wav", audio)
        atomic_write_text(root / split / "lab" / f"{utt}.lab", "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    from speechlab.report import Results
    from speechlab.tts.align import align_recording, label_lines
    from speechlab.tts.corpus import (
        SECONDS_PER_SENTENCE,
        TtsCorpusConfig,
        english_sentences,
        festival_synthesize,
        import_label_corpus,
    )
    from speechlab.tts.labels import parse_labels

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=7.0)
    p.add_argument("--scale", default="demo")
    p.add_argument("--out", type=Path, default=None, help="keep the corpora and runs here")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    n = int(args.minutes * 60 / SECONDS_PER_SENTENCE)
    sentences = english_sentences(TtsCorpusConfig())[OFFSET:OFFSET + n]
    tmp = tempfile.TemporaryDirectory(prefix="salad-alignment-")
    root = args.out or Path(tmp.name)
    items = [(f"u{i:04d}", s) for i, s in enumerate(sentences)]
    kal = festival_synthesize(items, root / "festival-kal", "kal_diphone")
    slt = festival_synthesize(items, root / "festival-slt")
    true_rows, aligned_rows = {}, {}
    for utt, _ in items:
        audio, lines = kal[utt]
        ref_audio, ref_lines = slt[utt]
        got = align_recording(audio, ref_audio, parse_labels(ref_lines, utt)).labels
        true_rows[utt] = (audio, lines)
        aligned_rows[utt] = (audio, label_lines(got))
    cut1 = int(len(items) * FRACTIONS["train"])
    cut2 = cut1 + int(len(items) * FRACTIONS["dev"])
    pools = {"train": items[:cut1], "dev": items[cut1:cut2], "test": items[cut2:]}
    tables = {}
    for name, rows in (("true", true_rows), ("aligned", aligned_rows)):
        corpus = root / f"corpus-{name}"
        for split, pool in pools.items():
            _write(root / f"files-{name}", split, [(u, *rows[u]) for u, _ in pool])
            import_label_corpus(root / f"files-{name}" / split / "wav",
                                root / f"files-{name}" / split / "lab", corpus, split)
        run = root / f"salad-{name}"
        subprocess.run([sys.executable, "-m", "speechlab", "reproduce", "salad", "--scale",
                        args.scale, "--corpus", str(corpus), "--out", str(run),
                        "--jobs", "2", "--set", "models={small_rnn: mini_rnn, small_salad: "
                        "mini_salad}", "--set", "rnn_train.max_minutes=0",
                        "--set", "salad_train.max_minutes=0", "--set",
                        "latency_models=trained", "--set", "latency_lengths=[1.0]",
                        "--set", "latency_files=1"],
                       check=True)
        t2 = Results.load(run).table("table2")
        tables[name] = {"columns": t2.columns, "rows": t2.rows}
    print(f"{len(items)} sentences read by KAL ({args.minutes:g} min), SALAD paper at "
          f"--scale {args.scale}; Table 2 with the true labels, then with the aligned ones:")
    for name, t in tables.items():
        print(f"\n[{name} labels]")
        print("  " + " | ".join(str(c) for c in t["columns"]))
        for r in t["rows"]:
            print("  " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r))
    if args.json:
        args.json.write_text(json.dumps(tables, indent=2) + "\n")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
