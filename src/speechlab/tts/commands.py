"""The TTS corpus commands under ``speechlab data`` (``speechlab synth``, on any TTS model
``speechlab.load`` reads, is in :mod:`speechlab.inference`).

- ``speechlab data make-tts-corpus --out DIR --minutes N``: the embedded festival corpus.
- ``speechlab data import-tts WAV_DIR LAB_DIR --out DIR --split NAME``: a Merlin/HTS-layout
  corpus into the corpus layout.
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


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    add_data_commands(subparsers.choices["data"].subcommands)
