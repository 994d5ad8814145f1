"""The RNN-T as ONNX graphs (``asr.rnnt.onnx_graphs``): each graph gives what the PyTorch
networks give (within 1e-4, on random inputs, several batch sizes, row counts and chunkings),
and a recognizer on the graphs gives the PyTorch recognizer's hypotheses (tokens, text, words,
LID, active decoders) for every variant, greedy and beam, LID-free and language-given, with
and without early stopping; streamed in any chunks it gives what it transcribes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.asr.rnnt import ModelDims, build
from speechlab.asr.rnnt.networks import RnntNetworks
from speechlab.asr.rnnt.onnx_graphs import export_networks, onnx_networks
from speechlab.testing.rnnt import untrained_recognizer

TOL = 1e-4
VOCAB = {"en": 7, "hi": 5, "ta": 6}
# Two prediction layers, so the fused deeper-layer weights are exercised too.
DIMS = {
    "lstm": ModelDims(feature_dim=8, stack=4, stride=3, encoder_layers=2, encoder_dim=12,
                      embed_dim=6, predictor_layers=2, predictor_dim=10, joint_dim=14),
    "transformer": ModelDims(feature_dim=8, encoder="transformer", encoder_layers=2,
                             encoder_dim=12, heads=2, ffn_dim=16, conv_channels=3, embed_dim=6,
                             predictor_layers=3, predictor_dim=10, joint_dim=14, lid_dim=5),
}
VARIANTS = ["multisoftmax_lid", "multisoftmax_lsp", "multisoftmax", "onehot", "mono", "vanilla"]


def _model(variant: str, encoder: str, seed: int = 0):
    torch.manual_seed(seed)
    vocab = {"en": VOCAB["en"]} if variant == "mono" else VOCAB
    return build(variant, vocab, DIMS[encoder]).eval()


def _language(variant: str) -> str | None:
    return "hi" if variant == "onehot" else None


@pytest.fixture(scope="module")
def graphs():
    cache = {}

    def get(variant: str, encoder: str):
        if (variant, encoder) not in cache:
            model = _model(variant, encoder)
            cache[variant, encoder] = model, onnx_networks(model, export_networks(model))
        return cache[variant, encoder]

    return get


def _close(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    finite = torch.isfinite(b)
    assert torch.equal(torch.isfinite(a), finite)
    return float((a[finite] - b[finite]).abs().max()) if finite.any() else 0.0


def _chunk_matches_torch(model, graph, x, state, feed, language):
    """One chunk x (B,T,F) through the encoder graph (with the state arrays ``feed``) and
    through PyTorch from ``state``: frames and LID logits agree; returns the graph's outputs by
    name and the new PyTorch state."""
    with torch.inference_mode():
        enc, _, state = model.streaming_encode(x, torch.full((x.shape[0],), x.shape[1]), state,
                                               language)
        proj = model.joiner.project_encoder(enc)
        lid = model.lid_head(enc) if model.lid_head is not None else None
    out = dict(zip([o.name for o in graph.get_outputs()],
                   graph.run(None, {"feats": x.numpy(), **feed})))
    assert _close(torch.from_numpy(out["proj"]), proj) <= TOL
    if lid is not None:
        assert _close(torch.from_numpy(out["lid"]), lid) <= TOL
    return out, state


@pytest.mark.parametrize("encoder", ["lstm", "transformer"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_encoder_graph_streams_as_the_torch_encoder(graphs, variant, encoder):
    model, onnx = graphs(variant, encoder)
    ref = RnntNetworks.torch(model)
    lang = _language(variant)
    a, b = onnx.encoder.init_state(lang), ref.encoder.init_state(lang)
    g = torch.Generator().manual_seed(1)
    # chunks of every phase against the stride, one that completes no frame, an empty one
    for T in (7, 1, 2, 13, 0, 5, 40, 3):
        x = torch.randn(T, 8, generator=g)
        pa, la, a = onnx.encoder(x, a)
        pb, lb, b = ref.encoder(x, b)
        assert _close(pa, pb) <= TOL
        assert (la is None) == (lb is None) == (model.lid_head is None)
        if la is not None:
            assert _close(la, lb) <= TOL


@pytest.mark.parametrize("variant", ["multisoftmax_lid", "onehot"])
@pytest.mark.parametrize("batch", [1, 3])
def test_the_lstm_encoder_graph_takes_a_batch_of_streams(graphs, variant, batch):
    """The graph's batch: streams at the same position, each with its own state."""
    model, onnx = graphs(variant, "lstm")
    graph = onnx.encoder.graph
    g = torch.Generator().manual_seed(batch)
    state = model.init_state(batch)
    feed = {"history": state.stacker.history.numpy(), "seen": np.zeros(batch, np.int64),
            "h": state.h.numpy(), "c": state.c.numpy()}
    language = ["hi", "en", "hi"][:batch] if model.spec.lang_onehot else None
    if language is not None:
        feed["cond"] = model.language_onehot(model.language_ids(language, batch), "cpu").numpy()
    for T in (5, 1, 9, 4):
        x = torch.randn(batch, T, 8, generator=g)
        out, state = _chunk_matches_torch(model, graph, x, state, feed, language)
        assert _close(torch.from_numpy(out["h_out"]), state.h) <= TOL
        feed.update(history=out["history_out"], seen=out["seen_out"], h=out["h_out"],
                    c=out["c_out"])
        assert (out["seen_out"] == state.stacker.seen.numpy()).all()


