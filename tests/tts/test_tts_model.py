"""The four presets against Table 2's parameter counts; shapes, state and windows."""

import pytest
import torch

from speechlab.tts import build, num_parameters

TABLE2 = {"small_rnn": 1.17e6, "small_salad": 1.04e6, "big_rnn": 9.85e6, "big_salad": 9.66e6}


@pytest.mark.parametrize("name", sorted(TABLE2))
def test_parameter_counts_match_table2_within_2_percent(name):
    n = num_parameters(build(name, input_dim=364, output_dim=43))
    assert abs(n - TABLE2[name]) / TABLE2[name] < 0.02, n


@pytest.mark.parametrize("name", ["tiny_rnn", "tiny_salad"])
def test_streaming_in_windows_equals_whole_utterance(name):
    torch.manual_seed(0)
    model = build(name, input_dim=5, output_dim=3).eval()
    x = torch.randn(2, 30, 5)
    lens = torch.tensor([30, 30])
    whole_rnn = model(x, lens)
    state = model.init_state(2)
    parts = []
    for k in range(0, 30, 10):
        y, _, state = model.streaming_forward(x[:, k:k + 10], torch.tensor([10, 10]), state)
        parts.append(y)
    streamed = torch.cat(parts, 1)
    if name == "tiny_rnn":  # the carried (h, c) makes windows continue the sequence exactly
        assert torch.allclose(streamed, whole_rnn, atol=1e-6)
    else:  # SALAD carries positions: windowed forward is the same computation
        assert torch.allclose(streamed, model(x, lens, window=10), atol=1e-6)
        assert state[0].tolist() == [30, 30]
        assert not torch.allclose(streamed, whole_rnn, atol=1e-3)  # attention was limited


def test_padding_does_not_change_an_utterance_and_is_zero():
    torch.manual_seed(0)
    model = build("tiny_salad", input_dim=5, output_dim=3).eval()
    x = torch.randn(1, 13, 5)
    alone = model(x, torch.tensor([13]), window=4)
    padded = model(torch.cat([x, torch.randn(1, 7, 5)], 1), torch.tensor([13]), window=4)
    assert torch.allclose(alone, padded[:, :13], atol=1e-6)
    assert padded[:, 13:].abs().sum() == 0 and torch.isfinite(padded).all()


def test_conv_output_stage_keeps_frames_and_padding():
    from dataclasses import replace

    from speechlab.tts.model import build_from_config, preset

    torch.manual_seed(0)
    model = build_from_config(replace(preset("tiny_salad", 5, 3), output_conv=3)).eval()
    x = torch.randn(1, 9, 5)
    y = model(x, torch.tensor([9]))
    assert y.shape == (1, 9, 3) and torch.isfinite(y).all()
    padded = model(torch.cat([x, torch.zeros(1, 4, 5)], 1), torch.tensor([9]))
    assert padded[:, 9:].abs().sum() == 0
