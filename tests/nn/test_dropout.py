"""The compiled CPU dropout (``speechlab.nn.dropout``): PyTorch's semantics (keep 1 - p, scale
the kept by 1 / (1 - p), the same mask forward and backward), its draws those of a plain
reference of the generator, reproducible from PyTorch's seed, and attention with it equal to
``scaled_dot_product_attention``."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from speechlab.nn import dropout as D

MASK64 = (1 << 64) - 1


def _reference_keep(n: int, seed: int, p: float) -> list[bool]:
    """SplitMix64 in plain Python: two 32-bit draws a step, kept when >= round(p * 2**32)."""
    threshold = min(round(p * 2.0**32), 2**32 - 1)
    s, out = seed, []
    while len(out) < n:
        s = (s + 0x9E3779B97F4A7C15) & MASK64
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        z ^= z >> 31
        out += [(z & 0xFFFFFFFF) >= threshold, (z >> 32) >= threshold]
    return out[:n]


def test_the_mask_is_the_reference_generators_seeded_from_torch():
    x = torch.ones(7, 9)
    torch.manual_seed(3)
    seed = int(torch.randint(0, 2**62, (1,)).item())
    torch.manual_seed(3)
    y = D.dropout(x, 0.3)
    assert (y != 0).view(-1).tolist() == _reference_keep(x.numel(), seed, 0.3)
    assert torch.equal(y[y != 0], torch.full_like(y[y != 0], 1 / 0.7))


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_it_keeps_one_minus_p_and_scales_the_kept(p):
    torch.manual_seed(0)
    x = torch.randn(400_000)
    y = D.dropout(x, p)
    kept = y != 0
    share = kept.float().mean().item()
    sigma = math.sqrt(p * (1 - p) / x.numel())
    assert abs(share - (1 - p)) < 6 * sigma
    assert torch.allclose(y[kept], x[kept] / (1 - p), rtol=1e-6, atol=0)


def test_the_gradient_is_the_same_mask_scaled():
    torch.manual_seed(1)
    x = torch.randn(3, 50, dtype=torch.float64, requires_grad=True)
    y = D.dropout(x, 0.4)
    g = torch.randn_like(y)
    y.backward(g)
    keep = (y != 0).to(torch.float64)
    assert torch.equal(x.grad, g * keep / 0.6)
    def seeded(t):  # the same mask on every call gradcheck makes
        torch.manual_seed(2)
        return D.dropout(t, 0.4)

    assert torch.autograd.gradcheck(seeded, (torch.randn(4, 6, dtype=torch.float64,
                                                         requires_grad=True),))


def test_seeded_runs_repeat_and_successive_calls_differ():
    x = torch.randn(64, 64)
    torch.manual_seed(5)
    a, b = D.dropout(x, 0.5), D.dropout(x, 0.5)
    torch.manual_seed(5)
    assert torch.equal(D.dropout(x, 0.5), a) and not torch.equal(a, b)


def test_where_it_does_not_apply_it_is_pytorchs():
    x = torch.randn(1000)
    assert D.dropout(x, 0.3, training=False) is x and D.dropout(x, 0.0) is x
    assert torch.equal(D.dropout(x, 1.0), torch.zeros_like(x))
    half = D.dropout(x.to(torch.bfloat16), 0.5)  # half precision: PyTorch's dropout
    assert half.dtype == torch.bfloat16 and 300 < int((half != 0).sum()) < 700
    D.COMPILED = False
    try:
        torch.manual_seed(0)
        theirs = D.dropout(x, 0.3)
        torch.manual_seed(0)
        assert torch.equal(theirs, F.dropout(x, 0.3, True))
    finally:
        D.COMPILED = True


def test_the_module_is_an_nn_dropout():
    m = D.Dropout(0.2)
    assert isinstance(m, nn.Dropout) and m.state_dict() == {} and "p=0.2" in repr(m)
    x = torch.randn(100)
    assert torch.equal(m.eval()(x), x)
    assert int((m.train()(x) == 0).sum()) > 0


@pytest.mark.parametrize("mask", ["none", "bool", "additive", "causal"])
def test_attention_with_its_dropout_is_sdpas_attention(mask):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 11, 8, dtype=torch.float64) for _ in range(3))
    lengths = torch.tensor([11, 7])
    keys = torch.arange(11)[None, :] < lengths[:, None]
    attn_mask = {"none": None, "causal": None, "bool": keys[:, None, None, :],
                 "additive": torch.zeros(2, 1, 1, 11, dtype=torch.float64)
                 .masked_fill(~keys[:, None, None, :], -1e9)}[mask]
    causal = mask == "causal"
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=causal)
    # a dropout too small to drop anything: the weights as SDPA computes them
    got = D.attention(q, k, v, attn_mask, dropout_p=1e-12, is_causal=causal)
    assert torch.allclose(got, want, atol=1e-9)
    # and with dropout, the weights dropped as dropout() drops them
    torch.manual_seed(7)
    got = D.attention(q, k, v, attn_mask, dropout_p=0.25, is_causal=causal)
    scores = q @ k.transpose(-2, -1) / math.sqrt(8)
    if causal:
        scores = scores.masked_fill(~torch.ones(11, 11, dtype=torch.bool).tril(), -math.inf)
    if attn_mask is not None:
        scores = (scores.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool
                  else scores + attn_mask)
    torch.manual_seed(7)
    assert torch.allclose(got, D.dropout(scores.softmax(-1), 0.25) @ v, atol=1e-12)
    # evaluation (no dropout) is SDPA itself
    assert torch.equal(D.attention(q, k, v, attn_mask, is_causal=causal), want)
