"""``speechlab diagnose attention`` and ``speechlab wav2vec2 config``.

``diagnose attention MODEL --cuts CUTS --out DIR`` reads a wav2vec 2.0 model from anything
``speechlab.load`` gives an encoder for (:mod:`.checkpoint_import`: a package, a model directory
of a run, a Hugging Face directory of any of transformers' wav2vec 2.0 classes, CTC included, or
a fairseq checkpoint), feeds it as its own feature extractor would (normalized where the model
wants it), captures every block's attention maps on
the first ``--utterances`` cuts, and writes into DIR: ``attention_fig2.png`` (the paper's Fig. 2),
``results.json`` / ``results.md`` (the per-block table, which ``speechlab report DIR`` puts into
the HTML report) and ``suggested_blocks.txt`` (the vertical and vertical+diagonal blocks, e.g.
``6-11``). ``--apply`` also writes ``model.yaml``: the model's config with exactly those blocks
made local (``--radius``).

``diagnose attention-over-training RUN/models/pretrained --cuts CUTS --out DIR`` does the
same statistics at every periodic checkpoint of a pre-training run, beside the dev contrastive
accuracy of its log (:mod:`.over_training`): ``attention_over_training.json`` / ``.png``.

``wav2vec2 config --preset base --local-blocks 2-12 --radius 30 --out model.yaml`` writes a
model config and prints its parameter count.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
from pathlib import Path

from speechlab.config import bounded, command_group
from speechlab.errors import ConfigError, DataError


def _radius(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--radius must be an integer, got {text!r}") from None
    return value


def _check_radius(radius: int) -> None:
    from speechlab.ssl.wav2vec2.config import MAX_RADIUS, MAX_RADIUS_WHY

    if radius < 1:
        raise ConfigError(f"--radius must be >= 1 (frames each side of the query), got {radius}")
    if radius > MAX_RADIUS:
        raise ConfigError(f"--radius must be <= {MAX_RADIUS} ({MAX_RADIUS_WHY}), got {radius}")


def _utterances(cuts_path: Path, n: int, receptive_field: int) -> tuple[list, list[str]]:
    import torch
    from lhotse import CutSet

    from speechlab.audio.io import validate_recording

    if not cuts_path.is_file():
        raise DataError(f"{cuts_path}: no such cuts manifest")
    try:
        cuts = list(CutSet.from_file(cuts_path))
    except Exception as e:  # lhotse raises many kinds for a file that is not a manifest
        raise DataError(f"{cuts_path} is not a lhotse cuts manifest ({type(e).__name__})") from None
    if not cuts:
        raise DataError(f"{cuts_path}: the manifest holds no cut")
    wavs, names = [], []
    for cut in cuts[:n]:
        if cut.sampling_rate != 16000:
            raise DataError(f"{cuts_path}: cut {cut.id!r} is sampled at {cut.sampling_rate} Hz; "
                            "wav2vec 2.0 takes 16 kHz audio (resample it first)")
        if not cut.has_recording:
            raise DataError(f"{cuts_path}: cut {cut.id!r} has no recording")
        try:
            # Before loading: lhotse tries every audio backend on a bad file, and says so.
            validate_recording(cut.recording, 16000, channels=None)
        except DataError as e:
            raise DataError(f"{cuts_path}: cut {cut.id!r}: {e}") from None
        audio = torch.from_numpy(cut.load_audio()[0].copy()).float()
        if len(audio) < receptive_field:
            raise DataError(f"{cuts_path}: cut {cut.id!r} has {len(audio)} samples, shorter than "
                            f"the feature encoder's receptive field ({receptive_field} samples): "
                            "leave it out of the manifest")
        wavs.append(audio)
        names.append(cut.id)
    return wavs, names


def _run_diagnose(args: argparse.Namespace) -> int:
    from speechlab.config import save_config
    from speechlab.files import atomic_write_text, current_umask, make_temp_dir, naming
    from speechlab.report import Figure, Results
    from speechlab.ssl.wav2vec2.checkpoint_import import load_pretrained, wants_normalized
    from speechlab.ssl.wav2vec2.config import format_blocks
    from speechlab.ssl.wav2vec2.diagnose import (
        block_maps,
        diagnosis_table,
        grid_figure,
        suggested_blocks,
    )

    _check_radius(args.radius)
    model = load_pretrained(args.checkpoint)
    encoder = getattr(model, "encoder", model)
    wavs, names = _utterances(args.cuts, args.utterances, encoder.config.receptive_field)
    if wants_normalized(args.checkpoint):  # as the model's own feature extractor feeds it
        wavs = [(w - w.mean()) / (w.var(unbiased=False) + 1e-7).sqrt() for w in wavs]
    diagnosis = block_maps(model, wavs)
    blocks = suggested_blocks(diagnosis)
    new_config = encoder.config.localized(blocks, args.radius) if args.apply else None
    # Everything is computed: now write, into a directory renamed into place when complete,
    # so a failure (a full disk) leaves no half-written diagnosis.
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = make_temp_dir(out.parent, out.name)
    stage.chmod(0o777 & ~current_umask())  # as a plain mkdir would make it, not mkdtemp's 0700
    try:
        grid_figure(diagnosis, stage / "attention_fig2.png", names)
        listed = format_blocks(blocks)
        atomic_write_text(stage / "suggested_blocks.txt", listed + "\n")
        notes = (f"Model: `{args.checkpoint}`; {len(names)} utterance(s) of `{args.cuts}`. "
                 f"Suggested LMSAB blocks (vertical and vertical+diagonal): {listed or 'none'}.")
        if new_config is not None:
            save_config(dataclasses.replace(new_config), stage / "model.yaml")
            notes += f" `model.yaml` localizes them with radius {args.radius}."
        Results(title="wav2vec 2.0 attention diagnosis", tables=[diagnosis_table(diagnosis)],
                figures=[Figure("attention_fig2.png", "Attention maps (mean over heads), "
                                "utterances x blocks, each resized to 64 x 64 (Fig. 2 of the "
                                "local-attention paper).")], notes=notes).save(stage)
        if out.exists():  # --overwrite (the CLI refuses a non-empty --out without it)
            shutil.rmtree(out)
        stage.rename(out)
    except OSError as e:
        raise naming(e, out) from None  # the user's --out, not the staging name
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    for d in diagnosis:
        print(f"block {d.block:2d}: {d.label:<18} band {d.mean('band'):.3f} vertical "
              f"{d.mean('vertical'):.3f} entropy {d.mean('entropy'):.3f} agreement "
              f"{100 * d.agreement:.0f}%")
    print(f"suggested LMSAB blocks: {listed or 'none'}")
    return 0


def _run_over_training(args: argparse.Namespace) -> int:
    from speechlab.ssl.wav2vec2.checkpoint_import import load_pretrained
    from speechlab.ssl.wav2vec2.over_training import attention_over_training, write_over_training
    from speechlab.train.card import best_or_latest

    encoder = load_pretrained(best_or_latest(args.run_dir))
    encoder = getattr(encoder, "encoder", encoder)
    wavs, _ = _utterances(args.cuts, args.utterances, encoder.config.receptive_field)
    points = attention_over_training(args.run_dir, wavs)
    write_over_training(points, args.out)
    for p in points:
        acc = "-" if p.accuracy is None else f"{100 * p.accuracy:.1f}%"
        stats = " ".join(f"B{b.block}:{b.entropy:.2f}/{b.band:.2f}/{b.vertical:.2f}"
                         for b in p.blocks)
        print(f"update {p.step:6d} acc {acc:>6}  entropy/band/vertical {stats}")
    print(f"wrote {args.out}/attention_over_training.json and .png")
    return 0


def _run_config(args: argparse.Namespace) -> int:
    from speechlab.config import save_config
    from speechlab.ssl.wav2vec2.config import format_blocks, parse_blocks, preset
    from speechlab.ssl.wav2vec2.model import build_from_config

    _check_radius(args.radius)
    cfg = preset(args.preset)
    cfg = cfg.localized(parse_blocks(args.local_blocks, cfg.layers), args.radius)
    params = sum(p.numel() for p in build_from_config(cfg).parameters())
    save_config(cfg, args.out)
    print(f"{args.out}: preset {args.preset}, LMSAB blocks {format_blocks(cfg.local_blocks) or 'none'} "
          f"(radius {cfg.radius}), {params:,} parameters")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    dsub = command_group(sub, "diagnose", "diagnose a model (the local-attention paper's Sec. 3)",
                         dest="what", metavar="WHAT")
    a = dsub.add_parser("attention", help="per-block attention maps, patterns and the blocks "
                        "to make local, for a wav2vec 2.0 checkpoint or Hugging Face directory")
    a.add_argument("checkpoint", type=Path, metavar="CHECKPOINT_OR_HF_DIR")
    a.add_argument("--cuts", type=Path, required=True, help="lhotse cuts manifest (16 kHz)")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--utterances", default=6, help="cuts to look at (Fig. 2: six)",
                   type=bounded(int, ge=1, le=100, why="one row of the figure each"))
    a.add_argument("--apply", action="store_true", help="also write model.yaml localizing the "
                   "suggested blocks")
    a.add_argument("--radius", type=_radius, default=30, help="LMSAB radius for --apply")
    a.add_argument("--overwrite", action="store_true",
                   help="replace an existing (non-empty) --out directory")
    a.set_defaults(func=_run_diagnose, outputs={"out": "dir"})
    o = dsub.add_parser("attention-over-training", help="per-block attention statistics and "
                        "dev contrastive accuracy at every checkpoint of a pre-training run")
    o.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                   help="a pre-training run directory (RUN/models/pretrained) with ckpt-*.pt")
    o.add_argument("--cuts", type=Path, required=True, help="lhotse cuts manifest (16 kHz)")
    o.add_argument("--out", type=Path, required=True)
    o.add_argument("--utterances", default=6, help="cuts to look at, the same at every checkpoint",
                   type=bounded(int, ge=1, le=100, why="each is run through every checkpoint"))
    o.add_argument("--overwrite", action="store_true",
                   help="replace the files of an existing (non-empty) --out directory")
    o.set_defaults(func=_run_over_training, outputs={"out": "dir"})

    wsub = command_group(sub, "wav2vec2", "wav2vec 2.0 model configs", dest="what", metavar="WHAT")
    c = wsub.add_parser("config", help="write a model config with some blocks local")
    c.add_argument("--preset", default="base")
    c.add_argument("--local-blocks", default="", help="1-based blocks, e.g. 2-12 or 6-11,12")
    c.add_argument("--radius", type=_radius, default=30)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    c.set_defaults(func=_run_config, outputs={"out": "file"})
