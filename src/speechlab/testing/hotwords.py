"""The reference for CTC hotwords: T∘L∘G composed with the hotwords' bonus by OpenFst.

A CTC-topology model applies hotwords in its search arrays
(:meth:`speechlab.asr.ctc.recognizer.CtcRecognizer._boosted`). What that must equal is the graph
composed with a one-state transducer that passes every word and charges the hotwords
``-score``: speechlab's way before, kept here for the tests and ``benchmarks/hotword_latency.py``
to compare against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def composed_boost(asr: Any, words: Sequence[str], score: float) -> Any:
    """``asr``'s T∘L∘G (a ``kaldifst.StdVectorFst``) with the arcs that emit ``words`` costing
    ``score`` less, composed by OpenFst."""
    import kaldifst

    ids = {asr.graph.lang.word_index()[w] for w in words}
    boost = kaldifst.StdVectorFst()
    state = boost.add_state()
    boost.start = state
    boost.set_final(state, 0.0)
    for word in range(1, asr.graph.lang.num_words + 1):
        boost.add_arc(state, kaldifst.StdArc(word, word, -score if word in ids else 0.0, state))
    kaldifst.arcsort(boost, sort_type="ilabel")
    return kaldifst.compose(asr.graph.fst, boost)
