"""The multi-softmax reproduction's plan: per-model update budgets and the Table 7 test subset."""

from __future__ import annotations

import pytest
import torch

from speechlab.asr.data import Utterance
from speechlab.papers.multisoftmax.recipe import Data, MultiSoftmaxConfig, decode_set
from speechlab.papers.multisoftmax.reproduce import MultiSoftmaxPaper
from speechlab.errors import ConfigError
from speechlab.experiment.jobs import DecodeJob, TrainJob
from speechlab.train import TrainConfig


def _data(per_language: int) -> Data:
    langs = ("en", "hi")
    test = [Utterance(f"{lang}-test-{i:03d}", lang, torch.zeros(5, 2), "a", (1,))
            for i in range(per_language) for lang in langs]
    return Data(langs, {}, [], [], test, {}, {})


def test_variant_steps_set_the_updates_of_named_models_only():
    cfg = MultiSoftmaxConfig(train=TrainConfig(max_steps=10), variant_steps={"vanilla": 7, "multisoftmax": 30})
    trains = {j.name: j for j in MultiSoftmaxPaper().plan(cfg) if isinstance(j, TrainJob)}
    assert trains["vanilla"].steps == 7 and trains["multisoftmax"].steps == 30
    assert trains["onehot"].steps is None  # the recipe's train.max_steps
    assert trains["mono_hi"].steps == cfg.mono_steps
    # the longest trainings start first
    assert list(trains)[:5] == ["multisoftmax", "onehot", "multisoftmax_lsp", "multisoftmax_lid",
                                "vanilla"]


@pytest.mark.parametrize("steps, message", [({"mono": 5}, "not a multilingual model"),
                                            ({"vanilla": 0}, "variant_steps"),
                                            ({"onehot": 2.5}, "not a positive number")])
def test_bad_variant_steps_are_refused(steps, message):
    with pytest.raises(ConfigError, match=message):
        MultiSoftmaxConfig(variant_steps=steps)


def test_the_grid_decodes_the_first_grid_utterances_of_its_language():
    data = _data(per_language=6)
    cfg = MultiSoftmaxConfig(test_utterances=5, grid_utterances=2, grid_language="hi")
    jobs = {j.name: j for j in MultiSoftmaxPaper().plan(cfg) if isinstance(j, DecodeJob)}
    grid = decode_set(cfg, data, jobs["grid_0"].options)
    assert [u.id for u in grid] == ["hi-test-000", "hi-test-001"]
    # the other decodings keep the whole test set
    assert len(decode_set(cfg, data, jobs["lid_free"].options)) == 10
    assert [u.id for u in decode_set(cfg, data, jobs["mono_hi"].options)] == [f"hi-test-{i:03d}" for i in range(5)]
    # 0: the grid decodes what the other decodings do
    cfg = MultiSoftmaxConfig(test_utterances=5, grid_utterances=0, grid_language="hi")
    assert len(decode_set(cfg, data, jobs["grid_0"].options)) == 5


def test_recipe_dropout_replaces_the_presets_only_when_given():
    from speechlab.asr.rnnt.presets import get_preset

    assert MultiSoftmaxConfig(preset="fast").dims() == get_preset("fast")
    dims = MultiSoftmaxConfig(preset="fast", dropout=0.0).dims()
    assert dims.dropout == 0.0 and dims.encoder_dim == get_preset("fast").encoder_dim
    with pytest.raises(ConfigError, match="dropout"):
        MultiSoftmaxConfig(dropout=1.0)


