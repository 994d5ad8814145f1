"""``speechlab reproduce multisoftmax``: the multi-softmax RNN-T paper's experiments end to end.

Corpus -> fbank -> grapheme vocabularies -> every model of the paper trained with the shared
trainer -> decoding -> the analogues of Tables 2-7 (:mod:`.tables`). This module holds the plan;
the recipe and the data are :mod:`.recipe`, the tables :mod:`.tables`, training and decoding the
library's (:mod:`speechlab.asr.rnnt.training`, :mod:`.decoding`). Any lhotse multilingual corpus
with ``{train,dev,test}_cuts.jsonl.gz`` and a ``language`` on each supervision can replace the
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
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from speechlab.asr.rnnt.config import VARIANTS, EarlyStopConfig
from speechlab.papers.multisoftmax.recipe import (MULTILINGUAL, Data, Decode, DecodeOptions, ModelSpec,
                                       MultiSoftmaxConfig, Train, decode_set, prepare_data)
from speechlab.papers.multisoftmax.tables import multisoftmax_results
from speechlab.errors import ConfigError, DataError
from speechlab.experiment.jobs import Job, TrainJob
from speechlab.experiment.scoring import score
from speechlab.report import Results

log = logging.getLogger(__name__)


def _only(trains: list[Train], systems: tuple[str, ...]) -> list[Train]:
    """The trainings named in ``systems`` (all when it is empty), refusing a name the plan does
    not have and a fine-tuning whose seed model is left out."""
    if not systems:
        return trains
    names = {t.name for t in trains}
    unknown = [n for n in systems if n not in names]
    if unknown:
        raise ConfigError(f"systems: {unknown} are not models of the plan; its models: "
                          f"{', '.join(t.name for t in trains)}")
    kept = [t for t in trains if t.name in systems]
    for t in kept:
        if t.init_from is not None and t.init_from.name not in systems:
            raise ConfigError(f"systems: {t.name} starts from {t.init_from.name}, which is "
                              "not trained; add it to systems")
    return kept


class MultiSoftmaxPaper:
    """The multi-softmax RNN-T paper (Joshi et al.) as a
    :class:`~speechlab.experiment.reproduction.Reproduction`."""

    name = "multisoftmax"
    title = "Multi-softmax RNN-T"
    scales = ("ci", "demo", "small", "converged", "paper-shape", "shipped")
    demo_minutes = 5.0
    config_class = MultiSoftmaxConfig
    switches = ()

    def prepare(self, cfg: MultiSoftmaxConfig, out: Path, corpus: Path | None, *,
                write: bool = True) -> Data:
        data = prepare_data(cfg, out, corpus, write=write)
        if write:
            log.info("vocabularies (with blank): %s; training hours: %s", data.vocab_sizes,
                     {k: round(v, 3) for k, v in data.train_hours.items()})
        return data

    def plan(self, cfg: MultiSoftmaxConfig) -> list[Job]:
        """17 models and their decodings. The longest trainings first (pooled vocabularies
        cost most per update), so fine-tuning and decoding fill the workers while they run;
        then the slowest decodings (LID-free runs every language's decoder)."""
        langs = tuple(cfg.languages)
        by_cost = ("vanilla", "onehot", "multisoftmax_lsp", "multisoftmax_lid", "multisoftmax")
        steps = {v: cfg.variant_steps.get(v, cfg.train.max_steps) for v in by_cost}
        multi = {v: Train(v, ModelSpec(v), steps=cfg.variant_steps.get(v),
                          cost=steps[v] / cfg.train.max_steps) for v in by_cost}
        trains: list[Train] = sorted(multi.values(), key=lambda j: -steps[j.name])
        trains += [Train(f"mono_{lang}", ModelSpec("mono", (lang,)), steps=cfg.mono_steps,
                         cost=0.5) for lang in langs]
        # Table 3: from Onehot the whole model continues on one language (its one-hot fixed);
        # from MS a one-language model takes the shared and that language's parameters.
        trains += [Train(f"ft_onehot_{lang}", ModelSpec("onehot", (lang,)),
                         init_from=multi["onehot"], cost=0.2) for lang in langs]
        trains += [Train(f"ft_ms_{lang}", ModelSpec("mono", (lang,)),
                         init_from=multi["multisoftmax"], cost=0.2) for lang in langs]
        trains = _only(trains, cfg.systems)
        kept = {t.name for t in trains}
        decodes: list[Decode] = []
        if "multisoftmax_lid" in kept:
            lid = multi["multisoftmax_lid"]
            grid = (cfg.grid_language,) if cfg.grid_language else ()
            decodes += [Decode("lid_free", lid, DecodeOptions(early_stop=(math.inf, math.inf)))]
            decodes += [Decode(f"grid_{i}", lid, DecodeOptions(grid, early_stop=tuple(pair), grid=True))
                        for i, pair in enumerate(cfg.early_stop_grid)]
        decodes += [Decode(v, multi[v], DecodeOptions()) for v in MULTILINGUAL if v in kept]
        decodes += [Decode(t.name, t, DecodeOptions(t.spec.languages)) for t in trains
                    if t.spec.languages]
        if _has_unseen(cfg):
            # The same systems on the unseen-voice split (language known; MS LID without it).
            decodes += [Decode(f"{d.name}_unseen", d.model, replace(d.options, unseen=True))
                        for d in list(decodes) if not d.options.grid
                        and d.model.init_from is None
                        and (d.options.early_stop is None or d.name == "lid_free")]
        unknown = [n for n in cfg.train_first if n not in {t.name for t in trains}]
        if unknown:
            raise ConfigError(f"train_first: {unknown} are not models of the plan")
        # A stable sort: the named trainings move to the front in the order given, and their
        # decodings right after them, so that the headline table's numbers come first.
        first = {name: i for i, name in enumerate(cfg.train_first)}
        n = len(first)
        return sorted([*trains, *decodes], key=lambda j: first.get(j.name, n)
                      if isinstance(j, TrainJob) else n - 0.5
                      if j.model.name in first and not j.options.unseen else n)

    def train(self, job: Train, cfg: MultiSoftmaxConfig, data: Data, out: Path) -> None:
        from speechlab.asr.rnnt.model import build
        from speechlab.asr.rnnt.training import start_from, train_model

        spec = job.spec
        if spec.variant not in VARIANTS:
            raise ConfigError(f"unknown model {spec.variant!r} in job {job.name}")
        sizes = data.vocab_sizes
        model = build(spec.variant, {l: sizes[l] for l in spec.languages}
                      if spec.variant == "mono" else sizes, cfg.dims())
        if job.init_from is not None:
            start_from(model, out / "models" / job.init_from.name)
            train_cfg = cfg.finetune
        else:
            train_cfg = replace(cfg.train, max_steps=job.steps) if job.steps else cfg.train
        augment = None
        if cfg.task.augment.active:
            from speechlab.asr.data import WaveAugment

            augment = WaveAugment(cfg.task.augment, data.cmvn)
        train_model(model, data.train, data.dev, train_cfg, cfg.task, out / "models" / job.name,
                    languages=spec.languages, augment=augment)

    def decode(self, job: Decode, cfg: MultiSoftmaxConfig, data: Data, out: Path):
        from speechlab.papers.multisoftmax.decoding import decode_known, decode_without_language
        from speechlab.asr.rnnt.model import load
        from speechlab.config import to_dict
        from speechlab.train.card import write_decoding

        model = load(out / "models" / job.model.name)
        # The search the run decodes with, kept for the model's later use (speechlab.load).
        write_decoding(out / "models" / job.model.name, search=to_dict(cfg.search))
        utts = decode_set(cfg, data, job.options)
        if not utts and job.options.unseen:
            return score([], {})  # a corpus without an unseen-voice split
        if not utts:
            raise DataError(f"no test utterances in {list(job.options.languages)} to decode "
                            f"for {job.name}")
        if job.options.early_stop is None:
            return decode_known(model, utts, data.tokenizers, cfg.search)
        tau, s_th = job.options.early_stop
        return decode_without_language(model, utts, data.tokenizers, cfg.search,
                                       EarlyStopConfig(tau=tau, s_th=s_th))

    def report(self, cfg: MultiSoftmaxConfig, data: Data, decoded: Mapping[Decode, object],
               out: Path, scale: str) -> Results:
        return multisoftmax_results(cfg, data, self.plan(cfg), decoded, out, scale)


def _has_unseen(cfg: MultiSoftmaxConfig) -> bool:
    """Whether the recipe's corpus has unseen voices for every one of its languages (a corpus
    given with --corpus may still lack the split: its unseen decodings then come back empty)."""
    return all(lang in cfg.corpus.unseen_voices for lang in cfg.languages)
