"""sherpa-onnx as the peer of ``benchmarks/rnnt_decode.py --sherpa``: a streaming LSTM transducer
of the same sizes as a speechlab RNN-T, written in the layout sherpa-onnx's ``lstm`` model type
loads, and sherpa-onnx's recognizer run over audio in pieces.

The three graphs sherpa-onnx reads (its ``OnlineLstmTransducerModel``; icefall's
``lstm_transducer_stateless2`` export writes the same):

- ``encoder.onnx``: ``x`` (N, T, 80) fbank frames, ``h`` (layers, N, d_model), ``c`` (layers,
  N, rnn_hidden_size) -> ``encoder_out`` (N, T', joiner_dim), ``next_h``, ``next_c``. Metadata:
  ``model_type=lstm``, ``num_encoder_layers``, ``T`` (frames per call), ``decode_chunk_len``
  (frames the window moves), ``rnn_hidden_size``, ``d_model``. Here it is the speechlab
  model's own encoder: the same frame stacking (``stack`` frames every ``stride``), the same
  LSTM stack and the joint network's encoder projection, with the speechlab model's weights.
  sherpa-onnx hands the encoder no state but ``h``/``c``, so the stacking window travels
  inside each call: ``T = chunk + stack - stride`` frames, of which the last ``stack - stride``
  are the next call's first (speechlab's stacker carries them as state instead).
- ``decoder.onnx``: ``y`` (N, context_size) labels -> ``decoder_out`` (N, joiner_dim).
  Metadata ``vocab_size``, ``context_size``. A *stateless* prediction network as icefall's:
  an embedding of the last ``context_size`` labels, a grouped 1-D convolution over them, ReLU
  and the projection to the joint dimension. speechlab's is a stateful LSTM stack
  (``predictor_layers`` x ``predictor_dim``): the one difference in the networks.
- ``joiner.onnx``: ``encoder_out`` (N, J), ``decoder_out`` (N, J) -> ``logit`` (N, V):
  ``out(tanh(enc + dec))``, the speechlab model's output layer and weights.

``tokens.txt`` lists the speechlab tokenizer's symbols (``B_`` word starts written as ``▁``),
blank first.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from speechlab.asr.rnnt.encoder import LSTMEncoder
from speechlab.asr.rnnt.model import RNNT
from speechlab.nn.onnx_graph import export_graph

FILES = ("encoder.onnx", "decoder.onnx", "joiner.onnx", "tokens.txt")


class _Encoder(nn.Module):
    """``(x (N,T,F), h, c) -> (encoder_out (N,T',J), h, c)``: stacked frames (each the
    ``stack`` frames ending at the window's frames ``stack - 1, stack - 1 + stride, ...``)
    through the LSTM and the encoder projection."""

    def __init__(self, model: RNNT, chunk: int) -> None:
        super().__init__()
        encoder = model.encoder
        assert isinstance(encoder, LSTMEncoder)
        stack, stride = encoder.stacker.stack, encoder.stacker.stride
        self.window = chunk + stack - stride
        ends = torch.arange(stack - 1, self.window, stride)  # chunk // stride of them
        self.register_buffer("index", (ends[:, None] - stack + 1 + torch.arange(stack)).reshape(-1),
                             persistent=False)
        self.outputs = len(ends)
        self.lstm = encoder.lstm
        self.enc_proj = model.joiner.enc_proj

    def forward(self, x: Tensor, h: Tensor, c: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        stacked = x[:, self.index].reshape(x.shape[0], self.outputs, -1)
        y, (h, c) = self.lstm(stacked, (h, c))
        return self.enc_proj(y), h, c


class _Decoder(nn.Module):
    """icefall's stateless prediction network: ``y (N, context) -> (N, J)``."""

    def __init__(self, vocab: int, embed: int, joint: int, context: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.conv = nn.Conv1d(embed, embed, context, groups=max(1, embed // 4), bias=False)
        self.proj = nn.Linear(embed, joint)

    def forward(self, y: Tensor) -> Tensor:
        e = self.embedding(y.clamp(min=0)).permute(0, 2, 1)  # (N, E, context)
        return self.proj(torch.relu(self.conv(e)).squeeze(-1))


class _Joiner(nn.Module):
    def __init__(self, model: RNNT) -> None:
        super().__init__()
        self.output = model.joiner.outputs[0]

    def forward(self, encoder_out: Tensor, decoder_out: Tensor) -> Tensor:
        return self.output(torch.tanh(encoder_out + decoder_out))


def _with_metadata(graph: bytes, meta: dict[str, object]) -> bytes:
    import onnx

    proto = onnx.load_from_string(graph)
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, str(value)
    return proto.SerializeToString()


def export_lstm_transducer(model: RNNT, symbols: list[str], out_dir: Path, chunk: int = 30,
                           context_size: int = 2, seed: int = 0) -> dict[str, Path]:
    """Write ``FILES`` for a one-language LSTM-encoder ``model`` (module doc) into ``out_dir``;
    ``chunk``: feature frames per encoder call, a multiple of the stride. The stateless
    decoder's weights are random (``seed``); returns the files by name."""
    encoder = model.encoder
    if not isinstance(encoder, LSTMEncoder) or len(model.vocab_sizes) != 1:
        raise ValueError("the sherpa-onnx peer needs a one-language model with the LSTM encoder")
    if chunk % encoder.stacker.stride:
        raise ValueError(f"chunk {chunk} is not a multiple of the stride {encoder.stacker.stride}")
    dims, vocab = model.dims, model.vocab_sizes[0]
    out_dir.mkdir(parents=True, exist_ok=True)
    enc = _Encoder(model, chunk).eval()
    layers, hidden = encoder.lstm.num_layers, encoder.lstm.hidden_size
    x = torch.randn(1, enc.window, encoder.feature_dim)
    state = torch.zeros(layers, 1, hidden)
    graphs = {"encoder.onnx": _with_metadata(export_graph(
        enc, [x, state, state.clone()], ["x", "h", "c"], ["encoder_out", "next_h", "next_c"],
        {"x": {0: "N"}, "h": {1: "N"}, "c": {1: "N"}, "encoder_out": {0: "N"},
         "next_h": {1: "N"}, "next_c": {1: "N"}}),
        {"model_type": "lstm", "num_encoder_layers": layers, "T": enc.window,
         "decode_chunk_len": chunk, "rnn_hidden_size": hidden, "d_model": hidden})}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        dec = _Decoder(vocab, dims.embed_dim, dims.joint_dim, context_size).eval()
    graphs["decoder.onnx"] = _with_metadata(export_graph(
        dec, [torch.zeros(1, context_size, dtype=torch.long)], ["y"], ["decoder_out"],
        {"y": {0: "N"}, "decoder_out": {0: "N"}}),
        {"vocab_size": vocab, "context_size": context_size})
    j = torch.randn(1, dims.joint_dim)
    graphs["joiner.onnx"] = export_graph(_Joiner(model).eval(), [j, j.clone()],
                                         ["encoder_out", "decoder_out"], ["logit"],
                                         {"encoder_out": {0: "N"}, "decoder_out": {0: "N"},
                                          "logit": {0: "N"}})
    paths = {}
    for name, graph in graphs.items():
        (out_dir / name).write_bytes(graph)
        paths[name] = out_dir / name
    if len(symbols) != vocab:
        raise ValueError(f"{len(symbols)} symbols for a vocabulary of {vocab}")
    lines = [f"{'<blk>' if i == 0 else s.replace('B_', '▁')} {i}" for i, s in enumerate(symbols)]
    (out_dir / "tokens.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    paths["tokens.txt"] = out_dir / "tokens.txt"
    return paths


def recognizer(files: dict[str, Path], beam: int = 4, threads: int = 1) -> Any:
    """sherpa-onnx's streaming recognizer on ``files``: modified beam search with ``beam``
    active paths (greedy search for ``beam`` 1), fbank as speechlab's (80 bins, no dither)."""
    import sherpa_onnx

    return sherpa_onnx.OnlineRecognizer.from_transducer(
        tokens=str(files["tokens.txt"]), encoder=str(files["encoder.onnx"]),
        decoder=str(files["decoder.onnx"]), joiner=str(files["joiner.onnx"]),
        num_threads=threads, sample_rate=16000, feature_dim=80, dither=0.0,
        decoding_method="modified_beam_search" if beam > 1 else "greedy_search",
        max_active_paths=beam, model_type="lstm", provider="cpu")


def decode(rec: Any, audio: np.ndarray, piece: int = 1600) -> tuple[list[str], float]:
    """Stream ``audio`` (16 kHz float32) through ``rec`` in ``piece``-sample pieces, decoding
    whatever is ready after each; returns the tokens and the process CPU seconds taken."""
    start = time.process_time()
    stream = rec.create_stream()
    for at in range(0, len(audio), piece):
        stream.accept_waveform(16000, audio[at:at + piece])
        while rec.is_ready(stream):
            rec.decode_stream(stream)
    stream.input_finished()
    while rec.is_ready(stream):
        rec.decode_stream(stream)
    tokens = list(rec.get_result_all(stream).tokens)
    return tokens, time.process_time() - start
