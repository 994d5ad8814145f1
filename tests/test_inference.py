"""One way to use any trained model: ``speechlab.load`` / ``transcribe`` / ``stream`` /
``export`` and ``speechlab transcribe``, on Hugging Face directories built here with
transformers (its own greedy decoding is the reference) and on speechlab's own models.
(Each paper's ci-run test also exports its models and checks the package decodes as the run
did.)"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
import torch

import speechlab
from speechlab.cli import main
from speechlab.errors import ConfigError, DataError
from speechlab.testing.rnnt import same_words

transformers = pytest.importorskip("transformers")

VOCAB = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4, "E": 5, "T": 6, "A": 7, "O": 8,
         "N": 9, "I": 10, "H": 11}
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2)


def _audio(seconds: float = 2.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    return (0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))
            + 0.05 * rng.standard_normal(len(t))).astype(np.float32)


def _hf_ctc(directory, stable: bool, lower: bool = False):
    """A tiny random Wav2Vec2ForCTC with its processor, saved as a user's directory is."""
    from transformers import (Wav2Vec2Config, Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor,
                              Wav2Vec2ForCTC, Wav2Vec2Processor)

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.json").write_text(json.dumps(VOCAB))
    tokenizer = Wav2Vec2CTCTokenizer(str(directory / "vocab.json"), do_lower_case=lower)
    processor = Wav2Vec2Processor(feature_extractor=Wav2Vec2FeatureExtractor(do_normalize=True),
                                  tokenizer=tokenizer)
    cfg = Wav2Vec2Config(**TINY, vocab_size=len(VOCAB), pad_token_id=0,
                         do_stable_layer_norm=stable,
                         feat_extract_norm="layer" if stable else "group")
    torch.manual_seed(1 if stable else 0)
    model = Wav2Vec2ForCTC(cfg).eval()
    with torch.no_grad():  # a sharp head, so the greedy path holds words
        model.lm_head.weight.mul_(30.0)
    model.save_pretrained(directory)
    processor.save_pretrained(directory)
    return model, processor


def _hf_greedy(model, processor, audio: np.ndarray) -> str:
    """transformers' greedy CTC text, special tokens left out after repeats are grouped
    (speechlab's rule: CtcLabels.special)."""
    inputs = processor(audio, sampling_rate=16000, return_tensors="pt")
    with torch.no_grad():
        ids = model(inputs.input_values).logits.argmax(-1)
    text = processor.batch_decode(ids)[0]
    for token in ("<s>", "</s>", "<unk>"):
        text = text.replace(token, "")
    return " ".join(text.split())


def test_hugging_face_special_tokens_are_left_out_after_ctc_grouping(tmp_path):
    """<s>, </s> and <unk> do not reach the text (as transformers' skip_special_tokens), yet
    one between two equal letters keeps them apart, as CTC reads them (transformers drops
    them, and the pad, before grouping: its "lo l" below reads a doubled l as one)."""
    from transformers import Wav2Vec2CTCTokenizer

    from speechlab.ssl.wav2vec2.recognizer import hf_labels

    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4, "l": 5, "o": 6}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    Wav2Vec2CTCTokenizer(str(tmp_path / "vocab.json")).save_pretrained(tmp_path)
    labels = hf_labels(tmp_path)
    assert set(labels.special) == {"<s>", "</s>", "<unk>"}
    path = [5, 0, 5, 6, 1, 6, 4, 3, 5, 2]
    assert labels.text(path) == "lloo l"
    assert [w.word for w in labels.words(path, 0.02)] == ["lloo", "l"]
    tok = Wav2Vec2CTCTokenizer.from_pretrained(tmp_path)
    assert tok.decode(path) == "llo<s>o <unk>l</s>"  # what speechlab printed before
    assert labels == type(labels).from_json(json.loads(json.dumps(labels.to_json())))


