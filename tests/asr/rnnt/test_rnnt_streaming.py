"""Streaming decoding equals whole-utterance decoding for any chunking."""

import random

import pytest
import torch

from speechlab.asr.rnnt import (
    DecodeConfig,
    EarlyStopConfig,
    LidFreeDecoder,
    SearchConfig,
    StreamingDecoder,
    build,
    decode_lid_free,
)
from speechlab.asr.rnnt.search import decode

VOCAB = {"en": 7, "hi": 5, "ta": 6}


def sharp_model(variant, seed=0, preset="tiny"):
    torch.manual_seed(seed)
    model = build(variant, {"en": 7} if variant == "mono" else VOCAB, preset).eval()
    with torch.no_grad():
        # A random joint is nearly flat and input-independent; sharpen it and lower blank so
        # that the outputs are non-trivial and depend on the frames (at -1.0 the lid model's beam
        # search prefers the empty output, which would make the comparison vacuous).
        model.joiner.enc_proj.weight.mul_(4.0)
        for out in model.joiner.outputs:
            out.weight.mul_(4.0)
            out.bias[0] -= 1.5
    return model


def random_chunks(T, rng):
    cuts, pos = [], 0
    while pos < T:
        n = rng.randint(1, 9)
        cuts.append((pos, min(T, pos + n)))
        pos += n
    return cuts


@pytest.mark.parametrize("variant,lang", [("mono", None), ("onehot", "hi"), ("multisoftmax_lid", "en")])
@pytest.mark.parametrize("method", ["greedy", "beam", "modified_beam"])
def test_streaming_equals_full(variant, lang, method):
    model = sharp_model(variant)
    cfg = SearchConfig(method, 3, 2)
    x = torch.randn(1, 47, 8, generator=torch.Generator().manual_seed(1))
    (full,) = decode(model, x, torch.tensor([47]), lang, cfg)
    assert len(full.tokens) > 0
    rng = random.Random(7)
    for _trial in range(3):
        dec = StreamingDecoder(model, lang, cfg)
        partials = [dec.accept(x[0, a:b]) for a, b in random_chunks(47, rng)]
        assert dec.result().tokens == full.tokens
        assert dec.result().score == pytest.approx(full.score, abs=1e-4)
        assert dec.frames == 16
        if method == "greedy":  # greedy never revises: every partial is a prefix of the end
            assert all(full.tokens[: len(p)] == p for p in partials)


def test_lid_free_streaming_equals_whole_utterance():
    model = sharp_model("multisoftmax_lid")
    x = torch.randn(60, 8, generator=torch.Generator().manual_seed(2))
    cfg = DecodeConfig(search=SearchConfig("beam", 2, 2), early_stop=EarlyStopConfig(tau=3, s_th=0.05))
    whole = decode_lid_free(model, x, cfg)
    assert min(whole.active_frames.values()) < whole.num_frames  # early stopping did act
    rng = random.Random(3)
    for _trial in range(2):
        dec = LidFreeDecoder(model, cfg)
        for a, b in random_chunks(60, rng):
            partial = dec.accept(x[a:b])
            assert set(partial) <= set(model.languages)
        got = dec.finish()
        for field in ("language", "tokens", "hypotheses", "active_frames", "num_frames", "t_avg"):
            assert getattr(got, field) == getattr(whole, field), field
        for lang in model.languages:
            assert got.lid_posteriors[lang] == pytest.approx(whole.lid_posteriors[lang], abs=1e-9)
    chunked = decode_lid_free(model, x, DecodeConfig(search=cfg.search, early_stop=cfg.early_stop, chunk_frames=5))
    assert chunked.hypotheses == whole.hypotheses


def test_a_long_stream_keeps_only_the_prediction_rows_its_beams_use():
    """The prediction-network cache is compacted as a stream goes on: memory stays bounded by
    the beams, and the result is the whole-utterance decoding's."""
    from speechlab.asr.rnnt.search import StreamingDecoder

    torch.manual_seed(5)
    model = build("mono", {"en": 7}, "tiny").eval()
    with torch.no_grad():
        model.joiner.outputs[0].weight.mul_(8.0)
    x = torch.randn(1, 900, 8)
    cfg = SearchConfig("beam", 3, 2)
    (whole,) = decode(model, x, torch.tensor([900]), None, cfg)
    dec = StreamingDecoder(model, None, cfg)
    peak = 0
    for i in range(0, 900, 30):
        dec.accept(x[0, i : i + 30])
        peak = max(peak, dec.search.scorer.rows)
    assert dec.result().tokens == whole.tokens and dec.result().times == whole.times
    assert peak < 64 * 3 + 30 * 3 * 3 * 2  # the compaction bound plus one chunk's new rows
