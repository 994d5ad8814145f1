"""What the graph loss keeps between calls: the denominator graph per (topology, P, blank) and
the numerator template per topology.  A cached entry equals a freshly built one, entries do
not leak between keys or get written to, and the loss of an utterance is the same bit for
bit whatever else is in its batch and however often it is computed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.asr.ctc import loss_graphs, topology
from speechlab.asr.ctc.loss import graph_loss

NAMES = list(topology.TOPOLOGIES)
FIELDS = ("column", "in_ptr", "in_src", "out_ptr", "out_dst", "final", "start", "lo", "eps",
          "hi")


def assert_same_graph(a: loss_graphs.GraphBatch, b: loss_graphs.GraphBatch) -> None:
    for field in FIELDS:
        assert np.array_equal(getattr(a, field), getattr(b, field)), field


@pytest.mark.parametrize("name", NAMES)
def test_cached_denominator_equals_a_fresh_one(name):
    for num_phones, blank in ((3, 0), (7, 0), (7, 5)):
        cached = loss_graphs.denominator(name, num_phones, blank)
        assert loss_graphs.denominator(name, num_phones, blank) is cached
        assert_same_graph(cached, loss_graphs.denominator.__wrapped__(name, num_phones, blank))


def test_denominators_of_other_phone_counts_or_blanks_are_other_entries():
    small, large = loss_graphs.denominator("S2-T1", 3), loss_graphs.denominator("S2-T1", 4)
    assert small is not large and len(small.column) != len(large.column)
    moved = loss_graphs.denominator("S2-T1", 3, blank=2)
    assert moved is not small and not np.array_equal(moved.column, small.column)
    # "★" and "*" name one topology, but no entry serves another topology.
    assert loss_graphs.denominator("S2-T1*", 3).column.tolist() == \
        loss_graphs.denominator("S2-T1★", 3).column.tolist()
    assert loss_graphs.denominator("S2-T2", 3) is not loss_graphs.denominator("S2-T2★", 3)


@pytest.mark.parametrize("name", NAMES)
def test_cached_arrays_are_read_only(name):
    den = loss_graphs.denominator(name, 3)
    for field in ("column", "in_ptr", "in_src", "out_ptr", "out_dst", "final"):
        with pytest.raises(ValueError):
            getattr(den, field)[0] = 1
    for array in loss_graphs._template_arrays(topology.get(name).name):
        with pytest.raises(ValueError):
            array[0] = 1


@pytest.mark.parametrize("name", NAMES)
def test_cached_template_equals_the_topology_written_out(name):
    topo = topology.get(name)
    ptr, offset, condition = loss_graphs._template_arrays(topo.name)
    template = loss_graphs._numerator_template(topo)
    assert [slot for slot, _ in template] == list(range(topo.states + 1))
    assert ptr.tolist() == np.cumsum([0] + [len(arcs) for _, arcs in template]).tolist()
    assert list(zip(offset.tolist(), condition.tolist())) == \
        [arc for _, arcs in template for arc in arcs]


def _batch(name, seed):
    gen = torch.Generator().manual_seed(seed)
    frames = [30, 12, 25, 30, 9, 17, 21]
    labels = [6, 2, 5, 8, 0, 4, 3]
    vocab = topology.num_tokens(name, 5)
    log_probs = torch.randn(len(frames), 30, vocab, generator=gen, dtype=torch.float32)
    targets = torch.randint(1, 6, (len(frames), 8), generator=gen)
    return log_probs.log_softmax(-1), targets, torch.tensor(frames), torch.tensor(labels)


def _loss_and_grad(name, log_probs, targets, frames, labels):
    x = log_probs.clone().requires_grad_(True)
    loss = graph_loss(x, frames, targets, labels, name)
    (grad,) = torch.autograd.grad(loss.sum(), x)
    return loss, grad


@pytest.mark.parametrize("name", NAMES)
def test_results_are_identical_across_calls_and_batch_compositions(name):
    """Repeated calls, the batch reversed, and each part on its own (two threads): the same
    bits, losses and gradients."""
    log_probs, targets, frames, labels = _batch(name, seed=len(name))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        loss, grad = _loss_and_grad(name, log_probs, targets, frames, labels)
        again = _loss_and_grad(name, log_probs, targets, frames, labels)
        order = torch.arange(len(frames) - 1, -1, -1)
        flipped = _loss_and_grad(name, log_probs[order], targets[order], frames[order],
                                 labels[order])
        halves = [torch.arange(0, 3), torch.arange(3, len(frames))]
        parts = [_loss_and_grad(name, log_probs[h], targets[h], frames[h], labels[h])
                 for h in halves]
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(again, (loss, grad), rtol=0, atol=0)
    torch.testing.assert_close(flipped, (loss[order], grad[order]), rtol=0, atol=0)
    for h, part in zip(halves, parts):
        torch.testing.assert_close(part, (loss[h], grad[h]), rtol=0, atol=0)
