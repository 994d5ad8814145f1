"""``speechlab data prepare``: each corpus's real layout (written by
speechlab.testing.real_corpora with synthetic audio) into the corpus layout a paper reads;
normalised transcripts, languages mapped, audio at 16 kHz; bad directories refused with one line
and nothing written; a paper runs at the ci scale from a prepared corpus."""

from __future__ import annotations

import json

import pytest

from speechlab.cli import main
from speechlab.data.corpus import SPLITS, load_cuts
from speechlab.data.prepare import CORPORA, prepare_corpus
from speechlab.errors import DataError
from speechlab.testing import real_corpora as rc
from speechlab.testing.files import snapshot

# corpus -> (writer, the languages its prepared splits hold)
EXPECTED = {"librispeech": {"en"}, "fleurs": {"en", "hi"}, "cmu-indic": {"hi", "ta", "en"},
            "cmu-arctic": {"en"}, "ljspeech": {"en"}}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("real")
    return {name: writer(root / name.replace("-", "_")) for name, writer in rc.WRITERS.items()}


@pytest.fixture(scope="module")
def prepared(sources, tmp_path_factory):
    out = tmp_path_factory.mktemp("prepared")
    return {name: (prepare_corpus(name, src, out / name), out / name)
            for name, src in sources.items()}


