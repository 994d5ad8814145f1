"""wav2vec 2.0 models made by other toolkits, opened as speechlab models (registered in
:mod:`speechlab.families` as this family's ``opens``):

- a Hugging Face directory (``config.json`` with ``model.safetensors`` or ``pytorch_model.bin``):
  ``Wav2Vec2ForCTC`` with its ``vocab.json`` becomes a :class:`.recognizer.Wav2Vec2Recognizer`,
  ``Wav2Vec2ForPreTraining`` / ``Wav2Vec2Model`` an :class:`.recognizer.Wav2Vec2Encoder`;
- a fairseq checkpoint file (``.pt``): a fine-tuned one with fairseq's ``dict.ltr.txt`` beside
  it becomes a recognizer, a pre-trained one an encoder.

Nothing is unpickled: Hugging Face weights are read as safetensors or with ``weights_only``,
fairseq files by an inert unpickler (:mod:`.checkpoint_import`).
"""

from __future__ import annotations

import json
from pathlib import Path

from speechlab.contract import Model
from speechlab.errors import DataError

CHECKPOINT_SUFFIXES = (".pt", ".bin", ".ckpt")


def open_foreign(path: Path) -> Model | None:
    """The model at ``path`` if it is a Hugging Face directory or a fairseq checkpoint file,
    else None (not of these formats: another loader may know it)."""
    if path.is_dir() and (path / "config.json").is_file():
        return hugging_face(path)
    if path.is_file() and path.suffix in CHECKPOINT_SUFFIXES:
        return fairseq(path)
    return None


def hugging_face(directory: Path) -> Model:
    """A Hugging Face wav2vec 2.0 directory as a recognizer (CTC) or an encoder."""
    from speechlab.ssl.wav2vec2.checkpoint_import import load_hf
    from speechlab.ssl.wav2vec2.model import Wav2Vec2CTC
    from speechlab.ssl.wav2vec2.recognizer import (Wav2Vec2Encoder, Wav2Vec2Recognizer,
                                                   hf_normalize)

    try:
        kind = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"{directory / 'config.json'}: not valid JSON ({e})") from None
    if not isinstance(kind, dict):
        raise DataError(f"{directory / 'config.json'}: expected a JSON object (a transformers "
                        f"config), got a JSON {type(kind).__name__}")
    model_type = kind.get("model_type", "wav2vec2")
    if model_type != "wav2vec2":
        raise DataError(f"{directory}: a Hugging Face {model_type!r} model; speechlab reads "
                        "wav2vec 2.0 (model_type wav2vec2)")
    model = load_hf(directory)
    if isinstance(model, Wav2Vec2CTC):
        return Wav2Vec2Recognizer.from_hf(directory, model)
    return Wav2Vec2Encoder(model, normalize=hf_normalize(directory))


def fairseq(path: Path) -> Model:
    """A fairseq wav2vec 2.0 checkpoint as a recognizer (fine-tuned, with ``dict.ltr.txt``
    beside it) or an encoder (pre-trained)."""
    from speechlab.ssl.wav2vec2.checkpoint_import import load_pretrained
    from speechlab.ssl.wav2vec2.model import Wav2Vec2CTC
    from speechlab.ssl.wav2vec2.recognizer import (CtcLabels, Wav2Vec2Encoder,
                                                   Wav2Vec2Recognizer)

    model = load_pretrained(path)
    if not isinstance(model, Wav2Vec2CTC):
        return Wav2Vec2Encoder(model)
    letters = path.with_name("dict.ltr.txt")
    if not letters.is_file():
        raise DataError(f"{path} is a fine-tuned (CTC) fairseq checkpoint; its labels are in "
                        f"fairseq's dict.ltr.txt, looked for at {letters}")
    # fairseq's dictionary: <s> <pad> </s> <unk>, then one symbol per line; CTC's blank is <s>
    symbols = ["<s>", "<pad>", "</s>", "<unk>"]
    for line in letters.read_text(encoding="utf-8").splitlines():
        if line.strip():
            symbols.append(line.split()[0])
    return Wav2Vec2Recognizer(model, CtcLabels(tuple(symbols), 0, "|"), normalize=False,
                              source=path)