@pytest.mark.parametrize("stable", [False, True], ids=["base-layout", "stable-layer-norm"])
def test_a_hugging_face_ctc_directory_transcribes_as_transformers_decodes(tmp_path, stable,
                                                                          capsys):
    model, processor = _hf_ctc(tmp_path / "hf", stable)
    audio = _audio()
    reference = _hf_greedy(model, processor, audio)
    assert reference.strip()  # the planted head emits words to compare
    asr = speechlab.load(tmp_path / "hf")
    assert asr.kind == "asr" and asr.normalize and not asr.streaming
    result = asr.transcribe(audio, 16000)
    assert result.text == reference
    # words: the text's words, in order, with times inside the audio
    assert " ".join(w.word for w in result.words) == " ".join(reference.split())
    assert all(0 <= w.start < w.end <= 2.0 + 1e-6 for w in result.words)
    # the same through the command line, from a file, as JSON
    sf.write(tmp_path / "a.wav", audio, 16000, subtype="FLOAT")
    assert main(["transcribe", str(tmp_path / "hf"), str(tmp_path / "a.wav"), "--json"]) == 0
    line = json.loads(capsys.readouterr().out.strip())
    assert line["file"] == str(tmp_path / "a.wav") and line["text"] == reference
    assert line["language"] == "en" and line["lid"] is None and len(line["words"]) == len(result.words)
    # audio at another rate is resampled to the model's
    down = asr.transcribe(audio[::2], 8000)
    assert isinstance(down.text, str)


def test_hugging_face_tokenizer_options_and_special_tokens_are_honoured(tmp_path):
    model, processor = _hf_ctc(tmp_path / "hf", stable=False, lower=True)
    for seed in range(3):
        audio = _audio(1.5, seed)
        assert speechlab.load(tmp_path / "hf").transcribe(audio).text == \
            _hf_greedy(model, processor, audio)


def test_a_hugging_face_pretraining_directory_is_an_encoder_to_diagnose(tmp_path):
    from lhotse import CutSet

    from speechlab.testing.audio import tone_cut
    from transformers import Wav2Vec2Config, Wav2Vec2ForPreTraining

    torch.manual_seed(0)
    Wav2Vec2ForPreTraining(Wav2Vec2Config(**TINY)).save_pretrained(tmp_path / "pt")
    encoder = speechlab.load(tmp_path / "pt")
    assert encoder.kind == "ssl"
    with pytest.raises(AttributeError):
        encoder.transcribe  # noqa: B018 (an encoder does not transcribe)
    cuts = [tone_cut(tmp_path / f"t{i}.wav", duration=1.0, cut_id=f"t{i}") for i in range(2)]
    CutSet.from_cuts(cuts).to_file(tmp_path / "cuts.jsonl.gz")
    for model in ("pt",):
        assert main(["diagnose", "attention", str(tmp_path / model), "--cuts",
                     str(tmp_path / "cuts.jsonl.gz"), "--out", str(tmp_path / f"diag-{model}"),
                     "--utterances", "2"]) == 0
        assert (tmp_path / f"diag-{model}" / "attention_fig2.png").is_file()
    # a CTC directory diagnoses too (its encoder)
    _hf_ctc(tmp_path / "ctc", stable=False)
    assert main(["diagnose", "attention", str(tmp_path / "ctc"), "--cuts",
                 str(tmp_path / "cuts.jsonl.gz"), "--out", str(tmp_path / "diag-ctc"),
                 "--utterances", "1"]) == 0


def test_a_hugging_face_directory_exports_and_loads_elsewhere(tmp_path):
    model, processor = _hf_ctc(tmp_path / "hf", stable=True)
    out = speechlab.export(tmp_path / "hf", tmp_path / "pkg")
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors", "speechlab.json"]
    audio = _audio(1.0, 5)
    moved = tmp_path / "elsewhere" / "pkg"
    moved.parent.mkdir()
    out.rename(moved)
    assert speechlab.load(moved).transcribe(audio).text == _hf_greedy(model, processor, audio)
    with pytest.raises(DataError, match="already exists; pass --overwrite"):
        speechlab.export(tmp_path / "hf", moved)


