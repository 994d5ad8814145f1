"""Resumable, rank-aware batch samplers over in-memory item indices.

A sampler is an endless iterator of batches of item indices with ``state_dict()`` /
``load_state_dict()`` (:class:`ResumableBatches`). The whole order of an epoch is a pure
function of ``(seed, epoch)``, so the state is just a few counters: a checkpoint restores the
exact batch an uninterrupted run would have drawn next.

- :class:`BucketBatches`: shuffled batches of a fixed size and/or at most ``max_frames`` padded
  frames, with items of similar duration grouped together ("sortish" bucketing).
- :class:`LanguageBatches`: language-homogeneous batches; each batch's language is drawn with
  probability proportional to that language's hours of training data (Sec. 2.3 of the
  multi-softmax RNN-T paper), items of that language follow in shuffled order, and every
  language keeps its own epoch counter.
- :class:`MapBatches`: turns index batches into model inputs (a collate function) and keeps the
  wrapped sampler's state.
- :class:`GroupedBatches`: ``k`` consecutive batches at a time, for a task that makes one
  update from several batches (e.g. several language-homogeneous batches, each with its own
  softmax, in one update).

With ``world_size > 1`` every rank builds the same epoch plan (and, for languages, the same
language sequence) and takes every ``world_size``-th batch starting at its rank, so the ranks see
disjoint items and take the same number of steps, which DDP's collective ops need.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Generic, NamedTuple, Protocol, TypeVar, runtime_checkable

import numpy as np

from speechlab.errors import ConfigError, DataError

T = TypeVar("T")
U = TypeVar("U")

# Independent random streams derived from one seed (numpy SeedSequence mixes the whole list).
_STREAM_EPOCH = 1
_STREAM_LANGUAGE_DRAWS = 2
_STREAM_LANGUAGE_EPOCH = 3
# Language draws are generated in blocks so that draw n is a pure function of (seed, n).
_DRAW_BLOCK = 4096


@runtime_checkable
class ResumableBatches(Protocol[T]):
    """An endless iterator of batches whose position can be saved and restored."""

    def __iter__(self) -> Iterator[T]: ...

    def __next__(self) -> T: ...

    def state_dict(self) -> dict[str, Any]:
        """Plain values only (ints, floats, strings, lists, dicts): it goes into a checkpoint."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def make_batches(order: Sequence[int], durations: Sequence[float] | None, batch_size: int | None,
                 max_frames: float | None) -> list[list[int]]:
    """Cut ``order`` greedily into consecutive batches.

    A batch grows while it has at most ``batch_size`` items and its padded size
    ``len(batch) * max(duration)`` stays within ``max_frames``. An item longer than
    ``max_frames`` on its own gets a batch of its own rather than being dropped silently.
    """
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0.0
    for i in order:
        d = float(durations[i]) if durations is not None else 0.0
        fits_count = batch_size is None or len(cur) < batch_size
        fits_frames = max_frames is None or (len(cur) + 1) * max(longest, d) <= max_frames
        if cur and not (fits_count and fits_frames):
            batches.append(cur)
            cur, longest = [], 0.0
        cur.append(int(i))
        longest = max(longest, d)
    if cur:
        batches.append(cur)
    return batches


def _at_least(batches: list[list[int]], n: int) -> list[list[int]]:
    """``batches`` with the largest ones halved until there are ``n`` (or no batch has two
    items left): a small corpus whose items fit in fewer batches than there are ranks still
    gives every rank a batch. Halving only shrinks batches, so ``batch_size`` and
    ``max_frames`` still hold; every item stays in exactly one batch."""
    batches = list(batches)
    while len(batches) < n:
        k = max(range(len(batches)), key=lambda i: len(batches[i]), default=None)
        if k is None or len(batches[k]) < 2:
            break
        big = batches.pop(k)
        half = len(big) // 2
        batches[k:k] = [big[:half], big[half:]]
    return batches


