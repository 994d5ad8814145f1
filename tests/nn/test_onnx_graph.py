"""``nn.onnx_graph``: a graph exported and run, through the checked call and through
:func:`runner` (the same outputs; a bad feed still gets onnxruntime's own error)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from speechlab.nn.onnx_graph import export_graph, runner, session

pytest.importorskip("onnxruntime")


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor, shift: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.lin(x) + shift
        return y, torch.tanh(y)


@pytest.fixture(scope="module")
def graph() -> tuple[nn.Module, bytes]:
    torch.manual_seed(0)
    m = Affine().eval()
    g = export_graph(m, (torch.zeros(2, 3), torch.zeros(1)), ["x", "shift"], ["y", "t"],
                     {"x": {0: "rows"}, "y": {0: "rows"}, "t": {0: "rows"}})
    return m, g


def test_runner_gives_what_the_checked_call_and_the_module_give(graph):
    m, g = graph
    sess = session(g)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    feed = {"x": x, "shift": np.array([0.5], np.float32)}
    fast = runner(sess, ["t", "y"])(feed)
    checked = sess.run(["t", "y"], feed)
    want = [o.detach().numpy() for o in reversed(m(torch.from_numpy(x), torch.tensor([0.5])))]
    for a, b, c in zip(fast, checked, want):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, atol=1e-6)


def test_a_feed_the_checks_refuse_gets_their_error(graph):
    _, g = graph
    sess = session(g)
    run = runner(sess, ["y"])
    with pytest.raises(ValueError, match="Required inputs.*missing"):
        run({"x": np.zeros((1, 3), np.float32)})  # no shift
    with pytest.raises(Exception, match="x"):  # a wrong rank: the runtime names the input
        run({"x": np.zeros(3, np.float32), "shift": np.zeros(1, np.float32)})


def test_runner_without_a_compiled_session_calls_run():
    class Plain:
        def __init__(self) -> None:
            self.calls = []

        def run(self, names, feed):
            self.calls.append((names, dict(feed)))
            return ["ok"]

    plain = Plain()
    assert runner(plain, ["a"])({"x": 1}) == ["ok"] and plain.calls == [(["a"], {"x": 1})]
