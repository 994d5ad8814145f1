"""``speechlab reproduce multisoftmax``: the multi-softmax RNN-T paper's experiments end to end.

Corpus -> fbank -> grapheme vocabularies -> every model of the paper trained with the shared
trainer -> decoding -> the analogues of Tables 2-7 (JSON + markdown through the report writer)
and a plot of WER against T_avg. :class:`MultiSoftmax` is this paper's
:class:`~speechlab.experiment.reproduction.Reproduction`: its plan (which models, from which
seeds, which decodings) and its tables; the shared experiment layer does the rest. Scales are
``speechlab/recipes/multisoftmax/<scale>.yaml``; any lhotse multilingual corpus with
``{train,dev,test}_cuts.jsonl.gz`` and a ``language`` on each supervision can replace the
embedded one (``--corpus``).

Systems, as in the paper:
- Table 2 (language known): Mono (one model per language), Vanilla, Onehot, MS, MS LSP.
- Table 3: Mono vs. monolingual models fine-tuned from Onehot and from MS (for MS: the shared
  and that language's parameters, the other languages' discarded).
- Table 4 (language unknown): Vanilla, MS LID (decoders of all languages in parallel, LID
  posteriors pick), MS LID Oracle (the true language's decoder).
- Table 5: LID accuracy by script match (Vanilla, MS LID) and of the LID head itself.
- Table 6: parameter counts of the ``paper`` preset next to the paper's, and of the scale's.
- Table 7: the tau / s_th early-stopping grid: WER, T_avg (eq. 2), measured CPU decode time,
  LID accuracy.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from speechlab.asr.data import Utterance, collate, load_utterances
from speechlab.asr.rnnt.config import VARIANTS, DecodeConfig, EarlyStopConfig, SearchConfig
from speechlab.asr.rnnt.model import RNNT, build, count_parameters, parameter_table
from speechlab.asr.rnnt.multilingual_decode import decode_lid_free
from speechlab.asr.rnnt.presets import PRESETS, ModelDims, get_preset
from speechlab.asr.rnnt.search import decode
from speechlab.asr.rnnt.task import RNNTTask, TaskConfig
from speechlab.audio.features import FbankConfig, compute_features, fit_cmvn
from speechlab.config import check_fields, ranged
from speechlab.data.corpus import CorpusConfig, make_asr_corpus
from speechlab.data.text_harvest import check_languages
from speechlab.errors import ConfigError, DataError
from speechlab.experiment.jobs import DecodeJob, Job, TrainJob
from speechlab.experiment.scoring import (Scored, curves_from_logs, error_rate_table, merge,
                                          score, training_table, write_hyps)
from speechlab.experiment.trained import ModelCard, best_or_latest, load_trained, read_card
from speechlab.metrics.lid import lid_accuracy, script_of
from speechlab.report import Figure, Results, Table
from speechlab.report.plots import line_plot, panel_plot
from speechlab.text.graphemes import GraphemeTokenizer, join_symbols
from speechlab.train import Trainer, TrainConfig, distributed, load_model_weights

log = logging.getLogger(__name__)

PAPER_NAMES = {"en": "En-IN", "hi": "Hi-IN", "ta": "Ta-IN", "gu": "Gu-IN"}
MULTILINGUAL = ("vanilla", "onehot", "multisoftmax", "multisoftmax_lsp", "multisoftmax_lid")


@dataclass(frozen=True)
class ReproduceConfig:
    """One scale of the reproduction (``speechlab/recipes/multisoftmax/<scale>.yaml``)."""

    languages: tuple[str, ...] = ("en", "hi", "ta", "gu")
    # The embedded corpus built when no ``--corpus`` is given.
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    preset: str = "demo"
    # None: the preset's dropout. Short runs that are far from overfitting learn more per
    # update without it.
    dropout: float | None = ranged(None, ge=0, lt=1)
    train: TrainConfig = field(default_factory=TrainConfig)
    # Monolingual models see only their language's data; the paper trains each to convergence,
    # here each gets this many updates.
    mono_steps: int = ranged(300, ge=1)
    # Updates of individual multilingual models instead of train.max_steps (e.g. the demo gives
    # its few CPU minutes mostly to MS and MS LID, whose results it shows first).
    variant_steps: dict[str, int] = ranged(default_factory=dict, ge=1)
    finetune: TrainConfig = field(default_factory=TrainConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    # Test utterances decoded per language (0: all).
    test_utterances: int = ranged(0, ge=0)
    # Training utterances longer than this are left out (0: keep all); short utterances make
    # the small scales learn faster per CPU second.
    max_train_seconds: float = ranged(0.0, ge=0)
    # Table 7: (tau in encoder frames (30 ms for the paper's LSTM, 40 ms for the Transformer),
    # s_th) pairs; "inf" keeps every decoder on.
    early_stop_grid: tuple[tuple[float, float], ...] = ranged(
        ((math.inf, math.inf), (1000, 0.2), (100, 0.2), (30, 0.2), (30, 0.5), (10, 0.2)),
        ge=0, allow_inf=True)
    # The paper's Table 7 uses a Hindi subset; "" uses every test language.
    grid_language: str = "hi"
    # Test utterances per language of the Table 7 decodings, each of which runs every
    # language's decoder (0: the same as test_utterances).
    grid_utterances: int = ranged(0, ge=0)
    # What this scale can and cannot show, put at the top of the report (the recipe says it).
    summary: str = ""
    seed: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        check_languages(self.languages)
        if self.preset not in PRESETS:
            raise ConfigError(f"preset {self.preset!r} is not a model preset; choose one of "
                              f"{sorted(PRESETS)}")
        if self.grid_language and self.grid_language not in self.languages:
            raise ConfigError(f"grid_language {self.grid_language!r} is not one of the "
                              f"languages {list(self.languages)}")
        for name, steps in self.variant_steps.items():
            if name not in MULTILINGUAL:
                raise ConfigError(f"variant_steps: {name!r} is not a multilingual model; "
                                  f"choose from {list(MULTILINGUAL)} (mono_steps sets the "
                                  "monolingual ones)")
            if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
                raise ConfigError(f"variant_steps.{name}: {steps!r} is not a positive number "
                                  "of updates")

    def dims(self) -> ModelDims:
        """The model sizes: the preset, with the recipe's dropout if it sets one."""
        dims = get_preset(self.preset)
        return dims if self.dropout is None else replace(dims, dropout=self.dropout)


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class Data:
    languages: tuple[str, ...]
    tokenizers: dict[str, GraphemeTokenizer]
    train: list[Utterance]
    dev: list[Utterance]
    test: list[Utterance]
    train_hours: dict[str, float]
    skipped: dict[str, dict[str, int]]

    @property
    def vocab_sizes(self) -> dict[str, int]:
        return {lang: len(self.tokenizers[lang]) for lang in self.languages}


