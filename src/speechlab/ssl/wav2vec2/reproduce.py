"""``speechlab reproduce local-attention``: the local-attention paper's experiments end to end.

Pre-train one wav2vec 2.0 model on the English audio of the embedded corpus (or any corpus by
``--corpus``), diagnose its blocks (Sec. 3, :mod:`.diagnose`), fine-tune it with CTC on
characters as the original model (``Orig``) and with LMSABs in the blocks of each variant
(Sec. 4.2: ``L_B1-12``, ``L_B2-12``, ``L_B6-11``, ``L_B2-5``), decode each with Viterbi and
with an n-gram LM at beams 50 and 1500, and write Table 1 and the diagnosis (figure and
table). :class:`LocalAttention` is this paper's
:class:`~speechlab.experiment.reproduction.Reproduction`.

A variant's blocks are a block list (``2-12``) or ``diagnosis:vertical|6-11`` /
``diagnosis:diagonal|2-5``: the blocks the diagnosis of the model pre-trained here finds with
vertical lines (or diagonal), the list after ``|`` when it finds none. The paper pre-trains
one model per variant; here (as the issue plans it) one pre-trained model is fine-tuned five
ways, so the variants differ in their fine-tuning attention only. The feature encoder is
frozen in fine-tuning, so its outputs are computed once and shared by the five fine-tunes.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from speechlab.config import check_fields, ranged
from speechlab.data.corpus import SAMPLE_RATE, CorpusConfig, make_asr_corpus
from speechlab.errors import ConfigError, DataError
from speechlab.ssl.wav2vec2.config import (
    MAX_RADIUS,
    MAX_RADIUS_WHY,
    format_blocks,
    parse_blocks,
    preset,
)
from speechlab.ssl.wav2vec2.finetune import FeatureUtterance, FinetuneTaskConfig
from speechlab.ssl.wav2vec2.pretrain import PretrainTaskConfig
from speechlab.text.ngram import MAX_ORDER, MAX_ORDER_WHY
from speechlab.train import TrainConfig

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
PRETRAINED = "pretrained"
DIAGNOSIS = "diagnosis"
DIAGNOSED = "diagnosis:"


def _corpus_default() -> CorpusConfig:
    return CorpusConfig(minutes={"en": 10.0})


def _variants_default() -> dict[str, str]:
    return {"Orig": "", "L_B1-12": "1-12", "L_B2-12": "2-12",
            "L_B6-11": "diagnosis:vertical|6-11", "L_B2-5": "diagnosis:diagonal|2-5"}


@dataclass(frozen=True)
class LocalAttentionConfig:
    """One scale of the reproduction (``speechlab/recipes/local-attention/<scale>.yaml``)."""

    corpus: CorpusConfig = field(default_factory=_corpus_default)
    # A preset of speechlab.ssl.wav2vec2.config.PRESETS (the paper's: base).
    model: str = "base"
    # The preset's front end: conv (the paper's learned feature encoder, frozen in fine-tuning)
    # or fbank (parameter-free log-mel frames, the demo and small recipes; docs/local-attention.md).
    front_end: str = "conv"
    # LMSAB radius in frames (the paper: 30, i.e. +-0.6 s at 20 ms).
    radius: int = ranged(30, ge=1, le=MAX_RADIUS, why=MAX_RADIUS_WHY)
    variants: dict[str, str] = field(default_factory=_variants_default)
    pretrain: TrainConfig = field(default_factory=TrainConfig)
    pretrain_task: PretrainTaskConfig = field(default_factory=PretrainTaskConfig)
    finetune: TrainConfig = field(default_factory=TrainConfig)
    finetune_task: FinetuneTaskConfig = field(default_factory=FinetuneTaskConfig)
    # Utterances of the dev set whose maps the diagnosis reads (Fig. 2: six).
    diagnosis_utterances: int = ranged(6, ge=1)
    # The LM: order and vocabulary over the harvested English text (dev and test excluded);
    # beams of the LM search, and LM weights tried at the first beam on dev_utterances.
    lm_order: int = ranged(4, ge=1, le=MAX_ORDER, why=MAX_ORDER_WHY)
    lm_vocab: int = ranged(20000, ge=1)
    beams: tuple[int, ...] = ranged((50, 1500), ge=1)
    lm_weights: tuple[float, ...] = ranged((0.3, 0.6, 1.0), ge=0)
    word_bonus: float = ranged(0.0)
    # Pruning of the LM search (PrefixSearchConfig): labels below token_min_logp in a frame are
    # not extended, prefixes more than beam_prune_logp below the best are dropped. Tighter
    # pruning keeps beam 1500 affordable at the demo scale.
    token_min_logp: float = ranged(-8.0, le=0)
    beam_prune_logp: float = ranged(-20.0, le=0)
    dev_utterances: int = ranged(30, ge=1)
    seed: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.variants:
            raise ConfigError("variants: give at least one model (e.g. Orig: '')")
        if self.front_end not in ("conv", "fbank"):
            raise ConfigError(f"front_end: {self.front_end!r} is not conv or fbank")
        model = model_config(self)
        for name, spec in self.variants.items():
            variant_blocks(spec, model.layers, None, name=name)
        for key in ("beams", "lm_weights"):
            if not getattr(self, key):
                raise ConfigError(f"{key}: give at least one value")
        # A masked span must fit in a crop (masking.span_mask leaves shorter utterances
        # unmasked), or pre-training finds nothing to predict once features are computed.
        task = self.pretrain_task
        crop_frames = int(task.crop_seconds * SAMPLE_RATE) // model.hop
        if task.mask_length >= crop_frames:
            raise ConfigError(
                f"pretrain_task.mask_length {task.mask_length} frames is not shorter than a "
                f"crop: pretrain_task.crop_seconds {task.crop_seconds:g} s is {crop_frames} "
                f"frames of {1000 * model.hop / SAMPLE_RATE:g} ms, so no frame could be masked; "
                "the paper's span is 10")


def model_config(cfg: LocalAttentionConfig):
    """The pre-training model's sizes: the preset with the recipe's front end and radius."""
    return preset(cfg.model, radius=cfg.radius, front_end=cfg.front_end)


def variant_blocks(spec: str, layers: int, diagnosed: dict[str, tuple[int, ...]] | None, *,
                   name: str = "") -> tuple[int, ...]:
    """The 1-based blocks a variant makes local (module doc for the ``diagnosis:`` form)."""
    where = f"variant {name!r}: " if name else ""
    if spec.startswith(DIAGNOSED):
        kind, _, fallback = spec[len(DIAGNOSED):].partition("|")
        if kind not in ("vertical", "diagonal"):
            raise ConfigError(f"{where}{spec!r}: after 'diagnosis:' write vertical or diagonal")
        try:
            default = parse_blocks(fallback, layers)
        except ConfigError as e:
            raise ConfigError(f"{where}{e}") from None
        found = (diagnosed or {}).get(kind, ())
        return found or default
    try:
        return parse_blocks(spec, layers)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from None


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class Utt:
    id: str
    wav: Tensor
    text: str
    tokens: tuple[int, ...] | None


@dataclass
class LocalAttentionData:
    tokenizer: object
    train: list[Utt]
    dev: list[Utt]
    test: list[Utt]
    lm_path: Path
    skipped: dict[str, int]


def prepare_data(cfg: LocalAttentionConfig, out: Path, corpus_dir: Path | None, *,
                 write: bool = True) -> LocalAttentionData:
    """Corpus -> English waveforms in memory, a grapheme vocabulary, the LM's ARPA file."""
    from lhotse import CutSet

    from speechlab.asr.ctc.reproduce import write_lm
    from speechlab.data.text_harvest import harvest_sentences, sentence_key
    from speechlab.text.graphemes import GraphemeTokenizer
    from speechlab.text.normalize import normalize_text

    if corpus_dir is None:
        corpus_dir = out / "corpus"
        if write and not (corpus_dir / "corpus.json").exists():
            log.info("building the embedded corpus in %s", corpus_dir)
            make_asr_corpus(cfg.corpus, corpus_dir)
    cuts = {}
    for split in SPLITS:
        path = corpus_dir / f"{split}_cuts.jsonl.gz"
        if not path.exists():
            raise DataError(f"{path} is missing: a corpus dir needs train/dev/test cut manifests")
        cuts[split] = [c for c in CutSet.from_file(path)
                       if c.supervisions and c.supervisions[0].language == "en"]
    texts = {s: [normalize_text(c.supervisions[0].text or "", "en") for c in cuts[s]]
             for s in SPLITS}
    tokenizer = GraphemeTokenizer.build([t for t in texts["train"] if t.strip()], "en")
    field_ = model_config(cfg).receptive_field
    utts: dict[str, list[Utt]] = {}
    skipped: dict[str, int] = {}
    for split in SPLITS:
        utts[split] = []
        for cut, text in zip(cuts[split], texts[split]):
            audio = torch.from_numpy(cut.load_audio()[0].copy()).float()
            if not text.strip() or len(audio) < field_:
                skipped[split] = skipped.get(split, 0) + 1
                continue
            try:
                tokens: tuple[int, ...] | None = tuple(tokenizer.encode(text, utt=cut.id))
            except DataError:
                tokens = None  # scored on its text, never trained on
            utts[split].append(Utt(cut.id, audio, text, tokens))
        if not utts[split]:
            raise DataError(f"{corpus_dir}: no usable English utterance in {split}")
    lm_path = out / "lang" / "en.arpa"
    if write and not lm_path.exists():
        held_out = {sentence_key(u.text) for s in ("dev", "test") for u in utts[s]}
        harvested = harvest_sentences(["en"], cfg.corpus.cache_dir).get("en", [])
        lm_text = [normalize_text(s.text, "en") for s in harvested
                   if sentence_key(s.text) not in held_out]
        lm_text += [u.text for u in utts["train"]]
        write_lm(lm_text, cfg, lm_path)
    return LocalAttentionData(tokenizer, utts["train"], utts["dev"], utts["test"], lm_path,
                              skipped)


