"""The multi-softmax paper's tables and figures from a run's decodings: Tables 2-7, their CER
versions, the hypotheses, training curves and the run's notes.

:func:`multisoftmax_results` is the reproduction's report. It picks each row by the typed
jobs of the plan (which variant, fine-tuned from which, decoded how), never by a name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from speechlab.asr.data import Utterance
from speechlab.asr.rnnt.model import count_parameters, load, parameter_table
from speechlab.experiment.jobs import Job, TrainJob
from speechlab.experiment.scoring import (
    Scored,
    curves_from_logs,
    error_rate_table,
    merge,
    training_table,
    write_hyps,
)
from speechlab.metrics.lid import lid_accuracy, script_of
from speechlab.papers.multisoftmax.decoding import LidFreeRun
from speechlab.papers.multisoftmax.recipe import (
    MULTILINGUAL,
    Data,
    Decode,
    MultiSoftmaxConfig,
    Train,
    test_set,
    unseen_set,
)
from speechlab.processes import machine_load
from speechlab.report import Figure, Results, Table
from speechlab.report.plots import line_plot, panel_plot

PAPER_NAMES = {"en": "En-IN", "hi": "Hi-IN", "ta": "Ta-IN", "gu": "Gu-IN"}

SYSTEM_NAMES = {"vanilla": "Multilingual Vanilla", "onehot": "Multilingual Onehot",
                "multisoftmax": "Multi-softmax", "multisoftmax_lsp": "Multi-softmax LSP",
                "multisoftmax_lid": "Multi-softmax LID (language given)"}

TRAINING_CAPTION = (
    "Training: updates made, best dev RNN-T loss per utterance (over the dev languages the "
    "model has) and the update it was reached at (the weights decoded), and wall-clock minutes "
    "of training (one thread per model, models trained side by side; validation included).")


def _decodings(plan: Sequence[Job], decoded: Mapping[Decode, object],
               keep: Callable[[Decode], bool], unseen: bool = False) -> list:
    """The results of the plan's decodings that ``keep`` accepts, in plan order: of the test
    set, or with ``unseen`` of the unseen-voice split."""
    return [decoded[j] for j in plan if not isinstance(j, TrainJob) and keep(j)
            and j.options.unseen == unseen]


def _unseen_table(plan: Sequence[Job], decoded: Mapping[Decode, object],
                  mono: Scored | None, known: Mapping[str, Scored | None],
                  langs: Sequence[str]) -> tuple[Table | None, dict[str, Scored]]:
    """WER[%] of each system with the language known (and MS LID without it) on the test
    sentences read by training's voices and by unseen voices, side by side (None if nothing
    was decoded on an unseen-voice split), and the unseen-voice decodings by system."""
    mono_u = _decodings(plan, decoded, _from_scratch("mono"), unseen=True)
    known_u = {v: _first(_decodings(plan, decoded, _from_scratch(v), unseen=True))
               for v in MULTILINGUAL}
    lid_free = _first(_decodings(plan, decoded, lambda j: j.name == "lid_free"))
    lid_free_u = _first(_decodings(plan, decoded, lambda j: j.name == "lid_free_unseen",
                                   unseen=True))
    pairs = [("Monolingual", mono, merge(mono_u) if mono_u else None)]
    pairs += [(SYSTEM_NAMES[v], known[v], known_u[v]) for v in MULTILINGUAL]
    pairs.append(("Multi-softmax LID (language unknown)",
                  lid_free.lid if isinstance(lid_free, LidFreeRun) else None,
                  lid_free_u.lid if isinstance(lid_free_u, LidFreeRun) else None))
    rows, systems = [], {}
    for name, test, unseen in pairs:
        if test is None or unseen is None or not unseen.words:
            continue
        systems[name] = unseen
        row: list = [name]
        for lang in langs:
            row += [_pct(test.words.get(lang)), _pct(unseen.words.get(lang))]
        row += [100 * test.average(), 100 * unseen.average()]
        rows.append(row)
    if not rows:
        return None, {}
    cols = ["System"] + [f"{PAPER_NAMES.get(l, l)} {side}" for l in [*langs, "Avg."]
                         for side in ("test", "unseen voices")]
    return Table("unseen", "WER[%] on the test sentences read by the voices of training (test) "
                 "and by voices no training utterance has (unseen voices), side by side: how far "
                 "the models recognise speech rather than the synthesizers they heard.", cols,
                 rows, formats={c: "{:.2f}" for c in cols[1:]}), systems


def _pct(rate) -> float | None:
    return None if rate is None else 100 * rate.wer


def _from_scratch(variant: str) -> Callable[[Decode], bool]:
    return lambda j: (j.model.init_from is None and j.model.spec.variant == variant
                      and j.options.early_stop is None)


def _fine_tuned_from(variant: str) -> Callable[[Decode], bool]:
    return lambda j: j.model.init_from is not None and j.model.init_from.spec.variant == variant


def _first(found: list):
    return found[0] if found else None


def _rows(*rows: tuple[str, object]) -> list[tuple[str, object]]:
    """The rows whose system the plan trained and decoded (a scale may train only some)."""
    return [(name, scored) for name, scored in rows if scored is not None]


def _reduction_caption(rows: Sequence[tuple[str, object]]) -> str:
    return f"relative to {rows[0][0]}" if rows else ""


def multisoftmax_results(cfg: MultiSoftmaxConfig, data: Data, plan: Sequence[Job],
                         decoded: Mapping[Decode, object], out: Path, scale: str) -> Results:
    langs = data.languages
    test = test_set(cfg, data)
    models_dir = out / "models"
    trains: list[Train] = [j for j in plan if isinstance(j, TrainJob)]
    mono_jobs = [j for j in trains if j.spec.variant == "mono" and j.init_from is None]
    # The paper's order (the plan's is by cost): models from scratch, then fine-tuned ones.
    names_trained = {j.name for j in trains}
    multilingual = [v for v in MULTILINGUAL if v in names_trained]
    first = [j.name for j in mono_jobs] + multilingual
    trained = first + [j.name for j in trains if j.init_from is not None]
    mono_scored = (merge(_decodings(plan, decoded, _from_scratch("mono"))) if mono_jobs
                   else None)
    known = {v: _first(_decodings(plan, decoded, _from_scratch(v))) for v in MULTILINGUAL}
    unseen, unseen_systems = _unseen_table(plan, decoded, mono_scored, known, langs)
    ft_scored = {v: (merge(parts) if (parts := _decodings(plan, decoded, _fine_tuned_from(v)))
                     else None) for v in ("onehot", "multisoftmax")}
    lid_free: LidFreeRun | None = _first(_decodings(
        plan, decoded, lambda j: j.options.early_stop is not None and not j.options.grid))
    grid = _decodings(plan, decoded, lambda j: j.options.grid)

    table2_rows = _rows(("Monolingual", mono_scored), ("Multilingual Vanilla", known["vanilla"]),
                        ("Multilingual Onehot", known["onehot"]),
                        ("Multi-softmax", known["multisoftmax"]),
                        ("Multi-softmax LSP", known["multisoftmax_lsp"]))
    table3_rows = _rows(("Monolingual", mono_scored), ("Onehot finetuning", ft_scored["onehot"]),
                        ("Multi-softmax finetuning", ft_scored["multisoftmax"]))
    table4_rows = _rows(("Multilingual Vanilla", known["vanilla"]),
                        ("Multi-softmax LID", lid_free.lid if lid_free else None),
                        ("Multi-softmax LID Oracle", lid_free.oracle if lid_free else None))
    names = {"column_names": PAPER_NAMES}
    tables = []
    if table2_rows:
        tables.append(error_rate_table(
            "table2", "WER[%] with the input language known (Table 2). Avg. is word-weighted; "
            f"WERR {_reduction_caption(table2_rows)}.", table2_rows, langs, **names))
    if unseen is not None:  # the same systems on voices training never heard, beside Table 2
        tables.append(unseen)
    if table3_rows:
        tables.append(error_rate_table(
            "table3", "WER[%] of monolingual models from scratch vs. fine-tuned from a "
            f"multilingual seed (Table 3); WERR {_reduction_caption(table3_rows)}.", table3_rows,
            langs, **names))
    if table4_rows:
        tables.append(error_rate_table(
            "table4", "WER[%] with the input language unknown (Table 4): MS LID runs one decoder "
            "per language on one encoder pass and picks by averaged LID posteriors; WERR "
            f"{_reduction_caption(table4_rows)}.", table4_rows, langs, **names))
    if lid_free is not None:
        tables.append(lid_table(known["vanilla"], lid_free, test, langs))
    tables.append(param_table(cfg.preset, {name: load(models_dir / name) for name in first}))
    figures = []
    if grid:
        grid_table, grid_fig = early_stop_grid(cfg, grid, out)
        tables.append(grid_table)
        figures.append(grid_fig)
    # Character error rates of Tables 2 and 4: at small scales they move before WER does.
    if table2_rows:
        tables.append(error_rate_table("table2_cer", "CER[%] of the Table 2 systems (character-"
                                       "weighted average; CERR "
                                       f"{_reduction_caption(table2_rows)}).", table2_rows,
                                       langs, unit="chars", **names))
    if table4_rows:
        tables.append(error_rate_table("table4_cer", "CER[%] of the Table 4 systems (CERR "
                                       f"{_reduction_caption(table4_rows)}).", table4_rows,
                                       langs, unit="chars", **names))
    hyps = {"mono": mono_scored, **known, "ft_onehot": ft_scored["onehot"],
            "ft_multisoftmax": ft_scored["multisoftmax"],
            "ms_lid": lid_free.lid if lid_free else None,
            "ms_lid_oracle": lid_free.oracle if lid_free else None}
    write_hyps(out / "hyps", test, {k: v for k, v in hyps.items() if v is not None})
    if unseen_systems:
        write_hyps(out / "hyps" / "unseen", unseen_set(cfg, data),
                   {name.lower().replace(" ", "_").replace("(", "").replace(")", ""): v
                    for name, v in unseen_systems.items()})
    tables.append(training_table(models_dir, trained, caption=TRAINING_CAPTION))
    figures += training_figures(models_dir, langs, {j.spec.languages[0]: j.name for j in mono_jobs},
                                multilingual, out)
    return Results(title=f"Multi-softmax RNN-T reproduction ({scale} scale)", tables=tables,
                   figures=figures, notes=notes(cfg, scale, data, test))


def lid_table(vanilla_scored: Scored | None, lid_free: LidFreeRun, test: Sequence[Utterance],
              langs: Sequence[str]) -> Table:
    """Table 5: % of utterances whose hypothesis script matches the transcription's."""
    truth = [u.language for u in test]
    want = {lang: script_of(next(u.text for u in test if u.language == lang)) for lang in langs
            if any(u.language == lang for u in test)}
    script_to_lang = {v: k for k, v in want.items()}

    def by_script(scored: Scored):
        pred = [script_to_lang.get(script_of(scored.hyps[u.id]) or "", "none") for u in test]
        return lid_accuracy(truth, pred)

    rows = []
    # a recipe whose systems leave Vanilla out has no Vanilla row
    vanilla = ([("Multilingual Vanilla (script)", by_script(vanilla_scored))]
               if vanilla_scored is not None else [])
    for name, acc in (*vanilla,
                      ("Multi-softmax LID (script)", by_script(lid_free.lid)),
                      ("Multi-softmax LID (LID head)",
                       lid_accuracy(truth, [lid_free.picked[u.id] for u in test])),
                      ("Multi-softmax LID (LID head, summed log-posteriors)",
                       lid_accuracy(truth, [lid_free.picked_log.get(u.id, "none") for u in test]))):
        rows.append([name] + [100 * acc.per_language[lang].accuracy if lang in acc.per_language else None
                              for lang in langs]
                    + [100 * acc.macro_accuracy])
    cols = ["System"] + [PAPER_NAMES.get(lang, lang) for lang in langs] + ["Avg."]
    return Table(name="table5", caption="LID accuracy [%] (Table 5): script of the hypothesis vs. "
                 "the transcription's, and the LID head's choice from its frame-averaged "
                 "posteriors (what Table 4 uses) or from its summed log-posteriors (the score "
                 "early stopping uses). Avg. is the mean over languages.",
                 columns=cols, rows=rows, formats={c: "{:.1f}" for c in cols[1:]})


