"""The CTC task for the shared trainer: the loss is the mean graph loss of the feasible
utterances, infeasible ones are counted and left out, and training lowers the dev loss."""

from __future__ import annotations

import pytest
import torch

from speechlab.asr.ctc.loss import graph_loss
from speechlab.asr.ctc.model import build, preset
from speechlab.asr.ctc.task import CtcTask, CtcTaskConfig
from speechlab.asr.data import Utterance, collate
from speechlab.train import OptimConfig, Trainer, TrainConfig
from speechlab.train.log import read_log


def _utts(n=12, frames=(48, 80), phones=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        T = int(torch.randint(frames[0], frames[1], (1,), generator=g))
        toks = tuple(int(t) for t in torch.randint(1, phones + 1, (4,), generator=g))
        # a learnable cue: the features carry the first phone
        x = torch.randn(T, 20, generator=g) * 0.1
        x[:, toks[0]] += 1.0
        out.append(Utterance(f"u{i}", "en", x, "x", toks))
    return out


def test_loss_is_the_mean_over_feasible_utterances_and_counts_the_rest():
    topo = "S2-T2"  # two frames per phone: 4 phones need 8 output frames = about 36 input frames
    utts = _utts(4) + [Utterance("short", "en", torch.zeros(12, 20), "x", (1, 2, 3, 1))]
    model = build(preset("tiny", num_tokens=1 + 3 * 2, feature_dim=20)).eval()
    task = CtcTask(topo, utts, utts, CtcTaskConfig(spec_augment=False))
    batch = collate(utts)
    loss, stats, weight = task.loss(model, batch)
    lp, lens = model(batch.x, batch.x_lens)
    direct = graph_loss(lp, lens, batch.targets, batch.target_lens, topology=topo)
    assert torch.isinf(direct[-1]) and torch.isfinite(direct[:-1]).all()
    assert float(loss.detach()) == pytest.approx(float(direct[:-1].detach().mean()), rel=1e-5)
    assert stats == {"infeasible": 1.0} and weight == 4.0
    with torch.no_grad():
        m = task.validate(model)
    assert m["infeasible"] == pytest.approx(1 / 5)
    assert m["loss"] == pytest.approx(float(direct[:-1].detach().mean()), rel=1e-5)


def test_training_lowers_the_dev_loss(tmp_path):
    utts = _utts(16)
    torch.manual_seed(0)
    model = build(preset("tiny", num_tokens=1 + 3, feature_dim=20))
    task = CtcTask("S1-T1", utts, utts[:6], CtcTaskConfig(max_utterances=8, spec_augment=False))
    cfg = TrainConfig(max_steps=40, valid_every=20, log_every=10, checkpoint_every=40,
                      progress=False, optim=OptimConfig(lr=0.01))
    Trainer(model, task, cfg, tmp_path).fit()
    valid = [r["loss"] for r in read_log(tmp_path / "log.jsonl") if r["kind"] == "valid"]
    with torch.no_grad():
        before = CtcTask("S1-T1", utts, utts[:6], CtcTaskConfig()).validate(
            build(preset("tiny", num_tokens=1 + 3, feature_dim=20)).eval())["loss"]
    assert valid[-1] < 0.8 * before


def test_lexicon_numerators_give_the_phone_loss_when_words_have_one_pronunciation():
    from speechlab.asr.ctc.phones import PhoneTokenizer
    from speechlab.asr.ctc.training import lexicon_graphs
    from speechlab.errors import ConfigError
    from speechlab.text.lexicon import Lexicon

    # Words "a", "b", "c" are the phones 1, 2, 3: a transcript spells its targets.
    tok = PhoneTokenizer(Lexicon({"a": [["A"]], "b": [["B"]], "c": [["C"]]}), "en",
                         phones=["A", "B", "C"])
    utts = [Utterance(u.id, "en", u.feats, " ".join("abc"[t - 1] for t in u.tokens), u.tokens)
            for u in _utts(4)]
    model = build(preset("tiny", num_tokens=1 + 3 * 2, feature_dim=20)).eval()
    phones = CtcTask("S2-T2", utts, utts, CtcTaskConfig(spec_augment=False))
    words = CtcTask("S2-T2", utts, utts, CtcTaskConfig(spec_augment=False, numerator="lexicon"),
                    lexicon_graph=lexicon_graphs("S2-T2", tok))
    batch = collate(utts)
    with torch.no_grad():
        assert float(words.loss(model, batch)[0]) == pytest.approx(
            float(phones.loss(model, batch)[0]), rel=1e-6)
    with pytest.raises(ConfigError, match="needs a lexicon graph"):
        CtcTask("S2-T2", utts, utts, CtcTaskConfig(numerator="lexicon"))
