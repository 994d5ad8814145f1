"""Contextual biasing: a graph of hotwords that rewards a search for spelling them.

The hotwords, each a sequence of labels, form a trie with failure links (Aho-Corasick), as
the context graphs of icefall and sherpa-onnx do. A hypothesis carries a state of the graph;
each label it emits moves the state and changes its score by :meth:`ContextGraph.step`'s
delta:

- a label that continues a hotword earns ``score`` (the state goes one deeper);
- a label that breaks a partial match gives back what that match had earned (the state falls
  back along the failure links to the longest suffix that is still a hotword's prefix, and
  earns that suffix's bonus again);
- a completed hotword keeps its bonus: from its last state nothing is given back.

So only whole hotwords end up rewarded, ``score`` per label. The graph knows labels, not
models: a family turns each hotword into its own labels (graphemes of a language).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from speechlab.errors import ConfigError


class ContextGraph:
    """The hotwords ``sequences`` (label ids) with ``score`` per label (module doc)."""

    def __init__(self, sequences: Sequence[Sequence[int]], score: float) -> None:
        if not score > 0:
            raise ConfigError(f"hotword score must be > 0, got {score}")
        seqs = [tuple(int(x) for x in s) for s in sequences if len(s)]
        if not seqs:
            raise ConfigError("no hotword to bias towards (each must spell at least one label)")
        self.score = float(score)
        self.children: list[dict[int, int]] = [{}]
        self.depth = [0]
        self.end = [False]
        for seq in seqs:
            node = 0
            for label in seq:
                nxt = self.children[node].get(label)
                if nxt is None:
                    nxt = len(self.children)
                    self.children[node][label] = nxt
                    self.children.append({})
                    self.depth.append(self.depth[node] + 1)
                    self.end.append(False)
                node = nxt
            self.end[node] = True
        # failure links, breadth first: the longest proper suffix that is a prefix too
        self.fail = [0] * len(self.children)
        queue = deque(self.children[0].values())
        while queue:
            node = queue.popleft()
            for label, child in self.children[node].items():
                f = self.fail[node]
                while f and label not in self.children[f]:
                    f = self.fail[f]
                target = self.children[f].get(label, 0)
                self.fail[child] = target if target != child else 0
                queue.append(child)

    def _earned(self, state: int) -> float:
        """The bonus a hypothesis in ``state`` holds that a broken match would give back."""
        return 0.0 if self.end[state] else self.depth[state] * self.score

    def next_state(self, state: int, label: int) -> int:
        f = state
        while True:
            child = self.children[f].get(label)
            if child is not None:
                return child
            if f == 0:
                return 0
            f = self.fail[f]

    def step(self, state: int, label: int) -> tuple[float, int]:
        """(score delta, next state) of emitting ``label`` in ``state`` (module doc)."""
        new = self.next_state(state, label)
        if new and self.depth[new] == self.depth[state] + 1 and self.children[state].get(label) == new:
            return self.score, new
        return self.depth[new] * self.score - self._earned(state), new

    def deltas(self, state: int, size: int) -> np.ndarray:
        """(size,) the score delta of every label in ``state`` (labels the graph never sees
        give back the partial match: the state falls to the root)."""
        out = np.full(size, -self._earned(state), dtype=np.float64)
        labels: set[int] = set()
        f = state
        while True:
            labels.update(self.children[f])
            if f == 0:
                break
            f = self.fail[f]
        for label in labels:
            if label < size:
                out[label] = self.step(state, label)[0]
        return out
