"""``speechlab calibrate MODEL --cuts DEV``: how well a recognizer's word confidences are
calibrated on a set of utterances (:mod:`speechlab.metrics.calibration`): the expected
calibration error, the table of bins, and a reliability diagram."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from speechlab.config import bounded


def measure(model: Any, cuts: Any, *, nbest: int = 10, limit: int = 0, bins: int = 10,
            progress: Any = None) -> Any:
    """The :class:`~speechlab.metrics.calibration.Calibration` of ``model`` over ``cuts``
    (lhotse cuts with a supervision's text; those of the model's languages, the first
    ``limit`` of them, 0: all), transcribed with the language given where the model knows
    several, ``nbest`` alternatives each."""
    from speechlab.metrics.calibration import calibration, correct_words
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
        right = correct_words(ref, hyp)
        confidences += [float(w.confidence) for w in words]
        correct += right
        if progress is not None:
            progress(k)
    return calibration(confidences, correct, bins)


def reliability_diagram(cal: Any, title: str, path: Path) -> Path:
    from speechlab.report.plots import new_figure, save_figure

    fig = new_figure((4.8, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    width = cal.edges[1] - cal.edges[0]
    centers = [a + width / 2 for a in cal.edges[:-1]]
    shown = [(x, a, n) for x, a, n in zip(centers, cal.accuracy, cal.counts) if n]
    ax.bar([x for x, _, _ in shown], [a for _, a, _ in shown], width=width * 0.9,
           color="#4c72b0", label="accuracy of the words in the bin")
    ax.plot([0, 1], [0, 1], color="#888888", linestyle="--", label="calibrated")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("word confidence")
    ax.set_ylabel("share of words right")
    ax.set_title(f"{title}\nECE {cal.ece:.3f} over {cal.words} words", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    return save_figure(fig, path)


def _run(args: argparse.Namespace) -> int:
    from lhotse import CutSet

    from speechlab.contract import as_recognizer
    from speechlab.inference import load
    from speechlab.progress import WorkProgress

    model = as_recognizer(load(args.model), args.model)
    cuts = CutSet.from_file(args.cuts)
    ours = sum(1 for c in cuts if not c.supervisions[0].language
               or c.supervisions[0].language in model.languages)
    total = min(args.limit, ours) if args.limit else ours
    with WorkProgress(f"calibrating on {args.cuts}", total, unit="utterances") as progress:
        cal = measure(model, cuts, nbest=args.nbest, limit=args.limit, bins=args.bins,
                      progress=progress.update)
    print(f"{args.model}: {cal.words} words, mean confidence {cal.mean_confidence:.3f}, "
          f"accuracy {cal.mean_accuracy:.3f}, expected calibration error (ECE) {cal.ece:.3f}")
    print("bin\twords\tconfidence\taccuracy")
    for a, b, n, c, acc in zip(cal.edges, cal.edges[1:], cal.counts, cal.confidence,
                               cal.accuracy):
        print(f"{a:.1f}-{b:.1f}\t{n}\t" + (f"{c:.3f}\t{acc:.3f}" if n else "-\t-"))
    if args.plot is not None:
        print(f"reliability diagram: {reliability_diagram(cal, str(args.model), args.plot)}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="how well a recognizer's word confidences are "
                       "calibrated on a set of utterances (ECE, reliability diagram)")
    p.add_argument("model", type=Path, metavar="PATH")
    p.add_argument("--cuts", type=Path, required=True,
                   help="lhotse cuts with their texts, e.g. a corpus's dev_cuts.jsonl.gz")
    p.add_argument("--limit", type=bounded(int, ge=0, why="utterances"), default=0,
                   help="the first N utterances only (default: all)")
    p.add_argument("--bins", type=bounded(int, ge=2, le=100, why="bins"), default=10)
    p.add_argument("--nbest", type=bounded(int, ge=1, le=100, why="alternatives"), default=10,
                   help="alternatives each word's confidence is taken over (default 10)")
    p.add_argument("--plot", type=Path, default=None, metavar="PNG",
                   help="write the reliability diagram here")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --plot")
    p.set_defaults(func=_run, outputs={"plot": "file"})