@dataclass(frozen=True)
class Batching:
    """How a sampler cuts an epoch into batches and shards them; both samplers hold one.

    At most ``batch_size`` items and/or ``max_frames`` padded frames (``len * longest``) per
    batch, at least one of the two given; items sorted by duration within pools of
    ``bucket_pool`` (1 disables); every order drawn from ``seed``; this rank's share is every
    ``world_size``-th batch from ``rank``.
    """

    batch_size: int | None = None
    max_frames: float | None = None
    bucket_pool: int = 256
    seed: int = 0
    rank: int = 0
    world_size: int = 1

    def __post_init__(self) -> None:
        if self.batch_size is None and self.max_frames is None:
            raise ConfigError("a sampler needs batch_size and/or max_frames")
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"rank {self.rank} is outside world_size {self.world_size}")

    def check_durations(self, durations: Sequence[float] | None, num_items: int) -> None:
        """The items' durations (or None) fit these settings: one per item, and present if
        batches are bounded in frames."""
        if durations is not None and len(durations) != num_items:
            raise ConfigError(f"{len(durations)} durations for {num_items} items")
        if self.max_frames is not None and durations is None:
            raise ConfigError("max_frames batching needs the items' durations")

    def epoch_plan(self, indices: np.ndarray, durations: Sequence[float] | None, *,
                   shuffle: bool, rng: np.random.Generator) -> list[list[int]]:
        """One epoch of batches for this rank: shuffle, sort within pools, cut, shuffle
        batches, shard. Every rank computes the same plan before taking its share."""
        order = rng.permutation(indices) if shuffle else np.asarray(indices)
        pool = self.bucket_pool
        if durations is not None and pool > 1:
            # Sorting inside pools of a few hundred items keeps padding low while the epoch
            # stays random at a coarser scale.
            pools = [order[k:k + pool] for k in range(0, len(order), pool)]
            order = np.concatenate([p[np.argsort([durations[i] for i in p], kind="stable")]
                                    for p in pools]) if pools else order
        batches = _at_least(make_batches(order.tolist(), durations, self.batch_size,
                                         self.max_frames), self.world_size)
        if shuffle:
            batches = [batches[k] for k in rng.permutation(len(batches))]
        usable = len(batches) // self.world_size * self.world_size
        return batches[self.rank:usable:self.world_size]


class BucketBatches:
    """Shuffled batches over items ``0..N-1``, endless over epochs.

    Args:
        num_items: N, or pass ``durations`` (length N: frames or seconds, any unit that
            ``max_frames`` uses too).
        batch_size: at most this many items per batch.
        max_frames: at most this many padded frames per batch (``len * longest``).
        shuffle: new random order every epoch (else the natural order, for validation).
        bucket_pool: items sorted by duration within pools of this many; 1 disables.
        seed, rank, world_size: see the module docstring.

    Yields ``list[int]`` of item indices.
    """

    def __init__(self, num_items: int | None = None, *, durations: Sequence[float] | None = None,
                 batch_size: int | None = None, max_frames: float | None = None,
                 shuffle: bool = True, bucket_pool: int = 256, seed: int = 0, rank: int = 0,
                 world_size: int = 1) -> None:
        if num_items is None:
            if durations is None:
                raise ConfigError("BucketBatches needs num_items or durations")
            num_items = len(durations)
        self.batching = Batching(batch_size, max_frames, bucket_pool, seed, rank, world_size)
        self.batching.check_durations(durations, num_items)
        self.num_items = num_items
        self.durations = durations
        self.shuffle = shuffle
        self.epoch = 0
        self.position = 0
        self._plan: list[list[int]] | None = None

    def _epoch_batches(self) -> list[list[int]]:
        if self._plan is None:
            rng = np.random.default_rng([self.seed, _STREAM_EPOCH, self.epoch])
            self._plan = self.batching.epoch_plan(np.arange(self.num_items), self.durations,
                                                  shuffle=self.shuffle, rng=rng)
            if not self._plan:
                raise DataError(
                    f"{self.num_items} items make fewer batches than the "
                    f"{self.batching.world_size} ranks: add data or lower batch_size/max_frames")
        return self._plan

    @property
    def seed(self) -> int:
        return self.batching.seed

    def __iter__(self) -> Iterator[list[int]]:
        return self

    def __next__(self) -> list[int]:
        plan = self._epoch_batches()
        if self.position >= len(plan):
            self.epoch, self.position, self._plan = self.epoch + 1, 0, None
            plan = self._epoch_batches()
        batch = plan[self.position]
        self.position += 1
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed,
                "num_items": self.num_items}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["num_items"] != self.num_items or state["seed"] != self.seed:
            raise DataError(
                f"the batch sampler state was saved for {state['num_items']} items with seed "
                f"{state['seed']}, but this run has {self.num_items} items with seed {self.seed}: "
                "the training data or seed changed since the checkpoint")
        self.epoch, self.position, self._plan = int(state["epoch"]), int(state["position"]), None


