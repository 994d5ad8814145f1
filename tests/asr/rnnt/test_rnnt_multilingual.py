"""LID-free parallel decoding: selection by LID head, oracle, early stopping wired in."""

import pytest
import torch

from speechlab.asr.rnnt import (
    DecodeConfig,
    EarlyStopConfig,
    SearchConfig,
    active_frames,
    build,
    decode_lid_free,
)
from speechlab.asr.rnnt.search import decode
from speechlab.asr.rnnt.multilingual_decode import select_by_lid
from speechlab.errors import ConfigError, DataError

VOCAB = {"en": 7, "hi": 5, "ta": 6}
SEARCH = SearchConfig("beam", 3, 2)


def lid_model(lid_bias=None, seed=0):
    torch.manual_seed(seed)
    model = build("multisoftmax_lid", VOCAB, "tiny").eval()
    with torch.no_grad():
        model.joiner.enc_proj.weight.mul_(4.0)
        for out in model.joiner.outputs:
            out.weight.mul_(4.0)
            out.bias[0] -= 1.0
        if lid_bias is not None:  # plant the LID: constant posteriors softmax(lid_bias)
            model.lid_head.weight.zero_()
            model.lid_head.bias.copy_(torch.tensor(lid_bias))
    return model


def feats(T=61, seed=4):
    return torch.randn(T, 8, generator=torch.Generator().manual_seed(seed))


def test_lid_picks_the_planted_language_and_each_decoder_equals_monolingual_decoding():
    model = lid_model([0.0, -1.0, 1.5])  # Tamil most likely on every frame
    x = feats()
    res = decode_lid_free(model, x, DecodeConfig(search=SEARCH))
    assert res.language == "ta"
    assert res.tokens == res.hypotheses["ta"]
    for lang in model.languages:
        (h,) = decode(model, x[None], torch.tensor([x.shape[0]]), lang, SEARCH)
        assert res.hypotheses[lang] == h.tokens
        assert res.scores[lang] == pytest.approx(h.score, abs=1e-4)
    expected = torch.softmax(torch.tensor([0.0, -1.0, 1.5]), 0)
    for i, lang in enumerate(model.languages):
        assert res.lid_posteriors[lang] == pytest.approx(float(expected[i]), abs=1e-6)
    assert res.num_frames == 21 and res.t_avg == 3.0
    assert all(n == 21 for n in res.active_frames.values())
    assert res.cpu_seconds > 0


def test_oracle_picks_the_true_language():
    model = lid_model([0.0, -1.0, 1.5])
    res = decode_lid_free(model, feats(), DecodeConfig(search=SEARCH, select="oracle"), true_language="hi")
    assert res.language == "hi" and res.tokens == res.hypotheses["hi"]
    with pytest.raises(DataError, match="true language"):
        decode_lid_free(model, feats(), DecodeConfig(search=SEARCH, select="oracle"))


def test_lid_posteriors_are_frame_averages_of_the_lid_head():
    model = lid_model()  # unplanted: posteriors vary over frames
    x = feats()
    res = decode_lid_free(model, x, DecodeConfig(search=SEARCH))
    with torch.no_grad():
        enc, enc_lens = model.encode(x[None], torch.tensor([x.shape[0]]))
        post = torch.softmax(model.lid_logits(enc)[0].double(), -1).mean(0)
    for i, lang in enumerate(model.languages):
        assert res.lid_posteriors[lang] == pytest.approx(float(post[i]), abs=1e-6)
    assert res.language == model.languages[int(post.argmax())]


class PlantedLid(torch.nn.Module):
    """A LID head whose logits on frame t are row t of ``logp`` (whole utterances only)."""

    def __init__(self, logp):
        super().__init__()
        self.logp = logp

    def forward(self, enc):
        return self.logp[: enc.shape[-2]]