def _feature_utterances(encoder, utts: list[Utt]) -> list[FeatureUtterance]:
    from speechlab.ssl.wav2vec2.finetune import conv_features

    feats = conv_features(encoder.feature_encoder, [u.wav for u in utts])
    return [FeatureUtterance(u.id, f, u.text, u.tokens) for u, f in zip(utts, feats)]


def shared_features(encoder, data: LocalAttentionData, out: Path, source: Path,
                    write: bool = True) -> tuple[list[FeatureUtterance], list[FeatureUtterance]]:
    """Train and dev conv features of the frozen feature encoder loaded from ``source``,
    computed by the first fine-tune that needs them and read back by the others
    (``out/features/conv.pt``, keyed by the source checkpoint's name, size and time)."""
    from speechlab.utils import atomic_path

    stat = source.stat()
    key = f"{source.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    path = out / "features" / "conv.pt"
    cached = None
    if path.is_file():
        try:
            cached = torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # a stale or unreadable cache is recomputed, never trusted
            cached = None
    splits = {"train": data.train, "dev": data.dev}
    if not (isinstance(cached, dict) and cached.get("key") == key
            and all(len(cached.get(s, ())) == len(u) for s, u in splits.items())):
        from speechlab.ssl.wav2vec2.finetune import conv_features

        cached = {"key": key, **{s: conv_features(encoder.feature_encoder, [x.wav for x in u])
                                 for s, u in splits.items()}}
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                torch.save(cached, tmp)
    return tuple([FeatureUtterance(u.id, f, u.text, u.tokens)  # type: ignore[return-value]
                  for u, f in zip(splits[s], cached[s])] for s in ("train", "dev"))


