"""Parameter counts of the paper preset against Table 6 and against hand arithmetic."""

import pytest
import torch

from speechlab.asr.rnnt import (
    PAPER_TABLE6,
    PAPER_VOCAB_SIZES,
    VARIANTS,
    build,
    count_parameters,
    format_parameter_table,
    parameter_table,
)


def lstm(inp: int, hid: int, layers: int) -> int:
    """PyTorch LSTM: 4 gates, input and recurrent weights, two bias vectors per layer."""
    first = 4 * hid * (inp + hid) + 8 * hid
    return first + (layers - 1) * (4 * hid * (hid + hid) + 8 * hid)


def linear(i: int, o: int) -> int:
    return i * o + o


def by_hand(variant: str) -> int:
    """Independent arithmetic for the paper preset (640 in, 6x1024, emb 1024, 2x1024, joint 1024)."""
    sizes = list(PAPER_VOCAB_SIZES.values())
    L = len(sizes)
    union = sum(v - 1 for v in sizes) + 1
    onehot = L if variant == "onehot" else 0
    softmaxes = {"mono": [sizes[0]], "vanilla": [union], "onehot": [union]}.get(variant, sizes)
    n = lstm(640 + onehot, 1024, 6)                                    # encoder
    n += sum(v * 1024 for v in softmaxes)                              # embeddings
    n += lstm(1024 + onehot, 1024, 2) * (L if variant == "multisoftmax_lsp" else 1)
    n += 2 * linear(1024, 1024) + sum(linear(1024, v) for v in softmaxes)  # joint
    n += linear(1024, L) if variant == "multisoftmax_lid" else 0       # LID head
    return n


def test_table6_within_one_percent_and_matches_arithmetic():
    rows = {r["variant"]: r for r in parameter_table()}
    print("\n" + format_parameter_table(list(rows.values())))
    assert set(rows) == set(VARIANTS)
    for variant, row in rows.items():
        assert row["params"] == by_hand(variant), variant
        assert row["paper_m"] == PAPER_TABLE6[variant]
    for variant in ("mono", "multisoftmax", "multisoftmax_lsp"):
        assert abs(rows[variant]["params_m"] / PAPER_TABLE6[variant] - 1) < 0.01, variant
    # The hand arithmetic of the brief: 67.97M, 68.55M (rounded up from 68.545), 118.93M.
    assert rows["mono"]["params"] == 67_973_253
    assert rows["multisoftmax"]["params"] == 68_544_924
    assert rows["multisoftmax_lsp"]["params"] == 118_925_724


def test_paper_mono_builds_for_real_with_the_same_count():
    torch.manual_seed(0)
    model = build("mono", {"en": 133}, "paper")
    assert count_parameters(model) == by_hand("mono")
    assert all(p.device.type == "cpu" and torch.isfinite(p).all() for p in model.parameters())
    del model


@pytest.mark.parametrize("variant", ["vanilla", "multisoftmax_lsp"])
def test_meta_device_build_allocates_nothing(variant):
    with torch.device("meta"):
        model = build(variant, PAPER_VOCAB_SIZES, "paper")
    assert all(p.is_meta for p in model.parameters())