@pytest.mark.parametrize("variant", ["multisoftmax_lid", "onehot"])
@pytest.mark.parametrize("batch", [1, 3])
def test_the_transformer_encoder_graph_carries_the_torch_cache(graphs, variant, batch):
    """The graph's batch: streams at the same position, each with its own cache; what comes
    out is the PyTorch state (last frames, convolution rows, frames seen, keys and values), the
    cache growing by each chunk's frames, from empty."""
    model, onnx = graphs(variant, "transformer")
    graph = onnx.encoder.graph
    g = torch.Generator().manual_seed(batch)
    state = model.init_state(batch)
    feed = {"history": state.feats.numpy(), "conv": state.conv.numpy(),
            "seen": state.seen.numpy(), "keys": state.keys.numpy(),
            "values": state.values.numpy()}
    assert state.keys.shape[3] == 0
    language = ["hi", "en", "hi"][:batch] if model.spec.lang_onehot else None
    if language is not None:
        feed["cond"] = model.language_onehot(model.language_ids(language, batch), "cpu").numpy()
    for T in (5, 1, 2, 9, 4, 3):  # every stride phase; chunks that complete no frame
        x = torch.randn(batch, T, 8, generator=g)
        out, state = _chunk_matches_torch(model, graph, x, state, feed, language)
        assert (out["seen_out"] == state.seen.numpy()).all()
        for name, want in (("history_out", state.feats), ("conv_out", state.conv),
                           ("keys_out", state.keys), ("values_out", state.values)):
            assert _close(torch.from_numpy(out[name]), want) <= TOL, name
        feed.update(history=out["history_out"], conv=out["conv_out"], seen=out["seen_out"],
                    keys=out["keys_out"], values=out["values_out"])
    assert feed["keys"].shape[3] == (24 + 3) // 4


def test_the_transformer_encoder_graph_streams_long_inputs_as_the_torch_encoder(graphs):
    """Hundreds of cached frames: the attention over a long past agrees too."""
    model, onnx = graphs("multisoftmax_lid", "transformer")
    ref = RnntNetworks.torch(model)
    a, b = onnx.encoder.init_state(None), ref.encoder.init_state(None)
    g = torch.Generator().manual_seed(5)
    for T in [32] * 60 + [7, 30]:
        x = torch.randn(T, 8, generator=g)
        pa, la, a = onnx.encoder(x, a)
        pb, lb, b = ref.encoder(x, b)
        assert _close(pa, pb) <= TOL and _close(la, lb) <= TOL
    assert a.keys.shape[3] == b[0].frames.item() == (60 * 32 + 37 + 3) // 4


