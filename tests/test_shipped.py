"""Shipped models by name: speechlab.load, speechlab transcribe, speechlab models, and
speechlab serve with no PATH all reach the packages under models/ (or $SPEECHLAB_MODELS)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import speechlab
from speechlab.cli import main
from speechlab.errors import DataError
from speechlab.shipped import MODELS_ENV, models_dir, resolve, shipped
from speechlab.testing.tiny_models import ctc_package


@pytest.fixture(scope="module")
def ships(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    ctc_package(root / "en_tiny_ctc")
    (root / "not_a_package").mkdir()
    return root


def test_a_shipped_name_loads_like_its_path(ships, monkeypatch):
    monkeypatch.setenv(MODELS_ENV, str(ships))
    assert models_dir() == ships
    assert list(shipped()) == ["en_tiny_ctc"]
    assert resolve("en_tiny_ctc") == ships / "en_tiny_ctc"
    by_name, by_path = speechlab.load("en_tiny_ctc"), speechlab.load(ships / "en_tiny_ctc")
    audio = np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.1
    assert by_name.transcribe(audio).text == by_path.transcribe(audio).text


def test_an_unknown_name_names_the_shipped_models(ships, monkeypatch, capsys):
    monkeypatch.setenv(MODELS_ENV, str(ships))
    assert resolve("no_such_model") == Path("no_such_model")
    with pytest.raises(DataError, match=r"no_such_model does not exist; give .*, or a shipped "
                                        r"model's name \(en_tiny_ctc\)"):
        speechlab.load("no_such_model")
    assert main(["transcribe", "no_such_model", "x.wav"]) == 2
    assert "or a shipped model's name (en_tiny_ctc)" in capsys.readouterr().err


def test_speechlab_models_lists_them(ships, monkeypatch, capsys):
    monkeypatch.setenv(MODELS_ENV, str(ships))
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "en_tiny_ctc" in out and "not_a_package" not in out
    assert main(["models", "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| Model | Family") and lines[2].startswith("| en_tiny_ctc |")


def test_the_table_shows_the_default_searchs_figures_first_and_counts_the_rest():
    from speechlab.shipped import TABLE_FIGURES, _headline

    figures = {"en test WER (greedy)": 9.0, "en test WER": 8.0, "en unseen WER": 40.0}
    assert _headline(figures) == \
        "en test WER: 8.0; en unseen WER: 40.0; en test WER (greedy): 9.0"
    many = {f"x{i} test WER (greedy)": i for i in range(20)} | {"en test WER": 1.0}
    cell = _headline(many).split("; ")
    assert cell[0] == "en test WER: 1.0" and len(cell) == TABLE_FIGURES + 1
    assert cell[-1] == f"{21 - TABLE_FIGURES} more in its README"
    assert _headline({}) == "-"


def test_serve_without_paths_serves_the_shipped_models(ships):
    from speechlab.testing.serve_process import serve_process

    with serve_process(["--port", "0"], {MODELS_ENV: str(ships)}) as (url, printed):
        assert "en_tiny_ctc" in printed
        with urllib.request.urlopen(url + "api/models", timeout=30) as r:
            assert [m["name"] for m in json.loads(r.read())] == ["en_tiny_ctc"]


def test_ship_makes_a_package_with_its_card_readme_and_measured_figures(tmp_path, monkeypatch,
                                                                        capsys):
    from lhotse import CutSet

    from speechlab.metrics import wer
    from speechlab.package import read_card
    from speechlab.testing.corpus import tiny_corpus

    corpus = tiny_corpus(tmp_path)
    run = tmp_path / "run"
    assert main(["reproduce", "topologies", "--scale", "ci", "--corpus", str(corpus), "--out",
                 str(run), "--set", "languages=[en]", "topologies=[S1-T1]",
                 "train.ema_decay=0.9"]) == 0
    ships = tmp_path / "models"
    monkeypatch.setenv(MODELS_ENV, str(ships))
    model = str(run / "models" / "en_S1-T1")
    # the run read a corpus of its own (--corpus): ship is told where it is
    assert main(["models", "ship", model, "--name", "en_ctc"]) == 2
    assert "no test split to measure the model on" in capsys.readouterr().err
    # the confidence map is fitted on the dev split's words (this tiny model's lattices are
    # too large for confidences: planted words stand in for what it would give)
    import speechlab.calibrate

    asked = []
    planted = ([0.9, 0.8, 0.6, 0.3], [True, True, False, False])
    monkeypatch.setattr(speechlab.calibrate, "outcomes",
                        lambda m, cuts, **kw: asked.append(len(cuts)) or planted)
    assert main(["models", "ship", model, "--name", "en_ctc", "--corpus", str(corpus)]) == 0
    dev = CutSet.from_file(corpus / "dev_cuts.jsonl.gz")  # the model's language's cuts
    assert asked == [sum(c.supervisions[0].language == "en" for c in dev)] and asked[0]
    card = read_card(ships / "en_ctc")
    figures = card.results["shipped"]
    # plain CTC with an LM also searches by prefix: its figures too, beside the default's
    assert set(figures) == {"en test WER", "en unseen WER", "en test WER (prefix)",
                            "en unseen WER (prefix)"}
    # the test figure is the run's own decoding of the same utterances, re-scored
    refs = dict(l.split(" ", 1) for l in (run / "hyps" / "en" / "ref.txt").read_text().splitlines())
    hyps = dict((l.split(" ", 1) + [""])[:2]
                for l in (run / "hyps" / "en" / "en_S1-T1.txt").read_text().splitlines())
    assert figures["en test WER"] == pytest.approx(
        100 * wer(list(refs.values()), [hyps[u] for u in refs]).wer, abs=0.05)
    assert card.made_by["command"] and card.made_by["git_commit"]  # what made it
    # its words' confidences are mapped by what was fitted on the dev split
    from speechlab.confidence import fit_platt

    fitted = card.data["confidence_map"]["fitted_on"]
    assert fitted["cuts"] == "dev_cuts.jsonl.gz" and fitted["words"] == 4
    assert card.data["confidence_map"]["a"] == pytest.approx(fit_platt(*planted).a)
    # lean: float16 weights, and the decoding graph rebuilt at load rather than shipped
    from speechlab.package import weights_header

    assert "graph" not in card.files and not (ships / "en_ctc" / "graph.fst").exists()
    # the LM goes gzip-compressed, and the graph built from it is the run's
    assert card.files["lm"] == "lm.arpa.gz" and not (ships / "en_ctc" / "lm.arpa").exists()
    assert (ships / "en_ctc" / "lm.arpa.gz").stat().st_size < \
        (run / "lang" / "en.arpa").stat().st_size / 2
    assert {dtype for _, dtype in weights_header(ships / "en_ctc").values()} == {"F16"}
    full = speechlab.load(model)
    lean = speechlab.load(ships / "en_ctc")
    assert lean.graph.fst.num_states == full.graph.fst.num_states
    assert {k: v for k, v in lean.graph.info.items() if k != "build_seconds"} == \
        {k: v for k, v in full.graph.info.items() if k != "build_seconds"}
    assert next(lean.model.parameters()).dtype == next(full.model.parameters()).dtype
    readme = (ships / "en_ctc" / "README.md").read_text()
    assert "| en unseen WER |" in readme and 'speechlab.load("en_ctc")' in readme
    assert isinstance(card.made_by["step"], int) and "unfinished" not in card.made_by
    # trained with the weights' moving average: the package holds it, and says so
    assert card.made_by["weights"] == {"ema_decay": 0.9,
                                       "average_updates": card.made_by["step"]}
    assert "the run's moving average of its weights (`ema_decay` 0.9" in readme
    # the settings its run's decode step chose on dev, which the package decodes with
    tuned = json.loads((run / "models" / "en_S1-T1" / "decoding.json").read_text())
    assert card.made_by["decoding"]["acoustic_weight"] == tuned["acoustic_weight"] == \
        card.data["viterbi"]["acoustic_weight"]
    assert f"acoustic_weight {tuned['acoustic_weight']}" in readme
    # a run still training (no results.json yet): the command and commit come from the
    # invocations of this model the run recorded (not those that trained its other models),
    # and the card says whether this model's training had ended
    from speechlab.report.results import INVOCATIONS_NAME, read_invocations
    from speechlab.train.checkpoint import training_ended

    calls = read_invocations(run)
    assert len(calls) == 1 and calls[0]["command"] == card.made_by["command"]
    with open(run / INVOCATIONS_NAME, "a") as f:
        f.write('{"command": "cut sh')  # a line cut short by a kill is skipped
        f.write('\n{"command": "speechlab train topologies hi_S1-T1 --out r", '
                '"git_commit": "0ther"}\n')  # another model's, recorded without its name
        f.write('{"command": "python -m speechlab train", "git_commit": "0ther", '
                '"model": "hi_S1-T1"}\n')
    (run / "results.json").rename(run / "results.json.away")
    elsewhere = tmp_path / "early"
    assert main(["models", "ship", model, "--name", "en_ctc_early", "--corpus", str(corpus),
                 "--to", str(elsewhere)]) == 0
    (run / "results.json.away").rename(run / "results.json")
    early = read_card(elsewhere / "en_ctc_early").made_by
    assert early["invocations"] == calls
    assert (early["command"], early["git_commit"]) == (calls[0]["command"], calls[0]["git_commit"])
    assert early["step"] == card.made_by["step"]
    # the ci run trains to its max_steps: this model's training has ended, not the run's
    ended = training_ended(Path(model))
    assert ended is not None and early["training_ended"] == ended
    assert "unfinished" not in early
    readme = (elsewhere / "en_ctc_early" / "README.md").read_text()
    why = ("its last update (`max_steps`)" if ended["reason"] == "max_steps"
           else "early stopping on the dev split")
    assert f"its training had ended (by {why}, at update {ended['step']})" in readme
    assert "0ther" not in readme
    assert "had not finished" not in readme
    # a model still training: the card says so
    from dataclasses import replace as replaced

    from speechlab.shipping import _readme

    training = {k: v for k, v in early.items() if k != "training_ended"}
    readme = _readme("en_ctc_early", replaced(read_card(elsewhere / "en_ctc_early"),
                                              made_by=dict(training, unfinished=True)), 1.0)
    assert "had not finished" in readme and f"(update {early['step']})" in readme
    assert "its training had ended" not in readme
    assert "written before the first of them" not in readme  # trained after its start
    # a run older than its record: its checkpoint predates the first recorded start
    from speechlab.shipping import _before_first_start

    later = dict(early, invocations=[dict(calls[0], date_utc="2999-01-01T00:00:00+00:00")])
    assert _before_first_start(later) and not _before_first_start(early)
    assert not _before_first_start(dict(early, invocations=[]))
    assert f"fitted on {fitted['words']} words of the run corpus's dev split" in readme
    capsys.readouterr()
    assert main(["models"]) == 0 and "en_ctc" in capsys.readouterr().out
    # measured again on the same corpus, by name, the figures are the card's
    measured = tmp_path / "measured.json"
    assert main(["models", "measure", "en_ctc", "--corpus", str(corpus), "--json",
                 str(measured)]) == 0
    printed = capsys.readouterr().out.splitlines()
    again = json.loads(measured.read_text())
    assert again["figures"] == again["card"] == figures
    assert printed[0].split() == ["figure", "measured", "card"]
    assert any(line.split()[-2:] == [str(figures["en test WER"])] * 2
               for line in printed if line.startswith("en test WER "))
    # an existing --json is not replaced without --overwrite, before any decoding
    assert main(["models", "measure", "en_ctc", "--corpus", str(corpus), "--json",
                 str(measured)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    # not replaced without --overwrite; nothing left half-made
    assert main(["models", "ship", model, "--name", "en_ctc", "--corpus", str(corpus)]) == 2
    assert sorted(p.name for p in ships.iterdir()) == ["en_ctc"]
    # shipped with another word LM: the run's mixed with one of words it never had
    from speechlab.text.ngram import NgramConfig, estimate, interpolate, read_arpa

    other = estimate([["the", "weather", "was", "cold"], ["the", "door"]],
                     NgramConfig(order=2, discount=0.5))
    mixed = tmp_path / "mixed.arpa"
    interpolate(read_arpa(run / "lang" / "en.arpa"), other, 0.5).write(mixed)
    monkeypatch.setenv("SPEECHLAB_CACHE", str(tmp_path / "cache"))
    assert main(["models", "ship", model, "--name", "en_ctc_mixed", "--corpus", str(corpus),
                 "--word-lm", str(mixed)]) == 0
    card = read_card(ships / "en_ctc_mixed")
    assert card.made_by["word_lm"]["file"] == "mixed.arpa"
    assert len(card.made_by["word_lm"]["sha256"]) == 64
    shipped = speechlab.load(ships / "en_ctc_mixed")
    assert {"weather", "door"} <= set(shipped.graph.lang.words)
    assert set(full.graph.lang.words) <= set(shipped.graph.lang.words)
    assert "word LM: not the run's but `mixed.arpa`" in \
        (ships / "en_ctc_mixed" / "README.md").read_text()
    assert set(card.results["shipped"]) == set(figures)  # measured with it
    capsys.readouterr()
    assert main(["export", model, "--out", str(tmp_path / "x"), "--word-lm", str(mixed)]) == 0
    assert "weather" in speechlab.load(tmp_path / "x").graph.lang.words


def test_ship_measures_a_synthesizer_on_the_test_split(tmp_path, monkeypatch):
    """A TTS model is shipped with its test split's MCD, F0 RMSE and V/UV agreement, measured
    as a user synthesizes (labels in, the model's frames against the recordings')."""
    import shutil

    from speechlab.metrics.tts import mcd
    from speechlab.package import read_card
    from speechlab.testing.tiny_models import salad_package
    from speechlab.tts.acoustic import MCEP, analyse
    from speechlab.tts.corpus import TtsCorpusConfig, load_tts_split, make_tts_corpus

    if shutil.which("festival") is None:
        pytest.skip("needs festival for the TTS corpus")
    corpus = make_tts_corpus(TtsCorpusConfig(minutes=0.3, dev_fraction=0.2, test_fraction=0.2),
                             tmp_path / "corpus")
    pkg = salad_package(tmp_path / "pkg")
    monkeypatch.setenv(MODELS_ENV, str(tmp_path / "models"))
    assert main(["models", "ship", str(pkg), "--name", "en_salad", "--corpus",
                 str(corpus)]) == 0
    card = read_card(tmp_path / "models" / "en_salad")
    figures = card.results["shipped"]
    assert set(figures) == {"test MCD [dB]", "test F0 RMSE [Hz]", "test V/UV [%]"}
    # the MCD is the model's own frames against the recordings', pooled over the test split
    model = speechlab.load(tmp_path / "models" / "en_salad")
    refs, hyps = [], []
    for utt in load_tts_split(corpus, "test"):
        frames = model.synthesize(labels=utt.labels).features
        import soundfile as sf

        wav, rate = sf.read(utt.wav, dtype="float64")
        refs.append(analyse(wav, rate, len(frames)))
        hyps.append(frames)
    assert len(refs) >= 1
    expected = mcd(np.concatenate(refs)[:, MCEP], np.concatenate(hyps)[:, MCEP])
    assert figures["test MCD [dB]"] == pytest.approx(expected, abs=0.02)
    assert 0 <= figures["test V/UV [%]"] <= 100 and figures["test F0 RMSE [Hz]"] >= 0
    readme = (tmp_path / "models" / "en_salad" / "README.md").read_text()
    assert "| test MCD [dB] |" in readme and "mel-cepstral distortion" in readme
    assert "confidence" not in readme


def test_serve_lists_the_shipped_models_in_the_order_file_s_order(tmp_path, monkeypatch,
                                                                    capsys):
    import shutil

    from speechlab.serve.commands import model_paths
    from speechlab.shipped import ORDER_FILE, serve_order

    ctc_package(tmp_path / "a_model")
    for name in ("b_model", "c_model"):
        shutil.copytree(tmp_path / "a_model", tmp_path / name)
    monkeypatch.setenv(MODELS_ENV, str(tmp_path))
    # no order file: by name
    assert [p.name for p in serve_order()] == ["a_model", "b_model", "c_model"]
    (tmp_path / ORDER_FILE).write_text("# the page's default first\nc_model\n\ngone_model  # "
                                       "not shipped\nc_model\n")
    assert [p.name for p in serve_order()] == ["c_model", "a_model", "b_model"]
    assert "'gone_model', which is not a shipped model" in capsys.readouterr().err
    assert [p.name for p in model_paths([], None)] == ["c_model", "a_model", "b_model"]
    # given paths are served as given
    assert model_paths([tmp_path / "b_model"], None) == [tmp_path / "b_model"]


def test_measure_refuses_a_corpus_it_cannot_measure_on(ships, monkeypatch, tmp_path, capsys):
    """``models measure`` names what is wrong: no test split, or none in the model's
    languages; and an unknown model."""
    from lhotse import CutSet

    from speechlab.testing.corpus import tiny_corpus

    monkeypatch.setenv(MODELS_ENV, str(ships))
    assert main(["models", "measure", "en_tiny_ctc", "--corpus", str(tmp_path)]) == 2
    assert "no test split" in capsys.readouterr().err
    corpus = tiny_corpus(tmp_path / "c")
    test = corpus / "test_cuts.jsonl.gz"
    others = [c for c in CutSet.from_file(test) if c.supervisions[0].language != "en"]
    assert others  # the tiny corpus has four languages
    CutSet.from_cuts(others).to_file(test)
    assert main(["models", "measure", "en_tiny_ctc", "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err
    assert "no utterance in en_tiny_ctc's languages (en)" in err
    assert main(["models", "measure", "no_such_model", "--corpus", str(corpus)]) == 2
    err = capsys.readouterr().err
    assert "no_such_model: no such package or shipped model (shipped: en_tiny_ctc)" in err
