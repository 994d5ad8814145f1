"""The CTC-topologies paper's tables and figures from a run's decodings: Tables 1-4 (WER, mean
BPP, share of BHP > 0.5, WER on the BHP > 0.5 and < 0.5 subsets), the Viterbi / full-sum
agreement, plain CTC against prefix search, BPP / BHP histograms, the hypotheses and training.

:func:`topology_results` is the reproduction's report. It finds each cell's decoding through
the typed jobs of the plan (which language, which topology, decoded how), never by a name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from speechlab.papers.topologies.recipe import CTC, Decode, LanguageData, TopologiesConfig
from speechlab.papers.topologies.decoding import TopologyDecoding
from speechlab.experiment.jobs import DecodeJob, Job, TrainJob
from speechlab.experiment.scoring import score, training_table, write_hyps
from speechlab.metrics import wer
from speechlab.report import Figure, Results, Table

PAPER_COLUMNS = {"en": "English (WSJ role)", "hi": "Hindi (LibriSpeech role)"}

#: (language, topology) -> its decoding (absent: not decoded).
Decodings = dict[tuple[str, str], TopologyDecoding]


def _decodings(plan: Sequence[Job], decoded: Mapping[Decode, TopologyDecoding],
               keep: Callable[[Decode], bool] = lambda j: True) -> Decodings:
    """The decodings of the plan's decode jobs that ``keep`` accepts, by their model's
    (language, topology)."""
    return {(j.model.spec.language, j.model.spec.topology): decoded[j] for j in plan
            if isinstance(j, DecodeJob) and j in decoded and keep(j)}


def _column(lang: str) -> str:
    return PAPER_COLUMNS.get(lang, lang)


def _test_wer(hyps: Mapping[str, str], ld: LanguageData, ids=None) -> float | None:
    """WER[%] of ``hyps`` on the test utterances of ``ld`` (those in ``ids`` if given)."""
    utts = [u for u in ld.test if ids is None or u.id in ids]
    if not utts:
        return None
    return 100 * wer([u.text for u in utts], [hyps.get(u.id, "") for u in utts]).wer


def _unseen_wer(hyps: Mapping[str, str], ld: LanguageData) -> float | None:
    """WER[%] of ``hyps`` on the unseen-voice utterances of ``ld`` (None if it has none)."""
    if not ld.unseen or not hyps:
        return None
    return 100 * wer([u.text for u in ld.unseen], [hyps.get(u.id, "") for u in ld.unseen]).wer


def decoding_summary(decoding: TopologyDecoding, ld: LanguageData) -> str:
    """One line on one model's decoding: its test (and unseen-voice) WER and the weight."""
    test, unseen = _test_wer(decoding.hyps, ld), _unseen_wer(decoding.unseen_hyps, ld)
    parts = [f"test WER {test:.2f}%" if test is not None else "no test utterances"]
    if unseen is not None:
        parts.append(f"unseen-voice WER {unseen:.2f}%")
    tried = ", ".join(f"{w:g}" for w in sorted(decoding.dev_wer))
    return (", ".join(parts) + f" at acoustic weight {decoding.acoustic_weight:g} (chosen on "
            f"dev among {tried})")


