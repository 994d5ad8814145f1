"""The RNN-T training task: utterance loading with counted skips, batching, fine-tuning maps."""

from __future__ import annotations

import itertools

import pytest
import torch
from lhotse import CutSet

from speechlab.asr.rnnt import build
from speechlab.asr.rnnt.training import monolingual_key_map
from speechlab.nn.ctc import ctc_loss
from speechlab.asr.data import Utterance, load_utterances
from speechlab.asr.rnnt.loss import rnnt_loss
from speechlab.asr.rnnt.task import RNNTTask, TaskConfig, collate_rnnt
from speechlab.metrics.lid import utterance_lid_accuracy
from speechlab.audio.features import compute_features
from speechlab.errors import ConfigError
from speechlab.testing.audio import tone_cut
from speechlab.text.graphemes import GraphemeTokenizer
from speechlab.train import load_model_weights, save_checkpoint


def _cuts(tmp_path):
    spec = [
        ("ok_en", "the cat", "en", 0.5),
        ("ok_hi", "नमस्ते दुनिया", "hi", 0.5),
        ("empty", "  ", "en", 0.5),
        ("unknown_lang", "bonjour", "fr", 0.5),
        ("oov", "the dog", "en", 0.5),  # 'd', 'o', 'g' are not in the English inventory below
        ("short", "the", "en", 0.01),
    ]
    cuts = [tone_cut(tmp_path / f"{i}.wav", duration=d, text=t, language=lang, cut_id=i, seed=k)
            for k, (i, t, lang, d) in enumerate(spec)]
    return compute_features(CutSet.from_cuts(cuts), tmp_path / "fbank", progress=False)


def test_load_utterances_counts_every_bad_case(tmp_path):
    toks = {"en": GraphemeTokenizer.build(["the cat"], "en"),
            "hi": GraphemeTokenizer.build(["नमस्ते दुनिया"], "hi")}
    utts, skipped = load_utterances(_cuts(tmp_path), toks, None, min_frames=3)
    ids = {u.id: u for u in utts}
    assert set(ids) == {"ok_en", "ok_hi", "oov"}
    assert ids["oov"].tokens is None  # scored on text, never trained on
    assert ids["ok_en"].tokens == tuple(toks["en"].encode("the cat"))
    assert skipped.counts["empty transcript"] == 1
    assert skipped.counts["language 'fr' has no head"] == 1
    assert skipped.counts["symbol outside the en inventory"] == 1
    assert skipped.counts["too short for one encoder frame"] == 1


def _utts(sizes, n=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    langs = list(sizes)
    for i in range(n):
        lang = langs[i % len(langs)]
        T = 30 + int(torch.randint(0, 30, (1,), generator=g))
        toks = torch.randint(1, sizes[lang], (5,), generator=g).tolist()
        out.append(Utterance(f"u{i}", lang, torch.randn(T, 80, generator=g), "x", tuple(toks)))
    return out


def test_batches_are_language_homogeneous_and_union_mapped():
    sizes = {"en": 7, "hi": 5}
    model = build("vanilla", sizes, "ci")
    task = RNNTTask(model, _utts(sizes), [], TaskConfig(max_frames=200, spec_augment=False))
    it = task.batches()
    for _ in range(10):
        b = next(it)
        langs = {task.train[int(i[1:])].language for i in b.ids}
        assert langs == {b.language}
        # union ids: Hindi's local ids are shifted past English's 6 non-blank symbols
        real = b.targets[torch.arange(b.targets.shape[1])[None] < b.target_lens[:, None]]
        if b.language == "hi":
            assert int(real.min()) >= 7
        else:
            assert int(real.max()) <= 6


def test_loss_is_the_rnnt_loss_plus_the_lid_cross_entropy():
    sizes = {"en": 7, "hi": 5}
    utts = _utts(sizes)
    for variant in ("multisoftmax", "multisoftmax_lid"):
        model = build(variant, sizes, "ci")
        task = RNNTTask(model, utts, utts[:4], TaskConfig(max_frames=200))
        batch = next(task.batches())
        loss, stats, weight = task.loss(model, batch)
        assert weight == len(batch.ids)
        assert ("lid_ce" in stats) == (variant == "multisoftmax_lid")
        # the loss is the batch-mean RNN-T loss (checked directly) plus the LID cross-entropy
        model.eval()  # no dropout, so the direct computation sees the same model
        assert float(loss.detach()) == pytest.approx(stats["rnnt"] + stats.get("lid_ce", 0.0), rel=1e-5)
        with torch.no_grad():
            out = model(batch.x, batch.x_lens, batch.targets, batch.target_lens, batch.language)
            direct = rnnt_loss(out.logits, batch.targets, out.enc_lens, batch.target_lens)
        task.spec_augment = None
        assert task.loss(model, batch)[1]["rnnt"] == pytest.approx(float(direct), rel=1e-5)


def test_balanced_lid_term_weighs_each_language_by_its_inverse_share():
    sizes = {"en": 7, "hi": 5}
    # three English utterances for every Hindi one (by frames, about)
    utts = [u for i, u in enumerate(_utts(sizes, n=32)) if u.language == "en" or i % 6 == 1]
    model = build("multisoftmax_lid", sizes, "ci").eval()
    plain = RNNTTask(model, utts, [], TaskConfig(max_frames=200, spec_augment=False))
    balanced = RNNTTask(model, utts, [], TaskConfig(max_frames=200, spec_augment=False,
                                                    lid_balance=True))
    frames = {lang: sum(u.num_frames for u in utts if u.language == lang) for lang in sizes}
    total = sum(frames.values())
    assert balanced.lid_weights == pytest.approx({l: total / (2 * n) for l, n in frames.items()})
    assert balanced.lid_weights["hi"] > 2 * balanced.lid_weights["en"]
    assert set(plain.lid_weights.values()) == {1.0}
    for batch in itertools.islice(balanced.batches(), 6):  # batches() never ends
        loss_b, stats, _ = balanced.loss(model, batch)
        loss_p, _, _ = plain.loss(model, batch)
        w = balanced.lid_weights[batch.language]
        assert float(loss_b.detach()) == pytest.approx(stats["rnnt"] + w * stats["lid_ce"], rel=1e-5)
        assert float((loss_b - loss_p).detach()) == pytest.approx((w - 1) * stats["lid_ce"], rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.0])
