"""The CTC-topologies reproduction's plan: one typed model per corpus and topology, each decoded
by a job that holds it, and the tables find a decoding through its job, not its name."""

from __future__ import annotations

from speechlab.papers.topologies.recipe import ModelSpec, TopologiesConfig
from speechlab.papers.topologies.reproduce import TopologiesPaper
from speechlab.papers.topologies.tables import _decodings
from speechlab.papers.topologies.decoding import TopologyDecoding
from speechlab.experiment.jobs import DecodeJob, TrainJob


def _decoding(hyp: str) -> TopologyDecoding:
    return TopologyDecoding({"u": hyp}, 1.0, {}, {}, {}, {}, {}, 0.0)


def test_every_corpus_and_topology_is_trained_then_decoded_by_a_job_holding_it():
    cfg = TopologiesConfig(languages=("hi", "en"), topologies=("S2-T1★", "S1-T1"))
    plan = TopologiesPaper().plan(cfg)
    trains = [j for j in plan if isinstance(j, TrainJob)]
    decodes = [j for j in plan if isinstance(j, DecodeJob)]
    assert [j.spec for j in trains] == [ModelSpec("hi", "S2-T1★"), ModelSpec("hi", "S1-T1"),
                                        ModelSpec("en", "S2-T1★"), ModelSpec("en", "S1-T1")]
    assert [j.name for j in trains] == ["hi_S2-T1s", "hi_S1-T1", "en_S2-T1s", "en_S1-T1"]
    assert plan == [*trains, *decodes]  # every model before any decoding
    assert [j.model for j in decodes] == trains
    assert all(j.needs == (j.model.name,) for j in decodes)
    # only plain CTC is also decoded by prefix search
    assert [j.model.spec for j in decodes if j.options.prefix_search] == [
        ModelSpec("hi", "S1-T1"), ModelSpec("en", "S1-T1")]
    assert len(set(plan)) == len(plan)  # hashable, distinct jobs: the report's keys


def test_tables_find_each_decoding_by_its_jobs_language_and_topology():
    cfg = TopologiesConfig(languages=("en", "hi"), topologies=("S1-T1", "S3-T2★★"))
    plan = TopologiesPaper().plan(cfg)
    decodes = [j for j in plan if isinstance(j, DecodeJob)]
    decoded = {j: _decoding(f"{j.model.spec.language} {j.model.spec.topology}")
               for j in decodes[:-1]}  # the last one not decoded (yet)
    found = _decodings(plan, decoded)
    assert {k: d.hyps["u"] for k, d in found.items()} == {
        ("en", "S1-T1"): "en S1-T1", ("en", "S3-T2★★"): "en S3-T2★★", ("hi", "S1-T1"): "hi S1-T1"}
    ctc = _decodings(plan, decoded, lambda j: j.options.prefix_search)
    assert set(ctc) == {("en", "S1-T1"), ("hi", "S1-T1")}