def test_an_encoder_graph_of_another_state_layout_is_refused(graphs):
    """A graph exported by a version whose encoder state differs (e.g. the Transformer graph
    over the whole prefix, before the key/value cache) is named, with what to do."""
    from speechlab.errors import DataError

    model, _ = graphs("multisoftmax_lid", "transformer")
    other, _ = graphs("multisoftmax_lid", "lstm")
    stale = export_networks(other)
    with pytest.raises(DataError, match="encoder graph takes .*export the model again"):
        onnx_networks(model, {**export_networks(model), "encoder": stale["encoder"]})


@pytest.mark.parametrize("encoder", ["lstm", "transformer"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_the_predictor_and_joiner_graphs_give_the_torch_numbers(graphs, variant, encoder):
    model, onnx = graphs(variant, encoder)
    ref = RnntNetworks.torch(model).prediction_joint
    got = onnx.prediction_joint
    assert (got.vocab_sizes, got.state_shape, got.joint_dim, got.blank) == \
        (ref.vocab_sizes, ref.state_shape, ref.joint_dim, ref.blank)
    rng = np.random.default_rng(0)
    layers, H = ref.state_shape
    for N in (1, 4, 9):
        slots = rng.integers(0, len(ref.vocab_sizes), N)
        tokens = np.array([rng.integers(0, ref.vocab_sizes[s]) for s in slots])
        h = rng.standard_normal((layers, N, H)).astype(np.float32)
        c = rng.standard_normal((layers, N, H)).astype(np.float32)
        for x, y in zip(got.step(tokens, slots, h, c), ref.step(tokens, slots, h, c)):
            assert np.abs(x - y).max() <= TOL
        frames = torch.randn(3, ref.joint_dim)
        frame_of = rng.integers(0, 3, N)
        pred = rng.standard_normal((N, ref.joint_dim)).astype(np.float32)
        with torch.inference_mode():
            lp = ref.log_probs(frames, frame_of, pred, slots)
        assert _close(got.log_probs(frames, frame_of, pred, slots), lp) <= TOL
        # each row reads its own slot's vocabulary, and nothing beyond it
        for i, s in enumerate(slots):
            assert torch.isfinite(lp[i, : ref.vocab_sizes[s]]).all()
            assert not torch.isfinite(lp[i, ref.vocab_sizes[s]:]).any()


# ---------------------------------------------------------------------------------------------
# Whole recognizers: torch and onnx backends on held-out audio

# 80-dim fbank models, small; two prediction layers.
LSTM = ModelDims(encoder_layers=2, encoder_dim=24, embed_dim=12, predictor_layers=2,
                 predictor_dim=20, joint_dim=24)
TRANSFORMER = ModelDims(encoder="transformer", encoder_layers=1, encoder_dim=16, heads=2,
                        ffn_dim=32, conv_channels=4, embed_dim=8, predictor_layers=2,
                        predictor_dim=16, joint_dim=16, lid_dim=8)
# variant, languages, sizes, language given, early stopping (tau, s_th)
CASES = {
    "lid-free": ("multisoftmax_lid", ("en", "hi"), "ci", None, None),
    "lid-free-early-stop": ("multisoftmax_lid", ("en", "hi", "ta"), LSTM, None, (2, 0.0)),
    "lid-free-margin": ("multisoftmax_lid", ("en", "hi"), LSTM, None, (3, 0.5)),
    "lid-language-given": ("multisoftmax_lid", ("en", "hi"), LSTM, "hi", None),
    "lsp": ("multisoftmax_lsp", ("en", "hi"), LSTM, "en", None),
    "onehot": ("onehot", ("en", "hi"), LSTM, "hi", None),
    "one-language": ("mono", ("en",), LSTM, None, None),
    "vanilla": ("vanilla", ("en", "hi"), "ci", None, None),
    "transformer-lid-free": ("multisoftmax_lid", ("en", "hi"), TRANSFORMER, None, (3, 0.5)),
    "transformer-onehot": ("onehot", ("en", "hi"), TRANSFORMER, "hi", None),
}


def _audio(seconds: float, seed: int) -> np.ndarray:
    """Held-out audio the models never saw: a tone whose pitch and loudness move, in noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    pitch = 150 + 90 * seed + 40 * np.sin(2 * np.pi * 0.7 * t)
    return (0.3 * np.sin(2 * np.pi * np.cumsum(pitch) / 16000) * (1 + np.sin(2 * np.pi * 3 * t))
            + 0.05 * rng.standard_normal(len(t))).astype(np.float32)


def _same(a, b) -> None:
    from speechlab.testing.rnnt import same_words

    assert (a.text, a.language, a.extra) == (b.text, b.language, b.extra)
    same_words(a, b)
    assert (a.lid is None) == (b.lid is None)
    if a.lid is not None:
        assert a.lid == pytest.approx(b.lid, abs=1e-6)


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_onnx_backend_recognizes_as_the_torch_backend(case):
    variant, languages, sizes, language, stop = CASES[case]
    rec = untrained_recognizer(variant, languages, sizes, sharpen=4.0)
    onnx = rec.onnx()
    assert (rec.backend, onnx.backend) == ("torch", "onnx")
    options = {"tau": stop[0], "s_th": stop[1]} if stop else {}
    emitted = 0
    for seed in (0, 1):
        audio = _audio(2.0, seed)
        for beam in (1, 3):  # greedy is beam 1
            want = rec.transcribe(audio, language=language, beam=beam, **options)
            _same(onnx.transcribe(audio, language=language, beam=beam, **options), want)
            emitted += len(want.words)
        a, b = rec.stream(language, **options), onnx.stream(language, **options)
        a.accept_waveform(audio)
        b.accept_waveform(audio)
        assert (a.partial, a.active) == (b.partial, b.active)
        if a.lid is not None:
            assert a.lid == pytest.approx(b.lid, abs=1e-6)
    assert emitted  # the planted sharp joint emits labels to compare
    if stop and language is None:
        assert len(want.extra["active_frames"]) == len(languages)


@pytest.mark.parametrize("sizes", [LSTM, TRANSFORMER], ids=["lstm", "transformer"])
def test_an_onnx_stream_in_any_chunks_gives_what_it_transcribes(sizes):
    onnx = untrained_recognizer("multisoftmax_lid", ("en", "hi"), sizes, sharpen=4.0).onnx()
    if onnx.segment_seconds is not None:  # segments end where they would, whatever the chunks
        onnx.segment_seconds = 1.2
    audio = _audio(3.0, 2)
    rng = np.random.default_rng(0)
    for options in ({}, {"tau": 3, "s_th": 0.5}):
        whole = onnx.transcribe(audio, **options)
        stream = onnx.stream(**options)
        i = 0
        while i < len(audio):
            n = int(rng.integers(1, 7000))
            stream.accept_waveform(audio[i:i + n])
            assert isinstance(stream.partial, str) and stream.active
            i += n
        assert stream.finish() == whole


def test_a_language_the_model_lacks_is_refused_on_either_backend():
    from speechlab.errors import ConfigError

    onnx = untrained_recognizer("onehot", ("en", "hi"), "ci").onnx()
    with pytest.raises(ConfigError, match="needs the language"):
        onnx.transcribe(_audio(0.5, 0))
    with pytest.raises(ConfigError, match="'fr'"):
        onnx.transcribe(_audio(0.5, 0), language="fr")


def test_an_int8_package_of_the_transducer_still_spells_the_planted_text(tmp_path):
    """export --format onnx --int8 quantizes the encoder, predictor and joiner graphs: each
    smaller, and the planted model (whose answer has a wide margin) still says its text."""
    import speechlab
    from speechlab.testing.tone_rnnt import MODEL, planted_run, tone_samples

    run = planted_run(tmp_path / "tones") / "models" / MODEL
    speechlab.export(run, tmp_path / "fp", format="onnx")
    speechlab.export(run, tmp_path / "int8", format="onnx", int8=True)
    for graph in ("encoder.onnx", "predictor.onnx", "joiner.onnx"):
        assert (tmp_path / "int8" / graph).stat().st_size < (tmp_path / "fp" / graph).stat().st_size
    model = speechlab.load(tmp_path / "int8")
    assert model.backend == "onnx" and model.transcribe(tone_samples()).text == "the fox"