def test_jobs_say_what_they_are_without_names():
    plan = MultiSoftmaxPaper().plan(MultiSoftmaxConfig(languages=("en", "hi"), grid_language="hi"))
    trains = {j.name: j for j in plan if isinstance(j, TrainJob)}
    ft = trains["ft_ms_hi"]
    assert ft.spec.variant == "mono" and ft.spec.languages == ("hi",)
    assert ft.init_from is trains["multisoftmax"] and ft.needs == ("multisoftmax",)
    assert trains["ft_onehot_en"].init_from.spec.variant == "onehot"
    decodes = [j for j in plan if isinstance(j, DecodeJob)]
    lid_free = [j for j in decodes if j.options.early_stop == (float("inf"), float("inf"))
                and not j.options.grid]
    assert [j.model.spec.variant for j in lid_free] == ["multisoftmax_lid"] * 2
    assert [j.options.unseen for j in lid_free] == [False, True]
    assert all(j.model is trains[j.model.name] for j in decodes)
    # Every model from scratch is decoded on the unseen-voice split too, as on the test set;
    # fine-tuned ones and the early-stopping grid only on the test set.
    unseen = {j.name: j for j in decodes if j.options.unseen}
    tested = {j.name: j for j in decodes if not j.options.unseen and not j.options.grid
              and j.model.init_from is None}
    assert set(unseen) == {f"{n}_unseen" for n in tested}
    for name, job in tested.items():
        assert unseen[f"{name}_unseen"].model is job.model
        assert unseen[f"{name}_unseen"].options.languages == job.options.languages
    # A corpus without unseen voices for a language plans no unseen decodings.
    from speechlab.data.corpus import CorpusConfig

    cfg = MultiSoftmaxConfig(languages=("en", "hi"), grid_language="hi",
                             corpus=CorpusConfig(minutes={"en": 1.0, "hi": 1.0},
                                                 unseen_voices={"en": {"en-ked": 1.0}}))
    assert not any(j.options.unseen for j in MultiSoftmaxPaper().plan(cfg)
                   if isinstance(j, DecodeJob))


def test_train_first_moves_the_named_trainings_to_the_front():
    cfg = MultiSoftmaxConfig(train_first=("mono_hi", "multisoftmax"))
    plan = MultiSoftmaxPaper().plan(cfg)
    names = [j.name for j in plan if isinstance(j, TrainJob)]
    assert names[:2] == ["mono_hi", "multisoftmax"]
    # their decodings next, before any other training: the headline numbers come first
    kinds = [(type(j).__name__, j.model.name if isinstance(j, DecodeJob) else j.name) for j in plan]
    assert kinds[:4] == [("TrainJob", "mono_hi"), ("TrainJob", "multisoftmax"),
                         ("DecodeJob", "multisoftmax"), ("DecodeJob", "mono_hi")]
    assert sum(isinstance(j, DecodeJob) and j.model.name in cfg.train_first
               and not j.options.unseen for j in plan) == 2
    with pytest.raises(ConfigError, match="train_first"):
        MultiSoftmaxPaper().plan(MultiSoftmaxConfig(train_first=("mono_fr",)))


def test_systems_train_only_the_named_models_and_decode_only_theirs():
    cfg = MultiSoftmaxConfig(languages=("en", "hi"), grid_language="hi",
                             systems=("vanilla", "multisoftmax_lid"))
    plan = MultiSoftmaxPaper().plan(cfg)
    assert sorted(j.name for j in plan if isinstance(j, TrainJob)) == ["multisoftmax_lid", "vanilla"]
    decodes = [j for j in plan if isinstance(j, DecodeJob)]
    assert {j.model.name for j in decodes} == {"vanilla", "multisoftmax_lid"}
    assert sum(j.options.grid for j in decodes) == len(cfg.early_stop_grid)
    # without the LID model there is nothing to decode LID-free
    plan = MultiSoftmaxPaper().plan(MultiSoftmaxConfig(systems=("multisoftmax", "ft_ms_hi")))
    assert {j.name for j in plan if isinstance(j, DecodeJob)} == {"multisoftmax", "ft_ms_hi",
                                                                  "multisoftmax_unseen"}


@pytest.mark.parametrize("systems, message", [(("mono_xx",), r"\['mono_xx'\] are not models"),
                                              (("ft_ms_hi",), "starts from multisoftmax")])
def test_bad_systems_are_refused(systems, message):
    with pytest.raises(ConfigError, match=message):
        MultiSoftmaxPaper().plan(MultiSoftmaxConfig(systems=systems))
