"""``speechlab synth`` and the TTS corpus commands under ``speechlab data``.

- ``speechlab synth MODEL_DIR LABELS --out x.wav``: a trained acoustic model (a model directory
  of ``speechlab reproduce salad``) turns phone-aligned HTS labels into speech;
  ``--text "..."`` instead of LABELS runs festival's front end (SLT voice) for the labels and
  their durations.
- ``speechlab data make-tts-corpus --out DIR --minutes N``: the embedded festival corpus.
- ``speechlab data import-tts WAV_DIR LAB_DIR --out DIR --split NAME``: a Merlin/HTS-layout
  corpus into the corpus layout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from speechlab.config import add_config_args, bounded, config_from_args
from speechlab.errors import ConfigError, DataError


def synthesize_labels(model_dir: Path, labels, window: int | None = None):
    """(samples,) float32 16 kHz speech for :class:`~speechlab.tts.labels.Labels` with the
    model trained in ``model_dir`` (its checkpoint, ``tts.json`` and ``questions.hed``)."""
    import numpy as np
    import torch

    from speechlab.experiment.trained import load_trained
    from speechlab.tts.acoustic import synthesize
    from speechlab.tts.features import normalize_utterance, read_stats, utterance_arrays
    from speechlab.tts.questions import load_questions
    from speechlab.tts.reproduce import QUESTIONS_NAME, SIDECAR

    sidecar = model_dir / SIDECAR
    if not sidecar.is_file():
        raise DataError(f"{model_dir}: no {SIDECAR} (normalizers); give a model directory "
                        "written by 'speechlab reproduce salad' (OUT/models/NAME)")
    inputs, outputs, max_duration, _ = read_stats(sidecar)
    questions = load_questions(model_dir / QUESTIONS_NAME)
    model = load_trained(model_dir)
    utt = normalize_utterance("synth", utterance_arrays(labels, None, questions), inputs, None,
                              max_duration)
    expected = model.embedding.proj.in_features
    if utt.phone_x.shape[1] + 2 != expected:
        raise DataError(f"{model_dir}: the model takes {expected} inputs, its question set gives "
                        f"{utt.phone_x.shape[1] + 2}")
    with torch.no_grad():
        x = torch.from_numpy(utt.x())[None]
        y = model(x, torch.tensor([x.shape[1]]), window=window)[0].numpy()
    # A NaN prediction would be written as a full-scale wav without a word.
    if not np.isfinite(y).all():
        raise DataError(f"{model_dir}: the model's predictions for {labels.source} are not "
                        "finite (NaN or inf): the model is broken; retrain it or use another")
    wav = synthesize(outputs.inverse(np.asarray(y)))
    if not np.isfinite(wav).all():
        raise DataError(f"{model_dir}: the vocoder gave non-finite samples for {labels.source} "
                        f"(the normalizers in {sidecar} are broken?); retrain the model")
    return wav


def _run_synth(args: argparse.Namespace) -> int:
    import io
    import tempfile

    import soundfile as sf

    from speechlab.tts.acoustic import SAMPLE_RATE
    from speechlab.tts.corpus import festival_synthesize
    from speechlab.tts.labels import load_labels, parse_labels
    from speechlab.utils import atomic_path

    if (args.labels is None) == (args.text is None):
        raise ConfigError("synth: give either a LABELS file or --text, not both")
    if not Path(args.model_dir).is_dir():
        raise DataError(f"{args.model_dir}: not a model directory")
    if args.text is not None:
        if not args.text.strip():
            raise DataError("synth: --text is empty")
        with tempfile.TemporaryDirectory(prefix="festival-") as tmp:
            _, lines = festival_synthesize([("text", args.text)], Path(tmp))["text"]
        labels = parse_labels(lines, "festival's labels of --text")
    else:
        labels = load_labels(args.labels)
    wav = synthesize_labels(Path(args.model_dir), labels, args.window or None)
    buf = io.BytesIO()
    sf.write(buf, wav, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    with atomic_path(args.out) as tmp:
        tmp.write_bytes(buf.getvalue())
    print(f"{args.out}: {len(wav) / SAMPLE_RATE:.2f} s")
    return 0


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
    p = subparsers.add_parser("synth", help="speech from HTS labels (or text) with a trained "
                              "SALAD / RNN acoustic model")
    p.add_argument("model_dir", type=Path, help="a model directory: OUT/models/NAME of "
                   "'speechlab reproduce salad'")
    p.add_argument("labels", type=Path, nargs="?", default=None,
                   help="phone-aligned HTS full-context labels (start end context)")
    p.add_argument("--text", default=None, help="text to speak through festival's front end")
    p.add_argument("--out", type=Path, required=True, help="output wav (16 kHz)")
    p.add_argument("--window", type=bounded(int, ge=0), default=120,
                   help="SALAD: attend within windows of this many frames (0: whole utterance)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=_run_synth, outputs={"out": "file"})