class LanguageBatch(NamedTuple):
    """A language-homogeneous batch: its language and item indices."""

    language: str
    indices: list[int]


class LanguageBatches:
    """Language-homogeneous batches, languages drawn in proportion to their hours of data.

    Args:
        languages: the language of each item (length N).
        weights: language -> sampling weight (hours of training data). Default: the summed
            ``durations`` per language, or the item counts when there are no durations.
        durations, batch_size, max_frames, bucket_pool, seed, rank, world_size: as in
            :class:`BucketBatches`, applied within each language.

        cycle: instead of drawing, take the languages in turn (sorted), each once in every
            ``L`` batches, weights ignored: grouped ``L`` to an update, every update then has
            one batch of each language.

    Yields :class:`LanguageBatch`. Every rank draws the same language sequence; within a
    language epoch each rank takes its own share of the batches.
    """

    def __init__(self, languages: Sequence[str], *, weights: Mapping[str, float] | None = None,
                 durations: Sequence[float] | None = None, batch_size: int | None = None,
                 max_frames: float | None = None, bucket_pool: int = 256, seed: int = 0,
                 rank: int = 0, world_size: int = 1, cycle: bool = False) -> None:
        self.batching = Batching(batch_size, max_frames, bucket_pool, seed, rank, world_size)
        self.batching.check_durations(durations, len(languages))
        by_lang: dict[str, list[int]] = {}
        for i, lang in enumerate(languages):
            by_lang.setdefault(str(lang), []).append(i)
        if weights is None:
            weights = {lang: (sum(float(durations[i]) for i in idx) if durations is not None
                              else float(len(idx))) for lang, idx in by_lang.items()}
        for lang in by_lang:
            if lang not in weights:
                raise DataError(f"language {lang!r} has training items but no sampling weight; "
                                f"weights are given for {sorted(weights)}")
        for lang, w in weights.items():
            if lang not in by_lang:
                raise DataError(f"language {lang!r} has a sampling weight but no training items")
            if not (w >= 0 and np.isfinite(w)):
                raise DataError(f"language {lang!r} has sampling weight {w}; use hours >= 0")
        # Sorted so that the language <-> integer mapping, hence the draws, never depend on the
        # order in which items or weights were listed.
        self.language_names = sorted(by_lang)
        total = sum(float(weights[lang]) for lang in self.language_names)
        if total <= 0:
            raise DataError("all language sampling weights are zero")
        self.probabilities = np.array([float(weights[lang]) / total
                                       for lang in self.language_names])
        self.cycle = cycle
        self._items = {lang: np.array(by_lang[lang]) for lang in self.language_names}
        self.durations = durations
        self.num_items = len(languages)
        self.draws = 0
        self.epochs = {lang: 0 for lang in self.language_names}
        self.positions = {lang: 0 for lang in self.language_names}
        self._plans: dict[str, list[list[int]]] = {}
        self._block: tuple[int, np.ndarray] | None = None

    @property
    def seed(self) -> int:
        return self.batching.seed

    def language_at(self, n: int) -> str:
        """The language of the n-th batch (0-based), identical on every rank."""
        if self.cycle:
            return self.language_names[n % len(self.language_names)]
        block, offset = divmod(n, _DRAW_BLOCK)
        if self._block is None or self._block[0] != block:
            rng = np.random.default_rng([self.seed, _STREAM_LANGUAGE_DRAWS, block])
            self._block = (block, rng.choice(len(self.language_names), size=_DRAW_BLOCK,
                                             p=self.probabilities))
        return self.language_names[int(self._block[1][offset])]

    def _plan(self, lang: str) -> list[list[int]]:
        if lang not in self._plans:
            k = self.language_names.index(lang)
            rng = np.random.default_rng([self.seed, _STREAM_LANGUAGE_EPOCH, k, self.epochs[lang]])
            plan = self.batching.epoch_plan(self._items[lang], self.durations, shuffle=True,
                                            rng=rng)
            if not plan:
                raise DataError(
                    f"language {lang!r} has {len(self._items[lang])} items, fewer batches than "
                    f"the {self.batching.world_size} ranks: add data or lower "
                    "batch_size/max_frames")
            self._plans[lang] = plan
        return self._plans[lang]

    def __iter__(self) -> Iterator[LanguageBatch]:
        return self

    def __next__(self) -> LanguageBatch:
        lang = self.language_at(self.draws)
        self.draws += 1
        plan = self._plan(lang)
        if self.positions[lang] >= len(plan):
            self.epochs[lang] += 1
            self.positions[lang] = 0
            del self._plans[lang]
            plan = self._plan(lang)
        batch = plan[self.positions[lang]]
        self.positions[lang] += 1
        return LanguageBatch(lang, batch)

    def state_dict(self) -> dict[str, Any]:
        return {"draws": self.draws, "seed": self.seed, "num_items": self.num_items,
                "epochs": dict(self.epochs), "positions": dict(self.positions)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if (state["num_items"] != self.num_items or state["seed"] != self.seed
                or sorted(state["epochs"]) != self.language_names):
            raise DataError(
                f"the language sampler state was saved for {state['num_items']} items in "
                f"languages {sorted(state['epochs'])} with seed {state['seed']}, but this run has "
                f"{self.num_items} items in {self.language_names} with seed {self.seed}: the "
                "training data or seed changed since the checkpoint")
        self.draws = int(state["draws"])
        self.epochs = {k: int(v) for k, v in state["epochs"].items()}
        self.positions = {k: int(v) for k, v in state["positions"].items()}
        self._plans = {}


class MapBatches(Generic[T, U]):
    """``fn`` applied to each batch of a resumable sampler; the state is the sampler's.

    ``fn`` turns indices into model inputs (collate). It runs when the batch is drawn, so any
    randomness it uses (augmentation) comes from the global RNGs the trainer checkpoints.
    """

    def __init__(self, source: ResumableBatches[T], fn: Callable[[T], U]) -> None:
        self.source = source
        self.fn = fn

    def __iter__(self) -> Iterator[U]:
        return self

    def __next__(self) -> U:
        return self.fn(next(self.source))

    def state_dict(self) -> dict[str, Any]:
        return self.source.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.source.load_state_dict(state)


class GroupedBatches(Generic[T]):
    """Lists of ``k`` consecutive batches of a resumable sampler; the state is the sampler's.

    The state is saved between groups (the trainer checkpoints between updates), so a resumed
    run continues with the group an uninterrupted run would have drawn next.
    """

    def __init__(self, source: ResumableBatches[T], k: int) -> None:
        if k < 1:
            raise ConfigError(f"a group needs at least one batch, got k={k}")
        self.source = source
        self.k = k

    def __iter__(self) -> Iterator[list[T]]:
        return self

    def __next__(self) -> list[T]:
        return [next(self.source) for _ in range(self.k)]

    def state_dict(self) -> dict[str, Any]:
        return self.source.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.source.load_state_dict(state)
