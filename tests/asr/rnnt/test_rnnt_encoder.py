"""The causal conv + Transformer encoder option: causality, padding, exact streaming, and the
multi-softmax model built on it (search, LID-free decoding)."""

import random

import pytest
import torch

from speechlab.asr.rnnt import DecodeConfig, SearchConfig, StreamingDecoder, build, decode_lid_free
from speechlab.asr.rnnt.search import decode
from speechlab.asr.rnnt.encoder import ConvTransformerEncoder
from speechlab.asr.rnnt.presets import PRESETS
from speechlab.errors import ConfigError, DataError

from test_rnnt_streaming import sharp_model

VOCAB = {"en": 7, "hi": 5, "ta": 6}


def encoder(cond_dim=0, seed=0):
    torch.manual_seed(seed)
    return ConvTransformerEncoder(8, 12, 2, 2, 16, 3, cond_dim=cond_dim).eval()


def test_output_lengths_are_a_quarter_rounded_up():
    enc = encoder()
    for T in (1, 2, 3, 4, 5, 8, 9, 47):
        y, y_lens = enc(torch.randn(1, T, 8), torch.tensor([T]))
        assert y.shape[1] == int(y_lens[0]) == -(-T // 4)


def test_frame_t_never_sees_input_after_frame_4t():
    enc = encoder()
    x = torch.randn(1, 40, 8)
    y, _ = enc(x, torch.tensor([40]))
    for t in (0, 3, 6):
        future = x.clone()
        future[:, 4 * t + 1 :] = torch.randn(1, 40 - 4 * t - 1, 8)
        y2, _ = enc(future, torch.tensor([40]))
        assert torch.allclose(y[0, : t + 1], y2[0, : t + 1], atol=1e-5)
        assert not torch.allclose(y[0, t + 1 :], y2[0, t + 1 :], atol=1e-3)


def test_padding_changes_nothing_and_padded_frames_are_zero():
    enc = encoder()
    x = torch.randn(3, 37, 8)
    lens = torch.tensor([37, 20, 5])
    y, y_lens = enc(x, lens)
    for b in range(3):
        alone, _ = enc(x[b : b + 1, : lens[b]], lens[b : b + 1])
        assert torch.allclose(y[b, : y_lens[b]], alone[0], atol=1e-5)
        assert bool((y[b, y_lens[b] :] == 0).all())


def test_streaming_equals_whole_input_for_any_chunking():
    enc = encoder(cond_dim=3)
    x = torch.randn(2, 61, 8)
    lens = torch.tensor([61, 33])
    cond = torch.eye(3)[[0, 2]]
    full, full_lens = enc(x, lens, cond)
    rng = random.Random(3)
    for _trial in range(4):
        state = enc.init_state(2)
        got = [[], []]
        pos = 0
        while pos < 61:
            n = rng.randint(1, 11)
            chunk = x[:, pos : pos + n]
            chunk_lens = (lens - pos).clamp(0, chunk.shape[1])
            y, y_lens, state = enc.streaming_forward(chunk, chunk_lens, state, cond)
            for b in range(2):
                got[b].append(y[b, : y_lens[b]])
            pos += n
        for b in range(2):
            assert torch.allclose(torch.cat(got[b]), full[b, : full_lens[b]], atol=1e-5)


def _stream(enc, x, lens, chunks, rng, cond=None):
    """Feed rows x (B,T,F) of lengths lens in pieces: ``chunks`` gives each step's (B,) frame
    counts (0 allowed); each piece has 0..2 frames of garbage padding, which must not matter
    (a piece of no frames at all for every row is (B,0,F)). Returns each row's frames and the
    last state."""
    B = x.shape[0]
    state = enc.init_state(B)
    pos = torch.zeros(B, dtype=torch.long)
    got = [[] for _ in range(B)]
    for n in chunks(pos):
        n = torch.minimum(n, lens - pos)
        width = int(n.max()) + rng.randint(0, 2)
        chunk = torch.randn(B, width, x.shape[2], dtype=x.dtype) * 100
        for b in range(B):
            chunk[b, : n[b]] = x[b, pos[b] : pos[b] + n[b]]
        before = state
        y, y_lens, state = enc.streaming_forward(chunk, n, state, cond)
        assert bool((y[torch.arange(y.shape[1])[None] >= y_lens[:, None]] == 0).all())
        for b in range(B):
            got[b].append(y[b, : y_lens[b]])
            if n[b] == 0:  # a row that brings nothing keeps its state
                assert torch.equal(state.feats[b], before.feats[b])
                assert torch.equal(state.conv[b], before.conv[b])
                f = int(before.frames[b])
                assert torch.equal(state.keys[:, b, :, :f], before.keys[:, b, :, :f])
                assert torch.equal(state.values[:, b, :, :f], before.values[:, b, :, :f])
        pos += n
        if bool((pos == lens).all()):
            break
    return [torch.cat(g) for g in got], state


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 5e-6), (torch.float64, 1e-12)])
@torch.no_grad()
def test_long_streams_in_random_uneven_pieces_equal_the_whole_input(dtype, tol):
    """Three rows of different lengths, each step giving each row its own piece: mostly 0..3
    frames (pieces that complete no encoder frame, at every stride phase), sometimes a long
    one; rows at different positions share one batch."""
    enc = encoder(cond_dim=3).to(dtype)
    rng = random.Random(7)
    x = torch.randn(3, 403, 8, dtype=dtype)
    lens = torch.tensor([403, 250, 97])
    cond = torch.eye(3, dtype=dtype)[[1, 0, 2]]
    full, full_lens = enc(x, lens, cond)

    def chunks(pos):
        while True:
            if rng.random() < 0.3:  # the whole batch at one pace
                yield torch.full((3,), rng.randint(0, 3))
            else:
                yield torch.tensor([rng.choice([0, 1, 2, 3, 3, rng.randint(4, 40)])
                                    for _ in range(3)])

    got, state = _stream(enc, x, lens, chunks, rng, cond)
    for b in range(3):
        assert got[b].shape[0] == full_lens[b]
        assert float((got[b] - full[b, : full_lens[b]]).abs().max()) <= tol
    assert state.frames.tolist() == full_lens.tolist() == [101, 63, 25]
    assert state.seen.tolist() == lens.tolist()
    assert state.keys.shape == state.values.shape == (2, 3, 2, 101, 6)
    # a piece of no frames for any row: nothing out, the state as it was
    y, y_lens, after = enc.streaming_forward(x[:, :0], torch.zeros(3, dtype=torch.long), state,
                                             cond)
    assert y.shape == (3, 0, 12) and y_lens.tolist() == [0, 0, 0]
    for a, b in ((after.feats, state.feats), (after.conv, state.conv), (after.seen, state.seen)):
        assert torch.equal(a, b)
    for b, f in enumerate(state.frames.tolist()):  # the slots past a row's frames are unused
        assert torch.equal(after.keys[:, b, :, :f], state.keys[:, b, :, :f])
        assert torch.equal(after.values[:, b, :, :f], state.values[:, b, :, :f])


