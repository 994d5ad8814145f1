"""The frozen front end's frames, computed once per pre-trained checkpoint and shared by every
fine-tune through a cache that is never trusted for another checkpoint."""

from __future__ import annotations

import torch

from speechlab.ssl.wav2vec2 import build
from speechlab.ssl.wav2vec2.training import Utterance, frozen_features


def _utts(n: int, seed: int) -> list[Utterance]:
    g = torch.Generator().manual_seed(seed)
    return [Utterance(f"u{i}", torch.randn(2000, generator=g), "a", (1,)) for i in range(n)]


def test_features_are_computed_once_per_checkpoint_and_recomputed_when_it_changes(tmp_path):
    source, cache = tmp_path / "best.pt", tmp_path / "features" / "conv.pt"
    source.write_bytes(b"one")
    splits = {"train": _utts(2, 0), "dev": _utts(1, 1)}
    torch.manual_seed(0)
    first = frozen_features(build("ci"), splits, source, cache)
    assert [u.id for u in first["train"]] == ["u0", "u1"] and first["dev"][0].tokens == (1,)
    assert cache.is_file()
    # another encoder, the same checkpoint: the cached frames are read back
    torch.manual_seed(1)
    other = build("ci")
    again = frozen_features(other, splits, source, cache)
    assert all(torch.equal(a.feats, b.feats) for a, b in zip(first["train"], again["train"]))
    # the checkpoint changed: the frames are this encoder's
    source.write_bytes(b"two!")
    fresh = frozen_features(other, splits, source, cache)
    assert not torch.equal(fresh["train"][0].feats, first["train"][0].feats)
    with torch.no_grad():
        expected, _ = other.feature_encoder(splits["train"][0].wav[None])
    assert torch.allclose(fresh["train"][0].feats, expected[0])
    # a reader that may not write leaves the cache as it was
    source.write_bytes(b"three")
    before = cache.read_bytes()
    frozen_features(build("ci"), splits, source, cache, write=False)
    assert cache.read_bytes() == before
