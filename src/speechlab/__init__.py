"""speechlab: one PyTorch toolkit for four published speech systems.

- ``speechlab.asr.rnnt``: streaming multilingual RNN-T with multi-softmax and integrated LID.
- ``speechlab.asr.ctc``: CTC-like models over HMM-style topologies, Viterbi decoding over T∘L∘G.
- ``speechlab.ssl.wav2vec2``: wav2vec 2.0 pre-training, CTC fine-tuning, local attention.
- ``speechlab.tts``: SALAD Transformer acoustic model against an LSTM baseline.

Shared parts: ``audio`` (I/O, features), ``data`` (corpora, manifests), ``text`` (tokenizers,
lexicons), ``train`` (one trainer, one checkpoint format), ``metrics``, ``report``.

Using a trained model (:mod:`speechlab.inference`)::

    import speechlab

    asr = speechlab.load("exp/demo/multisoftmax/models/multisoftmax_lid")  # or a package,
    result = asr.transcribe("a.wav")                     # a Hugging Face directory, ...
    print(result.text, result.language, result.lid, result.words)
    speechlab.export("exp/demo/multisoftmax/models/multisoftmax_lid", "ms-lid-package")
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def load(path: Any, *, backend: str | None = None, device: Any = None) -> Any:
    """The model at ``path``, its networks run by ``backend`` (``"torch"``, ``"onnx"``; None: a
    package's own) on ``device`` (None: the CPU; ``"cuda"``: a GPU): see
    :func:`speechlab.inference.load`."""
    from speechlab.inference import load as _load

    return _load(path, backend=backend, device=device)


def export(model: Any, out: Any, *, overwrite: bool = False, format: str = "torch",
           int8: bool = False) -> Any:
    """``model`` as a self-contained package at ``out`` (``format="onnx"``: its networks as
    ONNX graphs, ``int8``: quantized): see :func:`speechlab.inference.export`."""
    from speechlab.inference import export as _export

    return _export(model, out, overwrite=overwrite, format=format, int8=int8)