def test_summed_log_posteriors_can_pick_otherwise_than_averaged_posteriors():
    model = lid_model()
    x = feats()
    with torch.no_grad():
        enc, _ = model.encode(x[None], torch.tensor([x.shape[0]]))
        T = enc.shape[1]
        # Planted per-frame LID: "hi" is ahead on every frame but the first, on which it is all
        # but impossible; "ta" is never likely. The average forgives one frame, the log-sum not.
        logp = torch.full((T, 3), -30.0)
        logp[:, 0], logp[:, 1] = -0.9, -0.52
        logp[0] = torch.tensor([0.0, -30.0, -30.0])
        logp = torch.log_softmax(logp, -1)
    model.lid_head = PlantedLid(logp)
    post = decode_lid_free(model, x, DecodeConfig(search=SEARCH))
    log = decode_lid_free(model, x, DecodeConfig(search=SEARCH, lid_average="log"))
    assert post.lid_log_scores == pytest.approx(log.lid_log_scores)
    assert log.lid_log_scores["hi"] == pytest.approx(float(logp[:, 1].double().sum()), rel=1e-5)
    mean = logp.double().exp().mean(0)
    assert post.language == model.languages[int(mean.argmax())] == "hi"
    assert log.language == "en"


def test_early_stopping_switches_decoders_off_like_active_frames():
    model = lid_model([0.0, -0.5, 1.0])
    x = feats()
    tau, s_th = 4, 1.2
    res = decode_lid_free(model, x, DecodeConfig(search=SEARCH, early_stop=EarlyStopConfig(tau, s_th)))
    lid_lp = torch.log_softmax(torch.tensor([0.0, -0.5, 1.0]), 0).expand(21, 3)
    expected = active_frames(lid_lp, tau, s_th)
    # By hand: the gap to Tamil grows 1.0 (en) / 1.5 (hi) nats a frame; after tau=4 both are
    # more than 1.2 behind, so they stop after frame 5 (6 frames ran).
    assert expected.tolist() == [6, 6, 21]
    assert [res.active_frames[lang] for lang in model.languages] == expected.tolist()
    assert res.t_avg == pytest.approx(33 / 21)
    assert res.language == "ta"
    # A switched-off decoder's output covers exactly the frames it ran: the same as decoding
    # the features that make those encoder frames (the encoder is causal).
    R = model.encoder.stride
    for lang in ("en", "hi"):
        n = res.active_frames[lang]
        prefix = x[: (n - 1) * R + 1]
        (h,) = decode(model, prefix[None], torch.tensor([prefix.shape[0]]), lang, SEARCH)
        assert res.hypotheses[lang] == h.tokens


def test_switched_off_decoders_cannot_be_selected():
    posteriors = torch.tensor([0.6, 0.3, 0.1])
    assert select_by_lid(["a", "b", "c"], posteriors, torch.tensor([9, 20, 20]), None) == "b"
    # Everyone switched off: the decoders that ran longest compete.
    assert select_by_lid(["a", "b", "c"], posteriors, torch.tensor([9, 5, 12]), None) == "c"
    assert select_by_lid(["a", "b", "c"], posteriors, torch.tensor([20, 20, 20]), None) == "a"


def test_wrong_models_and_settings_are_config_errors():
    torch.manual_seed(0)
    ms = build("multisoftmax", VOCAB, "tiny").eval()
    with pytest.raises(ConfigError, match="need a LID head"):
        decode_lid_free(ms, feats(), DecodeConfig(search=SEARCH))
    res = decode_lid_free(ms, feats(), DecodeConfig(search=SEARCH, select="oracle"), true_language="en")
    assert res.language == "en" and res.t_avg == 3.0
    with pytest.raises(ConfigError, match="multi-softmax model"):
        decode_lid_free(build("vanilla", VOCAB, "tiny"), feats(), DecodeConfig(search=SEARCH))
    with pytest.raises(ConfigError, match="unknown selection"):
        decode_lid_free(lid_model(), feats(), DecodeConfig(search=SEARCH, select="vote"))
    with pytest.raises(DataError, match="too short"):
        decode_lid_free(lid_model(), torch.zeros(0, 8), DecodeConfig(search=SEARCH))
