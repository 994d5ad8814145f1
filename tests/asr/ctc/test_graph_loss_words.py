"""The graph loss with lexicon numerators ``T o (L o W)`` (eq. 4): equal to the phone-target
loss when every word has one pronunciation, the log-sum of the pronunciations' likelihoods
when a word has two, and infeasible utterances at +inf with zero gradient."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.asr.ctc import graphs
from speechlab.asr.ctc.loss import graph_loss, graph_loss_from_arcs
from speechlab.asr.ctc.topology import TOPOLOGIES, num_tokens
from speechlab.testing.devices import loss_path  # noqa: F401 (a fixture)
from speechlab.text.lexicon import Lexicon

# Every test runs on the numba kernels (the CPU's path) and on the PyTorch code a GPU runs.
pytestmark = pytest.mark.usefixtures("loss_path")

PHONES = ["a", "b", "c"]


def _numerators(name: str, lexicon: Lexicon, transcripts):
    compile_ = graphs.TrainingGraphCompiler(name, graphs.make_lang(lexicon, PHONES))
    return [graphs.to_arcs(compile_(t)[0]) for t in transcripts]


def _log_probs(name: str, frames: list[int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(frames), max(frames), num_tokens(name, len(PHONES)), generator=g,
                    dtype=torch.float64)
    return x.log_softmax(-1).requires_grad_()


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_one_pronunciation_per_word_equals_phone_targets(name):
    lex = Lexicon({"A": [["a"]], "B": [["b"]], "C": [["c"]], "AB": [["a", "b"]]})
    transcripts = [["A", "B", "C"], ["AB", "A"], ["C"], ["B", "B"]]
    phones = [[1, 2, 3], [1, 2, 1], [3], [2, 2]]
    frames = [9, 8, 4, 7]
    lp = _log_probs(name, frames, seed=1)
    lens = torch.tensor(frames)
    targets = torch.tensor([p + [0] * (3 - len(p)) for p in phones])
    ref = graph_loss(lp, lens, targets, torch.tensor([len(p) for p in phones]), name)
    (g_ref,) = torch.autograd.grad(ref.sum(), lp)
    got = graph_loss_from_arcs(lp, lens, _numerators(name, lex, transcripts), name)
    (g_got,) = torch.autograd.grad(got.sum(), lp)
    assert torch.allclose(got, ref, rtol=1e-9, atol=1e-9)
    assert torch.allclose(g_got, g_ref, atol=1e-9)


@pytest.mark.parametrize("name", ["S1-T1", "S3-T2★★"])
def test_two_pronunciations_sum_their_likelihoods(name):
    lex = Lexicon({"X": [["a", "b"], ["c"]], "Y": [["b"]]})
    lp = _log_probs(name, [8], seed=2)
    lens = torch.tensor([8])
    both = graph_loss_from_arcs(lp, lens, _numerators(name, lex, [["X", "Y"]]), name)
    each = [graph_loss(lp, lens, torch.tensor([p]), torch.tensor([len(p)]), name)
            for p in ([1, 2, 2], [3, 2])]
    expected = -torch.logaddexp(-each[0], -each[1])
    assert both.item() == pytest.approx(expected.item(), rel=1e-9)


def test_infeasible_utterance_is_inf_with_zero_gradient():
    lex = Lexicon({"A": [["a"]], "B": [["b"]]})
    name = "S3-T2"  # two frames per phone at least
    lp = _log_probs(name, [6, 3], seed=3)
    loss = graph_loss_from_arcs(lp, torch.tensor([6, 3]),
                                _numerators(name, lex, [["A", "B"], ["A", "B"]]), name)
    assert np.isfinite(loss[0].item()) and loss[1].item() == float("inf")
    (grad,) = torch.autograd.grad(torch.where(torch.isfinite(loss), loss, 0.0).sum(), lp)
    assert grad[1].abs().sum() == 0 and grad[0].abs().sum() > 0