def diagnosis_utterances(cfg: LocalAttentionConfig, data: LocalAttentionData) -> list[Utt]:
    """``diagnosis_utterances`` dev utterances spread over the dev set's durations."""
    dev = sorted(data.dev, key=lambda u: (len(u.wav), u.id))
    n = min(cfg.diagnosis_utterances, len(dev))
    return [dev[round(i * (len(dev) - 1) / max(n - 1, 1))] for i in range(n)]


def diagnose_pretrained(cfg: LocalAttentionConfig, data: LocalAttentionData, out: Path):
    """The diagnosis of the pre-trained model (deterministic: every job that needs it
    recomputes it, in well under a second at the small scales)."""
    from speechlab.experiment.trained import load_trained
    from speechlab.ssl.wav2vec2.diagnose import block_maps

    model = load_trained(out / "models" / PRETRAINED)
    return block_maps(model, [u.wav for u in diagnosis_utterances(cfg, data)])


def diagnosed_blocks(diagnosis) -> dict[str, tuple[int, ...]]:
    from speechlab.ssl.wav2vec2.diagnose import diagonal_blocks, suggested_blocks

    return {"vertical": suggested_blocks(diagnosis), "diagonal": diagonal_blocks(diagnosis)}


# ---------------------------------------------------------------------------------------------
# Training


