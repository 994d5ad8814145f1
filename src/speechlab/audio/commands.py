"""``speechlab features ...`` and ``speechlab text ...`` subcommands.

* ``features compute --cuts CUTS --out DIR``: fbank cache (options from :class:`FbankConfig`);
  prints the manifest of the cuts with features attached.
* ``features cmvn --cuts CUTS --out FILE``: global CMVN statistics of computed features.
* ``text build-tokenizers --cuts CUTS --out DIR``: ``DIR/<lang>.json`` per language and
  ``DIR/union.json`` (options from :class:`TokenizerBuildConfig`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from speechlab.audio.features import FbankConfig, compute_features, fit_cmvn
from speechlab.config import add_config_args, command_group, config_from_args
from speechlab.errors import ConfigError, DataError, where
from speechlab.files import atomic_path
from speechlab.text.graphemes import TokenizerBuildConfig, UnionTokenizer


def read_cuts(path: Path):
    """A lhotse CutSet manifest, with a clear error for a missing or malformed file."""
    from lhotse import CutSet

    if Path(path).is_dir():
        raise DataError(f"cuts manifest {path} is a directory; give the manifest file "
                        "(e.g. DIR/train_cuts.jsonl.gz)")
    if not Path(path).is_file():
        raise DataError(f"cuts manifest {path} does not exist")
    try:
        return CutSet.from_file(path)
    except Exception as e:  # lhotse raises JSON, key and value errors for bad manifests
        raise DataError(f"{path} is not a lhotse cuts manifest: {e}") from None


def write_cuts(cuts, path: Path) -> None:
    """Save a CutSet atomically; the temp name keeps the suffixes lhotse picks the format by."""
    path = Path(path)
    with atomic_path(path, suffix="".join(path.suffixes)) as tmp:
        cuts.to_file(tmp)


# Manifest file names lhotse can write (it picks the format by the suffix).
MANIFEST_SUFFIXES = (".jsonl.gz", ".jsonl", ".json.gz", ".json")


def run_compute(args: argparse.Namespace) -> int:
    cfg = config_from_args(FbankConfig, args)
    if args.cuts_out is not None and not str(args.cuts_out).endswith(MANIFEST_SUFFIXES):
        raise ConfigError(f"--cuts-out {args.cuts_out}: a manifest file name must end in one of "
                          f"{', '.join(MANIFEST_SUFFIXES)}")
    cuts = compute_features(read_cuts(args.cuts), args.out, cfg, progress=not args.quiet)
    if args.cuts_out is not None:
        write_cuts(cuts, args.cuts_out)
        print(args.cuts_out)
    else:
        first = next(iter(cuts), None)
        if first is not None:
            print(Path(first.features.storage_path) / "cuts.jsonl.gz")
    return 0


def run_cmvn(args: argparse.Namespace) -> int:
    cmvn = fit_cmvn(read_cuts(args.cuts), progress=not args.quiet)
    cmvn.save(args.out)
    print(args.out)
    return 0


def run_build_tokenizers(args: argparse.Namespace) -> int:
    cfg = config_from_args(TokenizerBuildConfig, args)
    pairs = []
    for cut in read_cuts(args.cuts):
        for sup in cut.supervisions:
            if not sup.language:
                raise DataError(f"{where(args.cuts, utt=cut.id)}: supervision {sup.id!r} has no "
                                "language; the corpus builder must set it")
            if not sup.text or not sup.text.strip():
                raise DataError(f"{where(args.cuts, utt=cut.id)}: supervision {sup.id!r} has an "
                                "empty transcript")
            pairs.append((sup.language, sup.text))
    union = UnionTokenizer.build(pairs, languages=cfg.languages, normalize=cfg.normalize)
    out = Path(args.out)
    for lang, tok in union.tokenizers.items():
        tok.save(out / f"{lang}.json")
        print(f"{out / f'{lang}.json'}: {len(tok)} symbols")
    union.save(out / "union.json")
    print(f"{out / 'union.json'}: {len(union)} symbols")
    return 0


def add_commands(subparsers) -> None:
    fsub = command_group(subparsers, "features", "fbank features and CMVN statistics")

    p = fsub.add_parser("compute", help="compute (or reuse) the fbank cache of a cuts manifest")
    p.add_argument("--cuts", type=Path, required=True, help="lhotse cuts manifest (.jsonl.gz)")
    p.add_argument("--out", type=Path, required=True, help="cache root directory")
    p.add_argument("--cuts-out", type=Path, default=None,
                   help="also write the cuts with features attached here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_config_args(p, FbankConfig)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --cuts-out file")
    # The cache is reused by design: features already computed there are kept.
    p.set_defaults(func=run_compute, outputs={"out": "cache", "cuts_out": "file"})

    p = fsub.add_parser("cmvn", help="global mean/std of computed features (safetensors)")
    p.add_argument("--cuts", type=Path, required=True, help="cuts with features attached")
    p.add_argument("--out", type=Path, required=True, help="output .safetensors file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=run_cmvn, outputs={"out": "file"})

    tsub = command_group(subparsers, "text", "tokenizers built from transcripts")
    p = tsub.add_parser("build-tokenizers",
                        help="one grapheme tokenizer JSON per language plus the union")
    p.add_argument("--cuts", type=Path, required=True, help="lhotse cuts manifest (.jsonl.gz)")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    add_config_args(p, TokenizerBuildConfig)
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing (non-empty) --out directory")
    p.set_defaults(func=run_build_tokenizers, outputs={"out": "dir"})