def param_table(preset: str, trained: Mapping[str, object]) -> Table:
    """Table 6: the paper preset with Table 1's vocabularies next to the paper, and ours."""
    paper = parameter_table("paper")
    rows = [[r["variant"], r["params_m"], r["paper_m"], 100 * r["rel_diff"]] for r in paper]
    ours = [[f"{name} ({preset} preset, this corpus)", count_parameters(m) / 1e6, None, None]
            for name, m in trained.items()]
    return Table(name="table6", caption="Parameters in millions (Table 6): the paper preset with "
                 "Table 1's vocabularies (en 133, hi 59, ta 97, gu 123) vs. the paper; then the "
                 "models trained here.", columns=["Model", "Params (M)", "Paper (M)", "Diff [%]"],
                 rows=rows + ours, formats={"Params (M)": "{:.2f}", "Paper (M)": "{:.2f}",
                                            "Diff [%]": "{:+.2f}"})


def early_stop_grid(cfg: MultiSoftmaxConfig, runs: Sequence[LidFreeRun], out: Path
                    ) -> tuple[Table, Figure]:
    """Table 7 and the WER-vs-T_avg plot from the LID-free runs of ``cfg.early_stop_grid``."""
    rows, xs, ys = [], [], []
    n = len(runs[0].picked)
    for (tau, s_th), r in zip(cfg.early_stop_grid, runs):
        acc = lid_accuracy([r.truth[u] for u in r.picked], list(r.picked.values())).accuracy
        w = 100 * r.lid.average()
        rows.append([_fmt_inf(tau), _fmt_inf(s_th), w, r.t_avg, 1000 * r.cpu_seconds / n,
                     r.cpu_seconds / r.audio_seconds, 100 * acc])
        xs.append(r.t_avg)
        ys.append(w)
    fig_path = "wer_vs_tavg.png"
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    xs, ys = [xs[i] for i in order], [ys[i] for i in order]
    line_plot(xs, {"MS LID early stopping": ys}, path=out / fig_path, xlabel="T_avg (decoders running on average)",
              ylabel="WER [%]", title="WER vs. T_avg (Table 7 grid)")
    lang_name = PAPER_NAMES.get(cfg.grid_language, cfg.grid_language) if cfg.grid_language else "all"
    table = Table(name="table7", caption=f"Early stopping trade-off on the {lang_name} test set "
                  f"({n} utterances; Table 7). tau in encoder frames ({10 * cfg.dims().subsampling} ms); "
                  "decode time is "
                  "process CPU time of encoder + LID head + all running decoders, measured "
                  f"({machine_load([r.load for r in runs])}).",
                  columns=["tau", "s_th", "WER", "T_avg", "CPU ms/utt", "RTF", "LID acc."],
                  rows=rows, formats={"WER": "{:.2f}", "T_avg": "{:.2f}", "CPU ms/utt": "{:.1f}",
                                      "RTF": "{:.3f}", "LID acc.": "{:.1f}"})
    return table, Figure(path=fig_path, caption="WER against T_avg over the tau / s_th grid.")


