"""The SALAD paper's tables and figures from a run's decodings: Table 2, Fig. 2, Fig. 3 and
Table 3, the listening examples, the training table and the run's notes.

:func:`salad_results` is the reproduction's report. It picks each row by the typed jobs of the
plan (which role, which family, which size), never by a name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from speechlab.experiment.jobs import DecodeJob, Job
from speechlab.papers.salad.recipe import ROLES, Decode, Role, SaladConfig, SaladDecoding
from speechlab.processes import machine_load
from speechlab.report import Figure, Results, Table
from speechlab.tts.evaluate import (
    Evaluation,
    f0_track,
    phone_mean_baseline,
    score_predictions,
    voiced_std,
)
from speechlab.tts.features import TtsData
from speechlab.tts.latency import LatencyCurve, latency_curve, long_input, torch_threads

TABLE2_CAPTION = (
    "Objective results on the test set (Table 2): mel-cepstral distortion (c0 excluded), F0 "
    "RMSE on frames voiced in both, voiced/unvoiced accuracy, and the spread (standard "
    "deviation) of F0 over each system's voiced frames, which over-smoothing shrinks (the "
    "recordings' on the first row). MCD - RNN: a SALAD row's MCD minus that of the RNN of its "
    "size (positive: SALAD worse), with its paired-bootstrap 95% interval over the test "
    "utterances.")


def _by_role(plan: Sequence[Job], decoded: Mapping[Decode, SaladDecoding]
             ) -> dict[Role, SaladDecoding]:
    """The decoded results of the plan's models by role, in the paper's order."""
    found = {j.model.spec.role: decoded[j] for j in plan
             if isinstance(j, DecodeJob) and j in decoded}
    return {r: found[r] for r in ROLES if r in found}


def table2(cfg: SaladConfig, data: TtsData, results: Mapping[Role, SaladDecoding],
           baseline: Evaluation, truth_f0: np.ndarray) -> Table:
    """Table 2: the ground truth's F0 spread, the phone-mean baseline, and every model in
    each attention mode, a SALAD row next to the RNN of its size."""
    from speechlab.metrics import mean_difference_interval

    cols = ["Model", "Preset", "#Params", "Attention", "Epochs", "MCD [dB]", "F0 [Hz]", "A [%]",
            "F0 σ [Hz]", "MCD - RNN [dB]", "95% CI"]
    b = baseline.scores
    rows = [["Ground truth", "-", None, "-", None, None, None, None, voiced_std(truth_f0), None,
             None],
            ["Phone-mean baseline", "-", None, "-", None, b["mcd"], b["f0_rmse"], 100 * b["vuv"],
             b["f0_std"], None, None]]
    frames = [u.num_frames for u in data.test]
    for role, d in results.items():
        rnn = results.get(role.partner) if role.family == "salad" else None
        for mode, s in d.scores.items():
            attn = "-" if role.family == "rnn" else (
                "whole utterance" if mode == "full" else f"{cfg.task.window}-frame windows")
            gap: list = [None, None]
            if rnn is not None and mode in d.mcd_sums and "full" in rnn.mcd_sums:
                low, high = mean_difference_interval(rnn.mcd_sums["full"], d.mcd_sums[mode],
                                                     frames)
                gap = [s["mcd"] - rnn.scores["full"]["mcd"], f"[{low:+.2f}, {high:+.2f}]"]
            rows.append([role.title + (f" + conv{d.output_conv}" if d.output_conv else ""),
                         d.preset, d.params, attn, d.epochs, s["mcd"], s["f0_rmse"],
                         100 * s["vuv"], s.get("f0_std", math.nan), *gap])
    return Table("table2", TABLE2_CAPTION, cols, rows,
                 formats={"#Params": "{:,}", "Epochs": "{:.1f}", "MCD [dB]": "{:.2f}",
                          "F0 [Hz]": "{:.2f}", "A [%]": "{:.1f}", "F0 σ [Hz]": "{:.1f}",
                          "MCD - RNN [dB]": "{:+.2f}"})


def fig2(results: Mapping[Role, SaladDecoding], truth_f0: np.ndarray, out: Path) -> Figure:
    """Fig. 2: F0 histograms of the ground truth and the big models."""
    from speechlab.report.plots import new_figure, save_figure

    hist = {"ground truth": truth_f0[truth_f0 > 0]}
    hist.update({role.title: d.f0 for role, d in results.items() if role.size == "big"})
    fig = new_figure()
    ax = fig.add_subplot()
    lo, hi = np.percentile(hist["ground truth"], [0.5, 99.5]) if len(hist["ground truth"]) else (50, 400)
    bins = np.linspace(lo * 0.8, hi * 1.2, 40)
    for label, values in hist.items():
        if not len(values):  # nothing voiced (a corpus of noise): no histogram to draw
            ax.plot([], [], label=f"{label} (no voiced frames)")
            continue
        ax.hist(values, bins=bins, histtype="step", density=True, linewidth=1.5,
                label=f"{label} (std {np.std(values):.1f} Hz)")
    ax.set_xlabel("F0 [Hz]")
    ax.set_ylabel("density")
    ax.legend()
    save_figure(fig, out / "fig2_f0_histogram.png")
    return Figure("fig2_f0_histogram.png", "Fig. 2: F0 histograms of the test set's voiced "
                  "frames: ground truth, Big RNN, Big SALAD.")


def latency_curves(cfg: SaladConfig, data: TtsData, out: Path) -> list[LatencyCurve]:
    """Time the paper-sized models (Table 1; trained weights when the run trained that preset,
    else untrained ones: time does not depend on the weights) on test files and long inputs;
    SALAD both with full attention and with the training window."""
    from speechlab.tts.model import build, load

    with torch_threads(cfg.latency_threads):
        inputs = [u.x() for u in data.test[: cfg.latency_files]]
        inputs += [long_input(data.test, s) for s in cfg.latency_lengths]
        curves = []
        for role in ROLES:
            model_dir = out / "models" / role.name
            # A role's Table 1 preset has the role's name.
            trained = model_dir.is_dir() and (cfg.latency_models == "trained"
                                              or cfg.models.get(role.name) == role.name)
            model = load(model_dir) if trained else build(role.name, data.input_dim).eval()
            windows = ({"": None} if role.family == "rnn"
                       else {" (full)": None, " (window)": cfg.task.window})
            for suffix, window in windows.items():
                curves.append(latency_curve(role.name + suffix, model, inputs, window, cfg.seed))
        return curves


def fig3_table3(cfg: SaladConfig, data: TtsData, out: Path) -> tuple[Figure, Table]:
    """Fig. 3 (inference time against generated duration, RANSAC lines) and Table 3 (the
    fits' maximum latency)."""
    from speechlab.report.plots import new_figure, save_figure

    curves = latency_curves(cfg, data, out)
    load = machine_load()
    fig = new_figure()
    ax = fig.add_subplot()
    for c in curves:
        dots = ax.plot(c.seconds, c.latency, "o", markersize=3, label=c.label)
        xs = np.array([0, max(c.seconds)])
        ax.plot(xs, c.slope * xs + c.intercept, "-", color=dots[0].get_color(), linewidth=1)
    ax.set_xlabel("generated speech [s]")
    ax.set_ylabel("CPU inference time [s]")
    ax.legend(fontsize=7)
    save_figure(fig, out / "fig3_latency.png")
    figure = Figure("fig3_latency.png", f"Fig. 3: CPU inference time ({cfg.latency_threads} "
                    "threads) against generated duration, per test file and for long inputs "
                    f"made of test sentences; lines: RANSAC fits ({load}).")
    which = ("the paper-sized models (Table 1)" if cfg.latency_models == "paper"
             else "the models this run trained")
    t3 = Table("table3", "Maximum inference latency of the RANSAC fit (Table 3), at the longest "
               f"generated duration ({max(cfg.latency_lengths):g} s), for {which} "
               f"({load}).",
               ["Model", "Max. latency [s]", "Slope [s/s]"],
               [[c.label, c.max_latency, c.slope] for c in curves],
               formats={"Max. latency [s]": "{:.3f}", "Slope [s/s]": "{:.4f}"})
    return figure, t3


def examples(cfg: SaladConfig, data: TtsData, results: Mapping[Role, SaladDecoding],
             out: Path) -> list[Figure]:
    """Listening: the vocoded ground truth of each example sentence, then each model's."""
    from speechlab.tts.acoustic import synthesize
    from speechlab.tts.synthesis import write_wav

    figures = []
    for k, u in enumerate(data.test[: cfg.examples]):
        rel = f"samples/reference/{u.id}.wav"
        write_wav(out / rel, synthesize(data.norm.outputs.inverse(u.y)))
        figures.append(Figure(rel, f"{u.id}: natural features through WORLD (reference)"))
        figures += [Figure(d.wavs[k], f"{u.id}: {role.title}") for role, d in results.items()
                    if k < len(d.wavs)]
    return figures


def salad_results(cfg: SaladConfig, data: TtsData, plan: Sequence[Job],
                  decoded: Mapping[Decode, SaladDecoding], out: Path, scale: str) -> Results:
    """Table 2, Fig. 2, Fig. 3, Table 3, the listening examples and the training table."""
    from speechlab.experiment.scoring import training_table

    results = _by_role(plan, decoded)
    baseline = score_predictions(data.test, phone_mean_baseline(data.train, data.test),
                                 data.norm.outputs)
    truth = f0_track([u.y for u in data.test], data.norm.outputs)
    t2 = table2(cfg, data, results, baseline, truth)
    figures = [fig2(results, truth, out)]
    fig3, t3 = fig3_table3(cfg, data, out)
    figures += [fig3, *examples(cfg, data, results, out)]
    trained = [j.model.name for j in plan if isinstance(j, DecodeJob) and j in decoded]
    training = training_table(out / "models", trained, caption="Training: updates, best dev "
                              "MCD [dB] and its update, minutes.", metric="mcd")
    model_rows = t2.rows[2:]  # after the ground truth and the baseline
    learned = [r for r in model_rows if r[5] is not None and r[5] < baseline.scores["mcd"]]
    counts = {"train": len(data.train), "dev": len(data.dev), "test": len(data.test)}
    minutes = {s: sum(u.num_frames for u in getattr(data, s)) * 0.005 / 60 for s in counts}
    notes = (f"Scale `{scale}`: utterances {counts}, minutes "
             f"{ {k: round(v, 1) for k, v in minutes.items()} }, {data.input_dim} input dims "
             f"({data.input_dim - 2} from the question set + 2), 43 output dims; up to "
             f"{cfg.epochs} epochs of {cfg.task.streams} x {cfg.task.window}-frame "
             f"{'stateful' if cfg.task.stateful else 'shuffled'} batches, patience "
             f"{cfg.patience}. Models: {cfg.models}. {len(learned)} of {len(model_rows)} model "
             f"rows beat the phone-mean baseline's MCD ({baseline.scores['mcd']:.2f} dB). The "
             f"corpus is {getattr(data, 'corpus', '') or 'not recorded'}.")
    return Results(title=f"SALAD vs. the LSTM baseline ({scale} scale)",
                   tables=[t2, t3, training], figures=figures, notes=notes)