def test_fairseq_checkpoints_load_as_an_encoder_or_with_their_letters_as_a_recognizer(tmp_path):
    from speechlab.ssl.wav2vec2 import build
    from speechlab.testing.wav2vec2 import fairseq_checkpoint, fairseq_state

    # pre-training: an encoder to diagnose, with the checkpoint's weights
    encoder = speechlab.load(fairseq_checkpoint(tmp_path / "pt.pt", seed=3))
    assert encoder.kind == "ssl"
    torch.manual_seed(3)
    own = build("ci").state_dict()
    loaded = encoder.model.state_dict()
    assert all(torch.equal(loaded[k], own[k]) for k in loaded if k in own)
    # fine-tuned: fairseq's keys under w2v_encoder, a CTC projection, letters in dict.ltr.txt
    torch.manual_seed(4)
    base = build("ci")
    letters = ["|", "E", "T", "A", "O"]
    state = {f"w2v_encoder.w2v_model.{k}": v for k, v in fairseq_state(base).items()}
    dim = base.config.dim
    state["w2v_encoder.proj.weight"] = torch.randn(4 + len(letters), dim)
    state["w2v_encoder.proj.bias"] = torch.randn(4 + len(letters))
    (tmp_path / "ft").mkdir()
    torch.save({"model": state}, tmp_path / "ft" / "checkpoint_best.pt")
    with pytest.raises(DataError, match="dict.ltr.txt"):
        speechlab.load(tmp_path / "ft" / "checkpoint_best.pt")
    (tmp_path / "ft" / "dict.ltr.txt").write_text(
        "".join(f"{c} {100 - i}\n" for i, c in enumerate(letters)), encoding="utf-8")
    rec = speechlab.load(tmp_path / "ft" / "checkpoint_best.pt")
    audio = _audio(1.5, 2)
    with torch.inference_mode():
        lp, _ = rec.model(torch.from_numpy(audio)[None])
    symbols = ["<s>", "<pad>", "</s>", "<unk>", *letters]  # fairseq's; CTC's blank is <s>
    path = lp[0].argmax(-1).tolist()
    ids = [k for i, k in enumerate(path) if k != 0 and (i == 0 or k != path[i - 1])]
    expect = "".join(symbols[k] for k in ids).replace("|", " ").split()
    assert rec.transcribe(audio).text == " ".join(expect)
    assert rec.transcribe(audio).text  # a random head emits something


# ---------------------------------------------------------------------------------------------
# speechlab's own streaming RNN-T


def _sharp_run(directory, preset: str = "ci"):
    """An untrained multisoftmax_lid run whose random joint is sharpened to emit labels."""
    from speechlab.testing.rnnt import untrained_run
    from speechlab.train.checkpoint import load_checkpoint, save_checkpoint

    run = untrained_run(directory, "multisoftmax_lid", preset=preset)
    path = next((run / "models" / "multisoftmax_lid").glob("ckpt-*.pt"))
    ckpt = load_checkpoint(path)
    ckpt.pop("format_version")
    for k in ckpt["model"]:
        if k.startswith("joiner.outputs."):
            ckpt["model"][k] = ckpt["model"][k] * 8.0
    save_checkpoint(path, **ckpt)
    return run


@pytest.fixture(scope="module")
def rnnt_run(tmp_path_factory):
    return _sharp_run(tmp_path_factory.mktemp("rnnt") / "run")


def test_streaming_equals_whole_recordings_for_any_chunks(rnnt_run):
    from speechlab.asr.rnnt.search import decode
    from speechlab.audio.features import fbank

    asr = speechlab.load(rnnt_run / "models" / "multisoftmax_lid")
    assert asr.kind == "asr" and asr.streaming and asr.languages == ("en", "hi")
    audio = _audio(3.0, 2)
    whole = asr.transcribe(audio)
    assert whole.text and whole.language in ("en", "hi")
    assert sum(whole.lid.values()) == pytest.approx(1.0) and set(whole.lid) == {"en", "hi"}
    rng = np.random.default_rng(0)
    stream = asr.stream()
    i, partials = 0, []
    while i < len(audio):
        n = int(rng.integers(1, 6000))
        stream.accept_waveform(audio[i:i + n])
        partials.append(stream.partial)
        words = stream.partial_words
        assert " ".join(w.word for w in words) == stream.partial
        assert all(0 <= w.confidence <= 1 and w.end <= (i + n) / 16000 + 1e-9 for w in words)
        i += n
    assert stream.finish() == whole
    assert stream.partial_words == whole.words
    assert partials[-1] == whole.text or len(partials[-1]) <= len(whole.text)
    # with the language given, the same as decoding the utterance's features at once
    hi = asr.transcribe(audio, language="hi")
    feats = torch.from_numpy(fbank(audio))
    x = asr.cmvn(feats[None], torch.tensor([len(feats)]))[0]
    (best,) = decode(asr.model, x, torch.tensor([x.shape[1]]), "hi", asr.search)
    assert hi.text == asr.text(best.tokens, "hi") and hi.lid is None
    assert all(0 <= w.start <= w.end <= 3.0 + 1e-6 for w in hi.words)
    # early stopping switches decoders off but still decides
    stopped = asr.stream(tau=2, s_th=0.0)
    stopped.accept_waveform(audio)
    assert len(stopped.active) == 1
    assert stopped.finish().language == stopped.active[0]