def test_every_corpus_is_named_and_written_by_the_test_helpers():
    assert sorted(CORPORA) == sorted(rc.WRITERS) == ["cmu-arctic", "cmu-indic", "fleurs",
                                                      "librispeech", "ljspeech"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_prepared_corpus_has_train_dev_test_at_16k_with_normalised_text(prepared, name):
    reports, out = prepared[name]
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert set(SPLITS) <= set(info["splits"])
    assert info["prepared"][name]["resampled_to"] == 16000
    langs = set()
    for split in SPLITS:
        cuts = list(load_cuts(out, split))
        assert cuts and reports[split].kept == len(cuts)
        for cut in cuts[:3]:
            sup = cut.supervisions[0]
            langs.add(sup.language)
            assert cut.sampling_rate == 16000
            audio = cut.load_audio()
            assert audio.shape[0] == 1 and abs(audio.shape[1] - cut.num_samples) <= 1
            # normalised as the embedded corpus's: no upper case, no punctuation
            assert sup.text == sup.text.lower() and not any(c in sup.text for c in ".,|\"")
            assert sup.custom["raw_text"]
        langs |= {c.supervisions[0].language for c in cuts}
    assert langs == EXPECTED[name]


def test_librispeech_parts_become_splits_and_ljspeech_is_resampled_on_load(prepared, sources):
    _, out = prepared["librispeech"]
    train = list(load_cuts(out, "train"))
    assert train[0].supervisions[0].custom["raw_text"].isupper()
    _, lj = prepared["ljspeech"]
    rec = list(load_cuts(lj, "train"))[0].recording
    assert rec.sources[0].source.startswith(str(sources["ljspeech"]))  # not copied
    assert [type(t).__name__ for t in rec.transforms] == ["Resample"]


def test_made_splits_give_each_voice_and_language_a_test_and_dev_utterance(prepared):
    _, out = prepared["cmu-indic"]
    for split in ("dev", "test"):
        langs = {c.supervisions[0].language for c in load_cuts(out, split)}
        assert langs == {"hi", "ta", "en"}
    ids = {split: {c.id for c in load_cuts(out, split)} for split in SPLITS}
    assert not (ids["train"] & ids["test"]) and not (ids["dev"] & ids["test"])


def test_fleurs_as_released_with_its_archives_unpacked(tmp_path):
    src = rc.fleurs(tmp_path / "hf", languages=("hi",), released=True)
    assert not (src / "metadata").exists() and (src / "hi_in" / "train.tsv").is_file()
    reports = prepare_corpus("fleurs", src, tmp_path / "out")
    assert {split: r.kept for split, r in reports.items()} == {"train": 4, "dev": 4, "test": 4}
    cut = next(iter(load_cuts(tmp_path / "out", "test")))
    assert cut.recording.sources[0].source.startswith(str(src.resolve()))
    assert cut.load_audio().shape[1] == cut.num_samples


def test_the_parent_of_the_unpacked_folder_will_do(sources, tmp_path):
    reports = prepare_corpus("librispeech", sources["librispeech"].parent, tmp_path / "out")
    assert set(reports) == set(SPLITS)


def test_info_shows_each_split(prepared, capsys):
    _, out = prepared["fleurs"]
    assert main(["data", "info", str(out)]) == 0
    printed = capsys.readouterr().out
    for split in SPLITS:
        assert f"{split:<8}hi" in printed and f"{split:<8}en" in printed


def _write_librispeech(tmp_path):
    return rc.librispeech(tmp_path / "src", speakers=1, per_chapter=2)


@pytest.mark.parametrize("damage, message", [
    (lambda d: [p.unlink() for p in d.rglob("*.trans.txt") if "dev-clean-2" in str(p)],
     r"dev-clean-2/\*/\*/\*.trans.txt \(the transcripts\) is missing"),
    (lambda d: next(d.rglob("*-0001.flac")).unlink(), r"-0001.flac \(the audio of .*\) is missing"),
    (lambda d: [p.rename(p.with_name(f"part{i}")) for i, p in enumerate(sorted(d.iterdir()))],
     r"every LibriSpeech part .* is missing"),
])
def test_a_damaged_corpus_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, damage,
                                                                 message):
    import re

    src = _write_librispeech(tmp_path)
    damage(src)
    out = tmp_path / "out"
    assert main(["data", "prepare", "librispeech", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err
    assert not out.exists()


def test_languages_a_corpus_lacks_and_splits_already_there_are_refused(sources, tmp_path,
                                                                      capsys):
    out = tmp_path / "out"
    assert main(["data", "prepare", "fleurs", str(sources["fleurs"]), "--out", str(out),
                 "--languages", "fr"]) == 2
    assert "fleurs holds no ['fr'] speech" in capsys.readouterr().err
    assert main(["data", "prepare", "fleurs", str(sources["fleurs"]), "--out", str(out),
                 "--languages", "ta"]) == 2
    assert "(ta_in/) is missing" in capsys.readouterr().err
    assert main(["data", "prepare", "fleurs", str(sources["fleurs"]), "--out", str(out),
                 "--languages", "hi"]) == 0
    before = snapshot(out)
    with pytest.raises(DataError, match="--overwrite"):
        prepare_corpus("fleurs", sources["fleurs"], out, languages=["en"])
    assert snapshot(out) == before
    prepare_corpus("fleurs", sources["fleurs"], out, languages=["en"], overwrite=True)
    assert {c.supervisions[0].language for c in load_cuts(out, "train")} == {"en"}
    assert main(["data", "prepare", "mucs", str(sources["fleurs"]), "--out", str(out)]) == 2


def test_a_paper_runs_at_the_ci_scale_from_prepared_corpora(prepared, tmp_path):
    from speechlab.report import Results

    _, libri = prepared["librispeech"]
    run = tmp_path / "topo"
    assert main(["reproduce", "topologies", "--scale", "ci", "--corpus", str(libri), "--out",
                 str(run), "--set", "languages=[en]", "--set", "topologies=[S1-T1]"]) == 0
    t1 = Results.load(run).table("table1")
    assert t1.rows[0][0] == "S1-T1" and t1.rows[0][1] is not None
    _, fl = prepared["fleurs"]
    run = tmp_path / "ms"
    assert main(["reproduce", "multisoftmax", "--scale", "ci", "--corpus", str(fl), "--out",
                 str(run), "--set", "languages=[en, hi]",
                 "--set", "systems=[multisoftmax_lid]", "--set", "grid_language=hi"]) == 0
    names = [t.name for t in Results.load(run).tables]
    assert "table4" in names and "unseen" not in names  # a real corpus has no unseen split


@pytest.mark.parametrize("corpus, paper, sets", [
    ("cmu-indic", "multisoftmax", ["languages=[hi, ta]", "systems=[multisoftmax]",
                                   "grid_language=hi"]),
    ("ljspeech", "local-attention", []),
    ("cmu-arctic", "topologies", ["languages=[en]", "topologies=[S2-T1]"]),
])
def test_the_other_corpora_run_a_paper_at_the_ci_scale(prepared, tmp_path, corpus, paper, sets):
    from speechlab.report import Results

    _, out = prepared[corpus]
    run = tmp_path / "run"
    argv = ["reproduce", paper, "--scale", "ci", "--corpus", str(out), "--out", str(run)]
    assert main(argv + (["--set", *sets] if sets else [])) == 0
    assert Results.load(run).tables