def test_languages_are_drawn_by_hours_to_the_power_alpha(alpha):
    sizes = {"en": 7, "hi": 5}
    utts = [u for i, u in enumerate(_utts(sizes, n=64)) if u.language == "en" or i % 6 == 1]
    model = build("multisoftmax_lid", sizes, "ci").eval()
    task = RNNTTask(model, utts, [], TaskConfig(max_frames=200, spec_augment=False,
                                                language_alpha=alpha, lid_balance=True))
    frames = {lang: sum(u.num_frames for u in utts if u.language == lang) for lang in sizes}
    mass = {lang: n ** alpha for lang, n in frames.items()}
    expected = {lang: m / sum(mass.values()) for lang, m in mass.items()}
    assert task.sampling == pytest.approx(expected)
    # the balance undoes exactly the sampling: every language's expected LID weight is 1/L
    assert {l: task.sampling[l] * task.lid_weights[l] for l in sizes} == pytest.approx(
        {"en": 0.5, "hi": 0.5})
    assert {b.language for b in itertools.islice(task.batches(), 20)} == {"en", "hi"}
    sampler = task.batches().source  # the draws the batches follow, without collating
    drawn = [sampler.language_at(i) for i in range(20000)]
    assert drawn.count("hi") / len(drawn) == pytest.approx(expected["hi"], abs=0.015)
    if alpha == 0.0:
        assert task.lid_weights == pytest.approx({"en": 1.0, "hi": 1.0})


def test_language_alpha_outside_zero_one_is_refused():
    with pytest.raises(ConfigError, match="language_alpha"):
        TaskConfig(language_alpha=1.5)


def test_a_group_of_batches_is_one_update_averaged_over_its_utterances():
    sizes = {"en": 7, "hi": 5}
    utts = _utts(sizes, n=40)
    model = build("multisoftmax_lid", sizes, "ci")
    cfg = TaskConfig(max_frames=120, batches_per_update=3, spec_augment=False)
    task = RNNTTask(model, utts, [], cfg)
    group = next(task.batches())
    assert len(group.batches) == 3 and group.ids == [i for b in group.batches for i in b.ids]
    for b in group.batches:  # each batch keeps one language
        assert {task.train[int(i[1:])].language for i in b.ids} == {b.language}
    torch.manual_seed(0)
    loss, stats, weight = task.loss(model, group)
    assert weight == len(group.ids)
    # the same as the utterance-weighted mean of the batches' own losses
    single = RNNTTask(model, utts, [], TaskConfig(max_frames=120, spec_augment=False))
    parts = [(single.loss(model, b), len(b.ids)) for b in group.batches]
    expected = sum(l * n for (l, _, _), n in parts) / weight
    torch.testing.assert_close(loss, expected)
    assert stats["lid_ce"] == pytest.approx(sum(s["lid_ce"] * n for (_, s, _), n in parts) / weight)
    with pytest.raises(ConfigError, match="batches_per_update"):
        TaskConfig(batches_per_update=0)


