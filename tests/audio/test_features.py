"""Fbank extraction, the per-corpus cache, load_features and fit_cmvn."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from speechlab.audio import features as F
from speechlab.audio.features import FbankConfig, compute_features, fbank, fit_cmvn, load_features
from speechlab.errors import DataError
from speechlab.testing.audio import have_espeak, synth_samples, tone_cut, tone_samples


def chirp(duration: float = 1.3, sr: int = 16000) -> np.ndarray:
    """A 100 Hz -> 7 kHz sweep plus noise: energy in every mel bin at some point."""
    t = np.arange(int(duration * sr)) / sr
    f = 100 + (7000 - 100) * t / duration
    x = 0.4 * np.sin(2 * np.pi * np.cumsum(f) / sr)
    return (x + 0.01 * np.random.default_rng(0).standard_normal(len(t))).astype(np.float32)


def lhotse_reference(x: np.ndarray, cfg: FbankConfig) -> np.ndarray:
    """lhotse's own pure-torch Kaldi fbank (an independent implementation of the same recipe)."""
    from lhotse.features.kaldi.extractors import Fbank as LhotseFbank
    from lhotse.features.kaldi.extractors import FbankConfig as LhotseCfg

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lhotse warns that snip_edges=True is unusual for it
        ref = LhotseFbank(LhotseCfg(num_filters=cfg.num_mel_bins, low_freq=cfg.low_freq,
                                    high_freq=cfg.high_freq, snip_edges=cfg.snip_edges,
                                    dither=0.0)).extract(x, 16000)
    return ref


@pytest.mark.parametrize("n", [399, 400, 401, 16000, 16079, 16080, 16161])
@pytest.mark.parametrize("snip", [False, True])
def test_frame_count(n, snip):
    cfg = FbankConfig(snip_edges=snip)
    feats = fbank(tone_samples(n / 16000), cfg)
    assert feats.shape == (F.num_frames(n, cfg), 80)
    # Kaldi's formulas, written out independently of num_frames().
    expected = (1 + (n - 400) // 160 if n >= 400 else 0) if snip else int(np.floor(n / 160 + 0.5))
    assert feats.shape[0] == expected
    assert feats.dtype == np.float32


@pytest.mark.parametrize("snip", [False, True])
def test_matches_lhotse_kaldi_fbank(snip):
    cfg = FbankConfig(snip_edges=snip)
    x = chirp()
    ours = fbank(x, cfg)
    ref = lhotse_reference(x, cfg)
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, atol=5e-3)
    # A config change must reach the extractor: 40 bins differ in shape, not only value.
    assert fbank(x, FbankConfig(num_mel_bins=40, snip_edges=snip)).shape == (ours.shape[0], 40)


@pytest.mark.needs_espeak
@pytest.mark.skipif(not have_espeak(), reason="espeak-ng not installed")
def test_matches_reference_on_speech():
    x = synth_samples("namaste", "hi")
    cfg = FbankConfig()
    np.testing.assert_allclose(fbank(x, cfg), lhotse_reference(x, cfg), atol=5e-3)


def test_rejects_stereo():
    with pytest.raises(DataError, match="mono"):
        fbank(np.zeros((2, 1600), dtype=np.float32))


@pytest.fixture
def cuts(tmp_path):
    from lhotse import CutSet

    return CutSet.from_cuts([
        tone_cut(tmp_path / "wav" / f"c{i}.wav", duration=0.3 + 0.1 * i, freq=300.0 * (i + 1),
                 text="hello", language="en", cut_id=f"utt/{i}", seed=i)
        for i in range(3)
    ])


def test_compute_features_and_cache_reuse(cuts, tmp_path, monkeypatch):
    out = tmp_path / "feats"
    with_feats = compute_features(cuts, out, FbankConfig(), progress=False)
    assert sorted(c.id for c in with_feats) == sorted(c.id for c in cuts)
    for c in with_feats:
        x = load_features(c)
        assert isinstance(x, torch.Tensor) and x.dtype == torch.float32
        expected = fbank(cuts[c.id].load_audio()[0])
        assert x.shape == (round(c.duration * 100), 80) == expected.shape
        np.testing.assert_array_equal(x.numpy(), expected)
        assert c.supervisions[0].text == "hello"
    caches = [p for p in out.iterdir()]
    assert len(caches) == 1 and caches[0].name.startswith("fbank-")  # no temp dirs left
    npys = sorted(caches[0].rglob("*.npy"))
    mtimes = [p.stat().st_mtime_ns for p in npys]

    # Second call: nothing is recomputed, the arrays are not rewritten.
    def boom(*a, **k):
        raise AssertionError("recomputed")

    monkeypatch.setattr(F, "fbank", boom)
    again = compute_features(cuts, out, FbankConfig(), progress=False)
    assert [p.stat().st_mtime_ns for p in npys] == mtimes
    for c in again:
        np.testing.assert_array_equal(load_features(c).numpy(), load_features(with_feats[c.id]).numpy())

    # A different config is a different cache.
    monkeypatch.undo()
    other = compute_features(cuts, out, FbankConfig(num_mel_bins=40), progress=False)
    assert load_features(next(iter(other))).shape[1] == 40
    assert len([p for p in out.iterdir()]) == 2


