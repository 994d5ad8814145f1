"""The wav2vec 2.0 model: Base's size, parity with ``transformers``, checkpoint import (HF,
fairseq, speechlab), and that loading a checkpoint never runs pickled code."""

from __future__ import annotations

import os

import pytest
import torch

from speechlab.errors import DataError
from speechlab.ssl.wav2vec2 import build
from speechlab.ssl.wav2vec2.checkpoint_import import load_pretrained
from speechlab.testing.wav2vec2 import fairseq_state

transformers = pytest.importorskip("transformers")

BASE_PARAMETERS = 95_044_608  # transformers' Wav2Vec2ForPreTraining at its default config


def test_base_preset_has_wav2vec2_base_size():
    ours = sum(p.numel() for p in build("base").parameters())
    assert ours == BASE_PARAMETERS
    with torch.device("meta"):  # no memory or init time for the reference's 95M weights
        theirs = transformers.Wav2Vec2ForPreTraining(transformers.Wav2Vec2Config())
    assert sum(p.numel() for p in theirs.parameters()) == BASE_PARAMETERS
    # local blocks add no parameter
    assert sum(p.numel() for p in build("base", local_blocks=(2, 3, 12)).parameters()) == ours


def _hf_model(stable: bool, seed: int = 0):
    torch.manual_seed(seed)
    cfg = transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
        conv_dim=(16, 16, 16), conv_kernel=(10, 3, 3), conv_stride=(5, 4, 2),
        num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4, codevector_dim=16,
        proj_codevector_dim=12, num_codevectors_per_group=8, num_codevector_groups=2,
        feat_extract_norm="layer" if stable else "group", do_stable_layer_norm=stable,
        conv_bias=stable, attn_implementation="eager")
    return transformers.Wav2Vec2ForPreTraining(cfg).eval()


@pytest.mark.parametrize("stable", [False, True], ids=["base-postnorm", "large-prenorm"])
def test_hidden_states_and_attention_maps_match_transformers(tmp_path, stable):
    hf = _hf_model(stable)
    # weights away from their init (weight norm gains, layer norms) so that a swapped key shows
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.05 * torch.randn_like(p))
    hf.save_pretrained(tmp_path / "hf")
    ours = load_pretrained(tmp_path / "hf")
    wav = torch.randn(2, 4000)
    lens = torch.tensor([4000, 3100]) if stable else torch.tensor([4000, 4000])
    kwargs = {"attention_mask": (torch.arange(4000)[None] < lens[:, None]).long()} if stable else {}
    with torch.no_grad():
        want = hf.wav2vec2(wav, output_hidden_states=True, output_attentions=True, **kwargs)
        maps, hidden = [], []
        feats, flens = ours.features(wav, lens)
        out = ours.encode(feats, flens, on_attention=lambda i, w: maps.append(w), per_head=True,
                          hidden=hidden)
    assert len(hidden) == len(want.hidden_states) == 4
    for b in range(2):  # valid frames only: padded ones are unspecified in both
        t = int(flens[b])
        torch.testing.assert_close(out[b, :t], want.last_hidden_state[b, :t], atol=1e-4, rtol=1e-4)
        # every block's input (the last entry's placement around the final layer norm of the
        # pre-norm model differs between transformers versions; the output is checked above)
        for h_ours, h_hf in zip(hidden[:-1], want.hidden_states[:-1]):
            torch.testing.assert_close(h_ours[b, :t], h_hf[b, :t], atol=1e-4, rtol=1e-4)
        for m_ours, m_hf in zip(maps, want.attentions):
            torch.testing.assert_close(m_ours[b, :, :t, :t], m_hf[b, :, :t, :t], atol=1e-4,
                                       rtol=1e-4)
    # the quantizer and projections came across too
    torch.testing.assert_close(ours.quantizer.codevectors, hf.quantizer.codevectors)
    torch.testing.assert_close(ours.final_proj.weight, hf.project_hid.weight)