def prepare_data(cfg: ReproduceConfig, out_dir: Path, corpus_dir: Path | None, *,
                 write: bool = True) -> Data:
    """Corpus -> fbank -> per-language grapheme vocabularies -> CMVN -> utterances in memory.

    With ``write`` (the main process) the embedded corpus is built if missing, and the
    vocabularies and CMVN statistics are written to ``out_dir/lang`` for ``rnnt decode``;
    without (workers, DDP ranks > 0) the same data is rebuilt from those caches.
    """
    from lhotse import CutSet

    if corpus_dir is None:
        corpus_dir = out_dir / "corpus"
        if write and not (corpus_dir / "corpus.json").exists():
            log.info("building the embedded corpus in %s", corpus_dir)
            make_asr_corpus(cfg.corpus, corpus_dir)
    fbank_dir = out_dir / "fbank"
    paths = {split: corpus_dir / f"{split}_cuts.jsonl.gz" for split in ("train", "dev", "test")}
    for path in paths.values():
        if not path.exists():
            raise DataError(f"{path} is missing: a corpus dir needs train/dev/test cut manifests")
    cuts = {split: compute_features(CutSet.from_file(path), fbank_dir, FbankConfig())
            for split, path in paths.items()}

    languages = tuple(cfg.languages)
    texts: dict[str, list[str]] = {lang: [] for lang in languages}
    for cut in cuts["train"]:
        for sup in cut.supervisions:
            if sup.language in texts and (sup.text or "").strip():
                texts[sup.language].append(sup.text)
    missing = [lang for lang in languages if not texts[lang]]
    if missing:
        raise DataError(f"{corpus_dir}: no training utterances for language(s) {missing}")
    tokenizers = {lang: GraphemeTokenizer.build(texts[lang], lang) for lang in languages}
    cmvn = fit_cmvn(cuts["train"])
    if write:
        for lang, tok in tokenizers.items():
            tok.save(out_dir / "lang" / f"{lang}.json")
        cmvn.save(out_dir / "lang" / "cmvn.safetensors")
    utts, skipped = {}, {}
    for split in ("train", "dev", "test"):
        utts[split], report = load_utterances(cuts[split], tokenizers, cmvn, min_frames=3,
                                              split=split)
        skipped[split] = dict(report.counts)
    if cfg.max_train_seconds > 0:
        kept = [u for u in utts["train"] if u.num_frames <= 100 * cfg.max_train_seconds]
        skipped["train"][f"longer than {cfg.max_train_seconds:g} s"] = len(utts["train"]) - len(kept)
        utts["train"] = kept
    hours = {lang: sum(u.num_frames for u in utts["train"] if u.language == lang) / 360000
             for lang in languages}
    return Data(languages, tokenizers, utts["train"], utts["dev"], utts["test"], hours, skipped)