def train_pretrained(cfg: LocalAttentionConfig, data: LocalAttentionData, run_dir: Path) -> None:
    from speechlab.experiment.trained import ModelCard
    from speechlab.ssl.wav2vec2.model import build_from_config
    from speechlab.ssl.wav2vec2.pretrain import PretrainTask
    from speechlab.train import Trainer, distributed

    mcfg = model_config(cfg)
    torch.manual_seed(cfg.seed)
    model = build_from_config(mcfg)
    dist = distributed.current()
    task = PretrainTask([u.wav for u in data.train], [u.wav for u in data.dev], cfg.pretrain_task,
                        seed=cfg.pretrain.seed, rank=dist.rank, world_size=dist.world_size)
    Trainer(model, task, cfg.pretrain, run_dir,
            model_config=ModelCard.of("wav2vec2", mcfg).to_dict()).fit()


def train_variant(cfg: LocalAttentionConfig, data: LocalAttentionData, name: str,
                  out: Path) -> None:
    from speechlab.experiment.trained import ModelCard, best_or_latest
    from speechlab.ssl.wav2vec2.finetune import FinetuneTask
    from speechlab.ssl.wav2vec2.model import CtcConfig, build_ctc
    from speechlab.train import Trainer, distributed
    from speechlab.train.checkpoint import load_model_weights

    spec = cfg.variants[name]
    layers = preset(cfg.model).layers
    diagnosed = diagnosed_blocks(diagnose_pretrained(cfg, data, out)) \
        if spec.startswith(DIAGNOSED) else None
    blocks = variant_blocks(spec, layers, diagnosed, name=name)
    ccfg = CtcConfig(model_config(cfg).localized(blocks), len(data.tokenizer))
    torch.manual_seed(cfg.seed)
    model = build_ctc(ccfg)
    source = best_or_latest(out / "models" / PRETRAINED)
    load_model_weights(model.encoder, source)
    dist = distributed.current()
    train, dev = shared_features(model.encoder, data, out, source, write=dist.is_main)
    task = FinetuneTask(train, dev, cfg.finetune_task,
                        text_of=data.tokenizer.decode, seed=cfg.finetune.seed, rank=dist.rank,
                        world_size=dist.world_size)
    log.info("%s: LMSAB blocks %s (radius %d)", name, format_blocks(blocks) or "none", cfg.radius)
    Trainer(model, task, cfg.finetune, out / "models" / name,
            model_config=ModelCard.of("wav2vec2_ctc", ccfg).to_dict()).fit()


# ---------------------------------------------------------------------------------------------
# Decoding


@dataclass
class VariantDecoding:
    """One fine-tuned model's hypotheses per decoding (``None``, then each beam) and split,
    the LM weight chosen on dev, its blocks and the CPU seconds decoding took."""

    blocks: tuple[int, ...]
    hyps: dict[str, dict[str, dict[str, str]]]
    lm_weight: float
    seconds: float


@dataclass
class DiagnosisResult:
    labels: dict[int, str]
    table: object
    figure: str
    suggested: tuple[int, ...]


def _log_probs(model, utts: list[Utt]) -> list:
    out = []
    with torch.no_grad():
        for u in utts:
            lp, _ = model(u.wav[None])
            out.append(lp[0].numpy())
    return out


