"""local_attention against a brute-force masked softmax: values, gradients, padding, the band."""

from __future__ import annotations

import math

import pytest
import torch

from speechlab.errors import ConfigError
from speechlab.ssl.wav2vec2 import local_attention


def brute_force(q, k, v, radius, pad=None):
    """Per query, softmax over the keys within the radius (padded keys at the dtype's minimum),
    written as loops over the definition."""
    B, H, T, D = q.shape
    out = torch.zeros_like(q)
    for b in range(B):
        for i in range(T):
            js = [j for j in range(T) if abs(i - j) <= radius]
            s = torch.stack([(q[b, :, i] * k[b, :, j]).sum(-1) / math.sqrt(D) for j in js], -1)
            if pad is not None:
                s = s + torch.tensor([torch.finfo(q.dtype).min if pad[b, j] else 0.0 for j in js],
                                     dtype=q.dtype)
            w = s.softmax(-1)
            out[b, :, i] = sum(w[:, n, None] * v[b, :, j] for n, j in enumerate(js))
    return out


def _qkv(B=2, H=3, T=23, D=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, T, D, generator=g, dtype=dtype, requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("radius,chunk", [(1, 4), (3, 4), (5, 7), (2, 32), (10, 3), (8, 16)])
def test_equals_brute_force_band_with_gradients(radius, chunk):
    q, k, v = _qkv()
    got = local_attention(q, k, v, radius, chunk=chunk)
    want = brute_force(q, k, v, radius)
    torch.testing.assert_close(got, want)
    g = torch.randn_like(got)
    grads = torch.autograd.grad((got * g).sum(), (q, k, v))
    wants = torch.autograd.grad((want * g).sum(), (q, k, v))
    for a, b in zip(grads, wants):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b)


def test_no_weight_outside_the_radius():
    # Changing keys and values farther than the radius from query i never moves output i.
    q, k, v = _qkv(B=1, T=40)
    radius = 4
    base = local_attention(q, k, v, radius, chunk=8)
    k2, v2 = k.detach().clone(), v.detach().clone()
    k2[:, :, 20:] += 100.0
    v2[:, :, 20:] -= 50.0
    moved = local_attention(q, k2, v2, radius, chunk=8)
    torch.testing.assert_close(moved[:, :, : 20 - radius], base[:, :, : 20 - radius])
    assert not torch.allclose(moved[:, :, 20 - radius], base[:, :, 20 - radius])


@pytest.mark.parametrize("T", [1, 2, 9])
def test_equals_full_attention_when_the_radius_covers_the_sequence(T):
    q, k, v = _qkv(T=T)
    full = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(local_attention(q, k, v, max(T - 1, 1)), full)
    torch.testing.assert_close(local_attention(q, k, v, T + 5), full)
    # the blocked path at a radius just covering the sequence agrees too
    if T > 2:
        torch.testing.assert_close(local_attention(q, k, v, T - 2, chunk=2),
                                   brute_force(q, k, v, T - 2))


def test_key_padding_is_masked_and_padded_queries_stay_finite():
    q, k, v = _qkv(B=2, T=19)
    pad = torch.zeros(2, 19, dtype=torch.bool)
    pad[1, 11:] = True
    got = local_attention(q, k, v, 3, pad, chunk=4)
    torch.testing.assert_close(got, brute_force(q, k, v, 3, pad))
    assert torch.isfinite(got).all()
    # inference takes another path (one head at a time, no graph): same numbers
    with torch.no_grad():
        torch.testing.assert_close(local_attention(q, k, v, 3, pad, chunk=4), got)
        torch.testing.assert_close(local_attention(q, k, v, 5, chunk=3),
                                   brute_force(q, k, v, 5))
    # valid queries of the padded utterance equal that utterance alone, unpadded
    alone = local_attention(q[1:, :, :11], k[1:, :, :11], v[1:, :, :11], 3, chunk=4)
    torch.testing.assert_close(got[1:, :, :11], alone)


@pytest.mark.parametrize("radius", [0, -3, 2.5, True])
def test_radius_below_one_is_refused(radius):
    q, k, v = _qkv(T=5)
    with pytest.raises(ConfigError, match="radius must be an integer >= 1"):
        local_attention(q, k, v, radius)


def test_gradients_with_padding_and_more_heads_than_a_group_match_finite_differences():
    # 6 heads: the recomputing backward walks them in groups; padded keys in one row (few
    # enough that every query has a real key in reach: a query with none has meaningless
    # weights, which finite differences at the dtype's minimum cannot follow).
    q, k, v = _qkv(B=2, H=6, T=19, D=3, seed=4)
    pad = torch.zeros(2, 19, dtype=torch.bool)
    pad[1, 17:] = True
    assert torch.autograd.gradcheck(lambda a, b, c: local_attention(a, b, c, 3, pad, chunk=5), (q, k, v))


def test_dropout_gradients_match_finite_differences_for_a_fixed_mask():
    q, k, v = _qkv(B=1, H=5, T=17, D=3, seed=5)

    def fn(a, b, c):
        torch.manual_seed(11)  # the same keep-mask on every call
        return local_attention(a, b, c, 2, chunk=4, dropout=0.3)

    out = fn(q, k, v)
    # some weights were dropped: the output differs from the dropout-free one
    assert not torch.allclose(out, local_attention(q, k, v, 2, chunk=4))
    assert torch.autograd.gradcheck(fn, (q, k, v))