# ---------------------------------------------------------------------------------------------
# Training


def train_model(model: RNNT, data: Data, train_cfg: TrainConfig, task_cfg: TaskConfig,
                run_dir: Path, *, languages: Sequence[str] = ()) -> None:
    """Train (or resume) ``model`` in ``run_dir`` on the training utterances of ``languages``
    (all of the model's if empty), on this rank's shard under torchrun. Validation (and so
    the choice of ``best.pt``) uses the dev utterances of the same languages: a model
    fine-tuned on one language is judged on that language alone."""
    dist = distributed.current()
    if dist.distributed:
        if task_cfg.batches_per_update != 1:
            raise ConfigError("under torchrun each rank's batch is one of an update's batches: "
                              "set task.batches_per_update=1 and use that many ranks instead "
                              f"(got {task_cfg.batches_per_update})")
        # A language-homogeneous batch leaves the other languages' parts without gradient.
        train_cfg = replace(train_cfg, find_unused_parameters=True)
    train = [u for u in data.train if not languages or u.language in languages]
    dev = [u for u in data.dev if not languages or u.language in languages]
    task = RNNTTask(model, train, dev, task_cfg, seed=train_cfg.seed, rank=dist.rank,
                    world_size=dist.world_size)
    Trainer(model, task, train_cfg, run_dir,
            model_config=ModelCard.of("rnnt", model.config).to_dict()).fit()


def monolingual_key_map(source: RNNT, language: str) -> Callable[[str], str | None]:
    """Checkpoint key map from a multi-softmax model to a one-language model of the same sizes:
    shared parameters as they are, ``language``'s embedding / prediction net / output layer
    renamed to index 0, every other language's and the LID head discarded (Sec. 4 of the
    paper: fine-tuning "the shared and language specific parameters")."""
    route = source.routes[language]
    per_language = {"predictor.embeddings.": route.table, "joiner.outputs.": route.head}
    if source.spec.lang_predictor:
        per_language["predictor.lstms."] = route.net

    def map_key(key: str) -> str | None:
        if key.startswith("lid_head."):
            return None
        for prefix, index in per_language.items():
            if key.startswith(prefix):
                i, rest = key[len(prefix):].split(".", 1)
                return f"{prefix}0.{rest}" if int(i) == index else None
        return key

    return map_key



def _start_from(model: RNNT, source_dir: Path) -> None:
    """Load the trained model in ``source_dir`` into ``model`` (Table 3): the whole model if
    they are alike (Onehot fine-tuning), else, for a one-language model from a multi-softmax
    one, the shared parameters and that language's (:func:`monolingual_key_map`)."""
    ckpt = best_or_latest(source_dir)
    source = read_card(ckpt)
    key_map = None
    if model.spec.single_language and source.config.get("variant") != "mono":
        with torch.device("meta"):
            key_map = monolingual_key_map(source.build(), model.languages[0])
    load_model_weights(model, ckpt, map_key=key_map)


# ---------------------------------------------------------------------------------------------
# Decoding


