"""The local-attention reproduction's recipe and plan: typed jobs, the variants' blocks (given
or found by the diagnosis), and Table 1's WERR baseline picked by its spec, not its name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from speechlab.errors import ConfigError
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.ssl.wav2vec2.decode import LmDecoding
from speechlab.ssl.wav2vec2.diagnose import BlockDiagnosis
from speechlab.papers.local_attention.recipe import (
    Diagnosis,
    FineTuning,
    LocalAttentionConfig,
    LocalAttentionData,
    Pretraining,
    Transcription,
    VariantDecoding,
    fine_tuning,
)
from speechlab.papers.local_attention.reproduce import LocalAttentionPaper
from speechlab.papers.local_attention.tables import table1
from speechlab.ssl.wav2vec2.training import Utterance


def _cfg(**variants) -> LocalAttentionConfig:
    return LocalAttentionConfig(model="ci", variants=variants, dev_utterances=3,
                                diagnosis_utterances=2, beams=(4, 16), lm_weights=(0.5,))


def test_the_plan_fine_tunes_every_variant_from_the_one_pretrained_model():
    cfg = _cfg(Orig="", **{"L_B2-12": "2", "L_B6-11": "diagnosis:vertical|1-2"})
    plan = LocalAttentionPaper().plan(cfg)
    trains = [j for j in plan if isinstance(j, TrainJob)]
    pretrained = trains[0]
    assert isinstance(pretrained.spec, Pretraining) and pretrained.init_from is None
    assert pretrained.spec.model.layers == 2 and pretrained.spec.model.radius == cfg.radius
    assert [(j.name, j.spec, j.init_from) for j in trains[1:]] == [
        ("Orig", FineTuning(), pretrained), ("L_B2-12", FineTuning((2,)), pretrained),
        ("L_B6-11", FineTuning((1, 2), "vertical"), pretrained)]
    decodes = [j for j in plan if isinstance(j, DecodeJob)]
    # the diagnosis is told apart by its options, and reads the pre-trained model
    diagnosis = [j for j in decodes if isinstance(j.options, Diagnosis)]
    assert [(j.model, j.options.utterances) for j in diagnosis] == [(pretrained, 2)]
    tables = [j for j in decodes if isinstance(j.options, Transcription)]
    assert [j.model for j in tables] == trains[1:]
    assert {(j.options.search.beams, j.options.tune_utterances) for j in tables} == {((4, 16), 3)}
    # a second plan is equal job for job: the report finds each decoding by its job
    assert LocalAttentionPaper().plan(cfg) == plan


def test_variant_specs_parse_and_refuse_what_they_cannot_read():
    assert fine_tuning("", 12) == FineTuning()
    assert fine_tuning("6-11,12", 12) == FineTuning((6, 7, 8, 9, 10, 11, 12))
    assert fine_tuning("diagnosis:diagonal|2-5", 12) == FineTuning((2, 3, 4, 5), "diagonal")
    with pytest.raises(ConfigError, match="variant 'X': 'diagnosis:sideways|2': after "
                                          "'diagnosis:' write vertical or diagonal"):
        fine_tuning("diagnosis:sideways|2", 12, name="X")
    with pytest.raises(ConfigError, match=r"variant 'X': block list '2-13': block\(s\) 13"):
        fine_tuning("diagnosis:vertical|2-13", 12, name="X")


def _diagnosis(labels: dict[int, str]) -> list[BlockDiagnosis]:
    return [BlockDiagnosis(b, [], [label], []) for b, label in labels.items()]


def test_a_diagnosed_variant_takes_the_blocks_found_of_its_kind_else_its_own():
    found = _diagnosis({1: "diagonal", 2: "vertical", 3: "vertical+diagonal", 4: "heterogeneous"})
    assert FineTuning((5,), "vertical").local_blocks(found) == (2, 3)
    assert FineTuning((5,), "diagonal").local_blocks(found) == (1,)
    assert FineTuning((5,), "diagonal").local_blocks(_diagnosis({1: "vertical"})) == (5,)
    assert FineTuning((5,)).local_blocks(found) == (5,)  # not diagnosed: its own list
    assert FineTuning().original and not FineTuning((), "vertical").original


def _utt(uid: str, text: str) -> Utterance:
    return Utterance(uid, torch.zeros(1), text, None)


def test_table1_compares_with_the_full_attention_model_whatever_its_name_or_place(tmp_path):
    cfg = _cfg(**{"L_B1-12": "1-2", "Baseline": ""})
    plan = LocalAttentionPaper().plan(cfg)
    jobs = {j.name: j for j in plan if isinstance(j, DecodeJob)
            and isinstance(j.options, Transcription)}
    data = LocalAttentionData(None, [], [_utt("d", "a b")], [_utt("t", "a b c d")],
                              Path("unused"), {})

    def decoding(test_hyp: str) -> LmDecoding:
        return LmDecoding({None: {"dev": {"d": "a b"}, "test": {"t": test_hyp}}}, 0.5, {})

    variants = [(jobs["L_B1-12"], VariantDecoding((1, 2), decoding("a b c d"), 0.0)),
                (jobs["Baseline"], VariantDecoding((), decoding("a b c x"), 0.0))]
    rows = table1(data, variants, tmp_path).rows
    assert [r[:3] for r in rows] == [["L_B1-12", "1-2", "None"], ["Baseline", "none", "None"]]
    assert rows[0][5] == 0.0 and rows[1][5] == pytest.approx(25.0)
    assert rows[0][7] == pytest.approx(100.0)  # (25 - 0) / 25
    assert rows[1][7:] == [None, None]  # the baseline has no reduction against itself
    assert (tmp_path / "hyps" / "Baseline_viterbi.txt").read_text() == "t a b c x\n"
