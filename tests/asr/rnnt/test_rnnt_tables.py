"""The multi-softmax reproduction's own tables on planted decodings: Table 5 (LID accuracy by
script and by the LID head) and Table 7 (the early-stopping grid)."""

from __future__ import annotations

import math
from dataclasses import dataclass


from speechlab.papers.multisoftmax.decoding import LidFreeRun
from speechlab.papers.multisoftmax.recipe import MultiSoftmaxConfig
from speechlab.papers.multisoftmax.tables import early_stop_grid, lid_table
from speechlab.experiment.scoring import score


@dataclass(frozen=True)
class U:
    id: str
    language: str
    text: str
    num_frames: int = 100


TEST = [U("en1", "en", "the cat"), U("en2", "en", "a dog"),
        U("hi1", "hi", "नमस्ते दुनिया"), U("hi2", "hi", "एक दो")]


def _run(hyps, picked, t_avg=2.0, cpu=1.0, picked_log=None):
    s = score(TEST, hyps, cpu)
    return LidFreeRun(s, s, picked, {u.id: u.language for u in TEST}, t_avg, cpu, 4.0,
                      picked if picked_log is None else picked_log)


def test_table5_counts_script_matches_and_head_choices():
    # Vanilla writes en2 in Devanagari (wrong script) and nothing for hi2 (no script: wrong).
    vanilla = score(TEST, {"en1": "the cat", "en2": "दो", "hi1": "नमस्ते", "hi2": ""})
    # MS LID's hypotheses all in the right script, but its head picked "en" for hi1.
    # Its summed log-posteriors picked "hi" for en2 instead.
    lid = _run({"en1": "the", "en2": "dog", "hi1": "दुनिया", "hi2": "एक"},
               {"en1": "en", "en2": "en", "hi1": "en", "hi2": "hi"},
               picked_log={"en1": "en", "en2": "hi", "hi1": "hi", "hi2": "hi"})
    t = lid_table(vanilla, lid, TEST, ["en", "hi", "ta"])
    assert t.columns == ["System", "En-IN", "Hi-IN", "Ta-IN", "Avg."]
    assert t.rows == [["Multilingual Vanilla (script)", 50.0, 50.0, None, 50.0],
                      ["Multi-softmax LID (script)", 100.0, 100.0, None, 100.0],
                      ["Multi-softmax LID (LID head)", 100.0, 50.0, None, 75.0],
                      ["Multi-softmax LID (LID head, summed log-posteriors)", 50.0, 100.0, None, 75.0]]


def test_table7_rows_follow_the_grid(tmp_path):
    cfg = MultiSoftmaxConfig(early_stop_grid=((math.inf, math.inf), (10, 0.2)), grid_language="hi")
    right = {"en1": "the cat", "en2": "a dog", "hi1": "नमस्ते दुनिया", "hi2": "एक दो"}
    runs = [_run(right, {u.id: u.language for u in TEST}, t_avg=2.0, cpu=2.0),
            _run({**right, "hi2": ""}, {**{u.id: u.language for u in TEST}, "hi2": "en"},
                 t_avg=1.25, cpu=0.8)]
    table, fig = early_stop_grid(cfg, runs, tmp_path)
    assert [r[:2] for r in table.rows] == [["inf", "inf"], ["10", "0.2"]]
    # WER: 0, then 2 of 8 words; T_avg as given; CPU ms per utterance; RTF over 4 s of audio;
    # LID accuracy: all right, then 3 of 4
    assert table.rows[0][2:] == [0.0, 2.0, 500.0, 0.5, 100.0]
    assert table.rows[1][2:] == [25.0, 1.25, 200.0, 0.2, 75.0]
    assert (tmp_path / fig.path).is_file()
    # the caption says what else shared the CPU while decoding
    runs[0].load, runs[1].load = 0.5, 1.75
    assert "load average 0.50-1.75 on" in early_stop_grid(cfg, runs, tmp_path)[0].caption
    runs[0].load = runs[1].load = None  # decoded before the load was recorded
    assert "load was not recorded" in early_stop_grid(cfg, runs, tmp_path)[0].caption
