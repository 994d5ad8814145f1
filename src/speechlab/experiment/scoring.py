"""Scoring decoded test sets and turning them into paper-shaped tables, for every ASR paper.

- :class:`Scored`: one system's hypotheses on a set of utterances, scored per language in
  words (WER) and characters (CER); :func:`score` makes one, :func:`merge` joins systems that
  each decoded part of the languages (e.g. one monolingual model per language).
- :func:`error_rate_table`: a table with a column per language, the average (word-weighted for
  WER, character-weighted for CER) and the relative reduction against the first row (WERR or
  CERR, as the paper reports it).
- :func:`write_hyps`: the reference and every system's hypotheses as ``id text`` lines, plus a
  JSON summary of the error counts.
- :func:`training_table` and :func:`curves_from_logs`: what each model's ``log.jsonl`` says
  about its training.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from speechlab.errors import DataError
from speechlab.files import atomic_write_json, atomic_write_text
from speechlab.metrics import ErrorRate, cer, wer, werr, word_weighted_average
from speechlab.report import Table


class Scorable(Protocol):
    """An utterance as scoring sees it (e.g. :class:`speechlab.asr.data.Utterance`)."""

    id: str
    language: str
    text: str


@dataclass
class Scored:
    """Hypotheses of one system (utterance id -> text), scored per language in words and
    characters; ``seconds`` is the decoding time it took."""

    hyps: dict[str, str] = field(default_factory=dict)
    words: dict[str, ErrorRate] = field(default_factory=dict)
    chars: dict[str, ErrorRate] = field(default_factory=dict)
    seconds: float = 0.0

    def rates(self, unit: Literal["words", "chars"] = "words") -> dict[str, ErrorRate]:
        return self.words if unit == "words" else self.chars

    def average(self, unit: Literal["words", "chars"] = "words") -> float:
        """Error rate over every language together: errors / reference units (so weighted by
        each language's words, or characters)."""
        return word_weighted_average(self.rates(unit))


def score(utts: Sequence[Scorable], hyps: Mapping[str, str], seconds: float = 0.0) -> Scored:
    """Score ``hyps`` (id -> text; a missing id counts as an empty hypothesis) against each
    utterance's text, per language."""
    words, chars = {}, {}
    for lang in sorted({u.language for u in utts}):
        sel = [u for u in utts if u.language == lang]
        refs, out, ids = [u.text for u in sel], [hyps.get(u.id, "") for u in sel], [u.id for u in sel]
        words[lang] = wer(refs, out, ids=ids)
        chars[lang] = cer(refs, out, ids=ids)
    return Scored(dict(hyps), words, chars, seconds)


def merge(parts: Sequence[Scored]) -> Scored:
    """One system from systems that decoded disjoint languages."""
    out = Scored()
    for p in parts:
        clash = set(out.words) & set(p.words)
        if clash:
            raise ValueError(f"merge: languages {sorted(clash)} are scored twice")
        out.hyps.update(p.hyps)
        out.words.update(p.words)
        out.chars.update(p.chars)
        out.seconds += p.seconds
    return out


UNITS = {"words": ("WER", "WERR", "word-weighted"), "chars": ("CER", "CERR", "character-weighted")}


def error_rate_row(name: str, rates: Mapping[str, ErrorRate], languages: Sequence[str],
                   baseline: float | None) -> list:
    """``[name, rate per language..., average, relative reduction vs. baseline]`` in percent;
    a language the system did not decode is None; the reduction is 0 without a baseline."""
    avg = word_weighted_average(rates)
    row: list = [name] + [100 * rates[lang].wer if lang in rates else None for lang in languages]
    return row + [100 * avg, werr(baseline, avg) if baseline else 0.0]


def error_rate_table(name: str, caption: str, rows: Sequence[tuple[str, Scored]],
                     languages: Sequence[str], *, unit: Literal["words", "chars"] = "words",
                     column_names: Mapping[str, str] | None = None, ci: bool = True) -> Table:
    """A paper-shaped WER (or, with ``unit="chars"``, CER) table: a column per language
    (named by ``column_names``), ``Avg.`` and the relative reduction against the first row
    (``WERR`` / ``CERR``, in percent); with ``ci``, a last column with the paired-bootstrap 95%
    interval of that reduction (utterances resampled, 1000 replicates, seed 0), when every row
    was scored per utterance on the same utterances."""
    _, reduction, _ = UNITS[unit]
    names = column_names or {}
    baseline = word_weighted_average(rows[0][1].rates(unit)) if rows else None
    cols = ["System"] + [names.get(lang, lang) for lang in languages] + ["Avg.", reduction]
    body = [error_rate_row(n, s.rates(unit), languages, baseline) for n, s in rows]
    formats = {c: "{:.2f}" for c in cols[1:]}
    intervals = _reduction_intervals(rows, unit) if ci else None
    if intervals is not None:
        cols.append(f"{reduction} 95% CI")
        body = [row + [interval] for row, interval in zip(body, intervals)]
    return Table(name=name, caption=caption, columns=cols, rows=body, formats=formats)


def _reduction_intervals(rows: Sequence[tuple[str, Scored]], unit: Literal["words", "chars"]) -> list | None:
    """Per row, the paired-bootstrap 95% interval of its relative reduction against the first
    row over all languages pooled, as text (None for the first row); None if a row lacks
    per-utterance counts or covers other utterances than the first row."""
    from speechlab.metrics.stats import werr_interval

    kind = "word" if unit == "words" else "char"
    pooled = [sum(s.rates(unit).values(), ErrorRate.empty(kind)) for _, s in rows]
    if not pooled or any(not p.per_utterance for p in pooled):
        return None
    out: list = [None]
    for p in pooled[1:]:
        try:
            low, high = werr_interval(pooled[0], p)
        except DataError:
            return None
        out.append(f"[{low:+.1f}, {high:+.1f}]")
    return out


def write_hyps(dir_: Path, utts: Sequence[Scorable], systems: Mapping[str, Scored]) -> None:
    """``ref.txt`` and ``<system>.txt`` (``id text`` per line, in ``utts`` order) and
    ``summary.json`` (per system and language, the error counts) into ``dir_``."""
    atomic_write_text(dir_ / "ref.txt", "".join(f"{u.id} {u.text}\n" for u in utts))
    for name, s in systems.items():
        atomic_write_text(dir_ / f"{name}.txt", "".join(f"{u.id} {s.hyps.get(u.id, '')}\n" for u in utts))
    atomic_write_json(dir_ / "summary.json", {n: {lang: e.to_dict() for lang, e in s.words.items()}
                                             for n, s in systems.items()})


# ---------------------------------------------------------------------------------------------
# Training logs


def _records(run_dir: Path) -> tuple[list[dict], list[dict]]:
    from speechlab.train.log import read_log

    records = read_log(run_dir / "log.jsonl")
    return ([r for r in records if r.get("kind") == "train"],
            [r for r in records if r.get("kind") == "valid"])


def training_table(models_dir: Path, names: Sequence[str], *, caption: str,
                   metric: str = "loss") -> Table:
    """Per model of ``names`` with a validated log: updates made, the best validation
    ``metric`` (lowest) and the update it was reached at, and minutes of training."""
    rows = []
    for name in names:
        train, valid = _records(models_dir / name)
        valid = [r for r in valid if metric in r]
        if not valid:
            continue
        best = min(valid, key=lambda r: r[metric])
        rows.append([name, int(train[-1]["step"]) if train else int(valid[-1]["step"]),
                     best[metric], int(best["step"]),
                     (train[-1]["time"] / 60) if train and "time" in train[-1] else None])
    return Table(name="training", caption=caption,
                 columns=["Model", "Updates", f"Best dev {metric}", "at update", "Train min"],
                 rows=rows, formats={f"Best dev {metric}": "{:.1f}", "Train min": "{:.1f}"})


def curves_from_logs(models_dir: Path, series: Mapping[str, tuple[str, str]],
                     scale: float = 1.0) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Validation curves for a plot: ``series`` maps a label to ``(model, key)``; returns
    ``(xs, ys)`` by label (updates, the key's values times ``scale``), leaving out labels whose
    model logged no such key."""
    xs: dict[str, list[float]] = {}
    ys: dict[str, list[float]] = {}
    for label, (model, key) in series.items():
        _, valid = _records(models_dir / model)
        points = [(r["step"], r[key]) for r in valid if key in r]
        if points:
            xs[label] = [p[0] for p in points]
            ys[label] = [scale * p[1] for p in points]
    return xs, ys


def logged_keys(models_dir: Path, model: str) -> set[str]:
    """Every key of ``model``'s validation records."""
    _, valid = _records(models_dir / model)
    return {k for r in valid for k in r}


