"""``speechlab reproduce local-attention``: the local-attention paper's experiments end to end.

Pre-train one wav2vec 2.0 model on the English audio of the embedded corpus (or any corpus by
``--corpus``), diagnose its blocks (Sec. 3, :mod:`speechlab.ssl.wav2vec2.diagnose`), fine-tune
it with CTC on characters as the original model (``Orig``) and with LMSABs in the blocks of each
variant (Sec. 4.2: ``L_B1-12``, ``L_B2-12``, ``L_B6-11``, ``L_B2-5``), decode each with Viterbi
and with an n-gram LM at beams 50 and 1500, and write Table 1 and the diagnosis (figure and
table). :class:`LocalAttentionPaper` is this paper's
:class:`~speechlab.experiment.reproduction.Reproduction`: this module holds the plan; the
recipe, its jobs and the data are :mod:`.recipe`, the tables :mod:`.tables`, training and
decoding the library's (:mod:`speechlab.ssl.wav2vec2.training`,
:mod:`speechlab.ssl.wav2vec2.decode`).

The paper pre-trains one model per variant; here (as the issue plans it) one pre-trained model
is fine-tuned five ways, so the variants differ in their fine-tuning attention only. The
feature encoder is frozen in fine-tuning, so its outputs are computed once and shared by the
five fine-tunes (``features/conv.pt``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path

from speechlab.experiment.jobs import Job
from speechlab.report import Results
from speechlab.ssl.wav2vec2.config import format_blocks
from speechlab.papers.local_attention.recipe import (
    Decode,
    Diagnosis,
    DiagnosisResult,
    LocalAttentionConfig,
    LocalAttentionData,
    Pretraining,
    Train,
    Transcription,
    VariantDecoding,
    fine_tuning,
    model_config,
    prepare_data,
)
from speechlab.papers.local_attention.tables import local_attention_results

log = logging.getLogger(__name__)

PRETRAINED = "pretrained"
DIAGNOSIS = "diagnosis"


class LocalAttentionPaper:
    """The local-attention paper (Chen & Asgari) as a
    :class:`~speechlab.experiment.reproduction.Reproduction`."""

    name = "local-attention"
    title = "wav2vec 2.0: block-level attention diagnosis and local self-attention"
    scales = ("ci", "demo", "scan", "small", "shipped")
    demo_minutes = 2.0
    config_class = LocalAttentionConfig
    switches = ()

    def prepare(self, cfg: LocalAttentionConfig, out: Path, corpus: Path | None, *,
                write: bool = True) -> LocalAttentionData:
        return prepare_data(cfg, out, corpus, write=write)

    def plan(self, cfg: LocalAttentionConfig) -> list[Job]:
        """The pre-trained model, its fine-tunes (one per variant), the diagnosis of the
        pre-trained model and the Table 1 decodings of every fine-tune."""
        pretrained = Train(PRETRAINED, Pretraining(model_config(cfg)), cost=3.0)
        layers = pretrained.spec.model.layers
        variants = [Train(name, fine_tuning(blocks, layers, name=name), init_from=pretrained)
                    for name, blocks in cfg.variants.items()]
        transcription = Transcription(cfg.lm_search(), cfg.dev_utterances)
        return [pretrained, *variants,
                Decode(DIAGNOSIS, pretrained, Diagnosis(cfg.diagnosis_utterances), cost=0.1),
                *(Decode(v.name, v, transcription, cost=0.5) for v in variants)]

    def train(self, job: Train, cfg: LocalAttentionConfig, data: LocalAttentionData,
              out: Path) -> None:
        from speechlab.ssl.wav2vec2.diagnose import block_maps
        from speechlab.ssl.wav2vec2.model import CtcConfig, load
        from speechlab.ssl.wav2vec2.training import finetune_model, pretrain_model

        models, spec = out / "models", job.spec
        if isinstance(spec, Pretraining):
            pretrain_model(spec.model, [u.wav for u in data.train], [u.wav for u in data.dev],
                           cfg.pretrain_task, cfg.pretrain, models / job.name, seed=cfg.seed)
            return
        source = job.init_from
        assert source is not None and isinstance(source.spec, Pretraining)
        diagnosis = block_maps(load(models / source.name), [
            u.wav for u in data.spread_dev(cfg.diagnosis_utterances)]) if spec.diagnosed else ()
        blocks = spec.local_blocks(diagnosis)
        log.info("%s: LMSAB blocks %s (radius %d)", job.name, format_blocks(blocks) or "none",
                 cfg.radius)
        finetune_model(CtcConfig(source.spec.model.localized(blocks), len(data.tokenizer)),
                       models / source.name, data.train, data.dev, cfg.finetune_task,
                       cfg.finetune, models / job.name, text_of=data.tokenizer.decode,
                       features=out / "features" / "conv.pt", seed=cfg.seed)

    def decode(self, job: Decode, cfg: LocalAttentionConfig, data: LocalAttentionData,
               out: Path) -> DiagnosisResult | VariantDecoding:
        from speechlab.ssl.wav2vec2.decode import decode_with_lm
        from speechlab.ssl.wav2vec2.diagnose import block_maps, grid_figure
        from speechlab.ssl.wav2vec2.model import load
        from speechlab.text.ngram import read_arpa
        from speechlab.train.card import write_decoding

        start = time.process_time()
        model = load(out / "models" / job.model.name)
        options = job.options
        if isinstance(options, Diagnosis):
            utts = data.spread_dev(options.utterances)
            diagnosis = block_maps(model, [u.wav for u in utts])
            grid_figure(diagnosis, out / options.figure, [u.id for u in utts])
            return DiagnosisResult.of(diagnosis, options.figure)
        assert isinstance(options, Transcription)
        decoding = decode_with_lm(model, data.tokenizer, read_arpa(data.lm_path),
                                  data.decode_sets(),
                                  data.tune_references(options.tune_utterances), options.search)
        write_decoding(out / "models" / job.model.name, lm_weight=decoding.lm_weight,
                       beam=options.search.beams[0])
        return VariantDecoding(model.encoder.config.local_blocks, decoding,
                               time.process_time() - start)

    def report(self, cfg: LocalAttentionConfig, data: LocalAttentionData,
               decoded: Mapping[Decode, object], out: Path, scale: str) -> Results:
        return local_attention_results(cfg, data, self.plan(cfg), decoded, out, scale)