def test_a_chunks_work_does_not_grow_with_the_stream():
    """Counted, not timed: the rows each chunk feeds the convolutions and each layer are the
    same at the start of a stream and 600 chunks in."""
    enc = encoder()
    fed = []
    for module in (enc.subsampling.conv1, enc.subsampling.conv2, enc.layers[0].qkv,
                   enc.layers[1].qkv):
        # time is the second last axis of both (B,C,T,F) and (B,T,D)
        module.register_forward_hook(lambda m, args, out: fed.append(args[0].shape[-2]))
    state = enc.init_state(1)
    per_chunk = []
    for _ in range(600):
        fed.clear()
        _, y_lens, state = enc.streaming_forward(torch.randn(1, 8, 8), torch.tensor([8]), state)
        assert y_lens.tolist() == [2]
        per_chunk.append(tuple(fed))
    assert per_chunk[0] == per_chunk[-1] == (2 * 4 + 3, 2 * 2 + 3, 2, 2)
    assert set(per_chunk) == {per_chunk[0]}
    assert state.frames.tolist() == [1200]  # what the caller bounds (segments of its own)


def test_bad_inputs_are_named():
    enc = encoder(cond_dim=3)
    with pytest.raises(DataError, match=r"\(B, T, 8\)"):
        enc(torch.randn(1, 10, 7), torch.tensor([10]), torch.eye(3)[:1])
    with pytest.raises(DataError, match="do not fit"):
        enc(torch.randn(1, 10, 8), torch.tensor([11]), torch.eye(3)[:1])
    with pytest.raises(DataError, match="language one-hot"):
        enc(torch.randn(1, 10, 8), torch.tensor([10]))
    with pytest.raises(ConfigError, match="heads"):
        ConvTransformerEncoder(8, 12, 1, 5, 16, 3)


