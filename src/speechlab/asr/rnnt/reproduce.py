"""``speechlab reproduce multisoftmax``: the multi-softmax RNN-T paper's experiments end to end.

Corpus -> fbank -> grapheme vocabularies -> every model of the paper trained with the shared
trainer -> decoding -> the analogues of Tables 2-7 (JSON + markdown through the report writer)
and a plot of WER against T_avg. Scales are YAML files in ``recipes/multisoftmax/``; any lhotse
multilingual corpus with ``{train,dev,test}_cuts.jsonl.gz`` and a ``language`` on each
supervision can replace the embedded one (``--corpus``).

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

from speechlab.asr.rnnt.config import VARIANTS, DecodeConfig, EarlyStopConfig, SearchConfig
from speechlab.asr.rnnt.model import RNNT, build, count_parameters, parameter_table
from speechlab.asr.rnnt.multilingual_decode import decode_lid_free
from speechlab.asr.rnnt.search import decode
from speechlab.asr.rnnt.task import RNNTTask, TaskConfig, Utterance, collate, load_utterances
from speechlab.audio.features import FbankConfig, compute_features, fit_cmvn
from speechlab.config import load_config, save_config
from speechlab.data.corpus import CorpusConfig, make_asr_corpus
from speechlab.errors import ConfigError, DataError
from speechlab.metrics import ErrorRate, cer, wer, werr, word_weighted_average
from speechlab.metrics.lid import lid_accuracy, script_of
from speechlab.report import Figure, Results, Table
from speechlab.report.plots import line_plot, panel_plot
from speechlab.report.results import collect_meta
from speechlab.text.graphemes import GraphemeTokenizer, join_symbols
from speechlab.train import Trainer, TrainConfig, load_model_weights
from speechlab.utils import atomic_write_json, exit_with_parent, seed_everything

log = logging.getLogger(__name__)

SCALES = ("ci", "demo", "small", "paper-shape")
RECIPE_DIR = Path(__file__).resolve().parents[4] / "recipes" / "multisoftmax"
MODEL_JSON = "model.json"
PAPER_NAMES = {"en": "En-IN", "hi": "Hi-IN", "ta": "Ta-IN", "gu": "Gu-IN"}


@dataclass(frozen=True)
class ReproduceConfig:
    """One scale of the reproduction (see ``recipes/multisoftmax/*.yaml``)."""

    languages: tuple[str, ...] = ("en", "hi", "ta", "gu")
    # The embedded corpus built when no ``--corpus`` is given.
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    preset: str = "demo"
    train: TrainConfig = field(default_factory=TrainConfig)
    # Monolingual models see only their language's data; the paper trains each to convergence,
    # here each gets this many updates.
    mono_steps: int = 300
    finetune: TrainConfig = field(default_factory=TrainConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    # Test utterances decoded per language (0: all).
    test_utterances: int = 0
    # Training utterances longer than this are left out (0: keep all); short utterances make
    # the small scales learn faster per CPU second.
    max_train_seconds: float = 0.0
    # Table 7: (tau in encoder frames of 30 ms, s_th) pairs; "inf" keeps every decoder on.
    early_stop_grid: tuple[tuple[float, float], ...] = (
        (math.inf, math.inf), (1000, 0.2), (100, 0.2), (30, 0.2), (30, 0.5), (10, 0.2))
    # The paper's Table 7 uses a Hindi subset; "" uses every test language.
    grid_language: str = "hi"
    seed: int = 0


def load_scale(scale: str, config: Path | None = None, overrides: Sequence[str] = ()) -> ReproduceConfig:
    path = config if config is not None else RECIPE_DIR / f"{scale}.yaml"
    if not path.exists():
        raise ConfigError(f"no recipe config {path}; scales: {', '.join(SCALES)}")
    return load_config(ReproduceConfig, path, list(overrides))


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


def prepare_data(cfg: ReproduceConfig, out_dir: Path, corpus_dir: Path | None) -> Data:
    from lhotse import CutSet

    if corpus_dir is None:
        corpus_dir = out_dir / "corpus"
        if not (corpus_dir / "corpus.json").exists():
            log.info("building the embedded corpus in %s", corpus_dir)
            make_asr_corpus(cfg.corpus, corpus_dir)
    fbank_dir = out_dir / "fbank"
    cuts = {}
    for split in ("train", "dev", "test"):
        path = corpus_dir / f"{split}_cuts.jsonl.gz"
        if not path.exists():
            raise DataError(f"{path} is missing: a corpus dir needs train/dev/test cut manifests")
        cuts[split] = compute_features(CutSet.from_file(path), fbank_dir, FbankConfig())

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
    for lang, tok in tokenizers.items():
        tok.save(out_dir / "lang" / f"{lang}.json")

    cmvn = fit_cmvn(cuts["train"])
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
                run_dir: Path, *, train: Sequence[Utterance] | None = None) -> RNNT:
    """Train (or resume) ``model`` in ``run_dir`` and load its best (or last) weights."""
    task = RNNTTask(model, data.train if train is None else train, data.dev, task_cfg,
                    seed=train_cfg.seed)
    # What `speechlab rnnt decode` needs to rebuild the model from this directory.
    atomic_write_json(run_dir / MODEL_JSON, {"variant": model.variant,
                                             "vocab_sizes": dict(zip(model.languages, model.vocab_sizes)),
                                             "preset": model.config.preset if model.config else "custom"})
    result = Trainer(model, task, train_cfg, run_dir).fit()
    ckpt = result.best_checkpoint or result.last_checkpoint
    if ckpt is not None:
        load_model_weights(model, ckpt)
    model.eval()
    return model


def load_trained(run_dir: Path) -> RNNT:
    """Rebuild a model trained by :func:`train_model` from its directory (best, else last)."""
    import json

    from speechlab.train import latest_checkpoint

    meta_path = Path(run_dir) / MODEL_JSON
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{run_dir} is not a trained RNN-T directory (no {MODEL_JSON})") from None
    model = build(meta["variant"], meta["vocab_sizes"], meta["preset"])
    ckpt = Path(run_dir) / "best.pt"
    ckpt = ckpt if ckpt.exists() else latest_checkpoint(run_dir)
    if ckpt is None:
        raise DataError(f"{run_dir} holds no checkpoint")
    load_model_weights(model, ckpt)
    return model.eval()


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


def _train_job(name: str, cfg: ReproduceConfig, data: Data, models_dir: Path) -> RNNT:
    """Train (or load, if finished) one model of the reproduction, named as in ``models/``:
    ``mono_<lang>``, a variant name, or ``ft_onehot_<lang>`` / ``ft_ms_<lang>`` (Table 3: from
    Onehot the whole model continues on one language, its one-hot fixed; from MS a one-language
    model takes the shared + that language's parameters)."""
    sizes = data.vocab_sizes
    run_dir = models_dir / name
    torch.manual_seed(cfg.seed)
    if name.startswith("mono_"):
        lang = name.removeprefix("mono_")
        return train_model(build("mono", {lang: sizes[lang]}, cfg.preset), data,
                           replace(cfg.train, max_steps=cfg.mono_steps), cfg.task, run_dir,
                           train=[u for u in data.train if u.language == lang])
    if name.startswith("ft_"):
        base, lang = name.removeprefix("ft_").rsplit("_", 1)
        lang_train = [u for u in data.train if u.language == lang]
        if base == "onehot":
            model = build("onehot", sizes, cfg.preset)
            load_model_weights(model, _best_or_last(models_dir / "onehot"))
        else:
            model = build("mono", {lang: sizes[lang]}, cfg.preset)
            load_model_weights(model, _best_or_last(models_dir / "multisoftmax"),
                               map_key=monolingual_key_map(build("multisoftmax", sizes, cfg.preset), lang))
        return train_model(model, data, cfg.finetune, cfg.task, run_dir, train=lang_train)
    if name not in VARIANTS:
        raise ConfigError(f"unknown model job {name!r}")
    return train_model(build(name, sizes, cfg.preset), data, cfg.train, cfg.task, run_dir)


@dataclass(frozen=True)
class DecodeJob:
    """One decoding of the reproduction: the model in ``models/<model>`` on the test utterances
    of ``language`` (None: every language). With ``early_stop`` = (tau, s_th) the language is
    not given to the model: LID-free decoding with all languages' decoders (Tables 4, 5, 7)."""

    model: str
    language: str | None = None
    early_stop: tuple[float, float] | None = None


def _decode_job(job: DecodeJob, cfg: ReproduceConfig, data: Data, model: RNNT) -> Scored | LidFreeRun:
    utts = [u for u in _test_set(cfg, data) if job.language is None or u.language == job.language]
    if not utts:
        raise DataError(f"no test utterances in language {job.language!r} to decode")
    if job.early_stop is None:
        return decode_known(model, utts, data.tokenizers, cfg.search)
    tau, s_th = job.early_stop
    return decode_without_language(model, utts, data.tokenizers, cfg.search, EarlyStopConfig(tau=tau, s_th=s_th))


def _test_set(cfg: ReproduceConfig, data: Data) -> list[Utterance]:
    """The test utterances decoded: the first ``cfg.test_utterances`` of each language (all if 0)."""
    if not cfg.test_utterances:
        return list(data.test)
    return [u for lang in data.languages for u in [v for v in data.test if v.language == lang][: cfg.test_utterances]]


# Worker processes of a parallel reproduction: the data is loaded once per worker (from the run's
# caches) by _init_worker, then each task trains or decodes one model.
_WORKER: dict[str, object] = {}


def _init_worker(cfg: ReproduceConfig, out: Path, corpus_dir: Path | None, parent: int) -> None:
    """One thread, no progress bars, and an exit if the ``parent`` process dies (a killed
    reproduction): a restarted one must not find a model still being trained by an orphan."""
    exit_with_parent(parent)
    torch.set_num_threads(1)
    logging.basicConfig(level=logging.WARNING)
    cfg = replace(cfg, train=replace(cfg.train, progress=False), finetune=replace(cfg.finetune, progress=False))
    _WORKER.update(cfg=cfg, data=prepare_data(cfg, out, corpus_dir), models_dir=out / "models")


def _worker_train(name: str) -> str:
    start = time.time()
    _train_job(name, _WORKER["cfg"], _WORKER["data"], _WORKER["models_dir"])
    return f"trained {name} ({(time.time() - start) / 60:.1f} min)"


def _worker_decode(job: DecodeJob) -> Scored | LidFreeRun:
    model = load_trained(_WORKER["models_dir"] / job.model)
    return _decode_job(job, _WORKER["cfg"], _WORKER["data"], model)


def _in_parallel(cfg: ReproduceConfig, out: Path, corpus_dir: Path | None, jobs: int,
                 training: Sequence[str], decoding: Mapping[str, DecodeJob],
                 needs: Callable[[str], str | None]) -> dict[str, object]:
    """Train the models in ``training`` and run every decoding, ``jobs`` processes at a time.

    A job starts as soon as what it needs is trained (``needs(name)``: the model a training
    job starts from, or None; a decoding needs its model), the first ready one in the order
    given (training in ``training`` order, then decoding), so fine-tuning and decoding fill
    workers while the longest trainings still run. Returns the decoding results by key.
    """
    import multiprocessing
    import os
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait

    pending: list[tuple[str, str]] = [("train", n) for n in training] + [("decode", k) for k in decoding]
    trained: set[str] = set()
    running: dict[Future, tuple[str, str]] = {}
    results: dict[str, object] = {}

    def ready(kind: str, key: str) -> bool:
        dep = needs(key) if kind == "train" else decoding[key].model
        return dep is None or dep in trained

    ctx = multiprocessing.get_context("forkserver")
    log.info("training %d models and running %d decodings, %d at a time", len(training),
             len(decoding), jobs)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_init_worker,
                             initargs=(cfg, out, corpus_dir, os.getpid())) as pool:
        while pending or running:
            while len(running) < jobs:
                job = next((p for p in pending if ready(*p)), None)
                if job is None:
                    break
                pending.remove(job)
                kind, key = job
                running[pool.submit(_worker_train, key) if kind == "train"
                        else pool.submit(_worker_decode, decoding[key])] = job
            if not running:
                raise ConfigError(f"jobs wait for models that are never trained: {pending}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                kind, key = running.pop(fut)
                try:
                    result = fut.result()
                except BaseException as e:
                    # Say so at once and stop the other jobs instead of waiting for them.
                    log.error("%s %s failed: %s", kind, key, e)
                    for proc in list(getattr(pool, "_processes", {}).values()):
                        proc.terminate()
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
                if kind == "train":
                    trained.add(key)
                    log.info("%s [%d/%d trained]", result, len(trained), len(training))
                else:
                    results[key] = result
                    log.info("decoded %s [%d/%d]", key, len(results), len(decoding))
    return results


def _seed_of(name: str) -> str | None:
    """The model a training job starts from (Table 3's fine-tuning), None if from scratch."""
    if name.startswith("ft_"):
        base = name.removeprefix("ft_").rsplit("_", 1)[0]
        return {"ms": "multisoftmax"}.get(base, base)
    return None


def _best_or_last(run_dir: Path) -> Path:
    best = run_dir / "best.pt"
    return best if best.exists() else _last(run_dir)


# ---------------------------------------------------------------------------------------------
# Decoding and scoring


@dataclass
class Scored:
    """Hypotheses of one system on a set of utterances, scored per language."""

    hyps: dict[str, str]
    by_language: dict[str, ErrorRate]
    chars: dict[str, ErrorRate]
    seconds: float = 0.0

    @property
    def average(self) -> float:
        return word_weighted_average(self.by_language)


def _score(utts: Sequence[Utterance], hyps: Mapping[str, str], seconds: float = 0.0) -> Scored:
    words, chars = {}, {}
    for lang in sorted({u.language for u in utts}):
        sel = [u for u in utts if u.language == lang]
        refs, out, ids = [u.text for u in sel], [hyps[u.id] for u in sel], [u.id for u in sel]
        words[lang] = wer(refs, out, ids=ids)
        chars[lang] = cer(refs, out, ids=ids)
    return Scored(dict(hyps), words, chars, seconds)


def _text_of(model: RNNT, tokens: Sequence[int], language: str | None,
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
            batch = collate(chunk, lang, None)
            best = decode(model, batch.x, batch.x_lens, None if model.spec.single_language else lang, search)
            for u, h in zip(chunk, best):
                hyps[u.id] = _text_of(model, h.tokens, lang, tokenizers)
    return _score(utts, hyps, time.process_time() - start)


@dataclass
class LidFreeRun:
    """LID-free decoding of a set of utterances: the LID pick's and the oracle's hypotheses,
    the language picked and the true one per utterance id, T_avg, CPU and audio seconds."""

    lid: Scored
    oracle: Scored
    picked: dict[str, str]
    truth: dict[str, str]
    t_avg: float
    cpu_seconds: float
    audio_seconds: float


def decode_without_language(model: RNNT, utts: Sequence[Utterance], tokenizers: Mapping[str, GraphemeTokenizer],
                            search: SearchConfig, early_stop: EarlyStopConfig) -> LidFreeRun:
    cfg = DecodeConfig(search=search, early_stop=early_stop, select="lid")
    hyps, oracle, picked = {}, {}, {}
    t_avgs, cpu = [], 0.0
    for u in utts:
        r = decode_lid_free(model, u.feats, cfg, true_language=u.language)
        picked[u.id] = r.language
        hyps[u.id] = tokenizers[r.language].decode(r.tokens)
        oracle[u.id] = tokenizers[u.language].decode(r.hypotheses[u.language])
        t_avgs.append(r.t_avg)
        cpu += r.cpu_seconds
    audio = sum(u.num_frames for u in utts) / 100
    return LidFreeRun(_score(utts, hyps, cpu), _score(utts, oracle), picked,
                      {u.id: u.language for u in utts}, sum(t_avgs) / max(len(t_avgs), 1), cpu, audio)


# ---------------------------------------------------------------------------------------------
# Tables


def _wer_row(name: str, rates: Mapping[str, ErrorRate], languages: Sequence[str], baseline: float | None) -> list:
    avg = word_weighted_average(rates)
    row: list = [name] + [100 * rates[lang].wer if lang in rates else None for lang in languages]
    row += [100 * avg, werr(baseline, avg) if baseline else 0.0]
    return row


def _wer_table(name: str, caption: str, rows: Sequence[tuple[str, Scored]], languages: Sequence[str],
               unit: str = "words") -> Table:
    """A paper-shaped WER table (``unit="chars"``: the same over characters, CER)."""
    pick = (lambda s: s.by_language) if unit == "words" else (lambda s: s.chars)
    baseline = word_weighted_average(pick(rows[0][1]))
    cols = ["System"] + [PAPER_NAMES.get(lang, lang) for lang in languages] + ["Avg.", "WERR"]
    return Table(name=name, caption=caption, columns=cols,
                 rows=[_wer_row(n, pick(s), languages, baseline) for n, s in rows],
                 formats={c: "{:.2f}" for c in cols[1:]})


def _merge(parts: Sequence[Scored]) -> Scored:
    out = Scored({}, {}, {}, 0.0)
    for p in parts:
        out.hyps.update(p.hyps)
        out.by_language.update(p.by_language)
        out.chars.update(p.chars)
        out.seconds += p.seconds
    return out


# ---------------------------------------------------------------------------------------------
# The reproduction


def run(scale: str = "demo", out_dir: Path | str = "exp/multisoftmax", corpus_dir: Path | None = None,
        config: Path | None = None, overrides: Sequence[str] = (), jobs: int = 1) -> Path:
    """Run every experiment of the paper at ``scale``; returns the run directory.

    ``jobs`` > 1 trains (and then decodes with) that many models at a time, each in its own
    process with one thread: on two cores two single-threaded LSTM trainings get more done than
    one on two threads. Decoding results do not depend on ``jobs``; training may differ in the
    last bits (one thread vs. several sum in different orders).
    """
    started = time.time()
    if jobs < 1:
        raise ConfigError(f"jobs must be >= 1, got {jobs}")
    cfg = load_scale(scale, config, overrides)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_config(cfg, out / "config.yaml")
    seed_everything(cfg.seed)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))

    corpus_dir = Path(corpus_dir) if corpus_dir else None
    data = prepare_data(cfg, out, corpus_dir)
    langs, sizes = data.languages, data.vocab_sizes
    log.info("vocabularies (with blank): %s; training hours: %s", sizes,
             {k: round(v, 3) for k, v in data.train_hours.items()})
    test = _test_set(cfg, data)
    models_dir = out / "models"

    variants = ("vanilla", "onehot", "multisoftmax", "multisoftmax_lsp", "multisoftmax_lid")
    # Every model is a job; a finished job's directory holds its final checkpoint, so running it
    # again just loads it. Fine-tuning starts from the multilingual models, so it comes second.
    first = [f"mono_{lang}" for lang in langs] + list(variants)
    second = [f"ft_{base}_{lang}" for base in ("onehot", "ms") for lang in langs]
    # In parallel: the longest first (pooled vocabularies cost most per update), fine-tuning
    # as soon as its seed is trained.
    by_cost = ["vanilla", "onehot", "multisoftmax_lsp", "multisoftmax_lid", "multisoftmax"]
    order = by_cost + [n for n in first if n not in by_cost] + second
    # Every decoding, the slowest first (LID-free runs every language's decoder).
    decoding: dict[str, DecodeJob] = {"lid_free": DecodeJob("multisoftmax_lid", early_stop=(math.inf, math.inf))}
    for i, (tau, s_th) in enumerate(cfg.early_stop_grid):
        decoding[f"grid_{i}"] = DecodeJob("multisoftmax_lid", cfg.grid_language or None, (tau, s_th))
    decoding.update({v: DecodeJob(v) for v in variants})
    decoding.update({name: DecodeJob(name, name.rsplit("_", 1)[1]) for name in
                     [f"mono_{lang}" for lang in langs] + second})

    if jobs > 1:
        # Workers train and decode; this process then only loads the finished models.
        decoded = _in_parallel(cfg, out, corpus_dir, jobs, order, decoding, _seed_of)
        trained = {name: _train_job(name, cfg, data, models_dir) for name in first + second}
    else:
        trained = {name: _train_job(name, cfg, data, models_dir) for name in first + second}
        log.info("decoding %d test utterances", len(test))
        decoded = {key: _decode_job(job, cfg, data, trained[job.model]) for key, job in decoding.items()}

    mono = {lang: trained[f"mono_{lang}"] for lang in langs}
    models = {v: trained[v] for v in variants}
    mono_scored = _merge([decoded[f"mono_{lang}"] for lang in langs])
    known = {v: decoded[v] for v in variants}
    ft_scored = {"onehot": _merge([decoded[f"ft_onehot_{lang}"] for lang in langs]),
                 "multisoftmax": _merge([decoded[f"ft_ms_{lang}"] for lang in langs])}
    lid_free = decoded["lid_free"]
    grid = [decoded[f"grid_{i}"] for i in range(len(cfg.early_stop_grid))]

    table2_rows = [("Monolingual", mono_scored), ("Multilingual Vanilla", known["vanilla"]),
                   ("Multilingual Onehot", known["onehot"]), ("Multi-softmax", known["multisoftmax"]),
                   ("Multi-softmax LSP", known["multisoftmax_lsp"])]
    table4_rows = [("Multilingual Vanilla", known["vanilla"]), ("Multi-softmax LID", lid_free.lid),
                   ("Multi-softmax LID Oracle", lid_free.oracle)]
    tables = [
        _wer_table("table2", "WER[%] with the input language known (Table 2). Avg. is word-weighted; "
                   "WERR relative to Monolingual.", table2_rows, langs),
        _wer_table("table3", "WER[%] of monolingual models from scratch vs. fine-tuned from a "
                   "multilingual seed (Table 3).", [
                       ("Monolingual", mono_scored), ("Onehot finetuning", ft_scored["onehot"]),
                       ("Multi-softmax finetuning", ft_scored["multisoftmax"])], langs),
        _wer_table("table4", "WER[%] with the input language unknown (Table 4): MS LID runs one "
                   "decoder per language on one encoder pass and picks by averaged LID posteriors.",
                   table4_rows, langs),
        _lid_table(models["vanilla"], known["vanilla"], lid_free, test, langs),
        _param_table(cfg.preset, sizes, {**{f"mono_{l}": m for l, m in mono.items()}, **models}),
    ]
    grid_table, grid_fig = _early_stop_grid(cfg, grid, out)
    tables.append(grid_table)
    # Character error rates of Tables 2 and 4: at small scales they move before WER does.
    tables.append(_wer_table("table2_cer", "CER[%] of the Table 2 systems (character-weighted "
                             "average; relative reduction vs. Monolingual).", table2_rows, langs, unit="chars"))
    tables.append(_wer_table("table4_cer", "CER[%] of the Table 4 systems.", table4_rows, langs, unit="chars"))

    _write_hyps(out / "hyps", test, {"mono": mono_scored, **known, "ft_onehot": ft_scored["onehot"],
                                     "ft_multisoftmax": ft_scored["multisoftmax"],
                                     "ms_lid": lid_free.lid, "ms_lid_oracle": lid_free.oracle})
    curves_table, curves = training_curves(models_dir, first + second, out, langs)
    tables.append(curves_table)
    notes = _notes(cfg, scale, data, test)
    results = Results(title=f"Multi-softmax RNN-T reproduction ({scale} scale)", tables=tables,
                      figures=[grid_fig, *curves], notes=notes, meta=collect_meta(started=started))
    results.save(out)
    log.info("multisoftmax reproduction written to %s in %.1f min", out, (time.time() - started) / 60)
    return out


def _last(run_dir: Path) -> Path:
    from speechlab.train import latest_checkpoint

    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise DataError(f"{run_dir} holds no checkpoint to fine-tune from")
    return ckpt


def _lid_table(vanilla: RNNT, vanilla_scored: Scored, lid_free: LidFreeRun, test: Sequence[Utterance],
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
                       lid_accuracy(truth, [lid_free.picked[u.id] for u in test]))):
        rows.append([name] + [100 * acc.per_language[lang].accuracy if lang in acc.per_language else None
                              for lang in langs]
                    + [100 * acc.macro_accuracy])
    cols = ["System"] + [PAPER_NAMES.get(lang, lang) for lang in langs] + ["Avg."]
    return Table(name="table5", caption="LID accuracy [%] (Table 5): script of the hypothesis vs. "
                 "the transcription's, and the LID head's choice. Avg. is the mean over languages.",
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
        w = 100 * r.lid.average
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
                  f"({n} utterances; Table 7). tau in encoder frames (30 ms); decode time is "
                  "process CPU time of encoder + LID head + all running decoders, measured.",
                  columns=["tau", "s_th", "WER", "T_avg", "CPU ms/utt", "RTF", "LID acc."],
                  rows=rows, formats={"WER": "{:.2f}", "T_avg": "{:.2f}", "CPU ms/utt": "{:.1f}",
                                      "RTF": "{:.3f}", "LID acc.": "{:.1f}"})
    return table, Figure(path=fig_path, caption="WER against T_avg over the tau / s_th grid.")


def training_curves(models_dir: Path, names: Sequence[str], out: Path,
                    languages: Sequence[str]) -> tuple[Table, list[Figure]]:
    """From each model's ``log.jsonl``: a table of updates, best dev loss and training time; a
    plot with one panel per language of that language's dev loss against updates, the
    monolingual model next to every multilingual one (which spend only part of their updates
    on it); and, for a model with a LID head, its dev LID accuracy against updates."""
    from speechlab.train.log import read_log

    rows = []
    panels: dict[str, tuple[dict[str, list[float]], dict[str, list[float]]]] = {
        PAPER_NAMES.get(lang, lang): ({}, {}) for lang in languages}
    lid_x: dict[str, list[float]] = {}
    lid_y: dict[str, list[float]] = {}
    for name in names:
        records = read_log(models_dir / name / "log.jsonl")
        valid = [r for r in records if r.get("kind") == "valid"]
        train = [r for r in records if r.get("kind") == "train"]
        if not valid:
            continue
        best = min(valid, key=lambda r: r["loss"])
        rows.append([name, int(train[-1]["step"]) if train else int(valid[-1]["step"]),
                     best["loss"], int(best["step"]),
                     (train[-1]["time"] / 60) if train and "time" in train[-1] else None])
        if not name.startswith("ft_"):
            for lang in languages:
                key = "loss" if name == f"mono_{lang}" else f"loss_{lang}"
                points = [(r["step"], r[key]) for r in valid if key in r]
                if points and (name == f"mono_{lang}" or not name.startswith("mono_")):
                    xs, ys = panels[PAPER_NAMES.get(lang, lang)]
                    label = "mono" if name.startswith("mono_") else name
                    xs[label], ys[label] = [p[0] for p in points], [p[1] for p in points]
        if any("lid_acc" in r for r in valid):
            lid_x[name] = [r["step"] for r in valid if "lid_acc" in r]
            lid_y[name] = [100 * r["lid_acc"] for r in valid if "lid_acc" in r]
    table = Table(name="training", caption="Training: updates made, best dev RNN-T loss per "
                  "utterance (over the dev languages the model has) and the update it was "
                  "reached at (the weights decoded), and wall-clock minutes of training (one "
                  "thread per model, models trained side by side; validation included).",
                  columns=["Model", "Updates", "Best dev loss", "at update", "Train min"],
                  rows=rows, formats={"Best dev loss": "{:.1f}", "Train min": "{:.1f}"})
    figures = []
    panels = {k: v for k, v in panels.items() if v[1]}
    if panels:
        panel_plot(panels, path=out / "dev_loss.png", xlabel="update",
                   ylabel="dev RNN-T loss / utt.", title="Dev loss per language during training")
        figures.append(Figure(path="dev_loss.png", caption="Dev RNN-T loss per utterance of each "
                              "language against updates: the monolingual model and each "
                              "multilingual one (whose updates are shared by four languages)."))
    if lid_y:
        line_plot(lid_x, lid_y, path=out / "lid_accuracy.png", xlabel="update",
                  ylabel="dev LID accuracy [%]", title="LID head during training")
        figures.append(Figure(path="lid_accuracy.png", caption="Utterance-level dev accuracy of "
                              "the LID head (frame-averaged posteriors), mean over languages."))
    return table, figures


def _fmt_inf(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:g}"


def _write_hyps(dir_: Path, test: Sequence[Utterance], systems: Mapping[str, Scored]) -> None:
    from speechlab.utils import atomic_write_text

    atomic_write_text(dir_ / "ref.txt", "".join(f"{u.id} {u.text}\n" for u in test))
    for name, s in systems.items():
        atomic_write_text(dir_ / f"{name}.txt", "".join(f"{u.id} {s.hyps.get(u.id, '')}\n" for u in test))
    atomic_write_json(dir_ / "summary.json", {n: {lang: e.to_dict() for lang, e in s.by_language.items()}
                                             for n, s in systems.items()})


def _notes(cfg: ReproduceConfig, scale: str, data: Data, test: Sequence[Utterance]) -> str:
    counts = {lang: sum(u.language == lang for u in test) for lang in data.languages}
    hours = ", ".join(f"{PAPER_NAMES.get(k, k)} {60 * v:.1f} min" for k, v in data.train_hours.items())
    sizes = ", ".join(f"{k} {v}" for k, v in data.vocab_sizes.items())
    skipped = "; ".join(f"{split}: {d}" for split, d in data.skipped.items() if d) or "none"
    return (
        f"Scale `{scale}` (preset `{cfg.preset}`): {cfg.train.max_steps} updates per multilingual model, "
        f"{cfg.mono_steps} per monolingual model, {cfg.finetune.max_steps} fine-tuning updates.\n\n"
        f"Training audio: {hours}. Vocabularies with blank: {sizes}. Test utterances: {counts}. "
        f"Skipped or flagged utterances: {skipped}.\n\n"
        "The embedded corpus is synthetic (espeak-ng voices reading real sentences), so absolute WERs "
        "are not comparable with the paper's; the tables have the paper's shape and are computed by "
        "the command in `meta`. Search: "
        f"{cfg.search.method}, beam {cfg.search.beam}, at most {cfg.search.max_symbols_per_frame} "
        "symbols per frame."
    )
