"""Batch samplers: epochs cover every item once, bucketing limits, language frequencies
proportional to hours, per-language epochs, resumability, and disjoint rank shards."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from speechlab.errors import ConfigError, DataError
from speechlab.train.checkpoint import load_checkpoint, save_checkpoint
from speechlab.train.sampler import (
    BucketBatches,
    GroupedBatches,
    LanguageBatches,
    MapBatches,
    ResumableBatches,
    make_batches,
)


def take(it, n):
    return list(itertools.islice(it, n))


def test_make_batches_respects_count_and_padded_frames():
    durations = [3, 5, 2, 9, 1, 1, 4]
    batches = make_batches(range(7), durations, batch_size=3, max_frames=10)
    # Greedy in order: [0,1] (2*5=10), [2] since 2*9>10, [3], [4,5,6]? 3*4=12>10 -> [4,5],[6]
    assert batches == [[0, 1], [2], [3], [4, 5], [6]]
    assert make_batches(range(5), None, 2, None) == [[0, 1], [2, 3], [4]]


def test_an_item_longer_than_max_frames_gets_its_own_batch():
    assert make_batches([0, 1, 2], [2, 50, 2], None, 10) == [[0], [1], [2]]


def test_bucket_batches_epoch_covers_every_item_once_and_reshuffles():
    rng = np.random.default_rng(0)
    durations = rng.uniform(1, 20, size=101).tolist()
    s = BucketBatches(durations=durations, max_frames=60, batch_size=8, bucket_pool=32, seed=3)
    epoch0 = []
    while s.epoch == 0:
        b = next(s)
        if s.epoch == 0:
            epoch0.append(b)
    first_of_epoch1 = b
    assert sorted(i for b in epoch0 for i in b) == list(range(101))
    for b in epoch0:
        assert len(b) <= 8
        assert len(b) == 1 or len(b) * max(durations[i] for i in b) <= 60
    rest = [first_of_epoch1] + take(s, len(epoch0) - 1)
    assert sorted(i for b in rest for i in b) == list(range(101))
    assert rest != epoch0


def test_bucketing_reduces_padding():
    rng = np.random.default_rng(1)
    durations = rng.uniform(1, 100, size=400).tolist()

    def padding(pool):
        s = BucketBatches(durations=durations, batch_size=10, bucket_pool=pool, seed=0)
        batches = take(s, 40)
        return sum(len(b) * max(durations[i] for i in b) - sum(durations[i] for i in b)
                   for b in batches)

    assert padding(200) < 0.3 * padding(1)


def test_unshuffled_order_is_natural():
    s = BucketBatches(5, batch_size=2, shuffle=False)
    assert take(s, 4) == [[0, 1], [2, 3], [4], [0, 1]]


def assert_resumes(make, steps_before=37, steps_after=50):
    a = make()
    take(a, steps_before)
    state = a.state_dict()
    expected = take(a, steps_after)
    b = make()
    b.load_state_dict(state)
    assert take(b, steps_after) == expected


def test_bucket_batches_resume(tmp_path):
    durations = list(np.random.default_rng(2).uniform(1, 9, 57))
    assert_resumes(lambda: BucketBatches(durations=durations, max_frames=30, seed=5))
    # The state survives the checkpoint format (weights_only load).
    s = BucketBatches(10, batch_size=3, seed=1)
    take(s, 5)
    save_checkpoint(tmp_path / "c.pt", batches=s.state_dict())
    t = BucketBatches(10, batch_size=3, seed=1)
    t.load_state_dict(load_checkpoint(tmp_path / "c.pt")["batches"])
    assert take(t, 7) == take(s, 7)


def test_bucket_batches_refuse_a_state_for_other_data():
    s = BucketBatches(10, batch_size=3, seed=1)
    with pytest.raises(DataError, match="11 items"):
        BucketBatches(11, batch_size=3, seed=1).load_state_dict(s.state_dict())


def test_bucket_batches_ranks_disjoint_and_equal_length():
    plans = []
    for rank in range(3):
        s = BucketBatches(50, batch_size=4, seed=9, rank=rank, world_size=3)
        plans.append(take(s, len(s._epoch_batches())))
    sets = [set(i for b in p for i in b) for p in plans]
    assert len({len(p) for p in plans}) == 1  # same number of steps on every rank
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    # 13 batches of <=4 items; 12 usable across 3 ranks.
    assert sum(len(s) for s in sets) >= 50 - 4 * 2


LANGS = ["hi"] * 30 + ["ta"] * 60 + ["gu"] * 90


def test_language_frequencies_follow_hours():
    hours = {"hi": 1.0, "ta": 3.0, "gu": 6.0}
    s = LanguageBatches(LANGS, weights=hours, batch_size=4, seed=11)
    n = 20000
    counts = Counter(b.language for b in take(s, n))
    for lang, h in hours.items():
        p = h / 10
        sigma = (n * p * (1 - p)) ** 0.5
        assert abs(counts[lang] - n * p) < 4 * sigma, (lang, counts)


def test_language_weights_default_to_summed_durations():
    durations = [2.0] * 30 + [1.0] * 60 + [0.5] * 90  # 60, 60 and 45 "seconds"
    s = LanguageBatches(LANGS, durations=durations, batch_size=4)
    assert dict(zip(s.language_names, s.probabilities)) == pytest.approx(
        {"gu": 45 / 165, "hi": 60 / 165, "ta": 60 / 165})


def test_batches_are_homogeneous_and_each_language_has_its_own_epochs():
    s = LanguageBatches(LANGS, weights={"hi": 1, "ta": 1, "gu": 1}, batch_size=7, seed=4)
    per_lang: dict[str, list[int]] = {"hi": [], "ta": [], "gu": []}
    for b in take(s, 60):
        assert {LANGS[i] for i in b.indices} == {b.language}
        per_lang[b.language].extend(b.indices)
    hi = per_lang["hi"]
    # hi has 30 items = 5 batches of 7 (the last one of 2); its first epoch covers each once.
    first_epoch = hi[:30]
    assert sorted(first_epoch) == list(range(30))
    assert s.epochs["hi"] >= 1 and s.epochs["hi"] != s.epochs["gu"]


def test_language_batches_resume():
    w = {"hi": 1.0, "ta": 2.0, "gu": 0.5}
    assert_resumes(lambda: LanguageBatches(LANGS, weights=w, batch_size=5, seed=2),
                   steps_before=5000, steps_after=200)  # crosses a draw block


def test_cycled_languages_come_in_turn_and_resume():
    s = LanguageBatches(LANGS, weights={"hi": 1.0, "ta": 5.0, "gu": 0.1}, batch_size=4, seed=3,
                        cycle=True)
    langs = [b.language for b in take(s, 30)]
    assert langs == ["gu", "hi", "ta"] * 10  # weights ignored, sorted order, every 3 batches
    assert_resumes(lambda: LanguageBatches(LANGS, batch_size=5, seed=2, cycle=True),
                   steps_before=100, steps_after=50)
    # grouped three to an update, every update has one batch of each language
    groups = GroupedBatches(LanguageBatches(LANGS, batch_size=4, cycle=True), 3)
    assert all(sorted(b.language for b in g) == ["gu", "hi", "ta"] for g in take(groups, 20))


def test_language_ranks_share_languages_and_split_items():
    w = {"hi": 1.0, "ta": 1.0, "gu": 1.0}
    ranks = [LanguageBatches(LANGS, weights=w, batch_size=3, seed=8, rank=r, world_size=2)
             for r in range(2)]
    shards: list[dict[tuple[str, int], set[int]]] = [{}, {}]
    languages: list[list[str]] = [[], []]
    for r, s in enumerate(ranks):
        for _ in range(80):
            b = next(s)
            languages[r].append(b.language)
            shards[r].setdefault((b.language, s.epochs[b.language]), set()).update(b.indices)
    assert languages[0] == languages[1]
    assert shards[0].keys() == shards[1].keys()
    for key in shards[0]:
        assert not (shards[0][key] & shards[1][key]), key
    # hi's first epoch: 10 batches of 3, 5 per rank, together all 30 items.
    assert shards[0][("hi", 0)] | shards[1][("hi", 0)] == set(range(30))


@pytest.mark.parametrize("kwargs,error,needle", [
    (dict(weights={"hi": 1, "ta": 1}), DataError, "'gu'"),
    (dict(weights={"hi": 1, "ta": 1, "gu": 1, "xx": 1}), DataError, "'xx'"),
    (dict(weights={"hi": 0, "ta": 0, "gu": 0}), DataError, "zero"),
    (dict(weights={"hi": -1, "ta": 0, "gu": 0}), DataError, "'hi'"),
])
def test_bad_language_weights(kwargs, error, needle):
    with pytest.raises(error, match=needle):
        LanguageBatches(LANGS, batch_size=2, **kwargs)


def test_sampler_config_errors():
    with pytest.raises(ConfigError):
        BucketBatches(10)
    with pytest.raises(ConfigError, match="durations"):
        BucketBatches(10, max_frames=5)
    with pytest.raises(DataError, match="1 items make fewer batches than the 2 ranks"):
        next(BucketBatches(1, batch_size=4, world_size=2))


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_items_that_fit_in_fewer_batches_than_ranks_are_split_so_every_rank_has_one(world_size):
    # 4 items of one language fit one batch; with 2-4 ranks each rank still gets a batch,
    # the shards stay disjoint, and no batch grows past the limits.
    durations = [100.0, 120.0, 90.0, 110.0]
    shards = []
    for rank in range(world_size):
        s = LanguageBatches(["en"] * 4, durations=durations, max_frames=3000, batch_size=8,
                            seed=3, rank=rank, world_size=world_size)
        b = next(s)
        assert b.language == "en" and 1 <= len(b.indices) <= 8
        assert len(b.indices) * max(durations[i] for i in b.indices) <= 3000
        shards.append(set(b.indices))
    for a in range(world_size):
        for c in range(a + 1, world_size):
            assert not shards[a] & shards[c]
    assert len(set().union(*shards)) >= world_size


def test_a_language_with_fewer_items_than_ranks_is_named():
    s = LanguageBatches(["en", "hi", "hi"], batch_size=4, rank=0, world_size=2, seed=0)
    with pytest.raises(DataError, match="language 'en' has 1 items, fewer batches than the 2"):
        [next(s) for _ in range(50)]


def test_map_batches_keeps_the_state():
    m = MapBatches(BucketBatches(9, batch_size=2, seed=0), lambda b: [i * 10 for i in b])
    assert isinstance(m, ResumableBatches)
    first = next(m)
    assert all(i % 10 == 0 for i in first)
    state = m.state_dict()
    m2 = MapBatches(BucketBatches(9, batch_size=2, seed=0), lambda b: [i * 10 for i in b])
    m2.load_state_dict(state)
    assert take(m2, 5) == take(m, 5)


def test_grouped_batches_are_the_ungrouped_sequence_and_resume():
    def source():
        return LanguageBatches(LANGS, weights={"hi": 1.0, "ta": 1.0, "gu": 1.0}, batch_size=3, seed=4)
    flat = take(source(), 12)
    grouped = GroupedBatches(source(), 4)
    assert isinstance(grouped, ResumableBatches)
    first = take(grouped, 2)
    assert [b for g in first for b in g] == flat[:8]
    # a group mixes languages even though each batch is homogeneous
    assert any(len({b.language for b in g}) > 1 for g in first)
    resumed = GroupedBatches(source(), 4)
    resumed.load_state_dict(grouped.state_dict())
    assert next(resumed) == flat[8:12]
    with pytest.raises(ConfigError, match="at least one batch"):
        GroupedBatches(source(), 0)
