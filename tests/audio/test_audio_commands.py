"""``speechlab features ...`` and ``speechlab text build-tokenizers`` end to end on tiny cuts."""

from __future__ import annotations

import argparse

import pytest
import torch

from speechlab.audio.commands import add_commands
from speechlab.audio.features import load_features
from speechlab.audio.transforms import GlobalCMVN
from speechlab.errors import DataError
from speechlab.testing.audio import tone_cut
from speechlab.text.graphemes import GraphemeTokenizer, UnionTokenizer


def run(argv: list[str]) -> int:
    # Our own parser (not cli.main) so these tests do not depend on other areas' commands.
    parser = argparse.ArgumentParser(prog="speechlab")
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def manifest(tmp_path):
    from lhotse import CutSet

    texts = [("en", "Hello world"), ("hi", "नमस्ते दुनिया"), ("ta", "வணக்கம்"), ("gu", "નમસ્તે")]
    cuts = CutSet.from_cuts([
        tone_cut(tmp_path / "wav" / f"{lang}.wav", duration=0.25, text=text, language=lang,
                 cut_id=f"{lang}-1")
        for lang, text in texts
    ])
    path = tmp_path / "cuts.jsonl.gz"
    cuts.to_file(path)
    return path


def test_features_compute_and_cmvn(manifest, tmp_path, capsys):
    from lhotse import CutSet

    out_cuts = tmp_path / "cuts_fbank.jsonl.gz"
    assert run(["features", "compute", "--cuts", str(manifest), "--out", str(tmp_path / "f"),
                "--cuts-out", str(out_cuts), "--num_mel_bins", "40", "--quiet"]) == 0
    cuts = CutSet.from_file(out_cuts)
    assert {load_features(c).shape for c in cuts} == {(25, 40)}
    assert run(["features", "cmvn", "--cuts", str(out_cuts), "--out", str(tmp_path / "cmvn.st"),
                "--quiet"]) == 0
    cmvn = GlobalCMVN.load(tmp_path / "cmvn.st")
    assert cmvn.mean.shape == (40,) and torch.isfinite(cmvn.std).all()
    capsys.readouterr()
    # Without --cuts-out it prints the cache manifest, which loads as the same cuts.
    assert run(["features", "compute", "--cuts", str(manifest), "--out", str(tmp_path / "f"),
                "--num_mel_bins", "40", "--quiet"]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert sorted(CutSet.from_file(printed).ids) == sorted(cuts.ids)


def test_build_tokenizers(manifest, tmp_path):
    out = tmp_path / "tok"
    assert run(["text", "build-tokenizers", "--cuts", str(manifest), "--out", str(out),
                "--languages", "[en, hi, ta, gu]"]) == 0
    union = UnionTokenizer.load(out / "union.json")
    assert union.languages == ("en", "hi", "ta", "gu")
    hi = GraphemeTokenizer.load(out / "hi.json")
    assert hi.decode(hi.encode("नमस्ते दुनिया")) == "नमस्ते दुनिया"
    assert union.decode(union.encode("Hello world", "en")) == "hello world"


def test_missing_manifest(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        run(["text", "build-tokenizers", "--cuts", str(tmp_path / "x.jsonl.gz"), "--out",
             str(tmp_path)])


def test_supervision_without_language(tmp_path):
    from lhotse import CutSet

    cut = tone_cut(tmp_path / "a.wav", duration=0.2, text="hi", language=None, cut_id="no-lang")
    CutSet.from_cuts([cut]).to_file(tmp_path / "c.jsonl.gz")
    with pytest.raises(DataError, match="no-lang.*no language"):
        run(["text", "build-tokenizers", "--cuts", str(tmp_path / "c.jsonl.gz"), "--out",
             str(tmp_path / "o")])
