"""A language allowlist for the multi-softmax LID model: only the listed languages' decoders
run, the LID head's posteriors are renormalised over them, each decoder gives what it gives in
the full run, and the CLI, the API and the server refuse what cannot be."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.errors import ConfigError
from speechlab.testing.rnnt import untrained_recognizer
from speechlab.testing.tone_rnnt import MODEL, planted_run, tone_samples

FOUR = ("en", "hi", "ta", "gu")


@pytest.fixture(scope="module")
def four():
    return untrained_recognizer(languages=FOUR)


def _audio(seconds: float = 1.5) -> np.ndarray:
    rng = np.random.default_rng(3)
    return (0.1 * rng.standard_normal(int(seconds * 16000))).astype(np.float32)


def test_only_the_listed_decoders_run_and_lid_is_renormalised_over_them(four):
    from speechlab.asr.rnnt.config import DecodeConfig
    from speechlab.asr.rnnt.multilingual_decode import LidFreeDecoder

    audio = _audio()
    full = four.transcribe(audio)
    some = four.transcribe(audio, languages=["gu", "hi"])  # order given does not matter
    assert set(some.lid) == {"hi", "gu"} and set(some.extra["active_frames"]) == {"hi", "gu"}
    assert abs(sum(some.lid.values()) - 1) < 1e-9
    # per frame, softmax over the listed columns: the average ratio of the two is not the
    # full run's ratio, but each frame's is; check it on one frame of the encoder's output
    feats = torch.randn(40, 80)
    whole = LidFreeDecoder(four.networks, DecodeConfig())
    part = LidFreeDecoder(four.networks, DecodeConfig(), languages=["hi", "gu"])
    whole.accept(feats)
    part.accept(feats)
    _, logits, _ = four.networks.encoder(feats, four.networks.encoder.init_state(None))
    expected = torch.softmax(logits.double()[:, [1, 3]], dim=-1).sum(0)
    assert torch.allclose(part.posterior_sum, expected, rtol=1e-6)
    assert part.languages == ("hi", "gu") and len(part.beams) == 2
    # each listed decoder's hypothesis is the one it has in the full run (no early stopping)
    for lang in ("hi", "gu"):
        assert part.best(lang).tokens == whole.best(lang).tokens
    assert some.language in ("hi", "gu") and full.language in FOUR


def test_the_allowlist_decides_what_lid_can_pick(tmp_path_factory):
    import speechlab

    tones = speechlab.load(planted_run(tmp_path_factory.mktemp("tones")) / "models" / MODEL)
    audio = tone_samples()
    assert tones.transcribe(audio).language == "en"  # the LID head leads with English
    only_hindi = tones.transcribe(audio, languages=["hi"])
    assert only_hindi.language == "hi" and only_hindi.lid == {"hi": 1.0}
    english = tones.transcribe(audio, languages=["en"])
    assert english.text == "the fox" and english.lid == {"en": 1.0}
    stream = tones.stream(languages=["hi"])
    stream.accept_waveform(audio)
    assert stream.active == ("hi",)
    for bad, message in ((dict(languages=["fr"]), "'fr' is not one of"),
                         (dict(languages=[]), "at least one"),
                         (dict(language="en", languages=["en"]), "not both")):
        with pytest.raises(ConfigError, match=message):
            tones.transcribe(audio, **bad)


def test_the_cli_and_the_options_parser_refuse_what_cannot_be(tmp_path, capsys):
    import soundfile as sf

    from speechlab.cli import main
    from speechlab.contract import recognition_options
    from speechlab.testing.tiny_models import ctc_package

    run = planted_run(tmp_path / "tones") / "models" / MODEL
    wav = tmp_path / "a.wav"
    sf.write(wav, tone_samples(), 16000)
    assert main(["transcribe", str(run), str(wav), "--languages", "hi"]) == 0
    assert capsys.readouterr().out.split("\t")[1] == "hi"
    for argv, message in ((["--languages", "en,fr"], "--languages 'en,fr'"),
                          (["--languages", "en", "--language", "hi"], "give one of them")):
        assert main(["transcribe", str(run), str(wav), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    ctc = speechlab_load(ctc_package(tmp_path / "ctc"))
    with pytest.raises(ConfigError, match="LID head"):
        recognition_options(ctc, languages=ctc.languages[0])


def speechlab_load(path):
    import speechlab

    return speechlab.load(path)
