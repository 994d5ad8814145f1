"""`speechlab data pack` / `unpack`: a corpus carried in one file, its audio as Opus."""

from __future__ import annotations

import json
import tarfile

import numpy as np
import pytest

from speechlab.cli import main
from speechlab.data.corpus import load_cuts
from speechlab.data.pack import pack_corpus, unpack_corpus
from speechlab.errors import DataError


def test_a_packed_corpus_unpacks_into_a_corpus_that_reads_like_the_first(tiny, tmp_path, capsys):
    pack = tmp_path / "corpus.tar"
    assert main(["data", "pack", str(tiny), "--out", str(pack), "--splits", "train,dev",
                 "--others", "1", "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "train:" in said and "kbps" in said and "test: 1 recordings (its first)" in said
    with tarfile.open(pack) as tar:
        names = tar.getnames()
        info = json.loads(tar.extractfile("pack.json").read())
    assert "test_cuts.jsonl.gz" in names  # every manifest travels
    assert len([n for n in names if n.startswith("audio/wav/test/")]) == 1  # the test split's first
    assert 12 < info["splits"]["train"]["kbps"] < 40  # about the 24 asked
    out = tmp_path / "unpacked"
    assert main(["data", "unpack", str(pack), "--out", str(out), "--no-progress"]) == 0
    for split in ("train", "dev"):
        before, after = load_cuts(tiny, split), load_cuts(out, split)
        assert [c.id for c in before] == [c.id for c in after]
        for a, b in zip(before, after):
            assert a.supervisions[0].text == b.supervisions[0].text
            source = b.recording.sources[0].source
            assert source.startswith(str(out.resolve()))
            decoded = b.load_audio()[0]
            original = a.load_audio()[0]
            assert decoded.shape == original.shape  # cut or padded to the manifest's count
            # lossy, but the same speech: the levels agree within a few dB
            level = 10 * np.log10(np.mean(decoded**2) / np.mean(original**2))
            assert abs(level) < 3.0
    test = load_cuts(out, "test")  # its first recording only, with its audio
    assert [c.id for c in test] == [next(iter(load_cuts(tiny, "test"))).id]
    assert next(iter(test)).load_audio().shape[1] > 0
    assert json.loads((out / "corpus.json").read_text())["packed"]["codec"] == "opus"
    # nothing is replaced without --overwrite
    assert main(["data", "unpack", str(pack), "--out", str(out), "--no-progress"]) == 2
    assert main(["data", "pack", str(tiny), "--out", str(pack), "--no-progress"]) == 2


def test_bad_input_is_one_clear_error(tiny, tmp_path):
    with pytest.raises(DataError, match="--kbps 4"):
        pack_corpus(tiny, tmp_path / "a.tar", ["train"], kbps=4, progress=False)
    with pytest.raises(DataError, match="no nope_recordings"):
        pack_corpus(tiny, tmp_path / "a.tar", ["nope"], progress=False)
    assert not (tmp_path / "a.tar").exists()
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all")
    with pytest.raises(DataError, match="not a corpus pack"):
        unpack_corpus(junk, tmp_path / "out", progress=False)
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        tar.add(tiny / "corpus.json", arcname="../corpus.json")
    with pytest.raises(DataError, match="outside it"):
        unpack_corpus(evil, tmp_path / "out2", progress=False)
    assert not (tmp_path / "out2").exists()  # nothing half-written stays
