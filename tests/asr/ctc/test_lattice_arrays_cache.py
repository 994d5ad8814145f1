"""The lattice search's arrays of a cached decoding graph are kept beside it: the next process
reads them (the same arrays, to the bit) instead of printing and parsing the FST again; a file
it cannot read is made again, and a graph without a cache file is never written anywhere."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from speechlab.asr.ctc import lattice

FIELDS = ("start", "final", "e_off", "e_tok", "e_word", "e_w", "e_dst", "n_off", "n_word",
          "n_w", "n_dst")


def same(a: lattice.DecodingGraph, b: lattice.DecodingGraph) -> bool:
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        if f == "start":
            if x != y:
                return False
        elif not (x.dtype == y.dtype and np.array_equal(x, y)):
            return False
    return True


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A lean package (as shipped): T∘L∘G is built from its lexicon and LM at load, into the
    graphs cache."""
    from speechlab.inference import export
    from speechlab.testing.tiny_models import ctc_package

    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path / "cache"))
    full = ctc_package(tmp_path / "ctc")
    export(full, tmp_path / "lean", lean=True)
    return tmp_path / "lean"


def test_the_next_process_reads_the_arrays_it_kept(package, tmp_path, monkeypatch):
    import speechlab

    asr = speechlab.load(package)
    assert asr.graph.source is not None and asr.graph.source.suffix == ".fst"
    made = asr._arrays_of(asr.graph)
    kept = list((tmp_path / "cache" / "graphs").glob("*.lattice-v*.npz"))
    assert len(kept) == 1 and not list(kept[0].parent.glob(".*tmp*"))
    fresh = lattice.DecodingGraph.from_fst(asr.graph.fst)
    assert same(made, fresh)

    again = speechlab.load(package)  # as a new process would: nothing in memory

    def refuse(*_a, **_k):
        raise AssertionError("the FST was read again")

    monkeypatch.setattr(lattice.DecodingGraph, "from_fst", classmethod(refuse))
    read = again._arrays_of(again.graph)
    assert same(read, fresh)
    audio = np.random.default_rng(0).normal(0, 0.1, 32000).astype(np.float32)
    assert again.transcribe(audio, nbest=3).nbest == asr.transcribe(audio, nbest=3).nbest


def test_an_unreadable_file_is_made_again(package, tmp_path, caplog):
    import speechlab

    asr = speechlab.load(package)
    asr._arrays_of(asr.graph)
    kept, = (tmp_path / "cache" / "graphs").glob("*.lattice-v*.npz")
    good = kept.read_bytes()
    for bad in (b"not an npz", good[: len(good) // 2]):  # garbage, and a cut-off file
        kept.write_bytes(bad)
        again = speechlab.load(package)
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            read = again._arrays_of(again.graph)
        assert "unreadable" in caplog.text
        fresh = lattice.DecodingGraph.from_fst(again.graph.fst)
        assert same(read, fresh) and same(lattice.DecodingGraph.load(kept), fresh)  # kept again


def test_a_graph_without_a_cache_file_keeps_nothing(package, tmp_path):
    import speechlab

    asr = speechlab.load(package)
    before = sorted(p.name for p in (tmp_path / "cache").rglob("*"))
    made = lattice.DecodingGraph.from_fst_cached(asr.graph.fst, None)
    assert same(made, lattice.DecodingGraph.from_fst(asr.graph.fst))
    assert sorted(p.name for p in (tmp_path / "cache").rglob("*")) == before