def test_cache_is_relocatable(cuts, tmp_path):
    import shutil

    compute_features(cuts, tmp_path / "a", progress=False)
    shutil.move(tmp_path / "a", tmp_path / "b")
    (cache,) = (tmp_path / "b").iterdir()
    moved = F._load_cache(cache)
    assert load_features(next(iter(moved))).shape[1] == 80


def test_bad_cut_leaves_nothing_behind(cuts, tmp_path):
    from lhotse import CutSet

    bad = tone_cut(tmp_path / "wav" / "sr8k.wav", duration=0.5, sampling_rate=8000,
                   cut_id="eight-k")
    out = tmp_path / "feats"
    with pytest.raises(DataError, match="eight-k.*8000 Hz"):
        compute_features(CutSet.from_cuts(list(cuts) + [bad]), out, progress=False)
    assert list(out.iterdir()) == []


def test_load_features_needs_features(cuts):
    with pytest.raises(DataError, match="utt/0.*features compute"):
        load_features(cuts["utt/0"])


def test_fit_cmvn_matches_numpy(cuts, tmp_path):
    with_feats = compute_features(cuts, tmp_path / "f", progress=False)
    allf = np.concatenate([load_features(c).numpy() for c in with_feats]).astype(np.float64)
    cmvn = fit_cmvn(with_feats, progress=False)
    np.testing.assert_allclose(cmvn.mean.numpy(), allf.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cmvn.std.numpy(), allf.std(0), rtol=1e-4, atol=1e-5)


def test_non_finite_audio_is_refused_naming_the_cut(cuts, tmp_path):
    from lhotse import CutSet

    from speechlab.testing.audio import nonfinite_cut

    bad = nonfinite_cut(tmp_path / "wav" / "nan.wav", cut_id="nan-cut")
    out = tmp_path / "feats"
    with pytest.raises(DataError, match=r"cut 'nan-cut' \(.*nan\.wav\): 100 non-finite"):
        compute_features(CutSet.from_cuts(list(cuts) + [bad]), out, progress=False)
    assert list(out.iterdir()) == []
    with pytest.raises(DataError, match="fbank input: 100 non-finite"):
        fbank(bad.load_audio()[0])


def test_any_failure_inside_the_extractor_names_the_cut(cuts, tmp_path, monkeypatch):
    def broken(samples, cfg):
        raise RuntimeError("mel energy is nan")

    monkeypatch.setattr(F, "fbank", broken)
    with pytest.raises(DataError, match=r"cut 'utt/0' \(.*c0\.wav\): RuntimeError: mel energy"):
        compute_features(cuts, tmp_path / "feats", progress=False)


def test_non_finite_cached_features_are_refused_naming_the_cut(cuts, tmp_path):
    with_feats = compute_features(cuts, tmp_path / "f", progress=False)
    c = with_feats["utt/1"]
    path = Path(c.features.storage_path) / c.features.storage_key
    arr = np.load(path)
    arr[3, 5] = np.nan
    np.save(path, arr)
    with pytest.raises(DataError, match=r"cut 'utt/1': cached features .* non-finite"):
        load_features(c)
    with pytest.raises(DataError, match=r"cut 'utt/1'"):
        fit_cmvn(with_feats, progress=False)


def test_what_a_killed_run_left_is_removed_and_a_live_ones_is_not(cuts, tmp_path):
    import os

    out = tmp_path / "feats"
    key = F._cache_key(cuts, FbankConfig())
    dead = out / f".fbank-{key}-999999999-abcd.tmp"  # no such process
    live = out / f".fbank-{key}-{os.getppid()}-efgh.tmp"  # a concurrent run
    for d in (dead, live):
        (d / "ab").mkdir(parents=True)
        (d / "ab" / "half.npy").write_bytes(b"half")
    compute_features(cuts, out, FbankConfig(), progress=False)
    assert not dead.exists() and live.exists()
    assert len([p for p in out.iterdir() if p.name.startswith("fbank-")]) == 1
