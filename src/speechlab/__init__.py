"""speechlab: one PyTorch toolkit for four published speech systems.

- ``speechlab.asr.rnnt``: streaming multilingual RNN-T with multi-softmax and integrated LID.
- ``speechlab.asr.ctc``: CTC-like models over HMM-style topologies, Viterbi decoding over T∘L∘G.
- ``speechlab.ssl.wav2vec2``: wav2vec 2.0 pre-training, CTC fine-tuning, local attention.
- ``speechlab.tts``: SALAD Transformer acoustic model against an LSTM baseline.

Shared parts: ``audio`` (I/O, features), ``data`` (corpora, manifests), ``text`` (tokenizers,
lexicons), ``train`` (one trainer, one checkpoint format), ``metrics``, ``report``.
"""

__version__ = "0.1.0"
