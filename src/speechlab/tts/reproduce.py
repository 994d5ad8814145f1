"""``speechlab reproduce salad``: the SALAD paper's experiments end to end.

The embedded festival corpus (or any TTS corpus by ``--corpus``) -> linguistic and WORLD
features -> the four models of Table 1 trained with the shared trainer in the paper's stateful
arrangement (Adam for the RNNs, Noam for SALAD, early stopping on dev MCD) -> Table 2 (params,
MCD, F0 RMSE, V/UV accuracy, next to a baseline predicting each phone's mean training frame),
Fig. 2 (test F0 histograms), Fig. 3 and Table 3 (CPU inference time against generated duration
with a RANSAC fit) and a few synthesized test sentences to listen to.
:class:`SaladReproduction` is this paper's :class:`~speechlab.experiment.reproduction.Reproduction`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from speechlab.config import check_fields, ranged
from speechlab.errors import ConfigError
from speechlab.train import OptimConfig, ScheduleConfig, TrainConfig
from speechlab.tts.corpus import SPLITS, TtsCorpusConfig
from speechlab.tts.task import TtsTaskConfig

log = logging.getLogger(__name__)

ROLES = ("small_rnn", "small_salad", "big_rnn", "big_salad")
SIDECAR = "tts.json"      # in each model directory: normalizers, question set source
QUESTIONS_NAME = "questions.hed"


def _models_default() -> dict[str, str]:
    return {r: r for r in ROLES}


def _rnn_train() -> TrainConfig:
    # Sec. 3.3: Adam with PyTorch's defaults.
    return TrainConfig(early_stop_metric="mcd", progress=False, log_every=50)


def _salad_train() -> TrainConfig:
    # Sec. 3.3: Noam, Adam(0.9, 0.98, 1e-9), lr = H^-0.5 min(s^-0.5, s w^-1.5) with w = 4000.
    return TrainConfig(early_stop_metric="mcd", progress=False, log_every=50,
                       optim=OptimConfig(lr=1.0, betas=(0.9, 0.98), eps=1e-9),
                       schedule=ScheduleConfig(name="noam", warmup_steps=4000))


@dataclass(frozen=True)
class SaladConfig:
    """One scale of the reproduction (``speechlab/recipes/salad/<scale>.yaml``).

    ``models`` maps each of the paper's four roles to a model preset (:data:`.model.PRESETS`;
    the paper's sizes are the role names; smaller scales may train smaller stand-ins, and
    Table 2 shows the parameters actually trained). ``epochs`` and ``patience`` are the paper's
    300 and 20 (the trainer's steps and validations are derived from them); ``rnn_train`` and
    ``salad_train`` hold the rest of each family's training setup.
    """

    corpus: TtsCorpusConfig = field(default_factory=TtsCorpusConfig)
    questions: str | None = None  # a question file; None: the project's English set
    models: dict[str, str] = field(default_factory=_models_default)
    epochs: int = ranged(300, ge=1, le=10_000, why="the paper trains 300 epochs")
    patience: int = ranged(20, ge=0)
    rnn_train: TrainConfig = field(default_factory=_rnn_train)
    salad_train: TrainConfig = field(default_factory=_salad_train)
    task: TtsTaskConfig = field(default_factory=TtsTaskConfig)
    # None: the paper's dropout (0.5; SALAD 0.5 in FFN and after positions, 0.1 in attention).
    # A short run may lower the 0.5 ones (the demo does: a few epochs cannot afford them).
    dropout: float | None = ranged(None, ge=0, lt=1)
    # Beyond the paper (its future work): SALAD's output layer as a centred 1-D convolution of
    # this odd kernel width over frames instead of the linear layer (0: the paper's).
    output_conv: int = ranged(0, ge=0)
    feature_workers: int = ranged(2, ge=1)
    # Listening examples: this many test sentences per model.
    examples: int = ranged(3, ge=0)
    # Fig. 3: lengths (seconds) of the synthetic long inputs, repeats per point, and at most this
    # many test files timed per model.
    latency_lengths: tuple[float, ...] = ranged((1.0, 5.0, 10.0, 20.0, 35.0), gt=0)
    latency_files: int = ranged(20, ge=0)
    latency_threads: int = ranged(2, ge=1)
    # "paper": time the Table 1 sizes (untrained when the run trained stand-ins: time does not
    # depend on the weights); "trained": time the models the run trained (quick, for tests).
    latency_models: Literal["paper", "trained"] = "paper"
    seed: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        from speechlab.tts.model import PRESETS

        check_fields(self)
        for role, name in self.models.items():
            if role not in ROLES:
                raise ConfigError(f"models: {role!r} is not one of the paper's models {ROLES}")
            if name not in PRESETS:
                raise ConfigError(f"models.{role}: unknown preset {name!r}; choose one of "
                                  f"{sorted(PRESETS)}")
            if PRESETS[name].kind != role.split("_")[1]:
                raise ConfigError(f"models.{role}: preset {name!r} is a {PRESETS[name].kind} "
                                  "model")


def prepare_data(cfg: SaladConfig, out: Path, corpus_dir: Path | None, *, write: bool = True):
    """Corpus (built if needed) -> features of every split, normalizers fitted on train."""
    from speechlab.tts.corpus import load_tts_split, make_tts_corpus
    from speechlab.tts.features import prepare
    from speechlab.tts.questions import load_questions

    load_questions(cfg.questions)  # a question file that does not parse fails before any work
    if corpus_dir is None:
        corpus_dir = out / "corpus"
        if write and not (corpus_dir / "corpus.json").exists():
            log.info("building the embedded TTS corpus in %s", corpus_dir)
            make_tts_corpus(cfg.corpus, corpus_dir)
        corpus = "festival's SLT HTS voice (the embedded corpus), so the targets are themselves " \
                 "synthetic speech"
    else:
        corpus = f"`{corpus_dir}`"
    splits = {s: load_tts_split(corpus_dir, s) for s in SPLITS}
    data = prepare(splits, out, cfg.questions, tolerance=cfg.corpus.tolerance,
                   workers=cfg.feature_workers, write=write)
    data.corpus = corpus
    return data


def model_config(cfg: SaladConfig, role: str, input_dim: int):
    from speechlab.tts.model import preset

    mcfg = preset(cfg.models[role], input_dim=input_dim)
    if cfg.dropout is not None:
        mcfg = dataclasses.replace(mcfg, dropout=cfg.dropout)
    if cfg.output_conv and mcfg.kind == "salad":
        mcfg = dataclasses.replace(mcfg, output_conv=cfg.output_conv)
    return mcfg


def write_sidecar(model_dir: Path, data, question_file: str | None) -> None:
    """What ``speechlab synth`` needs besides the checkpoint: normalizers and questions."""
    from speechlab.tts.questions import english_questions
    from speechlab.utils import atomic_write_json, atomic_write_text

    text = Path(question_file).read_text(encoding="utf-8") if question_file else english_questions()
    atomic_write_text(model_dir / QUESTIONS_NAME, text)
    atomic_write_json(model_dir / SIDECAR, data.stats())


def train_model(cfg: SaladConfig, data, role: str, model_dir: Path) -> None:
    """Train (or resume) one model; epochs and patience become steps and validations."""
    from speechlab.experiment.trained import ModelCard
    from speechlab.train import Trainer
    from speechlab.tts.model import build_from_config
    from speechlab.tts.task import TtsTask

    mcfg = model_config(cfg, role, data.input_dim)
    task = TtsTask(data.train, data.dev, data.outputs, cfg.task, seed=cfg.seed)
    per_epoch = task.batches().batches_per_epoch
    base = cfg.rnn_train if mcfg.kind == "rnn" else cfg.salad_train
    schedule = base.schedule
    if schedule.name == "noam":  # H is the model's embedding size (Sec. 3.3)
        schedule = dataclasses.replace(schedule, model_dim=mcfg.emb_dim)
    tcfg = dataclasses.replace(base, max_steps=cfg.epochs * per_epoch, valid_every=per_epoch,
                               checkpoint_every=per_epoch * max(1, cfg.epochs // 10),
                               patience=cfg.patience, early_stop_metric="mcd",
                               seed=cfg.seed, schedule=schedule)
    model_dir.mkdir(parents=True, exist_ok=True)
    write_sidecar(model_dir, data, cfg.questions)
    log.info("%s: %s, %d batches per epoch, up to %d epochs", role, cfg.models[role], per_epoch,
             cfg.epochs)
    Trainer(build_from_config(mcfg), task, tcfg, model_dir,
            model_config=ModelCard.of("tts", mcfg).to_dict()).fit()


# ---------------------------------------------------------------------------------------------
# Decoding: Table 2's measures, F0 for Fig. 2, sentences to listen to


@dataclass
class SaladDecoding:
    """One model on the test set: parameters, scores per attention mode ("full" whole
    utterances; "window" SALAD limited to the training window), predicted F0 (Hz) of the
    voiced test frames, and the example wavs written (paths relative to the run dir)."""

    role: str
    preset: str
    params: int
    scores: dict[str, dict[str, float]]
    f0: np.ndarray
    wavs: list[str]
    epochs: float
    output_conv: int = 0
    # Per attention mode, each test utterance's summed per-frame MCD (for paired intervals).
    mcd_sums: dict[str, np.ndarray] = field(default_factory=dict)


def _write_wav(path: Path, wav: np.ndarray) -> None:
    import io

    import soundfile as sf

    from speechlab.tts.acoustic import SAMPLE_RATE
    from speechlab.utils import atomic_path

    buf = io.BytesIO()
    sf.write(buf, wav, SAMPLE_RATE, subtype="PCM_16", format="WAV")
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getvalue())


def decode_model(cfg: SaladConfig, data, role: str, out: Path) -> SaladDecoding:
    from speechlab.experiment.trained import load_trained
    from speechlab.tts.acoustic import f0_of, synthesize
    from speechlab.tts.model import num_parameters
    from speechlab.tts.task import mcd_sums, predict, score

    model = load_trained(out / "models" / role)
    refs = [u.y for u in data.test]
    modes = {"full": None}
    if cfg.models[role].endswith("salad"):
        modes["window"] = cfg.task.window
    scores, preds, sums = {}, {}, {}
    f0s = {}
    for mode, window in modes.items():
        preds[mode] = predict(model, data.test, window=window)
        scores[mode] = score(refs, preds[mode], data.outputs).to_dict()
        sums[mode] = mcd_sums(refs, preds[mode], data.outputs)
        f0s[mode] = np.concatenate([f0_of(data.outputs.inverse(p)) for p in preds[mode]])
        scores[mode]["f0_std"] = _voiced_std(f0s[mode])
    main_mode = "window" if "window" in preds else "full"
    main, f0 = preds[main_mode], f0s[main_mode]
    wavs = []
    for u, p in list(zip(data.test, main))[: cfg.examples]:
        rel = f"samples/{role}/{u.id}.wav"
        _write_wav(out / rel, synthesize(data.outputs.inverse(p)))
        wavs.append(rel)
    per_epoch = -(-sum(u.num_frames for u in data.train) // cfg.task.streams) / cfg.task.window
    steps = _last_step(out / "models" / role)
    return SaladDecoding(role, cfg.models[role], num_parameters(model), scores, f0[f0 > 0], wavs,
                         steps / math.ceil(per_epoch) if per_epoch else 0.0,
                         _output_conv(model), sums)


def _output_conv(model) -> int:
    """The kernel width of SALAD's convolutional output stage, 0 for a linear output (or RNN)."""
    import torch

    out = getattr(model, "output", None)
    return int(out.kernel_size[0]) if isinstance(out, torch.nn.Conv1d) else 0


def _voiced_std(f0: np.ndarray) -> float:
    """Standard deviation (Hz) of F0 over voiced frames (F0 > 0); NaN if none is voiced. Over-
    smoothed predictions show as a smaller spread than the recordings' (the paper's Fig. 2)."""
    voiced = f0[f0 > 0]
    return float(np.std(voiced)) if len(voiced) else math.nan


def _last_step(model_dir: Path) -> int:
    import json

    step = 0
    log_path = model_dir / "log.jsonl"
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            step = max(step, int(json.loads(line).get("step", 0)))
    return step


def phone_mean_baseline(data) -> list[np.ndarray]:
    """Each test frame predicted as the mean normalized training frame of its phone (the
    central phone of its label; a phone unseen in training gets the global mean)."""
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for u in data.train:
        for name in set(u.phones):
            idx = [i for i, p in enumerate(u.phones) if p == name]
            frames = u.y[np.isin(u.frame_phone, idx)]
            sums[name] = sums.get(name, 0) + frames.sum(0)
            counts[name] = counts.get(name, 0) + len(frames)
    overall = np.concatenate([u.y for u in data.train]).mean(0)
    means = {p: sums[p] / counts[p] for p in sums if counts[p]}
    return [np.stack([means.get(p, overall) for p in u.frame_phones]) for u in data.test]


# ---------------------------------------------------------------------------------------------
# Fig. 3 / Table 3: CPU inference time


def time_inference(model, x: np.ndarray, window: int | None = None, repeats: int = 1) -> float:
    """Seconds to predict (T, L) inputs ``x`` as one utterance (the best of ``repeats``)."""
    import torch

    xt = torch.from_numpy(x)[None]
    lens = torch.tensor([len(x)])
    best = math.inf
    with torch.no_grad():
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(xt, lens, window=window)
            best = min(best, time.perf_counter() - t0)
    return best


def long_input(data, seconds: float) -> np.ndarray:
    """(T, L) inputs of ``seconds`` of speech: test utterances' frames one after another."""
    from speechlab.tts.labels import FRAME_SECONDS

    frames = int(round(seconds / FRAME_SECONDS))
    parts, total = [], 0
    while total < frames:
        for u in data.test:
            parts.append(u.x())
            total += u.num_frames
            if total >= frames:
                break
    return np.concatenate(parts)[:frames]


@dataclass
class LatencyCurve:
    """Inference seconds against generated seconds, and the RANSAC line through them."""

    label: str
    seconds: list[float]
    latency: list[float]
    slope: float
    intercept: float

    @property
    def max_latency(self) -> float:
        """The fit at the longest generated duration (Table 3)."""
        return self.slope * max(self.seconds) + self.intercept


def ransac_fit(x: Sequence[float], y: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """Slope and intercept of scikit-learn's RANSAC linear fit (robust to outliers).

    RANSAC needs more points than a line has parameters: with two points the line goes through
    both, with one it goes through the origin (no time for no output)."""
    from sklearn.linear_model import RANSACRegressor

    if len(x) != len(y) or not len(x):
        raise ValueError(f"ransac_fit needs equally many x and y, at least one: {len(x)}, {len(y)}")
    if len(x) == 1:
        return float(y[0]) / float(x[0]), 0.0
    if len(x) == 2:
        slope, intercept = np.polyfit(np.asarray(x, float), np.asarray(y, float), 1)
        return float(slope), float(intercept)
    X = np.asarray(x, dtype=np.float64)[:, None]
    fit = RANSACRegressor(random_state=seed).fit(X, np.asarray(y, dtype=np.float64))
    return float(fit.estimator_.coef_[0]), float(fit.estimator_.intercept_)


def latency_curves(cfg: SaladConfig, data, out: Path) -> list[LatencyCurve]:
    """Time the paper-sized models (Table 1; trained weights when the run trained that preset,
    else untrained ones: time does not depend on the weights) on test files and long inputs;
    SALAD both with full attention and with the training window."""
    import torch

    from speechlab.experiment.trained import load_trained
    from speechlab.tts.labels import FRAME_SECONDS
    from speechlab.tts.model import build

    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.latency_threads)
    try:
        inputs = [u.x() for u in data.test[: cfg.latency_files]]
        inputs += [long_input(data, s) for s in cfg.latency_lengths]
        curves = []
        for role in ROLES:
            trained = (out / "models" / role).is_dir() and (
                cfg.latency_models == "trained" or cfg.models.get(role) == role)
            model = (load_trained(out / "models" / role) if trained
                     else build(role, data.input_dim).eval())
            windows = {"": None} if role.endswith("rnn") else {" (full)": None,
                                                               " (window)": cfg.task.window}
            for suffix, window in windows.items():
                time_inference(model, inputs[0], window)  # warm-up
                secs = [len(x) * FRAME_SECONDS for x in inputs]
                lat = [time_inference(model, x, window) for x in inputs]
                slope, intercept = ransac_fit(secs, lat, cfg.seed)
                curves.append(LatencyCurve(role + suffix, secs, lat, slope, intercept))
                log.info("latency %s: %.3f s at %.0f s", role + suffix, lat[-1], secs[-1])
        return curves
    finally:
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------------------------
# The reproduction


class SaladReproduction:
    """The SALAD paper (Pascual, Bonafonte, Serrà) as a
    :class:`~speechlab.experiment.reproduction.Reproduction`."""

    name = "salad"
    title = "SALAD: self-attention linguistic-acoustic decoder vs. the LSTM baseline"
    scales = ("ci", "demo", "small")
    demo_minutes = 3.0
    config_class = SaladConfig

    def prepare(self, cfg: SaladConfig, out: Path, corpus: Path | None, *, write: bool = True):
        return prepare_data(cfg, out, corpus, write=write)

    def plan(self, cfg: SaladConfig) -> list:
        from speechlab.experiment.jobs import DecodeJob, TrainJob

        # Costliest first: the big models, the RNNs before SALAD (sequential over time).
        roles = sorted(cfg.models, key=lambda r: ("big" not in r, "rnn" not in r))
        return [TrainJob(r, cfg.models[r]) for r in roles] + [DecodeJob(r, r) for r in roles]

    def train(self, job, cfg: SaladConfig, data, out: Path) -> None:
        train_model(cfg, data, job.name, out / "models" / job.name)

    def decode(self, job, cfg: SaladConfig, data, out: Path) -> SaladDecoding:
        return decode_model(cfg, data, job.model, out)

    def report(self, cfg: SaladConfig, data, decoded, out: Path, scale: str):
        return salad_results(cfg, data, decoded, out, scale)


ROW_NAMES = {"small_rnn": "Small RNN", "small_salad": "Small SALAD", "big_rnn": "Big RNN",
             "big_salad": "Big SALAD"}


def salad_results(cfg: SaladConfig, data, decoded, out: Path, scale: str):
    """Table 2, Fig. 2, Fig. 3, Table 3, the listening examples and the training table."""
    from speechlab.experiment.scoring import training_table
    from speechlab.metrics import mean_difference_interval
    from speechlab.report import Figure, Results, Table
    from speechlab.report.plots import _new_figure, _save
    from speechlab.tts.acoustic import f0_of, synthesize
    from speechlab.tts.task import score

    refs = [u.y for u in data.test]
    base_pred = phone_mean_baseline(data)
    baseline = score(refs, base_pred, data.outputs)
    truth = np.concatenate([f0_of(data.outputs.inverse(r)) for r in refs])
    base_f0 = np.concatenate([f0_of(data.outputs.inverse(p)) for p in base_pred])
    cols = ["Model", "Preset", "#Params", "Attention", "Epochs", "MCD [dB]", "F0 [Hz]", "A [%]",
            "F0 σ [Hz]", "MCD - RNN [dB]", "95% CI"]
    rows = [["Ground truth", "-", None, "-", None, None, None, None, _voiced_std(truth), None,
             None],
            ["Phone-mean baseline", "-", None, "-", None, baseline.mcd, baseline.f0_rmse,
             100 * baseline.vuv, _voiced_std(base_f0), None, None]]
    frames = [len(r) for r in refs]
    for role in ROLES:
        d = decoded.get(role)
        if d is None:
            continue
        rnn = decoded.get(role.replace("salad", "rnn")) if role.endswith("salad") else None
        for mode, s in d.scores.items():
            attn = "-" if role.endswith("rnn") else (
                "whole utterance" if mode == "full" else f"{cfg.task.window}-frame windows")
            gap: list = [None, None]
            if rnn is not None and mode in d.mcd_sums and "full" in rnn.mcd_sums:
                low, high = mean_difference_interval(rnn.mcd_sums["full"], d.mcd_sums[mode],
                                                     frames)
                gap = [s["mcd"] - rnn.scores["full"]["mcd"], f"[{low:+.2f}, {high:+.2f}]"]
            rows.append([ROW_NAMES[role] + (f" + conv{d.output_conv}" if d.output_conv else ""),
                         d.preset, d.params, attn, d.epochs, s["mcd"], s["f0_rmse"],
                         100 * s["vuv"], s.get("f0_std", math.nan), *gap])
    t2 = Table("table2", "Objective results on the test set (Table 2): mel-cepstral distortion "
               "(c0 excluded), F0 RMSE on frames voiced in both, voiced/unvoiced accuracy, "
               "and the spread (standard deviation) of F0 over each system's voiced frames, "
               "which over-smoothing shrinks (the recordings' on the first row). MCD - RNN: a "
               "SALAD row's MCD minus that of the RNN of its size (positive: SALAD worse), with "
               "its paired-bootstrap 95% interval over the test utterances.",
               cols, rows, formats={"#Params": "{:,}", "Epochs": "{:.1f}", "MCD [dB]": "{:.2f}",
                                    "F0 [Hz]": "{:.2f}", "A [%]": "{:.1f}", "F0 σ [Hz]": "{:.1f}",
                                    "MCD - RNN [dB]": "{:+.2f}"})
    figures = []
    # Fig. 2: F0 histograms of ground truth, Big RNN and Big SALAD.
    hist = {"ground truth": truth[truth > 0]}
    for role in ("big_rnn", "big_salad"):
        if role in decoded:
            hist[ROW_NAMES[role]] = decoded[role].f0
    fig = _new_figure()
    ax = fig.add_subplot()
    lo, hi = np.percentile(hist["ground truth"], [0.5, 99.5]) if len(hist["ground truth"]) else (50, 400)
    bins = np.linspace(lo * 0.8, hi * 1.2, 40)
    for label, values in hist.items():
        ax.hist(values, bins=bins, histtype="step", density=True, linewidth=1.5,
                label=f"{label} (std {np.std(values):.1f} Hz)")
    ax.set_xlabel("F0 [Hz]")
    ax.set_ylabel("density")
    ax.legend()
    _save(fig, out / "fig2_f0_histogram.png")
    figures.append(Figure("fig2_f0_histogram.png", "Fig. 2: F0 histograms of the test set's "
                          "voiced frames: ground truth, Big RNN, Big SALAD."))
    # Fig. 3 and Table 3.
    curves = latency_curves(cfg, data, out)
    fig = _new_figure()
    ax = fig.add_subplot()
    for c in curves:
        dots = ax.plot(c.seconds, c.latency, "o", markersize=3, label=c.label)
        xs = np.array([0, max(c.seconds)])
        ax.plot(xs, c.slope * xs + c.intercept, "-", color=dots[0].get_color(), linewidth=1)
    ax.set_xlabel("generated speech [s]")
    ax.set_ylabel("CPU inference time [s]")
    ax.legend(fontsize=7)
    _save(fig, out / "fig3_latency.png")
    figures.append(Figure("fig3_latency.png", f"Fig. 3: CPU inference time ({cfg.latency_threads} "
                          "threads) against generated duration, per test file and for long "
                          "inputs made of test sentences; lines: RANSAC fits."))
    which = ("the paper-sized models (Table 1)" if cfg.latency_models == "paper"
             else "the models this run trained")
    t3 = Table("table3", "Maximum inference latency of the RANSAC fit (Table 3), at the longest "
               f"generated duration ({max(cfg.latency_lengths):g} s), for {which}.",
               ["Model", "Max. latency [s]", "Slope [s/s]"],
               [[c.label, c.max_latency, c.slope] for c in curves],
               formats={"Max. latency [s]": "{:.3f}", "Slope [s/s]": "{:.4f}"})
    # Listening: the vocoded ground truth of each example sentence, then each model's.
    for k, u in enumerate(data.test[: cfg.examples]):
        rel = f"samples/reference/{u.id}.wav"
        _write_wav(out / rel, synthesize(data.outputs.inverse(u.y)))
        figures.append(Figure(rel, f"{u.id}: natural features through WORLD (reference)"))
        for role in ROLES:
            d = decoded.get(role)
            if d is not None and k < len(d.wavs):
                figures.append(Figure(d.wavs[k], f"{u.id}: {ROW_NAMES[role]}"))
    training = training_table(out / "models", list(decoded), caption="Training: updates, best "
                              "dev MCD [dB] and its update, minutes.", metric="mcd")
    model_rows = rows[2:]  # after the ground truth and the baseline
    learned = [r for r in model_rows if r[5] is not None and r[5] < baseline.mcd]
    counts = {"train": len(data.train), "dev": len(data.dev), "test": len(data.test)}
    minutes = {s: sum(u.num_frames for u in getattr(data, s)) * 0.005 / 60 for s in counts}
    notes = (f"Scale `{scale}`: utterances {counts}, minutes "
             f"{ {k: round(v, 1) for k, v in minutes.items()} }, {data.input_dim} input dims "
             f"({data.input_dim - 2} from the question set + 2), 43 output dims; up to "
             f"{cfg.epochs} epochs of {cfg.task.streams} x {cfg.task.window}-frame "
             f"{'stateful' if cfg.task.stateful else 'shuffled'} batches, patience "
             f"{cfg.patience}. Models: {cfg.models}. {len(learned)} of {len(model_rows)} model "
             f"rows beat the phone-mean baseline's MCD ({baseline.mcd:.2f} dB). The corpus is "
             f"{data.corpus or 'not recorded'}.")
    return Results(title=f"SALAD vs. the LSTM baseline ({scale} scale)",
                   tables=[t2, t3, training], figures=figures, notes=notes)
