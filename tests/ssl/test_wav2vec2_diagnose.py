"""classify on planted maps of each pattern (sizes, seeds and shapes it was not tuned on, with
and without padding), and the capture of a model's per-block maps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.ssl.wav2vec2 import build
from speechlab.ssl.wav2vec2.diagnose import (
    block_maps,
    classify,
    diagnosis_table,
    grid_figure,
    suggested_blocks,
    valid_length,
)
from speechlab.testing import attention_maps as M

PLANTED = {
    "diagonal": [lambda n, r: M.diagonal(n, r), lambda n, r: M.diagonal(n, r, width=3.0, shift=1),
                 lambda n, r: M.diagonal(n, r, width=0.7, shift=-1, noise=0.3)],
    "vertical": [lambda n, r: M.vertical(n, r), lambda n, r: M.vertical(n, r, columns=1, mass=0.6),
                 lambda n, r: M.vertical(n, r, columns=5, mass=0.9)],
    "vertical+diagonal": [lambda n, r: M.vertical_diagonal(n, r),
                          lambda n, r: M.vertical_diagonal(n, r, columns=2, diagonal_mass=0.3,
                                                           vertical_mass=0.6),
                          lambda n, r: M.vertical_diagonal(n, r, columns=4, diagonal_mass=0.55,
                                                           vertical_mass=0.35)],
    "heterogeneous": [lambda n, r: M.heterogeneous(n, r),
                      lambda n, r: M.heterogeneous(n, r, "random"),
                      lambda n, r: M.heterogeneous(n, r, "segments"),
                      lambda n, r: np.full((n, n), 1.0 / n)],
}


@pytest.mark.parametrize("label", list(PLANTED))
@pytest.mark.parametrize("n", [57, 149, 612])
def test_planted_maps_are_classified(label, n):
    rng = np.random.default_rng(1000 + n)
    for make in PLANTED[label]:
        attn = make(n, rng)
        assert np.allclose(attn.sum(1), 1.0)
        assert classify(attn) == label
        assert classify(M.padded(attn, pad=n // 3 + 1)) == label  # padded batch
        assert classify(torch.from_numpy(attn).float()) == label  # tensors too


def test_padding_is_found_and_cropped():
    rng = np.random.default_rng(3)
    attn = M.padded(M.diagonal(80, rng), pad=20)
    assert valid_length(attn) == 80
    # zero-filled padded rows (another way a batch can be padded) change nothing
    attn[80:] = 0.0
    assert classify(attn) == "diagonal"


def test_bad_maps_are_refused():
    with pytest.raises(ValueError, match="square"):
        classify(np.ones((3, 4)) / 4)
    with pytest.raises(ValueError, match="no valid frame"):
        classify(np.zeros((5, 5)))


def test_block_maps_capture_every_block_and_suggest_abnormal_ones(tmp_path):
    torch.manual_seed(0)
    model = build("ci")
    utts = [torch.randn(6000), torch.randn(9000)]
    diag = block_maps(model, utts)
    assert [d.block for d in diag] == [1, 2]
    assert all(len(d.labels) == 2 and d.thumbnails[0].shape == (64, 64) for d in diag)
    assert model.training  # the mode is restored
    table = diagnosis_table(diag)
    assert [r[0] for r in table.rows] == ["Block 1", "Block 2"]
    assert set(suggested_blocks(diag)) <= {1, 2}
    grid_figure(diag, tmp_path / "fig2.png")
    assert (tmp_path / "fig2.png").stat().st_size > 1000
