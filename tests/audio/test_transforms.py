"""FrameStacker (planted ramp, streaming == whole), SpecAugment bounds, GlobalCMVN vs numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.audio.transforms import FrameStacker, GlobalCMVN, SpecAugment, SpecAugmentConfig
from speechlab.errors import DataError


def ramp(lengths: list[int], D: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """x[b, t, d] = 1000*b + t + 0.1*d on valid frames, -1 on padding."""
    T = max(lengths) if lengths else 0
    x = torch.full((len(lengths), T, D), -1.0, dtype=torch.float64)
    for b, n in enumerate(lengths):
        t = torch.arange(n, dtype=torch.float64)[:, None]
        x[b, :n] = 1000 * b + t + 0.1 * torch.arange(D, dtype=torch.float64)[None, :]
    return x, torch.tensor(lengths)


@pytest.mark.parametrize("stack,stride", [(8, 3), (1, 1), (4, 2), (3, 5)])
def test_stacker_planted_mapping(stack, stride):
    lengths = [10, 1, 0, 7]
    D = 2
    x, lens = ramp(lengths, D)
    y, y_lens = FrameStacker(stack, stride, D)(x, lens)
    assert y.shape[-1] == stack * D
    for b, n in enumerate(lengths):
        expect_len = -(-n // stride)  # ceil
        assert int(y_lens[b]) == expect_len
        for tp in range(expect_len):
            # Output t' = input frames stride*t'-(stack-1) .. stride*t', oldest first, frames
            # before 0 are copies of frame 0.
            src = [max(stride * tp - (stack - 1) + k, 0) for k in range(stack)]
            expect = torch.cat([x[b, s] for s in src])
            assert torch.equal(y[b, tp], expect), (b, tp)
        assert (y[b, expect_len:] == 0).all()


def test_stacker_paper_dims():
    x, lens = ramp([100], 80)
    y, y_lens = FrameStacker()(x.float(), lens)
    assert y.shape == (1, 34, 640) and int(y_lens[0]) == 34


def run_streaming(stacker: FrameStacker, x, lens, chunkings: list[list[int]]):
    """Feed each stream in the given chunk sizes (streams advance together, one chunk per call)."""
    B, _, D = x.shape
    state = stacker.init_state(B, dtype=x.dtype)
    outs: list[list[torch.Tensor]] = [[] for _ in range(B)]
    pos = [0] * B
    for step in range(max(len(c) for c in chunkings)):
        cl = [min(chunkings[b][step], int(lens[b]) - pos[b]) if step < len(chunkings[b]) else 0
              for b in range(B)]
        Tc = max(cl)
        chunk = torch.full((B, Tc, D), 7.0, dtype=x.dtype)  # garbage padding must not leak
        for b in range(B):
            chunk[b, : cl[b]] = x[b, pos[b] : pos[b] + cl[b]]
            pos[b] += cl[b]
        y, y_lens, state = stacker.streaming_forward(chunk, torch.tensor(cl), state)
        for b in range(B):
            outs[b].append(y[b, : y_lens[b]])
    return [torch.cat(o) if o else torch.zeros(0) for o in outs], pos


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(data=st.data(), stack=st.integers(1, 9), stride=st.integers(1, 4))
def test_stacker_streaming_equals_whole(data, stack, stride):
    B = data.draw(st.integers(1, 3))
    lengths = data.draw(st.lists(st.integers(0, 25), min_size=B, max_size=B))
    x, lens = ramp(lengths, 3)
    stacker = FrameStacker(stack, stride, 3)
    y, y_lens = stacker(x, lens)
    chunkings = [data.draw(st.lists(st.integers(0, 7), min_size=1, max_size=40)) for _ in range(B)]
    for b in range(B):  # make sure every stream is fed completely
        chunkings[b] = chunkings[b] + [max(lengths[b], 1)]
    outs, pos = run_streaming(stacker, x, lens, chunkings)
    for b in range(B):
        assert pos[b] == lengths[b]
        assert outs[b].shape[0] == int(y_lens[b])
        if outs[b].numel():
            assert torch.equal(outs[b], y[b, : y_lens[b]])


def frames_masked(y: torch.Tensor) -> torch.Tensor:
    """(T,) bool: frames that are entirely the mask value 0 (inputs are all ones)."""
    return (y == 0).all(dim=-1)


def test_specaugment_bounds_and_determinism():
    torch.manual_seed(0)
    B, T, D = 16, 120, 40
    lens = torch.randint(20, T + 1, (B,))
    lens[0] = T
    x = torch.ones(B, T, D)
    aug = SpecAugment(SpecAugmentConfig(num_freq_masks=2, freq_mask_width=7, num_time_masks=3,
                                        time_mask_width=10, time_mask_max_ratio=0.1)).train()
    y, y_lens = aug(x, lens, generator=torch.Generator().manual_seed(5))
    assert y_lens is lens and y.shape == x.shape
    assert (x == 1).all()  # input untouched
    any_time = any_freq = False
    for b in range(B):
        n = int(lens[b])
        tmask = frames_masked(y[b])
        assert not tmask[n:].any(), "time masks stay inside the utterance"
        cap = min(10, int(0.1 * n))
        assert int(tmask.sum()) <= 3 * cap
        # Frequency-masked bins are zero on every unmasked frame; at most 2 masks of <= 7 bins.
        keep = ~tmask
        fmask = (y[b][keep] == 0).all(dim=0)
        assert int(fmask.sum()) <= 2 * 7
        # Nothing else is changed: every cell is 0 (masked) or 1 (kept).
        cell_masked = fmask[None, :] | tmask[:, None]
        assert torch.equal(y[b] == 0, cell_masked)
        any_time |= bool(tmask.any())
        any_freq |= bool(fmask.any())
    assert any_time and any_freq  # the masks do happen
    again, _ = aug(x, lens, generator=torch.Generator().manual_seed(5))
    assert torch.equal(y, again)
    other, _ = aug(x, lens, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(y, other)
    aug.eval()
    assert aug(x, lens)[0] is x


def test_specaugment_time_warp_keeps_monotone_ramp():
    B, T, D = 3, 60, 4
    lens = torch.tensor([60, 45, 30])
    x = torch.arange(T, dtype=torch.float32)[None, :, None].repeat(B, 1, D)
    aug = SpecAugment(SpecAugmentConfig(num_freq_masks=0, num_time_masks=0, time_warp=5)).train()
    y, _ = aug(x, lens, generator=torch.Generator().manual_seed(0))
    assert not torch.equal(y, x)
    for b in range(B):
        n = int(lens[b])
        seq = y[b, :n, 0]
        assert (seq[1:] >= seq[:-1] - 1e-5).all()
        assert seq.min() >= -1e-5 and seq.max() <= n - 1 + 1e-5
        assert torch.equal(y[b, n:], x[b, n:])


def test_cmvn_matches_numpy(tmp_path):
    rng = np.random.default_rng(0)
    D = 5
    a = rng.normal(3.0, 2.0, (2, 30, D))
    b = rng.normal(-1.0, 0.5, (3, 17, D))
    la, lb = np.array([30, 12]), np.array([17, 1, 9])
    cmvn = GlobalCMVN(D)
    cmvn.accumulate(torch.tensor(a, dtype=torch.float32), torch.tensor(la))
    cmvn.accumulate(torch.tensor(b, dtype=torch.float32), torch.tensor(lb))
    cmvn.finalize()
    valid = np.concatenate([a[i, :n] for i, n in enumerate(la)] + [b[i, :n] for i, n in enumerate(lb)])
    valid = valid.astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(cmvn.mean.numpy(), valid.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(cmvn.std.numpy(), valid.std(0), rtol=1e-5)
    x = torch.tensor(a, dtype=torch.float32)
    y, _ = cmvn(x, torch.tensor(la))
    np.testing.assert_allclose(y.numpy(), (a - valid.mean(0)) / valid.std(0), rtol=1e-4, atol=1e-4)
    # Per frame, so a chunk gives the same frames as the whole.
    ys, _, _ = cmvn.streaming_forward(x[:, 7:11], torch.tensor([4, 4]), cmvn.init_state(2))
    assert torch.equal(ys, y[:, 7:11])

    cmvn.save(tmp_path / "cmvn.safetensors")
    back = GlobalCMVN.load(tmp_path / "cmvn.safetensors")
    assert torch.equal(back.mean, cmvn.mean) and torch.equal(back.std, cmvn.std)
    assert torch.equal(back(x, None)[0], y)


def test_cmvn_errors(tmp_path):
    with pytest.raises(DataError, match="no frames"):
        GlobalCMVN(3).finalize()
    with pytest.raises(DataError, match="dim 3"):
        GlobalCMVN(3).accumulate(torch.zeros(1, 2, 4))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a tensor file")
    with pytest.raises(DataError, match="bad.safetensors"):
        GlobalCMVN.load(bad)
    cmvn = GlobalCMVN(2)
    cmvn.accumulate(torch.ones(4, 2))
    assert (cmvn.finalize().std > 0).all()  # constant dims are floored, not 0
