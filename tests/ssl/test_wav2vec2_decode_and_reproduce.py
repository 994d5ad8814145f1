"""Greedy and LM beam decoding on planted log-probs; the pre-training and fine-tuning losses;
``speechlab reproduce local-attention`` end to end at the ``ci`` scale."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from speechlab.ssl.wav2vec2.decode import LmBeamDecoder, greedy_ids
from speechlab.text.graphemes import GraphemeTokenizer
from speechlab.text.ngram import NgramConfig, estimate


def _spell(tokenizer, text: str, *, frames_per_label: int = 2, confusion: dict | None = None):
    """(T, V) log-probs whose best path spells ``text`` (a blank between labels);
    ``confusion`` maps a label id to another that gets slightly more probability."""
    ids = tokenizer.encode(text)
    V = len(tokenizer)
    rows = []
    for i in ids:
        for _ in range(frames_per_label):
            p = np.full(V, 0.01 / V)
            if confusion and i in confusion:
                p[confusion[i]], p[i] = 0.5, 0.45
            else:
                p[i] = 0.95
            rows.append(p / p.sum())
        b = np.full(V, 0.01 / V)
        b[0] = 0.99
        rows.append(b / b.sum())
    return np.log(np.array(rows))


def test_greedy_merges_repeats_and_drops_blanks():
    lp = torch.log(torch.tensor([[0.1, 0.9, 0.0 + 1e-9], [0.1, 0.9, 1e-9], [0.9, 0.1, 1e-9],
                                 [0.1, 0.9, 1e-9], [0.1, 0.1, 0.8]]))
    assert greedy_ids(lp) == [1, 1, 2]


def test_lm_beam_search_spells_words_and_the_lm_fixes_a_letter():
    tok = GraphemeTokenizer.build(["hello world word"], "en")
    lm = estimate([["hello", "world"], ["hello", "word"], ["world", "hello"]], NgramConfig(order=2))
    dec = LmBeamDecoder(lm, tok, beam=16, lm_weight=1.0)
    assert dec(_spell(tok, "hello world")) == "hello world"
    # acoustically "wOrld" is confused toward "wlrld" (no such word): the lexicon forces a word
    o, l_ = tok.encode("lo")[1], tok.encode("ol")[1]  # word-internal forms
    lp = _spell(tok, "hello world", confusion={o: l_})
    assert tok.decode(greedy_ids(lp)) != "hello world"
    assert dec(lp) == "hello world"


def test_pretraining_loss_is_finite_and_learns_a_planted_batch():
    from speechlab.ssl.wav2vec2 import build
    from speechlab.ssl.wav2vec2.pretrain import PretrainTask, PretrainTaskConfig

    torch.manual_seed(0)
    model = build("ci")
    wavs = [torch.randn(8000) for _ in range(2)]
    task = PretrainTask(wavs, wavs, PretrainTaskConfig(crop_seconds=0.5, batch_size=2,
                                                       mask_length=2, num_negatives=3))
    task.set_step(10)
    assert task.tau == pytest.approx(max(2.0 * 0.999995 ** 10, 0.5))
    loss, stats, weight = task.loss(model, wavs)
    assert math.isfinite(loss.item()) and weight > 0
    # the contrastive term of 1 + 3 candidates starts near log 4
    assert 0.5 < stats["contrastive"] < 3.0
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.slow
@pytest.mark.needs_espeak
def test_reproduce_local_attention_ci_writes_table1_and_the_diagnosis(tmp_path):
    from speechlab.cli import main
    from speechlab.report import Results
    from speechlab.testing.corpus import tiny_corpus

    corpus = tiny_corpus(tmp_path)
    out = tmp_path / "run"
    argv = ["reproduce", "local-attention", "--scale", "ci", "--corpus", str(corpus), "--out",
            str(out), "--jobs", "1"]
    assert main(argv) == 0
    res = Results.load(out)
    assert [t.name for t in res.tables] == ["table1", "diagnosis", "training"]
    t1 = res.table("table1")
    models = [r[0] for r in t1.rows if r[0]]
    assert models == ["Orig", "L_B1-12", "L_B2-12", "L_B6-11", "L_B2-5"]
    assert [r[2] for r in t1.rows[:3]] == ["None", "4", "16"]
    assert [r[1] for r in t1.rows if r[0]][:3] == ["none", "1-2", "2"]
    assert all(0 <= v for r in t1.rows for v in r[3:7])
    # Orig is the WERR baseline; every other row has its reduction and interval, recomputed
    # here from the hypothesis files the run wrote.
    assert all(r[7] is None and r[8] is None for r in t1.rows[:3])
    from speechlab.metrics import wer, werr

    def read(path):
        return dict(line.rstrip("\n").split(" ", 1) for line in path.read_text().splitlines())

    ref = read(out / "hyps" / "ref.txt")
    ids = sorted(ref)
    for row, beam in zip(t1.rows[3:6], ["viterbi", "beam4", "beam16"]):
        base = read(out / "hyps" / f"Orig_{beam}.txt")
        hyp = read(out / "hyps" / f"L_B1-12_{beam}.txt")
        b, h = (wer([ref[i] for i in ids], [x[i] for i in ids]) for x in (base, hyp))
        if b.wer > 0:
            assert row[7] == pytest.approx(werr(b.wer, h.wer))
            low, high = (float(v) for v in row[8].strip("[]").split(","))
            assert low - 0.05 <= row[7] <= high + 0.05  # the interval is printed to 0.1
    assert (out / "diagnosis_fig2.png").is_file()
    # Exported, loaded from the package alone, Orig gives the run's Viterbi (greedy) hypotheses.
    from speechlab.testing.packages import package_decodes_as_run

    assert package_decodes_as_run(out / "models" / "Orig", tmp_path / "pkg",
                                  corpus / "test_cuts.jsonl.gz",
                                  out / "hyps" / "Orig_viterbi.txt") >= 1
    # a rerun trains nothing again
    ckpt = out / "models" / "Orig" / "best.pt"
    before = ckpt.stat().st_mtime_ns
    assert main(argv) == 0
    assert ckpt.stat().st_mtime_ns == before


def test_reproduce_local_attention_runs_with_the_fbank_front_end(tmp_path):
    from speechlab.cli import main
    from speechlab.ssl.wav2vec2.model import load
    from speechlab.report import Results
    from speechlab.testing.corpus import tiny_corpus

    corpus = tiny_corpus(tmp_path)
    out = tmp_path / "run"
    argv = ["reproduce", "local-attention", "--scale", "ci", "--corpus", str(corpus), "--out",
            str(out), "--jobs", "1", "--set", "front_end=fbank", "beam_prune_logp=-10",
            "token_min_logp=-5"]
    assert main(argv) == 0
    assert load(out / "models" / "L_B2-5").encoder.config.front_end == "fbank"
    # the fine-tunes share the fbank frames: 160 channels at 20 ms
    assert torch.load(out / "features" / "conv.pt")["train"][0].shape[1] == 160
    assert "log-mel fbank front end" in Results.load(out).notes


@pytest.mark.parametrize("change", [{"front_end": "mfcc"}, {"beam_prune_logp": 1.0},
                                    {"token_min_logp": 0.5}])
def test_local_attention_config_refuses_bad_front_end_and_pruning(change):
    from speechlab.errors import ConfigError
    from speechlab.papers.local_attention.recipe import LocalAttentionConfig

    with pytest.raises(ConfigError):
        LocalAttentionConfig(**change)


class _PlantedModel:
    """A stand-in CTC model: waveform ``[k, ...]`` -> the planted (T, V) log-probs number k."""

    def __init__(self, planted):
        self.planted = planted

    def __call__(self, x):
        return torch.as_tensor(self.planted[int(x[0, 0])])[None], None


def test_decode_with_lm_tunes_the_weight_on_dev_at_the_first_beam_and_uses_it_everywhere():
    from dataclasses import dataclass

    from speechlab.ssl.wav2vec2.decode import LmSearchConfig, decode_with_lm

    tok = GraphemeTokenizer.build(["hello world word"], "en")
    calls = []

    @dataclass(frozen=True)
    class Planted(LmSearchConfig):
        # only the weight 0.6 finds the right last word, at any beam
        def decoder(self, lm, tokenizer, beam, lm_weight):
            calls.append((beam, lm_weight))
            return lambda lp: "hello world" if lm_weight == 0.6 else "hello word"

    model = _PlantedModel([_spell(tok, "hello world"), _spell(tok, "hello word")])
    sets = {"dev": {"d0": torch.tensor([0.0]), "d1": torch.tensor([1.0])},
            "test": {"t0": torch.tensor([1.0])}}
    search = Planted(beams=(4, 9), lm_weights=(0.3, 0.6, 1.0))
    out = decode_with_lm(model, tok, None, sets, {"d0": "hello world"}, search)
    assert out.lm_weight == 0.6
    assert out.dev_wer == {0.3: 0.5, 0.6: 0.0, 1.0: 0.5}
    # tuning decodes at the first beam only; then every beam at the chosen weight
    assert calls == [(4, 0.3), (4, 0.6), (4, 1.0), (4, 0.6), (9, 0.6)]
    assert list(out.hyps) == [None, 4, 9]
    assert out.hyps[None] == {"dev": {"d0": "hello world", "d1": "hello word"},
                              "test": {"t0": "hello word"}}
    assert out.hyps[9] == {"dev": {"d0": "hello world", "d1": "hello world"},
                           "test": {"t0": "hello world"}}


def test_decode_with_lm_refuses_tuning_references_of_utterances_it_does_not_decode():
    from speechlab.errors import DataError
    from speechlab.ssl.wav2vec2.decode import LmSearchConfig, decode_with_lm

    tok = GraphemeTokenizer.build(["hello"], "en")
    model = _PlantedModel([_spell(tok, "hello")])
    with pytest.raises(DataError, match=r"\['nope'\] are not in the 'dev' set"):
        decode_with_lm(model, tok, None, {"dev": {"d0": torch.tensor([0.0])}}, {"nope": "hello"},
                       LmSearchConfig())


def test_the_lm_search_needs_a_beam_and_a_weight():
    from speechlab.errors import ConfigError
    from speechlab.ssl.wav2vec2.decode import LmSearchConfig

    with pytest.raises(ConfigError, match="lm_weights: give at least one value"):
        LmSearchConfig(lm_weights=())
