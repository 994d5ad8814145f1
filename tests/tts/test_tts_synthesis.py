"""A model directory (checkpoint + side files) synthesizes speech from labels on its own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speechlab.errors import DataError
from speechlab.testing.tts_labels import HELLO_LABELS
from speechlab.train import save_checkpoint
from speechlab.train.card import ModelCard
from speechlab.tts.acoustic import DIMS, OutputNormalizer
from speechlab.tts.labels import InputNormalizer, frame_features, parse_labels
from speechlab.tts.model import FAMILY, build_from_config, preset
from speechlab.tts.questions import load_questions
from speechlab.tts.synthesis import (
    QUESTIONS_NAME,
    SIDECAR,
    Synthesizer,
    synthesize_labels,
    write_model_files,
)

LABELS = HELLO_LABELS


def _model_dir(path, input_dim, model_input_dim=None):
    q = load_questions()
    inputs = InputNormalizer(len(q.binary), q.dim, np.zeros(q.dim - len(q.binary)),
                             np.ones(q.dim - len(q.binary)))
    outputs = OutputNormalizer(np.full(DIMS, -1.0), np.full(DIMS, 3.0))
    stats = {"inputs": inputs.to_dict(), "outputs": outputs.to_dict(), "max_duration": 40,
             "questions": q.source, "input_dim": input_dim}
    path.mkdir()
    write_model_files(path, stats, None)
    cfg = preset("tiny_rnn", input_dim=model_input_dim or input_dim)
    torch.manual_seed(0)
    model = build_from_config(cfg)
    save_checkpoint(path / "ckpt-00000001.pt", model=model.state_dict(),
                    model_config=ModelCard.of(FAMILY, cfg).to_dict())
    return model.eval(), inputs, outputs


def test_a_model_directory_turns_labels_into_its_models_frames_and_speech(tmp_path):
    labels = parse_labels(LABELS)
    q = load_questions()
    model, inputs, outputs = _model_dir(tmp_path / "m", q.dim + 2)
    assert (tmp_path / "m" / SIDECAR).is_file() and (tmp_path / "m" / QUESTIONS_NAME).is_file()
    synth = Synthesizer.load(tmp_path / "m")
    frames = synth.acoustic(labels)
    assert frames.shape == (labels.num_frames, DIMS)
    # the model's own output on the normalized frame features, denormalized
    x = frame_features(labels, q, 40)
    x[:, : q.dim] = inputs(x[:, : q.dim])
    with torch.no_grad():
        y = model(torch.from_numpy(x)[None], torch.tensor([len(x)]))[0].numpy()
    np.testing.assert_allclose(frames, outputs.inverse(y), rtol=1e-5, atol=1e-5)
    wav = synthesize_labels(tmp_path / "m", labels)
    assert wav.dtype == np.float32 and abs(len(wav) / 16000 - labels.num_frames * 0.005) < 0.01


def test_a_model_of_other_inputs_or_no_side_files_is_refused(tmp_path):
    q = load_questions()
    _model_dir(tmp_path / "m", q.dim + 2, model_input_dim=q.dim + 5)
    with pytest.raises(DataError, match=f"takes {q.dim + 5} inputs, its question set gives {q.dim + 2}"):
        Synthesizer.load(tmp_path / "m").synthesize(labels=parse_labels(LABELS))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no tts.json"):
        Synthesizer.load(tmp_path / "empty")
