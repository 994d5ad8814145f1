"""``speechlab score``: WER/CER of a Kaldi-style hypothesis file against a reference file.

Both files hold one utterance per line, ``utt-id word word ...`` (an id alone is an empty
transcript). Every utterance must appear exactly once on each side; a malformed line or an id
present on one side only is reported with the file and line it comes from. The file paths and
the ``--cer`` switch are plain options; the scoring options (bootstrap level, resamples, seed,
whether CER keeps spaces, Unicode normalisation) come from :class:`ScoreConfig` through
``speechlab.config``.

``--baseline OTHER_HYP`` also scores a second system on the same references and prints the
relative error reduction of ``--hyp`` against it (the papers' WERR / CERR, positive when
``--hyp`` is better) with its paired-bootstrap interval (both systems' utterances resampled
together), so that a difference between two systems comes with what the test set can resolve.

Both files are put in Unicode NFC before scoring (``--normalization none`` turns that off):
the same text with precomposed or combining characters is the same text (see
:mod:`speechlab.metrics.error_rate`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from speechlab.config import add_config_args, check_fields, config_from_args, ranged, to_dict
from speechlab.errors import DataError, where
from speechlab.files import atomic_write_json
from speechlab.metrics.error_rate import ErrorRate, cer, wer, werr
from speechlab.metrics.stats import bootstrap_ci, werr_interval


@dataclass(frozen=True)
class ScoreConfig:
    """Options of ``speechlab score`` besides the input/output files."""

    spaces: bool = False  # with --cer: score the space between words as a character too
    level: float = ranged(0.95, gt=0, lt=1)  # confidence level of the bootstrap interval
    # bootstrap replicates; 0 skips the interval
    num_resamples: int = ranged(1000, ge=0, le=1_000_000,
                                why="each resample rescores every utterance; 1000 is usual")
    seed: int = ranged(0, ge=0)
    # Unicode normal form of both sides before scoring; "none" scores code points as given.
    normalization: Literal["NFC", "NFKC", "NFD", "NFKD", "none"] = "NFC"

    def __post_init__(self) -> None:
        check_fields(self)


def read_transcripts(path: str | Path) -> dict[str, str]:
    """Read a Kaldi ``text`` file into ``{utt_id: transcript}`` (file order kept)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected a text file") from None
    out: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{where(path, lineno)}: not valid UTF-8 ({e.reason} at byte "
                            f"{e.start}); re-encode the file as UTF-8") from None
        parts = line.split(maxsplit=1)
        if not parts:
            raise DataError(f"{where(path, lineno)}: empty line; every line must read "
                            "'utt-id word word ...'")
        utt = parts[0]
        if utt in out:
            raise DataError(f"{where(path, lineno, utt)}: duplicate utterance id (first seen on "
                            f"line {first_line[utt]}); each utterance must appear once")
        out[utt] = parts[1].strip() if len(parts) > 1 else ""
        first_line[utt] = lineno
    if not out:
        raise DataError(f"{path}: no utterances (the file is empty)")
    return out


def _missing(ids: list[str], in_path: Path, from_path: Path) -> DataError:
    shown = ", ".join(repr(i) for i in ids[:5]) + (", ..." if len(ids) > 5 else "")
    return DataError(f"{in_path}: {len(ids)} utterance id(s) of {from_path} are missing "
                     f"({shown}); score the same utterances on both sides")


def score_files(ref_path: str | Path, hyp_path: str | Path, *, char: bool = False,
                spaces: bool = False, normalization: str | None = "NFC") -> ErrorRate:
    """WER (or CER with ``char``) of the hypothesis file against the reference file."""
    ref_path, hyp_path = Path(ref_path), Path(hyp_path)
    refs = read_transcripts(ref_path)
    hyps = read_transcripts(hyp_path)
    no_hyp = [u for u in refs if u not in hyps]
    if no_hyp:
        raise _missing(no_hyp, hyp_path, ref_path)
    no_ref = [u for u in hyps if u not in refs]
    if no_ref:
        raise _missing(no_ref, ref_path, hyp_path)
    ids = list(refs)
    ref_texts = [refs[u] for u in ids]
    hyp_texts = [hyps[u] for u in ids]
    if char:
        return cer(ref_texts, hyp_texts, ids, spaces=spaces, normalization=normalization)
    return wer(ref_texts, hyp_texts, ids, normalization=normalization)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(ScoreConfig, args)
    result = score_files(args.ref, args.hyp, char=args.cer, spaces=cfg.spaces,
                         normalization=cfg.normalization)
    print(result)
    print(f"%SER {100 * result.sentence_error_rate:.2f} [ {result.sentence_errors} / "
          f"{result.sentences} ]")
    summary = {"ref": str(args.ref), "hyp": str(args.hyp), "config": to_dict(cfg)}
    if cfg.num_resamples > 0:
        low, high = bootstrap_ci(result, level=cfg.level, num_resamples=cfg.num_resamples,
                                 seed=cfg.seed)
        print(f"{100 * cfg.level:g}% CI (bootstrap over utterances, {cfg.num_resamples} "
              f"resamples): [{100 * low:.2f}, {100 * high:.2f}]")
        summary["ci"] = {"level": cfg.level, "low": low, "high": high}
    if args.baseline is not None:
        base = score_files(args.ref, args.baseline, char=args.cer, spaces=cfg.spaces,
                           normalization=cfg.normalization)
        name = "CERR" if args.cer else "WERR"
        if base.errors == 0:
            raise DataError(f"{args.baseline}: the baseline makes no errors, so there is no "
                            f"relative {name} against it")
        reduction = werr(base.wer, result.wer)
        print(f"baseline {args.baseline}: {base}")
        line = f"{name} vs. baseline: {reduction:+.2f}%"
        summary["baseline"] = {"hyp": str(args.baseline), "rate": base.wer,
                               "errors": base.errors, "reduction": reduction}
        if cfg.num_resamples > 0:
            low, high = werr_interval(base, result, level=cfg.level,
                                      num_resamples=cfg.num_resamples, seed=cfg.seed)
            line += f", {100 * cfg.level:g}% CI (paired bootstrap): [{low:+.2f}, {high:+.2f}]"
            summary["baseline"]["ci"] = {"level": cfg.level, "low": low, "high": high}
        print(line)
    if args.json is not None:
        summary.update(result.to_dict(per_utterance=True))
        atomic_write_json(args.json, summary)
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("score", help="WER/CER of a hypothesis text file",
                              description="WER/CER of a Kaldi-style hypothesis "
                              "text file against a reference text file.")
    p.add_argument("--ref", type=Path, required=True, help="reference text (utt-id words...)")
    p.add_argument("--hyp", type=Path, required=True, help="hypothesis text (utt-id words...)")
    p.add_argument("--cer", action="store_true", help="character instead of word error rate")
    p.add_argument("--baseline", type=Path, default=None, metavar="OTHER_HYP",
                   help="a second hypothesis file: print the relative error reduction of "
                   "--hyp against it (WERR/CERR) with its paired-bootstrap interval")
    p.add_argument("--json", type=Path, default=None, metavar="OUT",
                   help="also write counts, interval and per-utterance details as JSON")
    add_config_args(p, ScoreConfig)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    p.set_defaults(func=run, outputs={"json": "file"})