def _fmt_inf(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:g}"


def notes(cfg: MultiSoftmaxConfig, scale: str, data: Data, test: Sequence[Utterance]) -> str:
    counts = {lang: sum(u.language == lang for u in test) for lang in data.languages}
    hours = ", ".join(f"{PAPER_NAMES.get(k, k)} {60 * v:.1f} min" for k, v in data.train_hours.items())
    sizes = ", ".join(f"{k} {v}" for k, v in data.vocab_sizes.items())
    skipped = "; ".join(f"{split}: {d}" for split, d in data.skipped.items() if d) or "none"
    own = ", ".join(f"{name} {steps}" for name, steps in cfg.variant_steps.items())
    own = f" ({own})" if own else ""
    summary = f"{cfg.summary.strip()}\n\n" if cfg.summary.strip() else ""
    dropout = "" if cfg.dropout is None else f", dropout {cfg.dropout:g}"
    systems = (f" Models trained at this scale: {', '.join(cfg.systems)} (the paper's other "
               "systems and their rows are left out)." if cfg.systems else "")
    order = (f"the languages' batches in turn, {cfg.task.batches_per_update} per update"
             if cfg.task.language_order == "cycle"
             else f"languages drawn by hours ** {cfg.task.language_alpha:g}")
    return (
        f"{summary}Scale `{scale}` (preset `{cfg.preset}`{dropout}): {cfg.train.max_steps} updates "
        f"per multilingual model{own}, {cfg.mono_steps} per monolingual model, "
        f"{cfg.finetune.max_steps} fine-tuning updates; {order}.{systems}\n\n"
        f"Training audio: {hours}. Vocabularies with blank: {sizes}. Test utterances: {counts}. "
        f"Skipped or flagged utterances: {skipped}.\n\n"
        "The embedded corpus is synthetic (espeak-ng voices reading real sentences), so absolute WERs "
        "are not comparable with the paper's; the tables have the paper's shape and are computed by "
        "the command in `meta`. Search: "
        f"{cfg.search.method}, beam {cfg.search.beam}, at most {cfg.search.max_symbols_per_frame} "
        "symbols per frame."
    )