def text_of(model: RNNT, tokens: Sequence[int], language: str | None,
             tokenizers: Mapping[str, GraphemeTokenizer]) -> str:
    """Label ids -> words: union ids for pooled models, local ids of ``language`` otherwise."""
    if model.spec.union_vocab:
        syms = []
        for t in tokens:
            lang, j = model.union.to_local(int(t))
            if lang is not None:
                syms.append(tokenizers[lang].symbols[j])
        return join_symbols(syms)
    return tokenizers[language].decode(tokens)


def decode_known(model: RNNT, utts: Sequence[Utterance], tokenizers: Mapping[str, GraphemeTokenizer],
                 search: SearchConfig, *, batch_size: int = 16) -> Scored:
    """Decode with the language known (or not needed): one search per utterance."""
    hyps: dict[str, str] = {}
    start = time.process_time()
    by_lang: dict[str, list[Utterance]] = {}
    for u in utts:
        by_lang.setdefault(u.language, []).append(u)
    for lang, group in by_lang.items():
        for i in range(0, len(group), batch_size):
            chunk = group[i : i + batch_size]
            batch = collate(chunk, lang)
            best = decode(model, batch.x, batch.x_lens, None if model.spec.single_language else lang, search)
            for u, h in zip(chunk, best):
                hyps[u.id] = text_of(model, h.tokens, lang, tokenizers)
    return score(utts, hyps, time.process_time() - start)



@dataclass
class LidFreeRun:
    """LID-free decoding of a set of utterances: the LID pick's and the oracle's hypotheses,
    the language picked (averaged posteriors) and the true one per utterance id, T_avg, CPU and
    audio seconds; ``picked_log``: the language the summed log-posteriors pick."""

    lid: Scored
    oracle: Scored
    picked: dict[str, str]
    truth: dict[str, str]
    t_avg: float
    cpu_seconds: float
    audio_seconds: float
    picked_log: dict[str, str] = field(default_factory=dict)


def decode_without_language(model: RNNT, utts: Sequence[Utterance], tokenizers: Mapping[str, GraphemeTokenizer],
                            search: SearchConfig, early_stop: EarlyStopConfig) -> LidFreeRun:
    cfg = DecodeConfig(search=search, early_stop=early_stop, select="lid")
    hyps, oracle, picked, picked_log = {}, {}, {}, {}
    t_avgs, cpu = [], 0.0
    for u in utts:
        r = decode_lid_free(model, u.feats, cfg, true_language=u.language)
        picked[u.id] = r.language
        picked_log[u.id] = max(r.lid_log_scores, key=r.lid_log_scores.get)
        hyps[u.id] = tokenizers[r.language].decode(r.tokens)
        oracle[u.id] = tokenizers[u.language].decode(r.hypotheses[u.language])
        t_avgs.append(r.t_avg)
        cpu += r.cpu_seconds
    audio = sum(u.num_frames for u in utts) / 100
    return LidFreeRun(score(utts, hyps, cpu), score(utts, oracle), picked,
                      {u.id: u.language for u in utts}, sum(t_avgs) / max(len(t_avgs), 1), cpu, audio,
                      picked_log)



# ---------------------------------------------------------------------------------------------
# Tables