def test_attention_capture_does_not_change_outputs():
    model = build("ci", local_blocks=(2,), radius=2).eval()
    wav = torch.randn(2, 6000)
    lens = torch.tensor([6000, 4500])
    with torch.no_grad():
        feats, flens = model.features(wav, lens)
        plain = model.encode(feats, flens)
        seen = []
        inspected = model.encode(feats, flens, on_attention=lambda i, w: seen.append((i, w.shape)))
    assert torch.equal(plain, inspected)
    T = feats.shape[1]
    assert seen == [(1, (2, T, T)), (2, (2, T, T))]


class Planted:
    """Writes a file when unpickled, as a malicious checkpoint would."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class PlantedState:
    def __init__(self, path):
        self.path = path

    def __setstate__(self, state):
        open(state["path"], "w").close()


def test_fairseq_checkpoint_loads_without_running_pickled_code(tmp_path):
    model = build("ci").eval()
    marker1, marker2 = tmp_path / "ran-reduce", tmp_path / "ran-setstate"
    ckpt = {"model": fairseq_state(model), "args": Planted(marker1),
            "cfg": {"model": PlantedState(marker2)}}
    torch.save(ckpt, tmp_path / "w2v.pt")
    loaded = load_pretrained(tmp_path / "w2v.pt")
    assert not marker1.exists() and not marker2.exists()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[k], v)


def test_bad_checkpoints_are_named(tmp_path):
    (tmp_path / "notes.pt").write_text("not a checkpoint\n")
    with pytest.raises(DataError, match="notes.pt is not a wav2vec 2.0 checkpoint"):
        load_pretrained(tmp_path / "notes.pt")
    state = fairseq_state(build("ci"))
    state["encoder.layers.1.fc1.weight"] = torch.zeros(3, 3)
    torch.save({"model": state}, tmp_path / "bad.pt")
    with pytest.raises(DataError, match=r"tensor 'transformer.blocks.1.feed_forward.fc1.weight' "
                                        r"has shape \(3, 3\)"):
        load_pretrained(tmp_path / "bad.pt")


def test_short_audio_is_refused():
    model = build("ci").eval()
    with pytest.raises(DataError, match="399 samples is shorter than .* receptive field \\(400"):
        model.features(torch.randn(1, 399))
    assert model.features(torch.randn(1, 400))[0].shape[1] == 1


def test_build_entry_point_makes_exactly_the_listed_blocks_local():
    from speechlab.errors import ConfigError
    from speechlab.ssl.wav2vec2 import parse_blocks

    model = build(preset="base", local_blocks=(2, 3, 4, 5), radius=30)
    radii = [b.attention.radius for b in model.transformer.blocks]
    assert radii == [None, 30, 30, 30, 30] + [None] * 7
    assert parse_blocks("6-11,12", 12) == (6, 7, 8, 9, 10, 11, 12)
    for bad, match in [("2-x", "is not a block number"), ("5-2", "runs backwards"),
                       ("0-3", "block\\(s\\) 0 out of range"), ("13", "13 out of range")]:
        with pytest.raises(ConfigError, match=match):
            parse_blocks(bad, 12)
    with pytest.raises(ConfigError, match="radius must be >= 1"):
        build("ci", local_blocks=(1,), radius=0)


@torch.no_grad()
def test_init_std_sets_the_attention_logits_scale_at_the_start():
    """At BERT's 0.02 a 64-dim model starts with near-uniform attention (logit std ~0.03);
    0.02 * sqrt(768 / 64) gives it the logit scale Base starts from (~0.3)."""
    from speechlab.ssl.wav2vec2.config import preset
    from speechlab.ssl.wav2vec2.model import build_from_config

    torch.manual_seed(0)
    x = torch.randn(1, 50, 64)

    def logit_std(std):
        model = build_from_config(preset("tiny", front_end="fbank", init_std=std))
        attn = next(m for m in model.transformer.modules() if hasattr(m, "q_proj"))
        assert float(attn.q_proj.weight.std()) == pytest.approx(std, rel=0.05)
        q, k = attn._split(attn.q_proj(x)), attn._split(attn.k_proj(x))
        return float(((q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5).std())

    assert logit_std(0.02) < 0.06
    assert 0.15 < logit_std(0.02 * (768 / 64) ** 0.5) < 0.6
