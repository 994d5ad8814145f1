"""The graph loss's helper threads (``loss._run_batch``): kept between calls, usable again in
a forked child (a DataLoader worker), and an error in any thread reaches the caller."""

from __future__ import annotations

import multiprocessing as mp

import pytest
import torch

from speechlab.asr.ctc import loss as loss_module
from speechlab.asr.ctc.loss import graph_loss


def _batch():
    gen = torch.Generator().manual_seed(0)
    log_probs = torch.randn(6, 20, 9, generator=gen, dtype=torch.float64).log_softmax(-1)
    targets = torch.randint(1, 5, (6, 4), generator=gen)
    return log_probs, torch.full((6,), 20), targets, torch.full((6,), 4)


def _loss_in_child(conn, batch) -> None:
    # No torch op of the child's own: torch's OpenMP pool may hang a forked child.
    conn.send(graph_loss(*batch, "S2-T1").tolist())
    conn.close()


def test_helpers_are_kept_between_calls():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        graph_loss(*_batch(), "S2-T1")
        pool = loss_module._helpers
        assert pool is not None
        graph_loss(*_batch(), "S2-T1")
        assert loss_module._helpers is pool
    finally:
        torch.set_num_threads(before)


def test_a_forked_child_runs_the_loss_on_threads_of_its_own():
    """The child inherits the parent's pool object, whose threads did not survive the fork:
    using it would hang."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the child inherits 2
    batch = _batch()
    try:
        expected = graph_loss(*batch, "S2-T1").tolist()  # the parent's pool exists now
        ctx = mp.get_context("fork")
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_loss_in_child, args=(child, batch))
        proc.start()
    finally:
        torch.set_num_threads(before)
    child.close()
    try:
        assert parent.poll(60), "the forked child hung"
        assert parent.recv() == expected
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()


def test_an_error_in_a_helper_reaches_the_caller_after_all_threads_stop():
    done = []

    def work(b: int) -> None:
        if b == 3:
            raise RuntimeError("utterance 3 failed")
        done.append(b)

    with pytest.raises(RuntimeError, match="utterance 3"):
        loss_module._run_batch(work, list(range(8)), threads=2)
    assert 3 not in done and len(done) <= 7
