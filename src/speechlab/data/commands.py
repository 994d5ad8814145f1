"""``speechlab data ...``: build the embedded corpus, import Kaldi/lhotse corpora, inspect one,
harvest the sentence lists.

Options come from the config dataclasses (:class:`CorpusConfig`, :class:`ImportConfig`) through
:func:`speechlab.config.add_config_args`; ``--minutes en=60,hi=63`` is also accepted in that
comma form for convenience.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from speechlab.config import add_config_args, bounded, config_from_args
from speechlab.data.corpus import CorpusConfig, make_asr_corpus, read_corpus_json
from speechlab.data.importers import ImportConfig, ImportReport, import_kaldi, import_lhotse
from speechlab.data.text_harvest import (LANGUAGES, general_english, harvest_provenance,
                                         harvest_sentences)
from speechlab.errors import ConfigError, DataError

log = logging.getLogger(__name__)


def parse_minutes(text: str) -> dict[str, float]:
    """``"en=60,hi=63"`` -> ``{"en": 60.0, "hi": 63.0}``."""
    out: dict[str, float] = {}
    for part in text.split(","):
        lang, sep, value = part.partition("=")
        if not sep:
            raise ConfigError(f"--minutes: {part!r} is not of the form lang=minutes "
                              "(e.g. --minutes en=60,hi=63,ta=5.5,gu=7.2)")
        try:
            out[lang.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--minutes: {value!r} (for {lang.strip()!r}) is not a number") \
                from None
    return out


def _run_make(args: argparse.Namespace) -> int:
    minutes = getattr(args, "cfg__minutes", None)
    if minutes and "=" in minutes and not minutes.lstrip().startswith("{"):
        # "en=60,hi=63" -> YAML mapping, so the config machinery checks it like any override.
        args.cfg__minutes = json.dumps(parse_minutes(minutes))
    base = CorpusConfig.tiny() if args.tiny else None
    cfg = config_from_args(CorpusConfig, args, base=base)
    out = make_asr_corpus(cfg, args.out, progress=not args.no_progress, overwrite=args.overwrite)
    _print_info(out)
    return 0


def _report(rep: ImportReport) -> int:
    print(f"imported {rep.kept} utterances into {rep.out_dir} (split {rep.split!r})")
    if rep.total_skipped:
        print(f"skipped {rep.total_skipped} utterances: {dict(rep.skipped)}")
        for ex in rep.examples[:5]:
            print(f"  e.g. {ex}")
    return 0


def _run_import_kaldi(args: argparse.Namespace) -> int:
    cfg = config_from_args(ImportConfig, args)
    return _report(import_kaldi(args.kaldi_dir, args.out, cfg, overwrite=args.overwrite))


def _run_import_lhotse(args: argparse.Namespace) -> int:
    cfg = config_from_args(ImportConfig, args)
    return _report(import_lhotse(args.recordings, args.supervisions, args.out, cfg,
                                 overwrite=args.overwrite))


def _print_info(corpus_dir: Path) -> None:
    info = read_corpus_json(corpus_dir)
    if not info:
        raise DataError(f"{corpus_dir}: not a complete speechlab corpus (no corpus.json)")
    print(f"corpus {corpus_dir} ({info.get('sample_rate')} Hz)")
    print(f"{'split':<8}{'lang':<6}{'utts':>8}{'hours':>10}{'speakers':>10}  origin")
    for split, s in info["splits"].items():
        for lang, d in s["languages"].items():
            print(f"{split:<8}{lang:<6}{d['utterances']:>8}{d['hours']:>10.3f}"
                  f"{len(d['speakers']):>10}  {s.get('origin', '')}")
    synthetic = info.get("synthetic")
    if synthetic:
        voices = synthetic["voices"]
        print("test speakers:", ", ".join(voices.get("test", [])),
              "(espeak-ng variants held out of training)")
        if voices.get("unseen"):
            print("unseen-voice speakers (no training utterance):",
                  ", ".join(voices["unseen"]))
        missing = synthetic.get("missing_debian_packages")
        if missing:
            print("text sources missing (word-list top-up used):", ", ".join(missing))


def _run_prepare(args: argparse.Namespace) -> int:
    from speechlab.data.prepare import prepare_corpus

    languages = None
    if args.languages:
        languages = [lang.strip() for lang in args.languages.split(",") if lang.strip()]
    reports = prepare_corpus(args.corpus, args.src_dir, args.out, languages=languages,
                             on_error=args.on_error, overwrite=args.overwrite)
    for split, rep in reports.items():
        line = f"{split}: {rep.kept} utterances"
        if rep.total_skipped:
            line += f", skipped {rep.total_skipped}: {dict(rep.skipped)}"
        print(line)
    _print_info(Path(args.out).resolve())
    return 0


def _run_harvest(args: argparse.Namespace) -> int:
    sentences = harvest_sentences(LANGUAGES, args.cache_dir, refresh=args.refresh)
    prov = harvest_provenance(args.cache_dir)
    for lang in LANGUAGES:
        real = sum(s.is_real for s in sentences[lang])
        print(f"{lang}: {len(sentences[lang])} sentences ({real} harvested, "
              f"{len(sentences[lang]) - real} word-list)")
    if prov.get("missing_packages"):
        print("could not download:", ", ".join(prov["missing_packages"]))
    return 0


def _run_general_text(args: argparse.Namespace) -> int:
    from speechlab.files import atomic_write_text, refuse_existing

    refuse_existing(args.out, "a file", args.overwrite)
    sentences = general_english(args.cache_dir, refresh=args.refresh)
    source = sentences[0].source if sentences else "-"
    if args.hold_out:
        sentences = [s for i, s in enumerate(sentences) if i % args.hold_out]
    atomic_write_text(args.out, "".join(s.text + "\n" for s in sentences))
    print(f"{args.out}: {len(sentences)} sentences of general English ({source})"
          + (f", every {args.hold_out}th held out" if args.hold_out else ""))
    return 0


def _run_pack(args: argparse.Namespace) -> int:
    from speechlab.data.pack import pack_corpus

    splits = [x.strip() for x in args.splits.split(",") if x.strip()]
    if not splits:
        raise DataError("--splits: name at least one split")
    summary = pack_corpus(args.corpus_dir, args.out, splits, args.kbps, args.others,
                          progress=not args.no_progress)
    for split, row in summary["splits"].items():
        print(f"{split}: {row['recordings']} recordings{'' if row['whole'] else ' (its first)'}"
              f", {row['hours']} h as {row['mb']} MB of Opus ({row['kbps']} kbps)")
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB")
    return 0


def _run_unpack(args: argparse.Namespace) -> int:
    from speechlab.data.pack import unpack_corpus

    summary = unpack_corpus(args.pack_file, args.out, progress=not args.no_progress,
                            jobs=args.jobs)
    hours = sum(row["hours"] for row in summary["splits"].values())
    print(f"{args.out}: the corpus, with {hours:.2f} h of audio decoded from Opus "
          f"({', '.join(summary['splits'])})")
    return 0


def _run_info(args: argparse.Namespace) -> int:
    _print_info(Path(args.corpus_dir))
    return 0


def _add_import_options(parser: argparse.ArgumentParser,
                        run: Callable[[argparse.Namespace], int]) -> None:
    """The options every importer shares, after its own source options: where the imported
    split goes, and the :class:`ImportConfig` settings."""
    parser.add_argument("--out", type=Path, required=True, help="corpus directory to write into")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the split if the corpus directory already holds it")
    add_config_args(parser, ImportConfig)
    parser.set_defaults(func=run, outputs={"out": "corpus"})


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    data = subparsers.add_parser("data", help="make, import and inspect corpora")
    sub = data.add_subparsers(dest="data_command", metavar="DATA_COMMAND")
    data.set_defaults(func=lambda args: (data.print_help(), 2)[1])
    # Areas above this one add their own data commands here (tts: make-tts-corpus, import-tts).
    data.subcommands = sub  # type: ignore[attr-defined]

    make = sub.add_parser("make-asr-corpus",
                          help="synthesize the embedded en/hi/ta/gu ASR corpus")
    make.add_argument("--out", type=Path, required=True, help="output corpus directory")
    make.add_argument("--tiny", action="store_true",
                      help="6 utterances per language (seconds to build; for tests)")
    make.add_argument("--no-progress", action="store_true", help="no progress bar")
    make.add_argument("--overwrite", action="store_true",
                      help="replace the train/dev/test splits the directory already holds")
    add_config_args(make, CorpusConfig)
    make.set_defaults(func=_run_make, outputs={"out": "corpus"})

    kaldi = sub.add_parser("import-kaldi", help="import a Kaldi data directory")
    kaldi.add_argument("kaldi_dir", type=Path, help="dir with wav.scp, text, utt2spk "
                                                    "[, utt2lang, segments]")
    _add_import_options(kaldi, _run_import_kaldi)

    lh = sub.add_parser("import-lhotse", help="import a lhotse recipe's manifests")
    lh.add_argument("--recordings", type=Path, required=True, help="RecordingSet file")
    lh.add_argument("--supervisions", type=Path, required=True, help="SupervisionSet file")
    _add_import_options(lh, _run_import_lhotse)

    from speechlab.data.prepare import CORPORA

    prep = sub.add_parser(
        "prepare", help="a real corpus you have (LibriSpeech, FLEURS, CMU INDIC, LJSpeech, CMU "
        "ARCTIC) into the corpus layout, through lhotse's recipes",
        description="Prepare a corpus from its unpacked distribution (nothing is downloaded): "
        + "; ".join(f"{k}: {c.what}" for k, c in CORPORA.items())
        + ". Audio is resampled to 16 kHz on load, transcripts normalised as the embedded "
        "corpus's; see docs/corpus.md.")
    prep.add_argument("corpus", choices=sorted(CORPORA), metavar="CORPUS",
                      help=f"one of {', '.join(sorted(CORPORA))}")
    prep.add_argument("src_dir", type=Path, metavar="SRC_DIR", help="the unpacked corpus")
    prep.add_argument("--out", type=Path, required=True, help="corpus directory to write")
    prep.add_argument("--languages", default=None,
                      help="comma-separated tags to keep (fleurs, cmu-indic; default: every "
                           "one of en, hi, ta, gu it holds)")
    prep.add_argument("--on-error", dest="on_error", choices=("raise", "skip"), default="raise",
                      help="an unusable utterance stops the preparation (raise) or is counted "
                           "and left out (skip)")
    prep.add_argument("--overwrite", action="store_true",
                      help="replace splits the directory already holds")
    prep.set_defaults(func=_run_prepare, outputs={"out": "corpus"})

    harvest = sub.add_parser("harvest-text", help="harvest (or show) the cached sentence lists")
    harvest.add_argument("--refresh", action="store_true", help="harvest again")
    harvest.add_argument("--cache-dir", type=Path, default=None,
                         help="cache root (default $SPEECHLAB_CACHE or ~/.cache/speechlab)")
    harvest.set_defaults(func=_run_harvest, outputs={"cache_dir": "cache"})

    general = sub.add_parser(
        "general-text", help="everyday English for word LMs (WordNet's example sentences and "
                             "definitions, from Debian's wordnet-base), one sentence a line")
    general.add_argument("--out", type=Path, required=True, help="the text file to write")
    general.add_argument("--overwrite", action="store_true", help="replace --out")
    general.add_argument("--hold-out", dest="hold_out", type=bounded(int, ge=2), default=0,
                         metavar="N", help="leave out every Nth sentence (the first, the "
                         "N+1th...), e.g. 100: the ones benchmarks/general_english.py reads")
    general.add_argument("--refresh", action="store_true", help="harvest again")
    general.add_argument("--cache-dir", type=Path, default=None,
                         help="cache root (default $SPEECHLAB_CACHE or ~/.cache/speechlab)")
    general.set_defaults(func=_run_general_text, outputs={"out": "file"})

    pack = sub.add_parser(
        "pack", help="a corpus in one file for a machine that cannot build it: manifests, and "
                     "the audio of some splits as Opus",
        description="Write CORPUS into one tar: every manifest, and the audio of --splits coded "
                    "as Opus (lossy; about 3 KB per second at 24 kbps), the other splits cut to "
                    "their first --others recordings, e.g. to train on a GPU "
                    "machine without espeak-ng or festival. `speechlab data unpack` makes a "
                    "corpus directory of it again.")
    pack.add_argument("corpus_dir", type=Path, metavar="CORPUS")
    pack.add_argument("--out", type=Path, required=True, help="the tar file to write")
    pack.add_argument("--splits", default="train,dev",
                      help="splits whose audio is packed (comma-separated; default train,dev)")
    pack.add_argument("--kbps", type=float, default=24.0,
                      help="Opus rate, 12 to 128 kbps (default 24)")
    pack.add_argument("--others", type=bounded(int, ge=0), default=8, metavar="N",
                      help="the other splits are cut to their first N recordings (default 8)")
    pack.add_argument("--no-progress", action="store_true", help="no progress bar")
    pack.add_argument("--overwrite", action="store_true", help="replace --out")
    pack.set_defaults(func=_run_pack, outputs={"out": "file"})

    unpack = sub.add_parser("unpack", help="a corpus directory from `speechlab data pack`'s file")
    unpack.add_argument("pack_file", type=Path, metavar="PACK")
    unpack.add_argument("--out", type=Path, required=True, help="the corpus directory to write")
    unpack.add_argument("--jobs", type=bounded(int, ge=1), default=os.cpu_count() or 1,
                        help="threads that decode the audio (default: one per core)")
    unpack.add_argument("--no-progress", action="store_true", help="no progress bar")
    unpack.add_argument("--overwrite", action="store_true",
                        help="write into --out even if it holds files")
    unpack.set_defaults(func=_run_unpack, outputs={"out": "dir"})

    info = sub.add_parser("info", help="summarise a corpus directory")
    info.add_argument("corpus_dir", type=Path)
    info.set_defaults(func=_run_info)
