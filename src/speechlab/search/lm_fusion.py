"""Shallow fusion of a token n-gram LM into a label-synchronous search (the transducer's).

Every label a hypothesis emits adds ``weight * ln P_LM(label | the labels before it) + bonus``
to its score, as sherpa-onnx's and icefall's n-gram LM fusion for transducers do; blank adds
nothing. The LM's term is negative for every label, so fused alone it favours hypotheses with
fewer labels (deletions); ``bonus``, a constant per label, gives that back (the length reward of
shallow fusion; tune it with the weight on dev).
The LM's words are the model's tokens (graphemes with their word-start marks for speechlab's
RNN-T: an LM estimated on text spelled in those tokens, ``speechlab rnnt lm``). A hypothesis's
LM state is its last ``order - 1`` labels (with the sentence start while it has fewer), so the
deltas of a state are computed once and shared by every hypothesis in it.

Knows labels and an ARPA LM, no model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from speechlab.errors import ConfigError
from speechlab.text.ngram import ArpaLM

LN10 = math.log(10.0)
#: The sentence start in a state (no label id is negative).
START = -1
#: log10 probability of a token the LM never saw (an ARPA LM without ``<unk>`` gives it
#: none): low, but a hypothesis that needs it is not ruled out.
UNSEEN_LOG10 = -10.0


class TokenLM:
    """``lm`` over the model's ``symbols`` (label id -> the LM's word; id ``blank`` is never
    scored) with ``weight`` and a ``bonus`` per label (module doc)."""

    def __init__(self, lm: ArpaLM, symbols: Sequence[str], weight: float, *,
                 blank: int = 0, bonus: float = 0.0) -> None:
        if not 0 < weight <= 10:
            raise ConfigError(f"LM weight must be in (0, 10], got {weight}")
        if not -10 <= bonus <= 10:  # NaN too
            raise ConfigError(f"LM bonus per label must be in [-10, 10], got {bonus}")
        known = set(lm.vocab)
        if not any(s in known for i, s in enumerate(symbols) if i != blank):
            raise ConfigError("the LM shares no token with the model's vocabulary: estimate it "
                              "on text spelled in the model's tokens (speechlab rnnt lm)")
        self.lm, self.symbols, self.weight, self.blank = lm, list(symbols), float(weight), blank
        self.bonus = float(bonus)
        unk = lm.logprob("<unk>") if "<unk>" in known else -math.inf
        self.unseen = unk if unk > -math.inf else UNSEEN_LOG10
        self._deltas: dict[tuple[tuple[int, ...], int], np.ndarray] = {}

    @property
    def order(self) -> int:
        return self.lm.order

    def state(self, labels: Sequence[int]) -> tuple[int, ...]:
        """The LM state after ``labels``: the last ``order - 1``, the start first while there
        are fewer."""
        n = self.order - 1
        if n <= 0:
            return ()
        last = tuple(int(x) for x in labels[-n:])
        return last if len(labels) >= n else (START, *last)

    def deltas(self, state: tuple[int, ...], size: int) -> np.ndarray:
        """(size,) the score each label adds in ``state``: ``weight * ln P(label | state) +
        bonus``; 0 for the blank."""
        key = (state, size)
        out = self._deltas.get(key)
        if out is None:
            history = ["<s>" if x == START else self.symbols[x] for x in state]
            out = np.zeros(size, dtype=np.float64)
            for i in range(min(size, len(self.symbols))):
                if i == self.blank:
                    continue
                lp = self.lm.logprob(self.symbols[i], history)
                out[i] = self.weight * LN10 * (lp if lp > -math.inf else self.unseen) + self.bonus
            if len(self._deltas) > 100_000:  # a long stream: keep the cache bounded
                self._deltas.clear()
            self._deltas[key] = out
        return out

    def score(self, labels: Sequence[int]) -> float:
        """What the LM adds to a hypothesis of ``labels`` in all."""
        total = 0.0
        for k, label in enumerate(labels):
            total += float(self.deltas(self.state(labels[:k]), len(self.symbols))[label])
        return total