def test_an_exported_rnnt_transcribes_as_its_run_model(rnnt_run, tmp_path):
    model_dir = rnnt_run / "models" / "multisoftmax_lid"
    audio = _audio(2.0, 3)
    expected = speechlab.load(model_dir).transcribe(audio)
    pkg = speechlab.export(model_dir, tmp_path / "pkg")
    card = json.loads((pkg / "speechlab.json").read_text())
    assert card["family"] == "rnnt" and card["kind"] == "asr" and card["languages"] == ["en", "hi"]
    assert set(card["data"]["tokenizers"]) == {"en", "hi"} and "cmvn" in card["data"]
    assert speechlab.load(pkg).transcribe(audio) == expected


def test_an_onnx_package_transcribes_as_its_run_model(rnnt_run, tmp_path, capsys):
    model_dir = rnnt_run / "models" / "multisoftmax_lid"
    audio = _audio(2.0, 3)
    expected = speechlab.load(model_dir).transcribe(audio)
    assert main(["export", str(model_dir), "--out", str(tmp_path / "pkg"), "--format",
                 "onnx"]) == 0
    assert capsys.readouterr().out.strip().endswith("backend onnx")
    pkg = tmp_path / "pkg"
    assert sorted(p.name for p in pkg.iterdir()) == ["encoder.onnx", "joiner.onnx",
                                                     "predictor.onnx", "speechlab.json"]
    card = json.loads((pkg / "speechlab.json").read_text())
    assert card["backend"] == "onnx" and card["family"] == "rnnt"
    asr = speechlab.load(pkg)  # an ONNX package runs on onnxruntime unless told otherwise
    assert asr.backend == "onnx" and asr.streaming and asr.languages == ("en", "hi")
    got = asr.transcribe(audio)
    assert (got.text, got.language, got.extra) == (expected.text, expected.language,
                                                   expected.extra)
    same_words(got, expected)
    assert got.lid == pytest.approx(expected.lid, abs=1e-6)
    # the command line reads it as any package
    sf.write(tmp_path / "a.wav", audio, 16000, subtype="FLOAT")
    assert main(["transcribe", str(pkg), str(tmp_path / "a.wav"), "--json"]) == 0
    line = json.loads(capsys.readouterr().out.strip())
    assert line["text"] == expected.text and line["language"] == expected.language
    # a run's model (or a PyTorch package) runs on onnxruntime when asked, exported in memory
    assert speechlab.load(model_dir, backend="onnx").transcribe(audio).text == expected.text
    # an ONNX package has no PyTorch weights, and is not exported again
    with pytest.raises(ConfigError, match="load it with backend='onnx'"):
        speechlab.load(pkg, backend="torch")
    with pytest.raises(ConfigError, match="is an ONNX package; export from the model"):
        speechlab.export(pkg, tmp_path / "again")
    with pytest.raises(DataError, match="already exists; pass --overwrite"):
        speechlab.export(model_dir, pkg, format="onnx")
    assert speechlab.export(model_dir, pkg, format="onnx", overwrite=True) == pkg


def test_an_onnx_package_of_the_fast_preset_streams_as_its_run_model(tmp_path, capsys):
    """The causal Transformer encoder's graph carries its key/value cache from chunk to chunk:
    exported by the command line, loaded, it transcribes as the run's PyTorch model, across
    segment boundaries too."""
    model_dir = _sharp_run(tmp_path / "run", "fast") / "models" / "multisoftmax_lid"
    assert main(["export", str(model_dir), "--out", str(tmp_path / "pkg"), "--format",
                 "onnx"]) == 0
    capsys.readouterr()
    asr, ref = speechlab.load(tmp_path / "pkg"), speechlab.load(model_dir)
    assert (asr.backend, ref.backend) == ("onnx", "torch")
    audio = np.concatenate([_audio(1.5, 1), np.zeros(3000, np.float32), _audio(1.5, 2)])
    for segment in (None, 1.0):
        if segment is not None:
            asr.segment_seconds = ref.segment_seconds = segment
        for language in (None, "hi"):
            got = asr.transcribe(audio, language=language)
            want = ref.transcribe(audio, language=language)
            assert (got.text, got.language, got.extra) == (want.text, want.language, want.extra)
            same_words(got, want)
            assert got.lid == pytest.approx(want.lid, abs=1e-6) if want.lid else got.lid is None
    assert want.text and len(want.extra["segment_starts"]) >= 2