def test_fast_preset_sizes():
    model = build("multisoftmax_lid", {"en": 55, "hi": 117, "ta": 71, "gu": 95}, "fast")
    assert isinstance(model.encoder, ConvTransformerEncoder)
    n_enc = sum(p.numel() for p in model.encoder.parameters())
    assert 2.5e6 < n_enc < 3.5e6
    n_lid = sum(p.numel() for p in model.lid_head.parameters())
    assert n_lid == PRESETS["fast"].encoder_dim * 256 + 256 + 256 * 4 + 4


def sharp(variant):
    return sharp_model(variant, preset="tiny_transformer")


@pytest.mark.parametrize("variant,lang", [("mono", None), ("onehot", "hi"), ("multisoftmax_lid", "en")])
def test_streaming_decoder_equals_whole_utterance(variant, lang):
    model = sharp(variant)
    cfg = SearchConfig("beam", 3, 2)
    x = torch.randn(1, 53, 8, generator=torch.Generator().manual_seed(1))
    (full,) = decode(model, x, torch.tensor([53]), lang, cfg)
    assert len(full.tokens) > 0
    dec = StreamingDecoder(model, lang, cfg)
    for a in range(0, 53, 6):
        dec.accept(x[0, a : a + 6])
    assert dec.result().tokens == full.tokens
    assert dec.result().score == pytest.approx(full.score, abs=1e-4)


def test_lid_free_decoding_streams_exactly():
    model = sharp("multisoftmax_lid")
    x = torch.randn(45, 8, generator=torch.Generator().manual_seed(2))
    whole = decode_lid_free(model, x, DecodeConfig(search=SearchConfig("beam", 2, 2)))
    chunked = decode_lid_free(model, x, DecodeConfig(search=SearchConfig("beam", 2, 2), chunk_frames=7))
    assert chunked.hypotheses == whole.hypotheses
    assert chunked.lid_posteriors == pytest.approx(whole.lid_posteriors, abs=1e-6)
    assert whole.num_frames == 12


def test_transformer_model_trains_through_the_loss():
    from speechlab.asr.rnnt.loss import rnnt_loss

    model = build("multisoftmax", VOCAB, "tiny_transformer")
    x = torch.randn(2, 30, 8)
    out = model(x, torch.tensor([30, 22]), torch.tensor([[1, 2, 3], [4, 0, 0]]), torch.tensor([3, 1]), "en")
    loss = rnnt_loss(out.logits, torch.tensor([[1, 2, 3], [4, 0, 0]]), out.enc_lens, torch.tensor([3, 1])).mean()
    loss.backward()
    grads = [p.grad for p in model.encoder.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(float(g.abs().sum()) > 0 for g in grads)
