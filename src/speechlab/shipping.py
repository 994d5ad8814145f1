"""``speechlab models``: list the shipped models, and ship one (``speechlab models ship``).

``speechlab models ship RUN/models/NAME --name SHIPPED`` makes ``models/SHIPPED``
(:mod:`speechlab.shipped`) from a model of a recipe's run:

1. the package, as ``speechlab export`` writes it (its card names the run's command and commit),
   lean: float16 weights, and no side file the family rebuilds at load (a CTC model's
   decoding graph);
2. its test figures, measured through the model as a user loads it: a recognizer's WER per
   language on the run corpus's ``test`` split (the voices of training) and ``unseen`` split
   (voices no training utterance has), with the language given, and for a model of several
   languages also without it (its LID picks); a synthesizer's MCD, F0 RMSE and V/UV agreement
   on the ``test`` split (:func:`measure_speech`); written into the card
   (``results["shipped"]``);
3. a recognizer's confidence map (:mod:`speechlab.calibrate`), fitted on the run corpus's
   ``dev`` split when it has one, in the card (``data["confidence_map"]``);
4. its ``README.md``: what it is, the command and commit that made it, the figures, its size.

Everything is written into a staging directory beside ``models/SHIPPED`` and renamed into place
at the end, so a failed or killed ship leaves the shipped model as it was; an existing one is
replaced only with ``--overwrite``. ``speechlab models --markdown`` prints the table of
``models/README.md``. ``speechlab models measure NAME --corpus DIR`` measures a shipped model
again the same way on any corpus with a test split (the run corpus rebuilt on another machine,
or a user's own), beside the figures its card holds.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from speechlab.errors import DataError
from speechlab.shipped import models_dir, table_rows

HEADER = ["Model", "Family", "Kind", "Languages", "Test figures", "MB"]


def _cuts(corpus: Path, split: str, languages: list[str], limit: int) -> list[Any]:
    from lhotse import CutSet

    path = corpus / f"{split}_cuts.jsonl.gz"
    if not path.is_file():
        return []
    out: list[Any] = []
    counts: dict[str, int] = {}
    for cut in CutSet.from_file(path) or []:  # an empty file reads as None
        lang = cut.supervisions[0].language
        if lang in languages and (not limit or counts.get(lang, 0) < limit):
            counts[lang] = counts.get(lang, 0) + 1
            out.append(cut)
    return out


def measure(model: Any, corpus: Path, languages: list[str], limit: int = 0
            ) -> dict[str, float]:
    """WER[%] of ``model`` per language on ``corpus``'s test and unseen splits (the first
    ``limit`` utterances of each language; 0: all), language given, by its default search;
    for several languages also language not given; and with the language given by each other
    search the model offers (``model.methods[1:]``, e.g. a wav2vec 2.0 model's n-gram LM
    search). Keys like ``"en test WER"``, ``"en unseen WER"``, ``"en test WER (lm)"``."""
    from speechlab.metrics import wer
    from speechlab.text.normalize import normalize_text

    figures: dict[str, float] = {}
    methods = tuple(getattr(model, "methods", ()) or (None,))
    modes: list[tuple[bool, str | None]] = [(True, None)] + (
        [(False, None)] if len(languages) > 1 else []) + [(True, m) for m in methods[1:]]
    for split in ("test", "unseen"):
        cuts = _cuts(corpus, split, languages, limit)
        for given, method in modes:
            by_lang: dict[str, tuple[list[str], list[str]]] = {}
            options = {} if method is None else {"method": method}
            for cut in cuts:
                sup = cut.supervisions[0]
                text = model.transcribe(cut.load_audio()[0], cut.sampling_rate,
                                        language=sup.language if given else None,
                                        **options).text
                refs, hyps = by_lang.setdefault(sup.language, ([], []))
                refs.append(normalize_text(sup.text, sup.language))
                hyps.append(text)
            for lang in languages:
                if lang in by_lang:
                    key = f"{lang} {split} WER" + ("" if given else " (language not given)") \
                        + ("" if method is None else f" ({method})")
                    figures[key] = round(100 * wer(*by_lang[lang]).wer, 1)
    return figures


def measure_speech(model: Any, corpus: Path, limit: int = 0) -> dict[str, float]:
    """A synthesizer on ``corpus``'s test split (the first ``limit`` utterances; 0: all), as a
    user runs it (``synthesize(labels=...)``, the model's own attention window): each
    utterance's phone-aligned labels spoken, the model's acoustic frames (WORLD analysis of its
    waveform where the family gives none) against WORLD analysis of the recording: MCD [dB],
    F0 RMSE [Hz] over frames voiced in both, V/UV agreement [%]."""
    import soundfile as sf

    from speechlab.metrics.tts import mcd, vuv_accuracy
    from speechlab.metrics.tts import f0_rmse as rmse
    from speechlab.tts.acoustic import MCEP, analyse, f0_of
    from speechlab.tts.corpus import load_tts_split

    utts = load_tts_split(corpus, "test")[: limit or None]
    if not utts:
        raise DataError(f"{corpus}: no test utterance to measure the synthesizer on")
    refs, hyps = [], []
    for utt in utts:
        speech = model.synthesize(labels=utt.labels)
        frames = getattr(speech, "features", None)
        if frames is None:
            frames = analyse(speech.waveform, speech.sample_rate)
        wav, rate = sf.read(utt.wav, dtype="float64")
        refs.append(analyse(wav, rate, len(frames)))
        hyps.append(np.asarray(frames))
    ref, hyp = np.concatenate(refs), np.concatenate(hyps)
    ref_f0, hyp_f0 = f0_of(ref), f0_of(hyp)
    return {"test MCD [dB]": round(mcd(ref[:, MCEP], hyp[:, MCEP]), 2),
            "test F0 RMSE [Hz]": round(rmse(ref_f0, hyp_f0), 1),
            "test V/UV [%]": round(100 * vuv_accuracy(ref_f0, hyp_f0), 1)}


def _confidence_map(model: Any, corpus: Path, utterances: int) -> Any:
    """The confidence map fitted on ``corpus``'s dev split (the first ``utterances`` of each
    of the model's languages, 0: all); None when the model gives no word a confidence."""
    from speechlab.calibrate import fit_map, outcomes

    conf, right = outcomes(model, _cuts(corpus, "dev", list(model.languages), utterances))
    if not conf:
        return None
    fitted, _, _ = fit_map(conf, right, corpus / "dev_cuts.jsonl.gz")
    return fitted


def _before_first_start(made: dict[str, Any]) -> bool:
    """Whether the shipped checkpoint was written before the run's first recorded start."""
    import datetime

    starts = [c.get("date_utc") for c in made.get("invocations") or []]
    try:
        written = datetime.datetime.fromisoformat(str(made.get("checkpoint_utc")))
        first = datetime.datetime.fromisoformat(str(starts[0]))
    except (IndexError, ValueError):
        return False
    return written < first


def _readme(name: str, card: Any, size_mb: float) -> str:
    made = card.made_by or {}
    figs = (card.results or {}).get("shipped") or {}
    lines = [f"# {name}", "",
             f"A speechlab {card.kind} model of family `{card.family}`"
             + (f" for {', '.join(card.languages)}" if card.languages else "") + ".", "",
             "```", "import speechlab", f'model = speechlab.load("{name}")', "```", "",
             "## How it was made", "",
             f"- command: `{made.get('command') or 'unknown'}`",
             f"- commit: `{made.get('git_commit') or 'unknown'}`",
             f"- run: `{made.get('run') or made.get('source', 'unknown')}`, checkpoint "
             f"`{made.get('checkpoint', '-')}`"
             + (f" (update {made['step']})" if isinstance(made.get("step"), int) else "")]
    # the commits the run's recorded starts of this model used, in order
    commits = ", ".join(f"`{c}`" for c in dict.fromkeys(
        str(c.get("git_commit") or "unknown")[:7] for c in made.get("invocations") or []))
    if made.get("unfinished"):
        which = ("its best so far on the dev split" if made.get("checkpoint") == "best.pt"
                 else "its newest")
        lines += [f"- the run had not finished when this model was shipped: the checkpoint is "
                  f"{which}, and the command resumes the run; the command and commit above are "
                  f"those of its last start, and the starts recorded in the run used commit(s) "
                  f"{commits}"
                  + ("; the checkpoint was written before the first of them (the run is older "
                     "than its record)" if _before_first_start(made) else "")]
    ended = made.get("training_ended")
    if isinstance(ended, dict):
        why = {"early stopping": "early stopping on the dev split",
               "time limit": "its time limit (`max_minutes`)"}.get(
                   str(ended.get("reason")), "its last update (`max_steps`)")
        lines += [f"- its training had ended (by {why}, at update {ended.get('step')}) when "
                  "it was shipped; the run's other models had not, so the run has no report "
                  "yet; the command and commit above are those of this model's last start, and "
                  f"its starts used commit(s) {commits}"]
    weights = made.get("weights")
    if isinstance(weights, dict):
        lines += [f"- weights: the run's moving average of its weights (`ema_decay` "
                  f"{weights.get('ema_decay')}, kept for its last "
                  f"{weights.get('average_updates')} updates; docs/training.md), which its "
                  "validation read"]
    if made.get("decoding"):
        settings = ", ".join(f"{k} {v}" for k, v in made["decoding"].items())
        lines += [f"- decoding settings, chosen on the run's dev split by its decode step "
                  f"(`speechlab decode` for a run still training): {settings}"]
    if made.get("word_lm"):
        lm = made["word_lm"]
        lines += [f"- word LM: not the run's but `{lm.get('file')}` (SHA-256 "
                  f"`{lm.get('sha256')}`), given to `speechlab models ship --word-lm`; its "
                  "words the run's lexicon lacked were pronounced and added"]
    lines += ["",
             "## Test figures", "",
             ("Through `speechlab.load`, on the run corpus's test split: each sentence's "
              "phone-aligned labels spoken by the model, its acoustic frames against WORLD "
              "analysis of the recording (mel-cepstral distortion, F0 error over frames voiced "
              "in both, voiced/unvoiced agreement):" if card.kind == "tts" else
              "WER[%] through `speechlab.load`, on the run corpus's test split (the voices of "
              "training) and unseen split (the same sentences by voices no training utterance "
              "has), by the model's default search (in brackets: another search it offers, "
              "`transcribe(..., method=...)`):"), "", "| figure | value |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in figs.items()]
    fitted = (card.data or {}).get("confidence_map")
    if fitted:
        on = fitted.get("fitted_on") or {}
        lines += ["", f"Word confidences go through a confidence map (Platt scaling) fitted on "
                  f"{on.get('words', '?')} words of the run corpus's dev split: expected "
                  f"calibration error {on.get('ece_raw', '?')} raw, {on.get('ece_mapped', '?')} "
                  "mapped (`speechlab calibrate` measures it on other words)."]
    lines += ["", f"Size: {size_mb:.1f} MB"
              + ("; the weights are stored as float16 (the figures above were measured with "
                 "them)" if (card.data or {}).get("lean") else "")
              + ("; the decoding graph is rebuilt from the lexicon and the LM at the first "
                 "load and cached (models/README.md gives the time it takes)" if "rebuildable" in (card.data or {})
                 and "graph" not in card.files else "") + ".", ""]
    return "\n".join(lines)


def ship(model: str | Path, name: str, *, to: Path | None = None, corpus: Path | None = None,
         utterances: int = 0, overwrite: bool = False, word_lm: str | Path | None = None) -> Path:
    """Make the shipped model ``name`` from ``model`` (a run's ``RUN/models/NAME``) under
    ``to`` (default :func:`speechlab.shipped.models_dir`); module doc. ``word_lm``: a
    CTC-topology model decodes with this word LM instead of its run's
    (:func:`speechlab.inference.export`), and is measured with it."""
    from speechlab.data.importers import check_split_name
    from speechlab.inference import export, load
    from speechlab.package import CARD_NAME, move_into_place, read_card

    check_split_name(name)  # a plain directory name
    root = Path(to) if to is not None else models_dir()
    final = root / name
    if final.exists() and not overwrite:
        raise DataError(f"{final} already exists; pass --overwrite to replace it")
    source = Path(model)
    run_corpus = corpus or source.parent.parent / "corpus"
    if not (run_corpus / "test_cuts.jsonl.gz").is_file():
        raise DataError(f"{run_corpus}: no test split to measure the model on; give the run's "
                        "corpus with --corpus")
    staging = root / f".{name}.shipping"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        export(source, staging, overwrite=True, lean=True, word_lm=word_lm)
        card = read_card(staging)
        loaded = load(staging)
        figures = (measure_speech(loaded, run_corpus, utterances) if card.kind == "tts" else
                   measure(loaded, run_corpus, list(card.languages), utterances))
        data = json.loads((staging / CARD_NAME).read_text(encoding="utf-8"))
        data.setdefault("results", {})["shipped"] = figures
        if card.kind == "asr" and (run_corpus / "dev_cuts.jsonl.gz").is_file():
            fitted = _confidence_map(loaded, run_corpus, utterances)
            if fitted is not None:
                data["data"]["confidence_map"] = fitted.to_json()
        (staging / CARD_NAME).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                                         encoding="utf-8")
        size = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file()) / 2**20
        (staging / "README.md").write_text(_readme(name, read_card(staging), size),
                                           encoding="utf-8")
        move_into_place(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def measure_package(model: str | Path, corpus: Path, utterances: int = 0) -> dict[str, Any]:
    """A shipped model (its name or a package's path) measured again, as ``ship`` measured it, on
    ``corpus`` (a corpus directory with a ``test`` split, e.g. the run corpus rebuilt on
    another machine, or a user's own): ``{"figures": {...}, "card": {...}}``, the card's being
    the figures its shipping wrote (``results["shipped"]``), for comparison. A recognizer is
    measured on the languages it shares with the corpus."""
    from lhotse import CutSet

    from speechlab.inference import load
    from speechlab.package import read_card
    from speechlab.shipped import resolve, shipped

    corpus = Path(corpus)
    test = corpus / "test_cuts.jsonl.gz"
    path = resolve(model)
    if not path.exists():
        raise DataError(f"{model}: no such package or shipped model (shipped: "
                        f"{', '.join(shipped()) or 'none'})")
    card = read_card(path)
    # the corpus is checked before the model loads (a large graph takes half a minute)
    languages: list[str] = []
    if card.kind != "tts":
        if not test.is_file():
            raise DataError(f"{corpus}: no test split (test_cuts.jsonl.gz) to measure {model} on")
        present = {c.supervisions[0].language for c in CutSet.from_file(test) or []}
        languages = [lang for lang in card.languages if lang in present]
        if not languages:
            raise DataError(f"{corpus}: its test split has no utterance in {model}'s languages "
                            f"({', '.join(card.languages)}); it has {', '.join(sorted(present))}")
    loaded = load(path)
    figures = (measure_speech(loaded, corpus, utterances) if card.kind == "tts" else
               measure(loaded, corpus, languages, utterances))
    return {"model": str(model), "corpus": str(corpus), "utterances": utterances,
            "figures": figures, "card": (card.results or {}).get("shipped") or {}}


def _run_measure(args: argparse.Namespace) -> int:
    from speechlab.files import atomic_path

    if args.json is not None and args.json.exists() and not args.overwrite:
        raise DataError(f"{args.json} already exists; pass --overwrite to replace it")
    out = measure_package(args.model, args.corpus, args.utterances)
    rows = [(k, f"{v}", "" if k not in out["card"] else f"{out['card'][k]}")
            for k, v in out["figures"].items()]
    header = ("figure", "measured", "card")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    if args.json is not None:
        with atomic_path(args.json) as tmp:
            tmp.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


def _run_models(args: argparse.Namespace) -> int:
    rows = table_rows()
    if args.markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "|".join("---" for _ in HEADER) + "|")
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return 0
    if not rows:
        print(f"no shipped models in {models_dir()}")
        return 0
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADER)]
    for r in [HEADER, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def _run_ship(args: argparse.Namespace) -> int:
    out = ship(args.model, args.name, to=args.to, corpus=args.corpus,
               utterances=args.utterances, overwrite=args.overwrite, word_lm=args.word_lm)
    from speechlab.package import read_card

    print(f"shipped {out}")
    for k, v in ((read_card(out).results or {}).get("shipped") or {}).items():
        print(f"  {k}: {v}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    from speechlab.config import bounded

    m = sub.add_parser("models", help="the shipped models (speechlab.load takes their names); "
                                      "ship one from a run")
    m.add_argument("--markdown", action="store_true", help="as the table of models/README.md")
    m.set_defaults(func=_run_models)
    msub = m.add_subparsers(dest="models_command", metavar="MODELS_COMMAND")
    s = msub.add_parser("ship", help="package a run's model into models/NAME with its card, "
                                     "README and test figures")
    s.add_argument("model", type=Path, metavar="RUN/models/NAME")
    s.add_argument("--name", required=True, help="the shipped model's name")
    s.add_argument("--to", type=Path, default=None,
                   help=f"where shipped models live (default {models_dir()})")
    s.add_argument("--corpus", type=Path, default=None,
                   help="corpus to measure on (default: the run's RUN/corpus)")
    s.add_argument("--utterances", type=bounded(int, ge=0), default=0,
                   help="per language and split (0: all)")
    s.add_argument("--word-lm", dest="word_lm", type=Path, default=None, metavar="ARPA",
                   help="a CTC-topology model: it decodes and is measured with this word n-gram LM "
                        "instead of its run's (speechlab ctc lm and lm-mix make one; its new "
                        "words pronounced and added to the lexicon)")
    s.add_argument("--overwrite", action="store_true", help="replace a shipped model")
    s.set_defaults(func=_run_ship)
    me = msub.add_parser("measure", help="measure a shipped model again, as ship did, on a corpus "
                                         "(its test and unseen splits), beside its card's figures")
    me.add_argument("model", metavar="NAME|PACKAGE", help="a shipped model's name or a package")
    me.add_argument("--corpus", type=Path, required=True,
                    help="a corpus directory with a test split (test_cuts.jsonl.gz; unseen_cuts"
                         ".jsonl.gz too where it has one), e.g. a recipe run's OUT/corpus")
    me.add_argument("--utterances", type=bounded(int, ge=0), default=0,
                    help="per language and split (0: all)")
    me.add_argument("--json", type=Path, default=None, help="also write the figures here")
    me.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    me.set_defaults(func=_run_measure)