def test_validate_reports_each_language_and_lid_accuracy():
    sizes = {"en": 7, "hi": 5}
    utts = _utts(sizes, n=10)  # 5 en, 5 hi
    model = build("multisoftmax_lid", sizes, "ci").eval()
    task = RNNTTask(model, utts, utts, TaskConfig(max_frames=200, valid_utterances=3))
    with torch.no_grad():
        m = task.validate(model)
    assert set(m) == {"loss", "loss_en", "loss_hi", "lid_acc", "lid_acc_en", "lid_acc_hi"}
    # three utterances of each language: the overall loss is the plain mean of the two
    assert m["loss"] == pytest.approx((m["loss_en"] + m["loss_hi"]) / 2)
    # each language's loss is the mean per-utterance RNN-T loss of its first three utterances
    hi = [u for u in utts if u.language == "hi"][:3]
    b = collate_rnnt(hi, "hi", None)
    with torch.no_grad():
        out = model(b.x, b.x_lens, b.targets, b.target_lens, "hi")
        direct = rnnt_loss(out.logits, b.targets, out.enc_lens, b.target_lens, reduction="none")
    assert m["loss_hi"] == pytest.approx(float(direct.mean()), rel=1e-5)
    # A LID head planted to say "hi" for every frame is right on every Hindi utterance and on
    # no English one: accuracy 1 and 0, and their mean; planted to say "en", the other way.
    with torch.no_grad():
        model.lid_head.weight.zero_()
        model.lid_head.bias.copy_(torch.tensor([0.0, 10.0]))
        says_hi = task.validate(model)
        model.lid_head.bias.copy_(torch.tensor([10.0, 0.0]))
        says_en = task.validate(model)
    assert (says_hi["lid_acc_hi"], says_hi["lid_acc_en"]) == (1.0, 0.0)
    assert (says_en["lid_acc_hi"], says_en["lid_acc_en"]) == (0.0, 1.0)
    assert says_hi["lid_acc"] == says_en["lid_acc"] == pytest.approx(0.5)
    # Three Hindi utterances of five held in dev: the head saying "hi" is right on those three
    # only; as a share of all dev utterances it would be 3/6, per language it is 1 and 0.
    task3 = RNNTTask(model, utts, [u for u in utts if u.language == "hi"][:3] +
                     [u for u in utts if u.language == "en"][:1], TaskConfig(max_frames=200))
    with torch.no_grad():
        model.lid_head.bias.copy_(torch.tensor([0.0, 10.0]))
        m3 = task3.validate(model)
    assert (m3["lid_acc_hi"], m3["lid_acc_en"], m3["lid_acc"]) == (1.0, 0.0, 0.5)
    mono = build("mono", {"en": 7}, "ci").eval()
    with torch.no_grad():
        assert set(RNNTTask(mono, utts, utts, TaskConfig()).validate(mono)) == {"loss"}


def test_lid_utterance_accuracy_averages_posteriors_over_real_frames():
    logits = torch.zeros(3, 4, 2)
    logits[0, :, 1] = 5.0              # utterance 0: language 1 on every frame
    logits[1, :2, 0] = 5.0             # utterance 1: language 0 on its 2 real frames...
    logits[1, 2:, 1] = 50.0            # ...and language 1 on padding, which must not count
    logits[2, 0, 0], logits[2, 1:3, 1] = 9.0, 1.0  # utterance 2: one confident frame for 0
    lens = torch.tensor([4, 2, 3])
    assert utterance_lid_accuracy(logits, lens, torch.tensor([1, 0, 0])) == pytest.approx(1.0)
    assert utterance_lid_accuracy(logits, lens, torch.tensor([0, 0, 1])) == pytest.approx(1 / 3)


