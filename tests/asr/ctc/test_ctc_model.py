"""The CTC acoustic model: output shapes and lengths, normalised outputs, presets, and a
checkpoint that rebuilds it."""

from __future__ import annotations

import pytest
import torch

from speechlab.asr.ctc.model import CtcModelConfig, build, preset
from speechlab.errors import ConfigError


def test_log_probs_over_tokens_at_a_quarter_of_the_frames():
    model = build(preset("tiny", num_tokens=7, feature_dim=20)).eval()
    x = torch.randn(3, 41, 20)
    lens = torch.tensor([41, 30, 8])
    lp, out_lens = model(x, lens)
    assert lp.shape == (3, 9, 7)
    assert out_lens.tolist() == [9, 6, 1]
    torch.testing.assert_close(lp.exp().sum(-1), torch.ones(3, 9))


def test_presets_and_bad_sizes():
    n = sum(p.numel() for p in build(preset("small", num_tokens=81)).parameters())
    assert 2.5e6 < n < 3.5e6
    with pytest.raises(ConfigError, match="not divisible"):
        CtcModelConfig(num_tokens=5, dim=10, heads=4)
    with pytest.raises(ConfigError, match="unknown CTC model preset"):
        preset("huge", 5)


def test_a_trained_ctc_model_rebuilds_from_its_checkpoint(tmp_path):
    from speechlab.asr.ctc.model import FAMILY, load
    from speechlab.train import ModelCard, save_checkpoint

    model = build(preset("tiny", num_tokens=5, feature_dim=20))
    save_checkpoint(tmp_path / "best.pt", model=model.state_dict(),
                    model_config=ModelCard.of(FAMILY, model.config).to_dict())
    back = load(tmp_path)
    assert back.config == model.config
    torch.testing.assert_close(back.output.weight, model.output.weight)