def decode_variant(cfg: LocalAttentionConfig, data: LocalAttentionData, name: str,
                   out: Path) -> VariantDecoding:
    from speechlab.experiment.trained import load_trained
    from speechlab.metrics import wer
    from speechlab.ssl.wav2vec2.decode import LmBeamDecoder, greedy_ids
    from speechlab.text.ngram import read_arpa

    start = time.process_time()
    model = load_trained(out / "models" / name)
    blocks = tuple(model.encoder.config.local_blocks)
    splits = {"dev": data.dev, "test": data.test}
    lps = {s: _log_probs(model, u) for s, u in splits.items()}
    hyps: dict[str, dict[str, dict[str, str]]] = {"None": {
        s: {u.id: data.tokenizer.decode(greedy_ids(lp)) for u, lp in zip(splits[s], lps[s])}
        for s in splits}}
    lm = read_arpa(data.lm_path)
    tune = data.dev[: cfg.dev_utterances]
    pruning = dict(word_bonus=cfg.word_bonus, token_min_logp=cfg.token_min_logp,
                   beam_prune_logp=cfg.beam_prune_logp)
    best_w, best_err = cfg.lm_weights[0], math.inf
    for w in cfg.lm_weights:
        dec = LmBeamDecoder(lm, data.tokenizer, cfg.beams[0], lm_weight=w, **pruning)
        err = wer([u.text for u in tune], [dec(lp) for lp in lps["dev"][: len(tune)]]).wer
        if err < best_err:
            best_w, best_err = w, err
    for beam in cfg.beams:
        dec = LmBeamDecoder(lm, data.tokenizer, beam, lm_weight=best_w, **pruning)
        hyps[str(beam)] = {s: {u.id: dec(lp) for u, lp in zip(splits[s], lps[s])} for s in splits}
    return VariantDecoding(blocks, hyps, best_w, time.process_time() - start)


def decode_diagnosis(cfg: LocalAttentionConfig, data: LocalAttentionData,
                     out: Path) -> DiagnosisResult:
    from speechlab.ssl.wav2vec2.diagnose import diagnosis_table, grid_figure, suggested_blocks

    diagnosis = diagnose_pretrained(cfg, data, out)
    figure = "diagnosis_fig2.png"
    grid_figure(diagnosis, out / figure, [u.id for u in diagnosis_utterances(cfg, data)])
    return DiagnosisResult({d.block: d.label for d in diagnosis}, diagnosis_table(diagnosis),
                           figure, suggested_blocks(diagnosis))


# ---------------------------------------------------------------------------------------------
# The reproduction


class LocalAttention:
    """The local-attention paper (Chen & Asgari) as a
    :class:`~speechlab.experiment.reproduction.Reproduction`."""

    name = "local-attention"
    title = "wav2vec 2.0: block-level attention diagnosis and local self-attention"
    scales = ("ci", "demo", "small")
    demo_minutes = 3.0
    config_class = LocalAttentionConfig

    def prepare(self, cfg: LocalAttentionConfig, out: Path, corpus: Path | None, *,
                write: bool = True) -> LocalAttentionData:
        return prepare_data(cfg, out, corpus, write=write)

    def plan(self, cfg: LocalAttentionConfig) -> list:
        from speechlab.experiment.jobs import DecodeJob, TrainJob

        jobs: list = [TrainJob(PRETRAINED, PRETRAINED, cost=3.0)]
        jobs += [TrainJob(v, v, init_from=PRETRAINED) for v in cfg.variants]
        jobs += [DecodeJob(DIAGNOSIS, PRETRAINED, cost=0.1)]
        jobs += [DecodeJob(v, v, cost=0.5) for v in cfg.variants]
        return jobs

    def train(self, job, cfg: LocalAttentionConfig, data: LocalAttentionData, out: Path) -> None:
        if job.name == PRETRAINED:
            train_pretrained(cfg, data, out / "models" / PRETRAINED)
        else:
            train_variant(cfg, data, job.name, out)

    def decode(self, job, cfg: LocalAttentionConfig, data: LocalAttentionData, out: Path):
        if job.name == DIAGNOSIS:
            return decode_diagnosis(cfg, data, out)
        return decode_variant(cfg, data, job.name, out)

    def report(self, cfg: LocalAttentionConfig, data: LocalAttentionData, decoded, out: Path,
               scale: str):
        return local_attention_results(cfg, data, decoded, out, scale)


