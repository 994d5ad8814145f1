"""The embedded corpus: layout, scripts, real sentences, valid audio, disjoint splits, held-out
test voices, determinism for a seed, exact budgets, and interrupted builds."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st

from speechlab.audio.io import validate_cut
from speechlab.data import corpus as corpus_mod
from speechlab.data.corpus import (
    BASE_VOICES,
    BUILT_SPLITS,
    SPLITS,
    UNSEEN,
    CorpusConfig,
    load_cuts,
    make_asr_corpus,
    split_sentences_disjoint,
)
from speechlab.data.synth import VARIANTS
from speechlab.data.text_harvest import LANGUAGES, Sentence, in_script, sentence_key
from speechlab.errors import ConfigError, DataError


def _cuts(corpus_dir: Path) -> dict[str, list]:
    return {split: list(load_cuts(corpus_dir, split)) for split in SPLITS}


def test_layout_and_summary(tiny):
    for split in SPLITS:
        for kind in ("cuts", "recordings", "supervisions"):
            assert (tiny / f"{split}_{kind}.jsonl.gz").is_file()
    info = json.loads((tiny / "corpus.json").read_text(encoding="utf-8"))
    assert info["sample_rate"] == 16000
    assert info["languages"] == list(LANGUAGES)
    for lang in LANGUAGES:
        counts = [info["splits"][s]["languages"][lang]["utterances"] for s in SPLITS]
        assert counts == [4, 1, 1]
    cuts = _cuts(tiny)
    assert sum(len(c) for c in cuts.values()) == 24
    assert set(info["synthetic"]["text_sources"]) == set(LANGUAGES)
    assert info["synthetic"]["festival_models"] == {}  # SLT as Debian ships it


def test_each_language_in_its_own_script_with_real_sentences(tiny, harvested):
    real = {lang: {s.text for s in sents if s.is_real} for lang, sents in harvested.items()}
    for cuts in _cuts(tiny).values():
        for cut in cuts:
            (sup,) = cut.supervisions
            assert sup.language in LANGUAGES
            assert in_script(sup.text, sup.language), sup.text
            # Not merely in-script: a harvested, human-written sentence of that language.
            assert sup.text in real[sup.language], sup.text
            assert not sup.custom["text_source"].startswith("wordlist:")


def test_audio_is_valid_16k_mono_and_matches_manifest(tiny):
    for cuts in _cuts(tiny).values():
        for cut in cuts:
            validate_cut(cut, 16000, LANGUAGES)
            info = sf.info(cut.recording.sources[0].source)
            assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "PCM_16")
            assert info.frames == cut.recording.num_samples
            assert abs(cut.duration - info.frames / 16000) < 1e-6
            assert cut.id == cut.supervisions[0].id == cut.recording.id


def test_no_sentence_in_two_splits(tiny):
    keys = {split: {sentence_key(c.supervisions[0].text) for c in cuts}
            for split, cuts in _cuts(tiny).items()}
    assert not keys["train"] & keys["dev"]
    assert not keys["train"] & keys["test"]
    assert not keys["dev"] & keys["test"]


def test_test_voices_are_held_out(tiny):
    cfg = CorpusConfig.tiny()
    speakers = {split: {c.supervisions[0].speaker for c in cuts}
                for split, cuts in _cuts(tiny).items()}
    for spk in speakers["test"]:
        family, _, variant = spk.partition("+")
        if variant:  # espeak-ng: a held-out variant
            assert variant in cfg.test_variants
        else:  # festival: one recorded speaker, heard in training (in-domain)
            assert BASE_VOICES[family].engine == "festival"
            assert any(family in fams for fams in cfg.voices.values())
    for spk in speakers["train"] | speakers["dev"]:
        family, _, variant = spk.partition("+")
        if variant:
            assert variant in VARIANTS and variant not in cfg.test_variants
        else:
            assert BASE_VOICES[family].engine == "festival"


def test_unseen_split_is_the_test_sentences_by_voices_training_never_heard(tiny):
    cfg = CorpusConfig.tiny()
    cuts = {split: list(load_cuts(tiny, split)) for split in BUILT_SPLITS}
    heard = {c.supervisions[0].speaker for s in ("train", "dev") for c in cuts[s]}
    assert cuts[UNSEEN] and len(cuts[UNSEEN]) == len(cuts["test"])
    test_text = {(c.supervisions[0].language, c.supervisions[0].text) for c in cuts["test"]}
    for cut in cuts[UNSEEN]:
        sup = cut.supervisions[0]
        assert (sup.language, sup.text) in test_text
        assert sup.speaker not in heard
        family = sup.speaker.partition("+")[0]
        assert family in cfg.unseen_voices[sup.language]
    engines = {c.supervisions[0].custom["engine"] for s in cuts.values() for c in s}
    assert engines == {"espeak-ng", "festival"}


def test_a_festival_voice_cannot_be_both_heard_and_unseen():
    with pytest.raises(ConfigError, match="unseen_voices.en.*en-ked.*also speak in training"):
        CorpusConfig(voices={"en": {"en-us": 1.0, "en-ked": 1.0}, "hi": {"hi": 1.0},
                             "ta": {"ta": 1.0}, "gu": {"gu": 1.0}})
    with pytest.raises(ConfigError, match="unknown speaker famil"):
        CorpusConfig(unseen_voices={"en": {"en-nobody": 1.0}})
    from speechlab.audio.augment import AugmentPlan

    with pytest.raises(ConfigError, match="channels: unknown channel"):
        CorpusConfig(effects=AugmentPlan(channels=("carrier-pigeon",)))


def test_every_family_names_a_voice_and_an_accent_its_synthesizer_has():
    from speechlab.data import festival
    from speechlab.data.synth import ACCENTS, FESTIVAL_ACCENTS

    for family, base in BASE_VOICES.items():
        if base.engine == "festival":
            assert base.voice in festival.VOICES and base.accent in FESTIVAL_ACCENTS, family
        else:
            assert base.accent in ACCENTS, family
    # the accented English voices are in no default; a corpus may hear them, or keep them unseen
    defaults = CorpusConfig()
    accented = {f for f, b in BASE_VOICES.items() if b.accent == "respelt"}
    assert len(accented) == 7
    assert not accented & {f for table in (defaults.voices, defaults.unseen_voices)
                           for fams in table.values() for f in fams}
    cfg = CorpusConfig(unseen_voices={"en": {"en-ked": 1.0, "en-lp": 1.0}})
    assert cfg.families("en", UNSEEN) == {"en-ked": 1.0, "en-lp": 1.0}
    with pytest.raises(ConfigError, match="en-lp.*also speak in training"):
        CorpusConfig(voices={"en": {"en-us": 1.0, "en-lp": 1.0}, "hi": {"hi": 1.0},
                             "ta": {"ta": 1.0}, "gu": {"gu": 1.0}},
                     unseen_voices={"en": {"en-lp": 1.0}})


def _manifest_lines(corpus_dir: Path) -> dict[str, list[str]]:
    out = {}
    for p in sorted(corpus_dir.glob("*.jsonl.gz")):
        text = gzip.decompress(p.read_bytes()).decode("utf-8")
        out[p.name] = text.replace(str(corpus_dir), "<DIR>").splitlines()
    return out


def _wav_bytes(corpus_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(corpus_dir)): p.read_bytes()
            for p in sorted((corpus_dir / "wav").rglob("*.wav"))}


def test_slt_through_its_16k_model_is_a_family_a_corpus_records(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path / "cache"))
    cfg = CorpusConfig(minutes={"en": 1.0}, utterances_per_language=6, dev_fraction=0.17,
                       test_fraction=0.17, voices={"en": {"en-slt16": 1.0}},
                       unseen_voices={}, batch_size=8)
    out = make_asr_corpus(cfg, tmp_path / "c", progress=False)
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert list(info["synthetic"]["festival_models"]) == ["cmu_us_slt_arctic_hts_16k"]
    cuts = list(load_cuts(out, "train"))
    assert {c.supervisions[0].speaker for c in cuts} == {"en-slt16"}
    assert all(c.duration > 0.5 for c in cuts)


def test_deterministic_for_a_seed(tiny, tmp_path):
    again = make_asr_corpus(CorpusConfig.tiny(), tmp_path / "again", progress=False)
    assert _manifest_lines(again) == _manifest_lines(tiny)
    assert _wav_bytes(again) == _wav_bytes(tiny)
    info_a = json.loads((tiny / "corpus.json").read_text(encoding="utf-8"))
    info_b = json.loads((again / "corpus.json").read_text(encoding="utf-8"))
    assert info_a == info_b
    other = make_asr_corpus(CorpusConfig.tiny(seed=1), tmp_path / "other", progress=False)
    assert _manifest_lines(other) != _manifest_lines(tiny)


def test_minutes_budget_is_met_exactly_and_independent_of_workers(tmp_path):
    base = CorpusConfig(minutes={"hi": 0.4, "gu": 0.2}, seed=5, batch_size=4,
                        dev_fraction=0.25, test_fraction=0.25)
    one = make_asr_corpus(base, tmp_path / "w1", progress=False)
    from dataclasses import replace

    two = make_asr_corpus(replace(base, workers=2), tmp_path / "w2", progress=False)
    one_w1 = make_asr_corpus(replace(base, workers=1), tmp_path / "w1b", progress=False)
    assert _manifest_lines(two) == _manifest_lines(one) == _manifest_lines(one_w1)
    assert _wav_bytes(two) == _wav_bytes(one_w1)
    fractions = {"train": 0.5, "dev": 0.25, "test": 0.25}
    for split, cuts in _cuts(one).items():
        for lang in ("hi", "gu"):
            durs = [c.duration for c in cuts if c.supervisions[0].language == lang]
            budget = base.minutes[lang] * 60 * fractions[split]
            # Stops at the first utterance that reaches the budget: over by less than one.
            assert sum(durs) >= budget
            assert sum(durs) - durs[-1] < budget
    assert {c.supervisions[0].language for c in _cuts(one)["train"]} == {"hi", "gu"}


def test_interrupted_build_leaves_no_complete_corpus(tiny, tmp_path, monkeypatch):
    out = tmp_path / "interrupted"
    make_asr_corpus(CorpusConfig.tiny(), out, progress=False)
    real_write = corpus_mod.write_split
    calls = []

    def crash_on_second(*args, **kwargs):
        calls.append(args[1])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_write(*args, **kwargs)

    monkeypatch.setattr(corpus_mod, "write_split", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        make_asr_corpus(CorpusConfig.tiny(), out, progress=False, overwrite=True)
    assert not (out / "corpus.json").exists()
    assert not list(out.rglob("*.tmp"))
    with pytest.raises(DataError, match="not a complete speechlab corpus"):
        load_cuts(out, "train")
    monkeypatch.setattr(corpus_mod, "write_split", real_write)
    make_asr_corpus(CorpusConfig.tiny(), out, progress=False)  # a rerun finishes
    assert _manifest_lines(out) == {k: [line.replace(str(tiny), "<DIR>") for line in v]
                                    for k, v in _manifest_lines(tiny).items()}


def test_load_cuts_unknown_split(tiny):
    with pytest.raises(DataError, match="no split 'eval'"):
        load_cuts(tiny, "eval")


@pytest.mark.parametrize("kwargs, message", [
    ({"minutes": {"fr": 1.0}}, "unknown language"),
    ({"test_variants": VARIANTS}, "not all"),
    ({"test_variants": ("m99",)}, "unknown espeak variant"),
    ({"dev_fraction": 0.6, "test_fraction": 0.5}, "sum to < 1"),
    ({"voices": {"en": {"klingon": 1.0}, "hi": {"hi": 1.0}, "ta": {"ta": 1.0},
                 "gu": {"gu": 1.0}}}, "unknown speaker famil"),
    ({"utterances_per_language": 2}, ">= 3"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        CorpusConfig(**kwargs)


@settings(max_examples=40, deadline=None)
@given(n_real=st.integers(3, 60), n_fill=st.integers(0, 30), seed=st.integers(0, 10**6))
def test_sentence_pools_are_disjoint_and_complete(n_real, n_fill, seed):
    sents = [Sentence(f"real sentence {i}", "pkg") for i in range(n_real)]
    sents += [Sentence(f"filler words {i}", "wordlist:x") for i in range(n_fill)]
    pools = split_sentences_disjoint(sents, CorpusConfig(), random.Random(seed))
    seen = [s for split in SPLITS for s in pools[split]]
    assert sorted(seen, key=lambda s: s.text) == sorted(sents, key=lambda s: s.text)
    for split in SPLITS:
        # Every split starts with real sentences; fillers only after them.
        kinds = [s.is_real for s in pools[split]]
        assert kinds[0] and kinds == sorted(kinds, reverse=True)


def _imported(out: Path, split: str, tmp_path: Path) -> dict:
    """Import one tone as ``split`` of ``out``; returns corpus.json."""
    import numpy as np

    from speechlab.data.importers import ImportConfig, import_kaldi

    d = tmp_path / f"kaldi-{split}"
    d.mkdir()
    sf.write(d / "a.wav", (np.sin(np.arange(8000) * 0.1) * 8000).astype("int16"), 16000)
    (d / "wav.scp").write_text(f"a {d / 'a.wav'}\n")
    (d / "text").write_text("a hello\n")
    (d / "utt2spk").write_text("a s\n")
    (d / "utt2lang").write_text("a en\n")
    import_kaldi(d, out, ImportConfig(split=split))
    return json.loads((out / "corpus.json").read_text(encoding="utf-8"))


def test_a_build_keeps_imported_splits_and_refuses_to_replace_one(tiny, tmp_path):
    from speechlab.testing.files import snapshot

    # An imported split under another name stays listed, through the build and after it.
    out = tmp_path / "mixed"
    _imported(out, "mucs", tmp_path)
    make_asr_corpus(CorpusConfig.tiny(), out, progress=False)
    info = json.loads((out / "corpus.json").read_text(encoding="utf-8"))
    assert sorted(info["splits"]) == ["dev", "mucs", "test", "train", "unseen"]
    assert [c.id for c in load_cuts(out, "mucs")] == ["a"]
    assert (Path(next(iter(load_cuts(out, "mucs"))).recording.sources[0].source)).is_file()
    # An imported train split is not replaced without --overwrite...
    clash = tmp_path / "clash"
    _imported(clash, "train", tmp_path)
    before = snapshot(clash)
    with pytest.raises(DataError, match=r"imported split\(s\) \['train'\].*--overwrite"):
        make_asr_corpus(CorpusConfig.tiny(), clash, progress=False)
    assert snapshot(clash) == before
    # ...and an import does not replace a built split either.
    (tmp_path / "x").mkdir()
    before = snapshot(tiny)
    with pytest.raises(DataError, match=r"already holds split 'train' \(16 utterances, from "
                                        r"synthetic\)"):
        _imported(tiny, "train", tmp_path / "x")
    assert snapshot(tiny) == before