def training_figures(models_dir: Path, langs: Sequence[str], mono: Mapping[str, str],
                     multilingual: Sequence[str], out: Path) -> list[Figure]:
    """From the models' logs: one panel per language of that language's dev loss against
    updates, its monolingual model (``mono``: language -> model, where one was trained) next to
    every multilingual one (which spend only part of their updates on it); and, for a model
    with a LID head, its dev LID accuracy."""
    panels = {}
    for lang in langs:
        series = {"mono": (mono[lang], "loss")} if lang in mono else {}
        series.update({n: (n, f"loss_{lang}") for n in multilingual})
        xs, ys = curves_from_logs(models_dir, series)
        if ys:
            panels[PAPER_NAMES.get(lang, lang)] = (xs, ys)
    figures = []
    if panels:
        panel_plot(panels, path=out / "dev_loss.png", xlabel="update",
                   ylabel="dev RNN-T loss / utt.", title="Dev loss per language during training")
        which = "the monolingual model and each" if mono else "each"
        figures.append(Figure(path="dev_loss.png", caption="Dev RNN-T loss per utterance of each "
                              f"language against updates: {which} multilingual one (whose "
                              "updates are shared by all its languages)."))
    lid_x, lid_y = curves_from_logs(models_dir, {n: (n, "lid_acc") for n in multilingual},
                                    scale=100.0)
    if lid_y:
        line_plot(lid_x, lid_y, path=out / "lid_accuracy.png", xlabel="update",
                  ylabel="dev LID accuracy [%]", title="LID head during training")
        figures.append(Figure(path="lid_accuracy.png", caption="Utterance-level dev accuracy of "
                              "the LID head (frame-averaged posteriors), mean over languages."))
    return figures