def local_attention_results(cfg: LocalAttentionConfig, data: LocalAttentionData, decoded,
                            out: Path, scale: str):
    """Table 1 (WER per model and decoding, and CER; each model's test WER reduction against
    Orig at the same decoding with its paired-bootstrap 95% interval), the diagnosis table and
    Fig. 2; every test hypothesis goes to ``hyps/<model>_<decoding>.txt`` (``speechlab score``
    reads them)."""
    from speechlab.experiment.scoring import Scored, training_table, write_hyps
    from speechlab.metrics import cer, wer, werr, werr_interval
    from speechlab.report import Figure, Results, Table

    refs = {"dev": data.dev, "test": data.test}
    ids = {s: [u.id for u in refs[s]] for s in refs}

    def rates(by_split, split):
        r, h = [u.text for u in refs[split]], [by_split[split].get(i, "") for i in ids[split]]
        return wer(r, h, ids=ids[split]), cer(r, h, ids=ids[split])

    orig = decoded.get("Orig")  # the baseline of the WERR column, at each decoding
    orig_test = {k: rates(v, "test")[0] for k, v in orig.hyps.items()} if orig else {}
    rows, systems = [], {}
    for name in cfg.variants:
        d = decoded.get(name)
        if d is None:
            continue
        for decoding, by_split in d.hyps.items():
            row: list = [name if decoding == "None" else "",
                         (format_blocks(d.blocks) or "none") if decoding == "None" else "",
                         decoding]
            (dev_w, dev_c), (test_w, test_c) = rates(by_split, "dev"), rates(by_split, "test")
            row += [100 * dev_w.wer, 100 * dev_c.wer, 100 * test_w.wer, 100 * test_c.wer]
            base = orig_test.get(decoding)
            if name == "Orig" or base is None or base.wer <= 0:
                row += [None, None]
            else:
                low, high = werr_interval(base, test_w)
                row += [werr(base.wer, test_w.wer), f"[{low:+.1f}, {high:+.1f}]"]
            rows.append(row)
            label = "viterbi" if decoding == "None" else f"beam{decoding}"
            systems[f"{name}_{label}"] = Scored(dict(by_split["test"]), {"en": test_w},
                                                {"en": test_c})
    if systems:
        write_hyps(out / "hyps", data.test, systems)
    cols = ["Model", "LMSAB blocks", "Beam", "Dev WER", "Dev CER", "Test WER", "Test CER",
            "Test WERR", "WERR 95% CI"]
    t1 = Table("table1", "WER and CER [%] per model and decoding (Table 1): Viterbi (None) and "
               "CTC beam search with the word n-gram LM at each beam (LM weight chosen on dev at "
               "the first beam, so dev rows with an LM are tuned on). Test WERR: relative test "
               "WER reduction against Orig at the same decoding [%] (positive: better than "
               "Orig), with its paired-bootstrap 95% interval over the test utterances.",
               cols, rows, formats={c: "{:.1f}" for c in cols[3:8]})
    tables, figures = [t1], []
    diag = decoded.get(DIAGNOSIS)
    if diag is not None:
        tables.append(diag.table)
        figures.append(Figure(diag.figure, "Attention maps of the pre-trained model (mean over "
                              "heads), dev utterances x blocks, each resized to 64 x 64 (Fig. 2)."))
    tables.append(training_table(out / "models", [PRETRAINED, *cfg.variants],
                                 caption="Training: updates, best validation loss and its "
                                 "update, minutes."))
    lm_w = {n: d.lm_weight for n, d in decoded.items() if isinstance(d, VariantDecoding)}
    suggested = format_blocks(diag.suggested) if diag is not None and diag.suggested else "none"
    front = ("the paper's conv feature encoder" if cfg.front_end == "conv" else
             "a log-mel fbank front end instead of the paper's conv feature encoder")
    notes = (f"Scale `{scale}`: preset `{cfg.model}` ({preset(cfg.model).layers} blocks) with "
             f"{front}, radius {cfg.radius}, {cfg.pretrain.max_steps} pre-training and "
             f"{cfg.finetune.max_steps} fine-tuning updates per model; English of the embedded "
             f"corpus: {len(data.train)} train, {len(data.dev)} dev, {len(data.test)} test "
             f"utterances; {cfg.lm_order}-gram LM; LM weights chosen: {lm_w}. The diagnosis "
             f"suggests LMSABs in blocks: {suggested}. The corpus is synthetic speech; the "
             "tables have the paper's shape, computed by the command in `meta`.")
    # Say plainly when the models have not learned to transcribe (a reader would otherwise
    # compare variants whose differences are noise): the measured Viterbi rows decide.
    best = [r[6] for r in rows if r[2] == "None"]
    if best and min(best) >= 80.0:
        notes = ("**At this scale the fine-tuned models do not yet transcribe: the best Viterbi "
                 f"test CER is {min(best):.1f}%, so differences between the variants are not "
                 "the paper's effect.**\n\n" + notes)
    return Results(title=f"wav2vec 2.0 local attention ({scale} scale)", tables=tables,
                   figures=figures, notes=notes)
