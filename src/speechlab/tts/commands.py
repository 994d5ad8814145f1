"""The TTS corpus commands under ``speechlab data`` (``speechlab synth``, on any TTS model
``speechlab.load`` reads, is in :mod:`speechlab.inference`).

- ``speechlab data make-tts-corpus --out DIR --minutes N``: the embedded festival corpus.
- ``speechlab data import-tts WAV_DIR LAB_DIR --out DIR --split NAME``: a Merlin/HTS-layout
  corpus into the corpus layout.
- ``speechlab data align-tts CORPUS --out DIR``: recorded English speech with text (LJSpeech,
  CMU ARCTIC after ``speechlab data prepare``) -> a TTS corpus with phone-aligned labels
  (:mod:`speechlab.tts.align`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from speechlab.config import add_config_args, bounded, config_from_args


def _run_make(args: argparse.Namespace) -> int:
    from speechlab.tts.corpus import TtsCorpusConfig, make_tts_corpus

    cfg = config_from_args(TtsCorpusConfig, args)
    out = make_tts_corpus(cfg, args.out, overwrite=args.overwrite)
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    for split, d in info["splits"].items():
        print(f"{split:<6} {d['utterances']:>6} utterances {d['hours'] * 60:8.2f} min")
    return 0


def _run_import(args: argparse.Namespace) -> int:
    from speechlab.tts.corpus import import_label_corpus

    n = import_label_corpus(args.wav_dir, args.lab_dir, args.out, args.split, args.tolerance,
                            overwrite=args.overwrite)
    print(f"imported {n} utterances into {args.out} (split {args.split!r})")
    return 0


def _run_align(args: argparse.Namespace) -> int:
    from speechlab.tts.align import AlignConfig, align_tts_corpus

    cfg = AlignConfig(voice=args.voice, speaker=args.speaker, max_seconds=args.max_seconds,
                      max_ratio=args.max_ratio, batch_size=args.batch_size, workers=args.workers,
                      on_error=args.on_error)
    info = align_tts_corpus(args.corpus, args.out, cfg, overwrite=args.overwrite,
                            progress=not args.no_progress)
    for split, d in info["splits"].items():
        print(f"{split:<6} {d['utterances']:>6} utterances {d['hours'] * 60:8.2f} min")
    a = info["aligned"]
    print(f"aligned {a['utterances']} utterances of {a['speaker']!r}, left out "
          f"{a['left_out']}; warp cost mean {a['cost']['mean']:.2f}, 95th percentile "
          f"{a['cost']['p95']:.2f} (worst first in {Path(args.out) / 'alignment.tsv'})")
    return 0


def add_data_commands(sub: argparse._SubParsersAction) -> None:
    """The TTS subcommands of ``speechlab data``."""
    from speechlab.tts.corpus import TtsCorpusConfig

    make = sub.add_parser("make-tts-corpus",
                          help="festival (SLT HTS voice) speaks harvested English: wavs + labels")
    make.add_argument("--out", type=Path, required=True, help="output corpus directory")
    add_config_args(make, TtsCorpusConfig)
    make.add_argument("--overwrite", action="store_true",
                      help="replace the train/dev/test splits the directory already holds")
    make.set_defaults(func=_run_make, outputs={"out": "corpus"})

    imp = sub.add_parser("import-tts", help="import wavs + HTS labels (Merlin/HTS layout)")
    imp.add_argument("wav_dir", type=Path, help="folder of <id>.wav (16 kHz mono)")
    imp.add_argument("lab_dir", type=Path, help="folder of phone-aligned <id>.lab")
    imp.add_argument("--out", type=Path, required=True, help="corpus directory to write into")
    imp.add_argument("--split", default="train", help="split name (train, dev, test)")
    imp.add_argument("--tolerance", type=bounded(float, ge=0), default=0.1,
                     help="seconds the labels' end may differ from the wav's (default 0.1)")
    imp.add_argument("--overwrite", action="store_true",
                     help="replace the split if the corpus directory already holds it")
    imp.set_defaults(func=_run_import, outputs={"out": "corpus"})

    from speechlab.tts.align import ON_ERROR, REFERENCE_VOICES

    al = sub.add_parser("align-tts", help="recorded English speech with text -> a TTS corpus "
                        "with phone-aligned labels (festival front end, DTW to its voice)")
    al.add_argument("corpus", type=Path, help="a corpus of recordings with text (speechlab data "
                    "prepare ljspeech|cmu-arctic makes one)")
    al.add_argument("--out", type=Path, required=True, help="the TTS corpus to write")
    al.add_argument("--voice", choices=sorted(REFERENCE_VOICES), default="slt",
                    help="festival's reference voice: slt (female, HTS) or kal (male, diphone); "
                    "the nearer to the reader, the better the alignment (default slt)")
    al.add_argument("--speaker", default=None,
                    help="the speaker to take from a corpus of several (ARCTIC: slt, bdl, ...)")
    al.add_argument("--on-error", choices=ON_ERROR, default="raise",
                    help="an utterance that cannot be aligned stops the run (raise) or is left "
                    "out and counted (skip)")
    al.add_argument("--max-seconds", type=bounded(float, gt=0, le=120), default=30.0,
                    help="longest utterance aligned (default 30)")
    al.add_argument("--max-ratio", type=bounded(float, gt=1, le=10), default=2.5,
                    help="most the recording and festival's reading may differ in length "
                    "(default 2.5)")
    al.add_argument("--batch-size", type=bounded(int, ge=1, le=1000), default=16,
                    help="utterances per festival process (default 16)")
    al.add_argument("--workers", type=bounded(int, ge=1, le=64), default=2,
                    help="festival processes at a time (default 2)")
    al.add_argument("--no-progress", action="store_true", help="no progress bar")
    al.add_argument("--overwrite", action="store_true",
                    help="replace the splits the output directory already holds")
    al.set_defaults(func=_run_align, outputs={"out": "corpus"})


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    add_data_commands(subparsers.choices["data"].subcommands)
