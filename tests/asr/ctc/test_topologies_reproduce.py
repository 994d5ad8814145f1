"""`speechlab reproduce topologies` end to end at the `ci` scale on the tiny embedded corpus:
every topology trained with the graph loss, decoded over T∘L∘G, its lattices measured, and
Tables 1-4 written; the table cells are the hypotheses and lattices they summarise."""

from __future__ import annotations

import pytest

from speechlab.cli import main
from speechlab.report import Results
from speechlab.testing.corpus import tiny_corpus

pytestmark = [pytest.mark.slow, pytest.mark.needs_espeak]


def test_reproduce_topologies_writes_tables_1_to_4(tmp_path):
    from speechlab.metrics import wer

    corpus = tiny_corpus(tmp_path)
    out = tmp_path / "run"
    assert main(["reproduce", "topologies", "--scale", "ci", "--corpus", str(corpus), "--out",
                 str(out), "--jobs", "2"]) == 0
    res = Results.load(out)
    assert [t.name for t in res.tables] == ["table1", "unseen", "table2", "table3", "table4",
                                            "fullsum", "fullsum_ctc", "training"]
    t1 = res.table("table1")
    # In-domain and unseen-voice WER side by side: the test column is Table 1's, the unseen
    # one the WER of the unseen-voice hypotheses the run wrote.
    unseen = res.table("unseen")
    assert [r[0] for r in unseen.rows] == [r[0] for r in t1.rows]
    assert [r[1] for r in unseen.rows] == [r[1] for r in t1.rows]
    u_refs = dict(l.split(" ", 1) for l in
                  (out / "hyps" / "en-unseen" / "ref.txt").read_text().splitlines())
    u_hyps = dict((l.split(" ", 1) + [""])[:2] for l in
                  (out / "hyps" / "en-unseen" / "en_S1-T1.txt").read_text().splitlines())
    assert u_refs and all(u.startswith("en-unseen-") for u in u_refs)
    assert unseen.rows[0][2] == pytest.approx(100 * wer(list(u_refs.values()),
                                                        [u_hyps[u] for u in u_refs]).wer)
    assert [r[0] for r in t1.rows] == ["S1-T1", "S2-T1", "S2-T1★", "S2-T2★", "S2-T2", "S3-T2",
                                       "S3-T2★", "S3-T2★★"]
    # Table 1's S1-T1 English cell is the WER of the hypotheses it wrote.
    refs = dict(l.split(" ", 1) for l in (out / "hyps" / "en" / "ref.txt").read_text().splitlines())
    hyps = dict((l.split(" ", 1) + [""])[:2]
                for l in (out / "hyps" / "en" / "en_S1-T1.txt").read_text().splitlines())
    assert t1.rows[0][1] == pytest.approx(100 * wer(list(refs.values()),
                                                    [hyps[u] for u in refs]).wer)
    # Exported with its decoding graph, LM and tuned acoustic weight, loaded from the package
    # alone, a model gives the run's Viterbi hypotheses.
    from speechlab.testing.packages import package_decodes_as_run

    for name in ("en_S1-T1", "en_S3-T2s"):
        assert package_decodes_as_run(out / "models" / name, tmp_path / f"pkg-{name}",
                                      corpus / "test_cuts.jsonl.gz",
                                      out / "hyps" / "en" / f"{name}.txt") >= 1
    # BPP and BHP are proportions; Table 3 is a share of utterances.
    for row in res.table("table2").rows + res.table("table3").rows:
        assert all(v is None or 0 <= v <= 100 for v in row[1:]), row
    assert {f.path for f in res.figures} <= {"bpp_histogram.png", "bhp_histogram.png"}
    assert res.scale == "ci"
    # S1-T1 decoded three ways: the Viterbi row repeats Table 1; the prefix searches are WERs
    # with an agreement share beside them.
    ctc = res.table("fullsum_ctc")
    assert [r[0].split(",")[0] for r in ctc.rows] == ["Viterbi", "prefix search", "prefix search"]
    assert ctc.rows[0][1] == pytest.approx(t1.rows[0][1]) and ctc.rows[0][2] == 100
    for row in ctc.rows[1:]:
        assert row[1] is not None and 0 <= row[2] <= 100
