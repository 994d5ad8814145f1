"""``speechlab reproduce topologies``: the CTC-topologies paper's experiments end to end.

Two corpora play the roles of the paper's WSJ and LibriSpeech columns: English with CMUdict
phones and Hindi with espeak-ng phones from the embedded corpus (or any lhotse corpus, by
``--corpus``). For each corpus and each of the eight topologies
(:mod:`speechlab.asr.ctc.topology`) a phone-level acoustic model
(:mod:`speechlab.asr.ctc.model`) is trained with the graph loss (eqs. 1-5), decoded with the
Viterbi decoder over T∘L∘G (eqs. 7-8), and its lattices measured (BPP and BHP, eqs. 10-11).

This module holds the plan; the recipe and the data are :mod:`.recipe`, the tables
:mod:`.tables`, training and decoding the library's (:mod:`speechlab.asr.ctc.training`; decoding
sets :mod:`.decoding`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from speechlab.papers.topologies.recipe import (
    CTC,
    Decode,
    DecodeOptions,
    LanguageData,
    ModelSpec,
    TopologiesConfig,
    Train,
    decode_model,
    model_config,
    model_name,
    prepare_data,
)
from speechlab.papers.topologies.tables import decoding_summary, topology_results
from speechlab.papers.topologies.decoding import TopologyDecoding
from speechlab.experiment.jobs import Job
from speechlab.report import Results


class TopologiesPaper:
    """The CTC-topologies paper (Zhao et al.) as a
    :class:`~speechlab.experiment.reproduction.Reproduction`."""

    name = "topologies"
    title = "CTC-like topologies and Viterbi decoding"
    scales = ("ci", "demo", "small", "shipped", "shipped-espeak")
    demo_minutes = 3.5
    config_class = TopologiesConfig
    switches = ()

    def prepare(self, cfg: TopologiesConfig, out: Path, corpus: Path | None, *,
                write: bool = True) -> dict[str, LanguageData]:
        return prepare_data(cfg, out, corpus, write=write)

    def plan(self, cfg: TopologiesConfig) -> list[Job]:
        """One model per corpus and topology, then its decoding (plain CTC's also by prefix
        search)."""
        trains = [Train(model_name(lang, topo), ModelSpec(lang, topo))
                  for lang in cfg.languages for topo in cfg.topologies]
        decodes = [Decode(t.name, t, DecodeOptions(prefix_search=t.spec.topology == CTC))
                   for t in trains]
        return [*trains, *decodes]

    def train(self, job: Train, cfg: TopologiesConfig, data: dict[str, LanguageData],
              out: Path) -> None:
        from speechlab.asr.ctc.model import build
        from speechlab.asr.ctc.training import train_model
        from speechlab.asr.data import WaveAugment

        spec, lang = job.spec, data[job.spec.language]
        model = build(model_config(cfg, spec.topology, lang.tokenizer.num_phones, spec.language))
        augment = WaveAugment(cfg.task.augment, lang.cmvn) if cfg.task.augment.active else None
        train_model(model, spec.topology, lang.train, lang.dev, cfg.train, cfg.task,
                    out / "models" / job.name, tokenizer=lang.tokenizer, augment=augment)

    def decode(self, job: Decode, cfg: TopologiesConfig, data: dict[str, LanguageData],
               out: Path) -> TopologyDecoding:
        return decode_model(job, cfg, data, out)

    def summarize(self, job: Decode, cfg: TopologiesConfig, data: dict[str, LanguageData],
                  result: TopologyDecoding) -> str:
        """The line `speechlab decode` prints for one decode job."""
        return decoding_summary(result, data[job.model.spec.language])

    def report(self, cfg: TopologiesConfig, data: dict[str, LanguageData],
               decoded: Mapping[Decode, TopologyDecoding], out: Path, scale: str) -> Results:
        return topology_results(cfg, data, self.plan(cfg), decoded, out, scale)