def test_families_without_graphs_refuse_onnx(tmp_path):
    from speechlab.testing.tiny_models import wav2vec2_package

    pkg = wav2vec2_package(tmp_path / "w2v", preset="tiny")
    with pytest.raises(ConfigError, match="a wav2vec 2.0 encoder does not export to ONNX; "
                                          "--format onnx takes the streaming RNN-T"):
        speechlab.export(pkg, tmp_path / "out", format="onnx")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="does not run on onnxruntime"):
        speechlab.load(pkg, backend="onnx")


def test_transcribe_command_streams_with_partials_and_refuses_bad_options(rnnt_run, tmp_path,
                                                                          capsys):
    model_dir = rnnt_run / "models" / "multisoftmax_lid"
    sf.write(tmp_path / "a.wav", _audio(2.0, 4), 16000)
    assert main(["transcribe", str(model_dir), str(tmp_path / "a.wav"), "--stream",
                 "--chunk-ms", "400", "--language", "en"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith(f"{tmp_path / 'a.wav'}\ten\t")
    assert any(line.startswith("  [") for line in out[:-1])  # partials came first
    for argv, message in ((["--language", "fr"], "--language 'fr'"),
                          (["--beam", "0"], "--beam must be >= 1"),
                          (["--method", "viterbi"], "--method 'viterbi'"),
                          (["--tau", "nan"], "--tau must be a number")):
        assert main(["transcribe", str(model_dir), str(tmp_path / "a.wav"), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1


def test_transcribe_and_serve_take_a_backend(rnnt_run, tmp_path, capsys):
    from speechlab.serve.models import load_models

    model_dir = rnnt_run / "models" / "multisoftmax_lid"
    sf.write(tmp_path / "a.wav", _audio(2.0, 6), 16000)
    outs = []
    for backend in ("torch", "onnx"):
        assert main(["transcribe", str(model_dir), str(tmp_path / "a.wav"), "--json",
                     "--backend", backend]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    # the same words; their confidences read the joint's float outputs, a little apart
    words = [out.pop("words") for out in outs]
    assert outs[0] == outs[1] and outs[0]["text"]
    assert [(w["word"], w["start"], w["end"]) for w in words[0]] == \
        [(w["word"], w["start"], w["end"]) for w in words[1]]
    assert [w["confidence"] for w in words[0]] == \
        pytest.approx([w["confidence"] for w in words[1]], abs=1e-3)
    # serving: what can run on onnxruntime does, the rest stays in PyTorch
    served = load_models([model_dir], say=lambda line: None, backend="onnx")
    assert served["multisoftmax_lid"].model.backend == "onnx"


def test_load_names_what_it_looked_for(tmp_path):
    with pytest.raises(DataError, match="does not exist; give a speechlab package"):
        speechlab.load(tmp_path / "nope")
    (tmp_path / "run" / "models" / "a").mkdir(parents=True)
    with pytest.raises(DataError, match="is a run directory; give one of its models"):
        speechlab.load(tmp_path / "run")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="not a model speechlab can load; looked for"):
        speechlab.load(tmp_path / "empty")
    (tmp_path / "x.pt").write_bytes(b"")
    with pytest.raises(DataError, match="x.pt"):
        speechlab.load(tmp_path / "x.pt")
    with pytest.raises(ConfigError, match="backend"):
        speechlab.load(tmp_path, backend="tensorrt")


def test_bad_audio_is_refused_with_one_line(rnnt_run, tmp_path):
    model_dir = rnnt_run / "models" / "multisoftmax_lid"
    (tmp_path / "bad.wav").write_bytes(b"RIFF nothing")
    nan = np.full(1600, np.nan, np.float32)
    sf.write(tmp_path / "nan.wav", nan, 16000, subtype="FLOAT")
    # a header declaring 1 Hz would be resampled into hours; 3 MHz sizes the filter by it
    sf.write(tmp_path / "slow.wav", np.zeros(16, np.float32), 1, subtype="FLOAT")
    sf.write(tmp_path / "fast.wav", np.zeros(3000, np.float32), 3_000_000, subtype="FLOAT")
    for wav, message in (("bad.wav", "bad.wav"), ("nan.wav", "non-finite"),
                         ("missing.wav", "missing.wav"), ("slow.wav", "sample rate 1 Hz"),
                         ("fast.wav", "sample rate 3000000 Hz; speechlab reads audio at 8-192")):
        r = subprocess.run([sys.executable, "-m", "speechlab", "transcribe", str(model_dir),
                            str(tmp_path / wav)], capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    asr = speechlab.load(model_dir)
    with pytest.raises(DataError, match="non-finite"):
        asr.transcribe(nan)
    for rate in (0, 1, 2**31 - 1, 16000.5):
        with pytest.raises(DataError, match=f"sample rate {rate} Hz; speechlab reads audio at"):
            asr.transcribe(_audio(), rate)


@pytest.mark.parametrize("language", [None, "hi"])
def test_a_growing_encoder_streams_long_audio_in_segments_each_decoded_afresh(language):
    """A causal-Transformer RNN-T streams in segments (RnntStream): the same result for any
    chunking and for transcribe; each segment is what a fresh stream makes of its features;
    word times count from the start of the recording."""
    from speechlab.asr.rnnt.search import StreamingDecoder
    from speechlab.audio.features import fbank
    from speechlab.testing.rnnt import untrained_recognizer

    asr = untrained_recognizer(preset="fast", seed=1)
    assert asr.segment_seconds is not None
    asr.segment_seconds = 1.0
    audio = np.concatenate([_audio(1.3, 3), np.zeros(4000, np.float32), _audio(1.6, 4)])
    whole = asr.transcribe(audio, language=language)
    starts = whole.extra["segment_starts"]
    assert len(starts) >= 3 and starts[0] == 0.0 and starts == sorted(starts)
    assert all(b - a <= 1.0 + 1e-9 for a, b in zip(starts, starts[1:]))
    stream = asr.stream(language)
    rng = np.random.default_rng(1)
    i = 0
    while i < len(audio):
        n = int(rng.integers(100, 7000))
        stream.accept_waveform(audio[i:i + n])
        i += n
    assert stream.finish() == whole
    assert all(0 <= w.start <= w.end <= len(audio) / 16000 + 1e-6 for w in whole.words)
    if language is not None:  # each segment alone, from its own features
        feats = torch.from_numpy(fbank(audio))
        x = asr.cmvn(feats[None], torch.tensor([len(feats)]))[0][0]
        bounds = [round(s / asr.fbank.frame_shift) for s in starts] + [len(x)]
        texts = []
        for a, b in zip(bounds, bounds[1:]):
            dec = StreamingDecoder(asr.networks, language, asr.search)
            for j in range(a, b, asr.chunk_frames):
                dec.accept(x[j: min(j + asr.chunk_frames, b)])
            texts.append(asr.text(dec.result().tokens, language))
        assert whole.text == " ".join(t for t in texts if t)
    # the LSTM encoder's state does not grow: one segment, whatever the length
    lstm = untrained_recognizer(seed=1)
    assert lstm.segment_seconds is None
    assert len(lstm.transcribe(audio, language=language).extra["segment_starts"]) == 1


def test_a_card_that_asks_for_a_huge_model_is_refused_before_it_is_built(tmp_path):
    """A package is untrusted input: its card's sizes are built on the meta device and checked
    against the weights' safetensors header first. A card asking for 100 layers of width 8192
    (some 10^11 parameters) beside a tiny model's weights is one DataError, in a process whose
    peak memory stays far below what building it would take."""
    import json
    import subprocess
    import sys

    from speechlab.testing.tiny_models import ctc_package

    pkg = ctc_package(tmp_path / "ctc")
    card = json.loads((pkg / "speechlab.json").read_text())
    card["config"].update(dim=8192, ff_dim=65536, layers=100, heads=8)
    (pkg / "speechlab.json").write_text(json.dumps(card))
    probe = ("import resource, speechlab\n"
             "try:\n"
             f"    speechlab.load({str(pkg)!r})\n"
             "except Exception as e:\n"
             "    print(type(e).__name__, e)\n"
             "print('maxrss_mb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=300).stdout
    assert out.startswith("DataError") and "the card's config and the weights disagree" in out, out
    assert int(out.split("maxrss_mb")[1]) < 2000, out
    # an integer "weight": refused by dtype before anything is built for real
    pkg2 = ctc_package(tmp_path / "ctc2")
    from safetensors.torch import load_file, save_file

    weights = load_file(str(pkg2 / "model.safetensors"))
    name = next(k for k, v in weights.items() if v.is_floating_point())
    weights[name] = weights[name].to(torch.int64)
    save_file(weights, str(pkg2 / "model.safetensors"))
    with pytest.raises(DataError, match=f"weight '{name}' is stored as I64, not floating point"):
        speechlab.load(pkg2)


def test_side_data_that_disagrees_with_the_model_is_refused_at_load(tmp_path, capsys):
    """A card whose CMVN statistics or fbank settings do not fit the model's input is one
    error at load (exit 2 from the CLI), not a shape error at the first decode."""
    import json

    from speechlab.cli import main
    from speechlab.testing.tiny_models import ctc_package

    for what, change in (("the CMVN statistics", lambda d: d["cmvn"].update(
            mean=d["cmvn"]["mean"][:-3], std=d["cmvn"]["std"][:-3])),
                         ("the fbank settings", lambda d: d["fbank"].update(num_mel_bins=40))):
        pkg = ctc_package(tmp_path / what.split()[1])
        card = json.loads((pkg / "speechlab.json").read_text())
        change(card["data"])
        (pkg / "speechlab.json").write_text(json.dumps(card))
        with pytest.raises(DataError, match=f"feature dimensions disagree.*{what}"):
            speechlab.load(pkg)
        wav = tmp_path / "a.wav"
        sf.write(wav, np.zeros(16000, np.float32), 16000)
        assert main(["transcribe", str(pkg), str(wav)]) == 2
        err = capsys.readouterr().err
        assert "feature dimensions disagree" in err and err.count("\n") == 1


def test_export_onto_a_full_disk_names_the_package_and_leaves_nothing(tmp_path, monkeypatch,
                                                                      capsys):
    """safetensors reports a failed write as its own error; export says "no space left" about
    the package (exit 2), and no half-written directory stays."""
    import safetensors.torch
    from safetensors import SafetensorError

    from speechlab.testing.tiny_models import ctc_package

    pkg = ctc_package(tmp_path / "ctc")

    def full(*a, **k):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: '
                              'StorageFull, message: "No space left on device" })')

    monkeypatch.setattr(safetensors.torch, "save_file", full)
    assert main(["export", str(pkg), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no space left on device" in err and str(tmp_path / "out") in err
    assert err.count("\n") == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["ctc"]


def test_export_names_the_checkpoint_it_loaded_while_a_run_replaces_it(tmp_path, monkeypatch):
    """A run still training may save a new checkpoint while export reads the model: the card
    must name the update whose weights the package holds, so export reads again until the
    checkpoint it names is the one it loaded (and gives up, saying why, if it never is)."""
    import speechlab.inference as inference
    from speechlab.package import read_card
    from speechlab.testing.rnnt import untrained_run
    from speechlab.train.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint

    run = untrained_run(tmp_path / "run", "multisoftmax_lid")
    model_dir = run / "models" / "multisoftmax_lid"
    first = load_checkpoint(next(model_dir.glob("ckpt-*.pt")))
    first.pop("format_version")
    real_load, loads = inference.load, []

    def load_while_training(source, *a, **kw):
        obj = real_load(source, *a, **kw)
        loads.append(obj)
        if len(loads) <= saves:  # the run saves a newer checkpoint meanwhile
            save_checkpoint(checkpoint_path(model_dir, len(loads)),
                            **{**first, "step": len(loads)})
        return obj

    monkeypatch.setattr(inference, "load", load_while_training)
    saves = 1
    card = read_card(inference.export(model_dir, tmp_path / "pkg"))
    assert len(loads) == 2  # read again once the first read was overtaken
    assert card.made_by["step"] == 1 and card.made_by["checkpoint"] == "ckpt-00000001.pt"
    saves, loads[:] = 99, []
    with pytest.raises(DataError, match="replaced each time it was read"):
        inference.export(model_dir, tmp_path / "pkg2")
    assert len(loads) == 3 and not (tmp_path / "pkg2").exists()