def _mean(values) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def topology_results(cfg: TopologiesConfig, data: dict[str, LanguageData], plan: Sequence[Job],
                     decoded: Mapping[Decode, TopologyDecoding], out: Path,
                     scale: str) -> Results:
    """Tables 1-4 of the paper, the Viterbi / full-sum agreement, plain CTC decoded three
    ways, BPP / BHP histograms, hypothesis files and the training table."""
    langs = list(cfg.languages)
    by_model = _decodings(plan, decoded)
    cols = ["Topology"] + [_column(l) for l in langs]
    pct = {c: "{:.2f}" for c in cols[1:]}

    def cell(topo: str, lang: str, fn):
        d = by_model.get((lang, topo))
        return None if d is None else fn(d, data[lang])

    def rows(*fns) -> list[list]:
        return [[t] + [cell(t, l, fn) for l in langs for fn in fns] for t in cfg.topologies]

    t1 = Table("table1", "WER[%] per topology on each corpus's test set (Table 1): Viterbi "
               "decoding over T∘L∘G with the acoustic weight tuned on dev.", cols,
               rows(lambda d, ld: _test_wer(d.hyps, ld)), formats=pct)
    t2 = Table("table2", "Best Path Proportion, mean over test utterances [%] (Table 2, eq. 10).",
               cols, rows(lambda d, ld: None if not d.bpp else 100 * _mean(d.bpp.values())),
               formats={c: "{:.4f}" for c in cols[1:]})
    t3 = Table("table3", "Share of test utterances with BHP > 0.5 [%] (Table 3, eq. 11): where "
               "Viterbi decoding agrees with full-sum decoding over the lattice.", cols,
               rows(lambda d, ld: None if not d.bhp else
                    100 * _mean(v > 0.5 for v in d.bhp.values())),
               formats={c: "{:.1f}" for c in cols[1:]})
    cols4 = ["Topology"] + [f"{_column(l)} {side}" for l in langs
                            for side in ("BHP>0.5", "BHP<0.5")]
    t4 = Table("table4", "WER[%] on the test utterances with BHP > 0.5 and < 0.5 (Table 4).",
               cols4, rows(*(lambda d, ld, above=above: _test_wer(
                   d.hyps, ld, {u for u, v in d.bhp.items() if (v > 0.5) == above})
                   for above in (True, False))),
               formats={c: "{:.2f}" for c in cols4[1:]})
    agree = Table("fullsum", "Viterbi vs. full-sum: share of test utterances where the "
                  "hypothesis with the largest summed probability in the lattice (eq. 9) is "
                  "the Viterbi one (eq. 8) [%]; acoustic weight tuned on dev; lattices that "
                  "could not be measured.",
                  ["Topology"] + [f"{_column(l)} {k}" for l in langs
                                  for k in ("agree", "alpha", "failed")],
                  rows(lambda d, ld: None if not d.agrees else 100 * _mean(d.agrees.values()),
                       lambda d, ld: d.acoustic_weight, lambda d, ld: len(d.failed)))
    tables = [t1, t2, t3, t4, agree]
    if any(data[l].unseen for l in langs):
        cols_u = ["Topology"] + [f"{_column(l)} {side}" for l in langs
                                 for side in ("test", "unseen voices")]
        tables.insert(1, Table(
            "unseen", "WER[%] on the test sentences read by the voices of training (test) and "
            "by voices no training utterance has (unseen voices), side by side: how far the "
            "models recognise speech rather than the synthesizers they heard.", cols_u,
            rows(lambda d, ld: _test_wer(d.hyps, ld), lambda d, ld: _unseen_wer(d.unseen_hyps, ld)),
            formats={c: "{:.2f}" for c in cols_u[1:]}))
    ctc_decoded = {lang: d for (lang, _), d in
                   _decodings(plan, decoded, lambda j: j.options.prefix_search).items()}
    if any(d.prefix for d in ctc_decoded.values()):
        tables.append(_fullsum_ctc_table(cfg, data, ctc_decoded))
    trains = [j for j in plan if isinstance(j, TrainJob)]
    for lang in langs:  # every model's test hypotheses next to the reference
        systems = {j.model.name: score(data[lang].test, decoded[j].hyps) for j in plan
                   if isinstance(j, DecodeJob) and j.model.spec.language == lang and j in decoded}
        write_hyps(out / "hyps" / lang, data[lang].test, systems)
        if data[lang].unseen:  # and on the unseen-voice split
            write_hyps(out / "hyps" / f"{lang}-unseen", data[lang].unseen,
                       {j.model.name: score(data[lang].unseen, decoded[j].unseen_hyps)
                        for j in plan if isinstance(j, DecodeJob) and j in decoded
                        and j.model.spec.language == lang})
    training = training_table(out / "models", [j.name for j in trains], caption="Training: "
                              "updates, best dev graph-loss NLL per utterance and its update, "
                              "minutes.")
    figures = _histograms(cfg, by_model, out)
    counts = {l: {"train": len(data[l].train), "dev": len(data[l].dev), "test": len(data[l].test),
                  "unseen": len(data[l].unseen), "phones": data[l].tokenizer.num_phones}
              for l in langs}
    notes = (f"Scale `{scale}`: model preset `{cfg.model}`, {cfg.train.max_steps} updates per "
             f"model, {cfg.lm_order}-gram LM over at most {cfg.lm_vocab} words. Data: {counts}. "
             "BPP and BHP use the acoustic path probability p(π|X) over each utterance's "
             "lattice (lattice beam "
             f"{cfg.lattice_beam:g}). The embedded corpus is synthetic speech; the tables have "
             "the paper's shape, computed by the command in `meta`.")
    # Say plainly when plain CTC has not learned at this scale (a user would otherwise read a
    # near-100% row as a bug): the measured rows of Table 1 decide.
    ctc = {l: v for l, v in zip(langs, t1.rows[0][1:]) if t1.rows[0][0] == CTC and v is not None}
    others = [v for r in t1.rows[1:] for v in r[1:] if v is not None]
    if ctc and max(ctc.values()) >= 90.0:
        notes += (f"\n\n**At this scale S1-T1 (plain CTC) has not left the blank plateau**: its test "
                  f"WER is {', '.join(f'{v:.1f}% ({l})' for l, v in ctc.items())}, no better than "
                  "chance, while the topologies that make each phone last at least two frames "
                  f"learn sooner (best WER of the others {min(others):.1f}%)." if others else "")
    return Results(title=f"CTC topologies and Viterbi decoding ({scale} scale)",
                   tables=tables + [training], figures=figures, notes=notes)


