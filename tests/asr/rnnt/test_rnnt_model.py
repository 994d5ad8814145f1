"""The RNN-T family on the tiny preset: shapes, routing, gradients, streaming encoder."""

import random

import pytest
import torch

from speechlab.asr.rnnt import PRESETS, VARIANTS, RNNTConfig, UnionMap, build, build_from_config, lid_ce_loss
from speechlab.errors import ConfigError, DataError

VOCAB = {"en": 7, "hi": 5, "ta": 6}
DIMS = PRESETS["tiny"]


def make(variant, seed=0):
    torch.manual_seed(seed)
    return build(variant, {"en": 7} if variant == "mono" else VOCAB, "tiny")


def batch(B=3, T=13, U=4, vocab=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, DIMS.feature_dim, generator=g)
    x_lens = torch.tensor([T] + [max(1, T - 3 * i) for i in range(1, B)])
    y = torch.randint(1, vocab, (B, U), generator=g)
    y_lens = torch.tensor([U] + [max(0, U - i) for i in range(1, B)])
    return x, x_lens, y, y_lens


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_forward_shapes(variant):
    model = make(variant)
    lang = None if variant == "mono" else "hi"
    V = {"mono": 7, "vanilla": 16, "onehot": 16}.get(variant, 5)  # union: 6 + 4 + 5 + blank
    x, x_lens, y, y_lens = batch(vocab=V)
    out = model(x, x_lens, y, y_lens, lang)
    T_enc = -(-13 // DIMS.stride)
    assert out.logits.shape == (3, T_enc, 5, V)
    assert out.enc_lens.tolist() == [-(-n // DIMS.stride) for n in x_lens.tolist()]
    assert out.pred.shape == (3, 5, DIMS.predictor_dim)
    assert out.vocab_size == V
    torch.testing.assert_close(out.joint(out.enc[:, :2], out.pred), out.logits[:, :2])
    if variant == "multisoftmax_lid":
        assert out.lid_logits.shape == (3, T_enc, 3)
    else:
        assert out.lid_logits is None


def test_target_padding_value_does_not_matter():
    model = make("multisoftmax")
    x, x_lens, y, y_lens = batch()
    padded = y.clone()
    for b, n in enumerate(y_lens.tolist()):
        padded[b, n:] = -1
    torch.testing.assert_close(model(x, x_lens, padded, y_lens, "hi").logits,
                               model(x, x_lens, y, y_lens, "hi").logits)


def test_union_map():
    u = UnionMap(("en", "hi", "ta"), (7, 5, 6))
    assert u.size == 16
    assert u.to_union("hi", [0, 1, 4]) == [0, 7, 10]
    for lang, v in zip(u.languages, u.vocab_sizes):
        for i in range(1, v):
            assert u.to_local(u.to_union(lang, [i])[0]) == (lang, i)
    assert u.language_of([1, 8, 9, 0]) == "hi" and u.language_of([0]) is None
    for bad in (16, -1):
        with pytest.raises(DataError, match="outside the union vocabulary"):
            u.to_local(bad)
    with pytest.raises(DataError, match="unknown language 'fr'"):
        u.to_union("fr", [1])


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(ConfigError, match="unknown RNN-T variant"):
        build("bilingual", VOCAB, "tiny")
    with pytest.raises(ConfigError, match="exactly one language"):
        build("mono", VOCAB, "tiny")
    with pytest.raises(ConfigError, match="unknown model preset"):
        build("mono", {"en": 5}, "huge")
    model = make("multisoftmax")
    x, x_lens, y, y_lens = batch()
    with pytest.raises(DataError, match="unknown language 'fr'"):
        model(x, x_lens, y, y_lens, "fr")
    with pytest.raises(DataError, match="exactly one language"):
        model(x, x_lens, y, y_lens, ["en", "hi", "hi"])
    with pytest.raises(DataError, match="label id 5 is outside 1..4"):
        model(x, x_lens, torch.full_like(y, 5), y_lens, "hi")
    with pytest.raises(DataError, match=r"features \(B, T, 8\)"):
        model(x[..., :3], x_lens, y, y_lens, "hi")
    with pytest.raises(DataError, match="needs the language"):
        make("onehot").encode(x, x_lens)


def test_build_from_config_dims_override():
    cfg = RNNTConfig(variant="multisoftmax_lsp", vocab_sizes=VOCAB, preset="tiny",
                     dims=DIMS.__class__(feature_dim=4, stack=2, stride=1, encoder_layers=1,
                                         encoder_dim=5, embed_dim=3, predictor_layers=1,
                                         predictor_dim=4, joint_dim=6))
    model = build_from_config(cfg)
    assert model.config == cfg and len(model.predictor.lstms) == 3
    assert model.encoder.lstm.input_size == 8


def test_lid_ce_gradient_reaches_only_encoder_and_lid_head():
    model = make("multisoftmax_lid")
    x, x_lens, y, y_lens = batch()
    out = model(x, x_lens, y, y_lens, "ta")
    loss = lid_ce_loss(out.lid_logits, out.enc_lens, out.language_ids)
    loss.backward()
    for name, p in model.named_parameters():
        reached = p.grad is not None and bool(p.grad.abs().sum() > 0)
        assert reached == name.startswith(("encoder.", "lid_head.")), name


def test_lid_ce_loss_ignores_padding_and_matches_direct_sums():
    logits = torch.randn(2, 4, 3)
    lens = torch.tensor([4, 2])
    ids = torch.tensor([2, 0])
    frames = torch.cat([-logits[0].log_softmax(-1)[:, 2], -logits[1, :2].log_softmax(-1)[:, 0]])
    torch.testing.assert_close(lid_ce_loss(logits, lens, ids), frames.mean())
    # per utterance: each utterance's frames summed, averaged over the batch (like the RNN-T NLL)
    torch.testing.assert_close(lid_ce_loss(logits, lens, ids, "utterance"), frames.sum() / 2)
    with pytest.raises(ValueError, match="reduction"):
        lid_ce_loss(logits, lens, ids, "batch")


@pytest.mark.parametrize("variant", ["multisoftmax", "multisoftmax_lsp", "multisoftmax_lid"])
def test_other_languages_get_no_gradient(variant):
    model = make(variant)
    x, x_lens, y, y_lens = batch(vocab=5)
    out = model(x, x_lens, y, y_lens, "hi")
    # Any function of the logits stands in for the RNN-T loss here.
    (out.logits.log_softmax(-1)[..., 0].mean() + (out.lid_logits if out.lid_logits is not None else torch.zeros(1)).sum() * 0).backward()
    hi = model.languages.index("hi")
    lsp = variant == "multisoftmax_lsp"
    for name, p in model.named_parameters():
        parts = name.split(".")
        if parts[0] == "lid_head":
            continue
        per_language = parts[1] in ("embeddings", "outputs") or (parts[1] == "lstms" and lsp)
        used = not per_language or int(parts[2]) == hi
        assert (p.grad is not None) == used, name
        if used:
            assert p.grad.abs().sum() > 0, name


def test_onehot_uses_the_language_and_vanilla_does_not():
    x, x_lens, y, y_lens = batch(vocab=16)
    onehot = make("onehot")
    a = onehot(x, x_lens, y, y_lens, "en").logits
    b = onehot(x, x_lens, y, y_lens, ["ta", "ta", "ta"]).logits
    assert not torch.allclose(a, b)
    vanilla = make("vanilla")
    torch.testing.assert_close(vanilla(x, x_lens, y, y_lens, "en").logits,
                               vanilla(x, x_lens, y, y_lens, None).logits)


def reference_stack(x, stack, stride):
    """Direct loop: frame j = x[jR-S+1 .. jR] (copies of x[0] before the start), oldest first."""
    T, F = x.shape
    rows = []
    for t in range(0, T, stride):
        rows.append(torch.cat([x[max(i, 0)] for i in range(t - stack + 1, t + 1)]))
    return torch.stack(rows) if rows else torch.zeros(0, stack * F)


@pytest.mark.parametrize("variant", ["mono", "onehot"])
def test_encoder_matches_direct_stacking_and_lstm(variant):
    """Each row alone: direct stacking loop (+ one-hot), then the LSTM from a zero state."""
    enc = make(variant).encoder.eval()
    x, x_lens, _, _ = batch(T=11)
    cond = torch.eye(3)[[2, 0, 1]] if variant == "onehot" else None
    y, y_lens = enc(x, x_lens, cond)
    for b in range(3):
        ref_in = reference_stack(x[b, : x_lens[b]], DIMS.stack, DIMS.stride)
        if cond is not None:
            ref_in = torch.cat([ref_in, cond[b].expand(ref_in.shape[0], -1)], dim=-1)
        ref, _ = enc.lstm(ref_in[None])
        assert y_lens[b] == ref_in.shape[0] == enc.output_lengths(x_lens)[b]
        torch.testing.assert_close(y[b, : y_lens[b]], ref[0], atol=1e-6, rtol=1e-5)
        assert y[b, y_lens[b]:].abs().sum() == 0


def test_encoder_lstm_in_lower_precision_keeps_its_output_and_the_state_dtype():
    """On a GPU, autocast runs the packed LSTM in bf16/fp16 while the input and the carried
    state are fp32 (the CPU's autocast leaves a packed LSTM in fp32, so an LSTM that answers in
    bf16 stands in for it): the output comes back in bf16, the state stays fp32."""
    from speechlab.asr.rnnt.encoder import _lstm

    class HalfLSTM(torch.nn.LSTM):
        def forward(self, packed, state):
            y, (h, c) = super().forward(packed, state)
            return y._replace(data=y.data.bfloat16()), (h.bfloat16(), c.bfloat16())

    lstm = HalfLSTM(4, 5, batch_first=True)
    x, lens = torch.randn(3, 6, 4), torch.tensor([6, 0, 2])
    h = c = torch.zeros(1, 3, 5)
    out, h2, c2 = _lstm(x, lens, lstm, h, c)
    assert out.dtype == torch.bfloat16 and h2.dtype == c2.dtype == torch.float32
    plain = torch.nn.LSTM(4, 5, batch_first=True)
    plain.load_state_dict(lstm.state_dict())
    ref, ref_h, _ = _lstm(x, lens, plain, h, c)
    torch.testing.assert_close(out.float(), ref, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(h2, ref_h, atol=2e-2, rtol=2e-2)
    assert out[1].abs().sum() == 0 and h2[:, 1].abs().sum() == 0  # the empty row keeps its state


@pytest.mark.parametrize("variant", ["mono", "onehot"])
def test_streaming_encoder_equals_full_for_random_chunks(variant):
    model = make(variant).eval()
    lang = None if variant == "mono" else ["en", "ta", "hi"]
    x, x_lens, _, _ = batch(T=23)
    full, full_lens = model.encode(x, x_lens, lang)
    rng = random.Random(5)
    for _trial in range(3):
        state = model.init_state(3)
        pieces, got_lens = [[] for _ in range(3)], torch.zeros(3, dtype=torch.long)
        pos = torch.zeros(3, dtype=torch.long)
        while bool((pos < x_lens).any()):
            # Each row gets its own chunk length (0 allowed), as a batched server would see.
            n = torch.tensor([min(rng.randint(0, 5), int(x_lens[b] - pos[b])) for b in range(3)])
            width = int(n.max())
            chunk = torch.zeros(3, width, DIMS.feature_dim)
            for b in range(3):
                chunk[b, : n[b]] = x[b, pos[b] : pos[b] + n[b]]
            y, y_lens, state = model.streaming_encode(chunk, n, state, lang)
            for b in range(3):
                pieces[b].append(y[b, : y_lens[b]])
            got_lens += y_lens
            pos += n
        # An all-empty chunk changes nothing.
        y, y_lens, state2 = model.streaming_encode(torch.zeros(3, 0, DIMS.feature_dim),
                                                   torch.zeros(3, dtype=torch.long), state, lang)
        assert y.shape[1] == 0 and y_lens.tolist() == [0, 0, 0]
        torch.testing.assert_close(state2.h, state.h)
        assert got_lens.tolist() == full_lens.tolist()
        for b in range(3):
            torch.testing.assert_close(torch.cat(pieces[b]), full[b, : full_lens[b]], atol=1e-6, rtol=1e-5)


def test_an_english_batch_trains_the_shared_parts_and_english_only():
    from speechlab.asr.rnnt.loss import rnnt_loss

    model = make("multisoftmax_lid")
    x, x_lens, y, y_lens = batch()
    out = model(x, x_lens, y, y_lens, "en")
    loss = rnnt_loss(out.logits, y, out.enc_lens, y_lens, blank=0, reduction="mean")
    loss = loss + lid_ce_loss(out.lid_logits, out.enc_lens, out.language_ids)
    loss.backward()
    en, hi = model.routes["en"].head, model.routes["hi"].head
    touched = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert any(n.startswith("encoder.") for n in touched) and "lid_head.weight" in touched
    assert any(n.startswith(f"joiner.outputs.{en}.") for n in touched)
    assert not any(n.startswith(f"joiner.outputs.{hi}.") or n.startswith(f"predictor.embeddings.{hi}.")
                   for n in touched)
