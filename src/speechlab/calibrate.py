"""``speechlab calibrate MODEL --cuts DEV``: how well a recognizer's word confidences are
calibrated on a set of utterances (:mod:`speechlab.metrics.calibration`): the expected
calibration error, how well they tell right words from wrong (AUROC), the table of bins, and a
reliability diagram.

``--fit`` (a package only) fits a :class:`~speechlab.confidence.ConfidenceMap` to the words'
raw confidences and writes it into the package's card: from then on the package's words carry
the mapped confidence (``speechlab.load`` reads it, ``export`` keeps it). Fit on a dev split;
the same command on a test split then measures the map on words it was not fitted to
(``--raw``: without the map).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from speechlab.config import bounded
from speechlab.errors import ConfigError


def outcomes(model: Any, cuts: Any, *, nbest: int = 10, limit: int = 0, progress: Any = None
             ) -> tuple[list[float], list[bool]]:
    """Each recognized word's confidence and whether it is right, over ``cuts`` (lhotse cuts
    with a supervision's text; those of the model's languages, the first ``limit`` of them,
    0: all), transcribed with the language given where the model knows several, ``nbest``
    alternatives each."""
    from speechlab.metrics.calibration import correct_words
    from speechlab.text.normalize import normalize_text

    confidences: list[float] = []
    correct: list[bool] = []
    k = 0
    for cut in cuts:
        sup = cut.supervisions[0]
        if sup.language and sup.language not in model.languages:
            continue  # another language's utterance: not this model's to recognize
        if limit and k >= limit:
            break
        k += 1
        language = sup.language if len(model.languages) > 1 else None
        result = model.transcribe(cut.load_audio()[0], cut.sampling_rate, language=language,
                                  nbest=nbest)
        words = [w for w in result.words or () if w.confidence is not None]
        hyp = [normalize_text(w.word, sup.language or "en") for w in words]
        ref = normalize_text(sup.text, sup.language or "en").split()
        confidences += [float(w.confidence) for w in words]
        correct += correct_words(ref, hyp)
        if progress is not None:
            progress(k)
    return confidences, correct


def measure(model: Any, cuts: Any, *, nbest: int = 10, limit: int = 0, bins: int = 10,
            progress: Any = None) -> Any:
    """The :class:`~speechlab.metrics.calibration.Calibration` of ``model`` over ``cuts``
    (:func:`outcomes`)."""
    from speechlab.metrics.calibration import calibration

    return calibration(*outcomes(model, cuts, nbest=nbest, limit=limit, progress=progress), bins)


def fit_map(confidences: list[float], correct: list[bool], cuts: str | Path, bins: int = 10
            ) -> tuple[Any, Any, Any]:
    """The :class:`~speechlab.confidence.ConfidenceMap` fitted to these words (from
    :func:`outcomes` over ``cuts``), which notes what it was fitted on, and the words'
    :class:`~speechlab.metrics.calibration.Calibration` raw and mapped."""
    from speechlab.confidence import ConfidenceMap, fit_platt
    from speechlab.metrics.calibration import calibration

    raw = calibration(confidences, correct, bins)
    fitted = fit_platt(confidences, correct)
    mapped = calibration(fitted.apply(confidences), correct, bins)
    info = {"words": raw.words, "cuts": Path(cuts).name, "ece_raw": round(raw.ece, 4),
            "ece_mapped": round(mapped.ece, 4), "auroc": round(raw.auroc, 4)}
    return ConfidenceMap(fitted.a, fitted.b, info), raw, mapped


def reliability_diagram(cals: Any, title: str, path: Path) -> Path:
    """One panel per ``(label, Calibration)`` of ``cals`` (or one Calibration): the share of
    words right in each confidence bin against the diagonal."""
    from speechlab.report.plots import new_figure, save_figure

    panels = [("", cals)] if not isinstance(cals, (list, tuple)) else list(cals)
    fig = new_figure((4.4 * len(panels), 4.2))
    for k, (label, cal) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), k + 1)
        width = cal.edges[1] - cal.edges[0]
        centers = [a + width / 2 for a in cal.edges[:-1]]
        shown = [(x, a, n) for x, a, n in zip(centers, cal.accuracy, cal.counts) if n]
        ax.bar([x for x, _, _ in shown], [a for _, a, _ in shown], width=width * 0.9,
               color="#4c72b0", label="accuracy of the words in the bin")
        for x, a, n in shown:  # how many words each bar stands for
            ax.text(x, min(a, 0.9) + 0.02, str(n), ha="center", fontsize=7)
        ax.plot([0, 1], [0, 1], color="#888888", linestyle="--", label="calibrated")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("word confidence")
        ax.set_ylabel("share of words right")
        head = f"{title} {label}".strip()
        ax.set_title(f"{head}\nECE {cal.ece:.3f}, AUROC {cal.auroc:.3f}, {cal.words} words",
                     fontsize=9)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7,
                  frameon=False)
    return save_figure(fig, path)


def _summary(name: str, cal: Any) -> str:
    return (f"{name}: {cal.words} words, mean confidence {cal.mean_confidence:.3f}, "
            f"accuracy {cal.mean_accuracy:.3f}, expected calibration error (ECE) {cal.ece:.3f}, "
            f"AUROC {cal.auroc:.3f}")


def _table(cal: Any) -> None:
    print("bin\twords\tconfidence\taccuracy")
    for a, b, n, c, acc in zip(cal.edges, cal.edges[1:], cal.counts, cal.confidence,
                               cal.accuracy):
        print(f"{a:.1f}-{b:.1f}\t{n}\t" + (f"{c:.3f}\t{acc:.3f}" if n else "-\t-"))


def _run(args: argparse.Namespace) -> int:
    from lhotse import CutSet

    from speechlab.contract import as_recognizer
    from speechlab.inference import load
    from speechlab.metrics.calibration import calibration
    from speechlab.package import is_package, read_card, write_card
    from speechlab.progress import WorkProgress
    from speechlab.shipped import resolve

    if args.fit and args.raw:
        raise ConfigError("--fit measures the raw confidences already; give one of --fit, --raw")
    path = resolve(args.model)
    card = None
    if args.fit:
        if not is_package(path):
            raise ConfigError(f"{args.model}: --fit writes the map into a package's card; "
                              "export the model first (speechlab export)")
        card = read_card(path)
        if "confidence_map" in card.data and not args.overwrite:
            raise ConfigError(f"{args.model} has a confidence map already (fitted on "
                              f"{card.data['confidence_map'].get('fitted_on') or '?'}); pass "
                              "--overwrite to fit a new one")
    model = as_recognizer(load(args.model), args.model)
    kept = model.confidence_map
    if args.fit or args.raw:
        model.confidence_map = None
    cuts = CutSet.from_file(args.cuts)
    ours = sum(1 for c in cuts if not c.supervisions[0].language
               or c.supervisions[0].language in model.languages)
    total = min(args.limit, ours) if args.limit else ours
    with WorkProgress(f"calibrating on {args.cuts}", total, unit="utterances") as progress:
        conf, right = outcomes(model, cuts, nbest=args.nbest, limit=args.limit,
                               progress=progress.update)
    raw = calibration(conf, right, args.bins)
    how = ("raw" if model.confidence_map is None or args.raw else
           f"through its confidence map, fitted on {kept.fitted_on.get('words', '?')} words of "
           f"{kept.fitted_on.get('cuts', '?')}")
    print(_summary(f"{args.model} ({how})", raw))
    _table(raw)
    panels: list[tuple[str, Any]] = [("", raw)]
    if args.fit:
        if not conf:
            raise ConfigError(f"{args.cuts}: the model recognized no word to fit a map on")
        fitted, _, mapped = fit_map(conf, right, args.cuts, args.bins)
        print(_summary(f"mapped (a {fitted.a:.3f}, b {fitted.b:.3f}; on the words it was fitted "
                       "to)", mapped))
        _table(mapped)
        assert card is not None
        data = {**card.data, "confidence_map": fitted.to_json()}
        print(f"confidence map written into {write_card(path, replace(card, data=data))}")
        panels = [("(raw)", raw), ("(mapped)", mapped)]
    if args.plot is not None:
        print(f"reliability diagram: {reliability_diagram(panels, str(args.model), args.plot)}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="how well a recognizer's word confidences are "
                       "calibrated on a set of utterances (ECE, AUROC, reliability diagram); "
                       "--fit: fit a map on them and keep it in the package")
    p.add_argument("model", type=Path, metavar="PATH")
    p.add_argument("--cuts", type=Path, required=True,
                   help="lhotse cuts with their texts, e.g. a corpus's dev_cuts.jsonl.gz")
    p.add_argument("--limit", type=bounded(int, ge=0, why="utterances"), default=0,
                   help="the first N utterances only (default: all)")
    p.add_argument("--bins", type=bounded(int, ge=2, le=100, why="bins"), default=10)
    p.add_argument("--nbest", type=bounded(int, ge=1, le=100, why="alternatives"), default=10,
                   help="alternatives each word's confidence is taken over (default 10)")
    p.add_argument("--fit", action="store_true",
                   help="fit a confidence map (Platt scaling) to these words and write it "
                   "into the package's card (PATH: a package; fit on a dev split)")
    p.add_argument("--raw", action="store_true",
                   help="measure the raw confidences, without the package's map")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG",
                   help="write the reliability diagram here (with --fit: raw and mapped)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --plot, or with --fit the package's map")
    p.set_defaults(func=_run, outputs={"plot": "file"})