def _fullsum_ctc_table(cfg: TopologiesConfig, data: dict[str, LanguageData],
                       ctc_decoded: Mapping[str, TopologyDecoding]) -> Table:
    """S1-T1 decoded three ways: Viterbi over T∘L∘G (eq. 8), and full-sum prefix beam search
    (eq. 9) with the lexicon alone and with the n-gram LM; how often each picks Viterbi's."""
    langs = list(cfg.languages)
    cols = ["Decoding (S1-T1)"] + [f"{_column(l)} {k}" for l in langs
                                   for k in ("WER", "same as Viterbi")]
    rows = []
    for name, label in ((None, "Viterbi, T∘L∘G (eq. 8)"),
                        ("lexicon", f"prefix search, lexicon, beam {cfg.prefix_beam} (eq. 9)"),
                        ("lexicon+LM", f"prefix search, lexicon + LM, beam {cfg.prefix_beam} "
                                       "(eq. 9)")):
        row: list = [label]
        for l in langs:
            d = ctc_decoded.get(l)
            if d is None or (name is not None and name not in d.prefix):
                row += [None, None]
                continue
            hyps = d.hyps if name is None else d.prefix[name]
            same = [hyps.get(u.id, "") == d.hyps.get(u.id, "") for u in data[l].test]
            row += [_test_wer(hyps, data[l]), 100 * sum(same) / len(same) if same else None]
        rows.append(row)
    return Table("fullsum_ctc", "S1-T1 (plain CTC): Viterbi against full-sum prefix beam "
                 "search, test WER[%] and the share of test utterances where the two give the "
                 "same words [%].", cols, rows, formats={c: "{:.2f}" for c in cols[1:]})


def _histograms(cfg: TopologiesConfig, by_model: Decodings, out: Path) -> list[Figure]:
    """BPP (log10) and BHP histograms per topology, one panel per corpus."""
    import numpy as np

    from speechlab.report.plots import panel_plot

    figures = []
    for metric, xlabel, transform in (("bpp", "log10 BPP", lambda v: math.log10(max(v, 1e-12))),
                                      ("bhp", "BHP", lambda v: v)):
        panels = {}
        for lang in cfg.languages:
            xs, ys = {}, {}
            for topo in cfg.topologies:
                d = by_model.get((lang, topo))
                values = [transform(v) for v in (getattr(d, metric).values() if d else [])]
                if not values:
                    continue
                lo, hi = (-12.0, 0.0) if metric == "bpp" else (0.0, 1.0)
                hist, edges = np.histogram(values, bins=12, range=(lo, hi))
                xs[topo] = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
                ys[topo] = [100 * h / len(values) for h in hist]
            if ys:
                panels[_column(lang)] = (xs, ys)
        if panels:
            path = f"{metric}_histogram.png"
            panel_plot(panels, path=out / path, xlabel=xlabel, ylabel="% of test utterances",
                       title=f"{metric.upper()} per topology")
            figures.append(Figure(path=path, caption=f"Distribution of {metric.upper()} over "
                                  "the test utterances, per topology and corpus."))
    return figures