def _lid_table(vanilla_scored: Scored, lid_free: LidFreeRun, test: Sequence[Utterance],
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
    for name, acc in (("Multilingual Vanilla (script)", by_script(vanilla_scored)),
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



def _param_table(preset: str, sizes: Mapping[str, int], trained: Mapping[str, RNNT]) -> Table:
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



def _early_stop_grid(cfg: ReproduceConfig, runs: Sequence[LidFreeRun], out: Path) -> tuple[Table, Figure]:
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
                  "process CPU time of encoder + LID head + all running decoders, measured.",
                  columns=["tau", "s_th", "WER", "T_avg", "CPU ms/utt", "RTF", "LID acc."],
                  rows=rows, formats={"WER": "{:.2f}", "T_avg": "{:.2f}", "CPU ms/utt": "{:.1f}",
                                      "RTF": "{:.3f}", "LID acc.": "{:.1f}"})
    return table, Figure(path=fig_path, caption="WER against T_avg over the tau / s_th grid.")



def _fmt_inf(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:g}"



def _notes(cfg: ReproduceConfig, scale: str, data: Data, test: Sequence[Utterance]) -> str:
    counts = {lang: sum(u.language == lang for u in test) for lang in data.languages}
    hours = ", ".join(f"{PAPER_NAMES.get(k, k)} {60 * v:.1f} min" for k, v in data.train_hours.items())
    sizes = ", ".join(f"{k} {v}" for k, v in data.vocab_sizes.items())
    skipped = "; ".join(f"{split}: {d}" for split, d in data.skipped.items() if d) or "none"
    own = ", ".join(f"{name} {steps}" for name, steps in cfg.variant_steps.items())
    own = f" ({own})" if own else ""
    summary = f"{cfg.summary.strip()}\n\n" if cfg.summary.strip() else ""
    dropout = "" if cfg.dropout is None else f", dropout {cfg.dropout:g}"
    return (
        f"{summary}Scale `{scale}` (preset `{cfg.preset}`{dropout}): {cfg.train.max_steps} updates "
        f"per multilingual model{own}, {cfg.mono_steps} per monolingual model, "
        f"{cfg.finetune.max_steps} fine-tuning updates; languages drawn by hours ** "
        f"{cfg.task.language_alpha:g}.\n\n"
        f"Training audio: {hours}. Vocabularies with blank: {sizes}. Test utterances: {counts}. "
        f"Skipped or flagged utterances: {skipped}.\n\n"
        "The embedded corpus is synthetic (espeak-ng voices reading real sentences), so absolute WERs "
        "are not comparable with the paper's; the tables have the paper's shape and are computed by "
        "the command in `meta`. Search: "
        f"{cfg.search.method}, beam {cfg.search.beam}, at most {cfg.search.max_symbols_per_frame} "
        "symbols per frame."
    )


# ---------------------------------------------------------------------------------------------
# The reproduction


class MultiSoftmax:
    """The multi-softmax RNN-T paper (Joshi et al.) as a
    :class:`~speechlab.experiment.reproduction.Reproduction`."""

    name = "multisoftmax"
    title = "Multi-softmax RNN-T"
    scales = ("ci", "demo", "small", "paper-shape")
    demo_minutes = 10.0
    config_class = ReproduceConfig

    def prepare(self, cfg: ReproduceConfig, out: Path, corpus: Path | None, *,
                write: bool = True) -> Data:
        data = prepare_data(cfg, out, corpus, write=write)
        if write:
            log.info("vocabularies (with blank): %s; training hours: %s", data.vocab_sizes,
                     {k: round(v, 3) for k, v in data.train_hours.items()})
        return data

    def plan(self, cfg: ReproduceConfig) -> list[Job]:
        """17 models and their decodings. The longest trainings first (pooled vocabularies
        cost most per update), so fine-tuning and decoding fill the workers while they run;
        then the slowest decodings (LID-free runs every language's decoder)."""
        langs = tuple(cfg.languages)
        by_cost = ("vanilla", "onehot", "multisoftmax_lsp", "multisoftmax_lid", "multisoftmax")
        steps = {v: cfg.variant_steps.get(v, cfg.train.max_steps) for v in by_cost}
        jobs: list[Job] = [TrainJob(v, v, steps=cfg.variant_steps.get(v),
                                    cost=steps[v] / cfg.train.max_steps)
                           for v in sorted(by_cost, key=lambda v: -steps[v])]
        jobs += [TrainJob(f"mono_{lang}", "mono", (lang,), steps=cfg.mono_steps, cost=0.5)
                 for lang in langs]
        # Table 3: from Onehot the whole model continues on one language (its one-hot fixed);
        # from MS a one-language model takes the shared and that language's parameters.
        jobs += [TrainJob(f"ft_onehot_{lang}", "onehot", (lang,), init_from="onehot", cost=0.2)
                 for lang in langs]
        jobs += [TrainJob(f"ft_ms_{lang}", "mono", (lang,), init_from="multisoftmax", cost=0.2)
                 for lang in langs]
        jobs.append(DecodeJob("lid_free", "multisoftmax_lid",
                              options={"early_stop": (math.inf, math.inf)}))
        grid_data = (cfg.grid_language,) if cfg.grid_language else ()
        jobs += [DecodeJob(f"grid_{i}", "multisoftmax_lid", grid_data,
                           {"early_stop": (tau, s_th), "grid": True})
                 for i, (tau, s_th) in enumerate(cfg.early_stop_grid)]
        jobs += [DecodeJob(v, v) for v in MULTILINGUAL]
        jobs += [DecodeJob(j.name, j.name, j.data) for j in list(jobs)
                 if isinstance(j, TrainJob) and j.data]
        return jobs

    def train(self, job: TrainJob, cfg: ReproduceConfig, data: Data, out: Path) -> None:
        sizes = data.vocab_sizes
        if job.model == "mono":
            (lang,) = job.data
            model = build("mono", {lang: sizes[lang]}, cfg.dims())
        elif job.model in VARIANTS:
            model = build(job.model, sizes, cfg.dims())
        else:
            raise ConfigError(f"unknown model {job.model!r} in job {job.name}")
        if job.init_from:
            _start_from(model, out / "models" / job.init_from)
            train_cfg = cfg.finetune
        else:
            train_cfg = replace(cfg.train, max_steps=job.steps) if job.steps else cfg.train
        train_model(model, data, train_cfg, cfg.task, out / "models" / job.name, languages=job.data)

    def decode(self, job: DecodeJob, cfg: ReproduceConfig, data: Data, out: Path) -> Scored | LidFreeRun:
        model = load_trained(out / "models" / job.model)
        utts = decode_set(cfg, data, job)
        if not utts:
            raise DataError(f"no test utterances in {list(job.data)} to decode for {job.name}")
        early_stop = job.options.get("early_stop")
        if early_stop is None:
            return decode_known(model, utts, data.tokenizers, cfg.search)
        tau, s_th = early_stop
        return decode_without_language(model, utts, data.tokenizers, cfg.search,
                                       EarlyStopConfig(tau=tau, s_th=s_th))

    def report(self, cfg: ReproduceConfig, data: Data, decoded: Mapping[str, object], out: Path,
               scale: str) -> Results:
        langs = data.languages
        test = test_set(cfg, data)
        models_dir = out / "models"
        # The paper's order (the plan's is by cost): models from scratch, then fine-tuned ones.
        first = [f"mono_{lang}" for lang in langs] + list(MULTILINGUAL)
        trained = first + [f"ft_{base}_{lang}" for base in ("onehot", "ms") for lang in langs]
        mono_scored = merge([decoded[f"mono_{lang}"] for lang in langs])
        known = {v: decoded[v] for v in MULTILINGUAL}
        ft_scored = {"onehot": merge([decoded[f"ft_onehot_{lang}"] for lang in langs]),
                     "multisoftmax": merge([decoded[f"ft_ms_{lang}"] for lang in langs])}
        lid_free: LidFreeRun = decoded["lid_free"]
        grid = [decoded[f"grid_{i}"] for i in range(len(cfg.early_stop_grid))]

        table2_rows = [("Monolingual", mono_scored), ("Multilingual Vanilla", known["vanilla"]),
                       ("Multilingual Onehot", known["onehot"]), ("Multi-softmax", known["multisoftmax"]),
                       ("Multi-softmax LSP", known["multisoftmax_lsp"])]
        table4_rows = [("Multilingual Vanilla", known["vanilla"]), ("Multi-softmax LID", lid_free.lid),
                       ("Multi-softmax LID Oracle", lid_free.oracle)]
        names = {"column_names": PAPER_NAMES}
        tables = [
            error_rate_table("table2", "WER[%] with the input language known (Table 2). Avg. is "
                             "word-weighted; WERR relative to Monolingual.", table2_rows, langs, **names),
            error_rate_table("table3", "WER[%] of monolingual models from scratch vs. fine-tuned "
                             "from a multilingual seed (Table 3).", [
                                 ("Monolingual", mono_scored), ("Onehot finetuning", ft_scored["onehot"]),
                                 ("Multi-softmax finetuning", ft_scored["multisoftmax"])], langs, **names),
            error_rate_table("table4", "WER[%] with the input language unknown (Table 4): MS LID "
                             "runs one decoder per language on one encoder pass and picks by "
                             "averaged LID posteriors.", table4_rows, langs, **names),
            _lid_table(known["vanilla"], lid_free, test, langs),
            _param_table(cfg.preset, data.vocab_sizes,
                         {name: load_trained(models_dir / name) for name in first}),
        ]
        grid_table, grid_fig = _early_stop_grid(cfg, grid, out)
        tables.append(grid_table)
        # Character error rates of Tables 2 and 4: at small scales they move before WER does.
        tables.append(error_rate_table("table2_cer", "CER[%] of the Table 2 systems (character-"
                                       "weighted average; CERR: relative reduction vs. "
                                       "Monolingual).", table2_rows, langs, unit="chars", **names))
        tables.append(error_rate_table("table4_cer", "CER[%] of the Table 4 systems.", table4_rows,
                                       langs, unit="chars", **names))
        write_hyps(out / "hyps", test, {"mono": mono_scored, **known, "ft_onehot": ft_scored["onehot"],
                                        "ft_multisoftmax": ft_scored["multisoftmax"],
                                        "ms_lid": lid_free.lid, "ms_lid_oracle": lid_free.oracle})
        tables.append(training_table(models_dir, trained, caption=TRAINING_CAPTION))
        figures = [grid_fig, *_training_figures(
            models_dir, {lang: f"mono_{lang}" for lang in langs}, MULTILINGUAL, out)]
        return Results(title=f"Multi-softmax RNN-T reproduction ({scale} scale)", tables=tables,
                       figures=figures, notes=_notes(cfg, scale, data, test))


TRAINING_CAPTION = (
    "Training: updates made, best dev RNN-T loss per utterance (over the dev languages the "
    "model has) and the update it was reached at (the weights decoded), and wall-clock minutes "
    "of training (one thread per model, models trained side by side; validation included).")


def _training_figures(models_dir: Path, mono: Mapping[str, str], multilingual: Sequence[str],
                      out: Path) -> list[Figure]:
    """From the models' logs: one panel per language of that language's dev loss against
    updates, its monolingual model (``mono``: language -> model) next to every multilingual
    one (which spend only part of their updates on it); and, for a model with a LID head, its
    dev LID accuracy."""
    panels = {}
    for lang, mono_model in mono.items():
        series = {"mono": (mono_model, "loss")}
        series.update({n: (n, f"loss_{lang}") for n in multilingual})
        xs, ys = curves_from_logs(models_dir, series)
        if ys:
            panels[PAPER_NAMES.get(lang, lang)] = (xs, ys)
    figures = []
    if panels:
        panel_plot(panels, path=out / "dev_loss.png", xlabel="update",
                   ylabel="dev RNN-T loss / utt.", title="Dev loss per language during training")
        figures.append(Figure(path="dev_loss.png", caption="Dev RNN-T loss per utterance of each "
                              "language against updates: the monolingual model and each "
                              "multilingual one (whose updates are shared by four languages)."))
    lid_x, lid_y = curves_from_logs(models_dir, {n: (n, "lid_acc") for n in multilingual},
                                    scale=100.0)
    if lid_y:
        line_plot(lid_x, lid_y, path=out / "lid_accuracy.png", xlabel="update",
                  ylabel="dev LID accuracy [%]", title="LID head during training")
        figures.append(Figure(path="lid_accuracy.png", caption="Utterance-level dev accuracy of "
                              "the LID head (frame-averaged posteriors), mean over languages."))
    return figures


def _first_per_language(utts: Sequence[Utterance], languages: Sequence[str], n: int) -> list[Utterance]:
    if not n:
        return list(utts)
    return [u for lang in languages for u in [v for v in utts if v.language == lang][:n]]


def test_set(cfg: ReproduceConfig, data: Data) -> list[Utterance]:
    """The test utterances decoded: the first ``cfg.test_utterances`` of each language (all if 0)."""
    return _first_per_language(data.test, data.languages, cfg.test_utterances)


def decode_set(cfg: ReproduceConfig, data: Data, job: DecodeJob) -> list[Utterance]:
    """What ``job`` decodes: the test set in the job's languages, cut to the first
    ``cfg.grid_utterances`` per language for the Table 7 grid."""
    utts = [u for u in test_set(cfg, data) if not job.data or u.language in job.data]
    if job.options.get("grid"):
        utts = _first_per_language(utts, data.languages, cfg.grid_utterances)
    return utts