def test_auxiliary_ctc_trains_encoder_and_own_head_only():
    sizes = {"en": 7, "hi": 5}
    utts = _utts(sizes)
    model = build("multisoftmax", sizes, "ci")
    n_params = sum(p.numel() for p in model.parameters())
    task = RNNTTask(model, utts, [], TaskConfig(max_frames=200, spec_augment=False, ctc_weight=0.5))
    batch = next(task.batches())
    # the CTC term alone: its gradient reaches the encoder, the joint's encoder projection and
    # the batch language's output layer, nothing of the prediction network or other languages
    out = model(batch.x, batch.x_lens, batch.targets, batch.target_lens, batch.language, ctc=True)
    ctc = ctc_loss(out.ctc_logits, out.enc_lens, batch.targets, batch.target_lens)
    ctc.backward()
    head = model.routes[batch.language].head
    got = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert any(n.startswith("encoder.") for n in got)
    assert f"joiner.outputs.{head}.weight" in got and "joiner.enc_proj.weight" in got
    assert not any(n.startswith("predictor.") or n.startswith("joiner.pred_proj") for n in got)
    assert not any(n.startswith(f"joiner.outputs.{1 - head}.") for n in got)
    # the task adds it to the RNN-T loss with its weight, and the model has no extra parameters
    model.zero_grad()
    loss, stats, _ = task.loss(model, batch)
    assert loss.item() == pytest.approx(stats["rnnt"] + 0.5 * stats["ctc"], rel=1e-4)
    assert sum(p.numel() for p in model.parameters()) == n_params


def test_ctc_loss_matches_torch_and_ignores_infeasible_rows():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 6, 5, generator=g)
    targets = torch.tensor([[1, 2, 0], [3, 3, 3], [4, 0, 0]])
    lens, t_lens = torch.tensor([6, 4, 5]), torch.tensor([2, 3, 1])
    got = ctc_loss(logits, lens, targets, t_lens)
    # row 1 needs 5 frames for "3 3 3" (blanks between repeats) but has 4: it contributes 0
    ref = torch.nn.functional.ctc_loss(logits.log_softmax(-1).transpose(0, 1), targets, lens, t_lens,
                                       reduction="none")
    assert torch.isinf(ref[1])
    assert got.item() == pytest.approx((ref[0] + ref[2]).item() / 3, rel=1e-5)


def test_monolingual_model_from_multisoftmax_keeps_shared_and_own_head(tmp_path):
    sizes = {"en": 7, "hi": 5, "ta": 6}
    src = build("multisoftmax_lid", sizes, "ci")
    save_checkpoint(tmp_path / "ms.pt", model=src.state_dict())
    mono = build("mono", {"hi": 5}, "ci")
    load_model_weights(mono, tmp_path / "ms.pt", map_key=monolingual_key_map(src, "hi"))
    route = src.routes["hi"]
    torch.testing.assert_close(mono.encoder.lstm.weight_ih_l0, src.encoder.lstm.weight_ih_l0)
    torch.testing.assert_close(mono.predictor.embeddings[0].weight, src.predictor.embeddings[route.table].weight)
    torch.testing.assert_close(mono.joiner.outputs[0].weight, src.joiner.outputs[route.head].weight)
    # The mono model then decodes like the multilingual one restricted to Hindi.
    b = collate_rnnt(_utts({"hi": 5}, n=2), "hi", None)
    with torch.no_grad():
        a = src.eval()(b.x, b.x_lens, b.targets, b.target_lens, "hi").logits
        m = mono.eval()(b.x, b.x_lens, b.targets, b.target_lens, None).logits
    torch.testing.assert_close(a, m)


def test_a_model_trained_on_one_language_is_validated_on_it_alone(tmp_path):
    """Fine-tuning Onehot on Hindi keeps the four-language model, but its dev loss (and so
    its best checkpoint) must come from Hindi alone."""
    from speechlab.asr.rnnt.training import train_model
    from speechlab.train import TrainConfig
    from speechlab.train.log import read_log

    sizes = {"en": 7, "hi": 5}
    utts = _utts(sizes, n=8)
    cfg = TrainConfig(max_steps=2, valid_every=2, log_every=1, checkpoint_every=2, progress=False)
    for languages, run in (((), "all"), (("hi",), "hi")):
        train_model(build("onehot", sizes, "ci"), utts, utts, cfg, TaskConfig(max_frames=300),
                    tmp_path / run, languages=languages)
    [all_langs] = [r for r in read_log(tmp_path / "all" / "log.jsonl") if r["kind"] == "valid"]
    [hi_only] = [r for r in read_log(tmp_path / "hi" / "log.jsonl") if r["kind"] == "valid"]
    assert {"loss_en", "loss_hi"} <= set(all_langs)
    assert "loss_en" not in hi_only and "loss_hi" not in hi_only
