"""A multi-softmax-family RNN-T as three ONNX graphs, and those graphs run by onnxruntime behind
the interfaces of :mod:`.networks`, so that the searches and the recognizer are the ones the
PyTorch model uses.

- ``encoder``: one chunk of one stream's features in, the joint network's projection of each
  encoder frame it completes (and the LID head's logits, for a model with one) out. For the
  paper's LSTM encoder the stacker's carried frames and phase (frames seen) and the LSTM's
  h, c go in and out; for the causal Transformer encoder (``fast`` preset) the last two
  feature frames, the first convolution's last two rows, frames seen and every layer's keys and
  values of the frames so far (:class:`~.encoder.TransformerState`; the cache's length is a
  free axis, it grows by each chunk's frames).
- ``predictor``: the prediction network's step for a batch of rows, each with its label and
  slot (:mod:`.networks`), LSTM states in and out, the projected output ``W_p pred`` out.
- ``joiner``: projected encoder frames, prediction rows, which frame and slot each row takes
  -> log-probabilities over each slot's own vocabulary (-inf beyond it).

The graphs are made of the tables :class:`~.networks.TorchPredictionJoint` computes (the
concatenated output heads, the first layer's gate lookup, the fused deeper-layer weights), so
the search sees the same numbers up to float rounding. Rows of different LSTM stacks (the LSP
variant) are stepped through every stack and each keeps its own: one graph call, at the cost
of stepping each row through every language's stack.

Shapes: B streams, T frames, F feature dim, K stack - 1, N rows, J joint dim, H prediction
dim, D encoder dim, L languages, S slots, V vocabulary; P encoder frames cached, C and F1 the
first convolution's channels and frequency bins.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.asr.rnnt.encoder import ConvTransformerEncoder, LSTMEncoder, TransformerState
from speechlab.asr.rnnt.model import RNNT
from speechlab.asr.rnnt.networks import (RnntNetworks, TorchPredictionJoint, slot_languages,
                                         slot_of)
from speechlab.errors import ConfigError, DataError
from speechlab.nn.onnx_graph import export_graph, runner, session

#: graph role -> file name inside an ONNX package
FILES = {"encoder": "encoder.onnx", "predictor": "predictor.onnx", "joiner": "joiner.onnx"}


# ---------------------------------------------------------------------------------------------
# The graphs, as modules traced by the exporter


class LstmEncoderGraph(nn.Module):
    """The LSTM encoder's streaming step with the joint's encoder projection and the LID head.

    ``forward(feats (B,T,F), history (B,K,F), seen (B,), h, c (layers,B,D)[, cond (B,L)])
    -> (proj (B,T',J)[, lid (B,T',L)], history, seen, h, c)``: the rows are streams at the
    same position (the recognizer runs one stream per call); ``T'`` counts the feature frames
    of the chunk whose index, counted from the stream's start, is a multiple of the stride
    (:class:`~speechlab.audio.transforms.FrameStacker`).
    """

    def __init__(self, model: RNNT) -> None:
        super().__init__()
        encoder = model.encoder
        assert isinstance(encoder, LSTMEncoder)
        self.stack, self.stride = encoder.stacker.stack, encoder.stacker.stride
        self.lstm = encoder.lstm
        self.enc_proj = model.joiner.enc_proj
        self.lid_head = model.lid_head
        self.cond_dim = encoder.cond_dim

    def forward(self, feats: Tensor, history: Tensor, seen: Tensor, h: Tensor, c: Tensor,
                cond: Tensor | None = None) -> tuple[Tensor, ...]:
        B, T, Fd = feats.shape
        K = self.stack - 1
        # A stream's first frame is also its left padding.
        history = torch.where((seen == 0)[:, None, None], feats[:, :1].expand(B, K, Fd), history)
        buf = torch.cat([history, feats], dim=1)  # buf[K + j] is the chunk's frame j
        j = torch.arange(T)
        ending = (seen[:1] + j) % self.stride == 0  # chunk frames that end a stacked frame
        ends = j[ending]
        window = (ends + K)[:, None] + torch.arange(-K, 1)[None, :]  # (T', stack)
        stacked = buf[:, window.reshape(-1)].reshape(B, -1, self.stack * Fd)
        if self.cond_dim:
            stacked = torch.cat([stacked, cond[:, None, :].expand(B, stacked.shape[1], -1)],
                                dim=-1)
        y, (h_new, c_new) = self.lstm(stacked, (h, c))
        # A chunk that completes no stacked frame keeps the LSTM state (onnxruntime's LSTM
        # does not pass it through an empty sequence).
        some = ending.any()
        h, c = torch.where(some, h_new, h), torch.where(some, c_new, c)
        out = [self.enc_proj(y)]
        if self.lid_head is not None:
            out.append(self.lid_head(y))
        return (*out, buf[:, T:], seen + T, h, c)


class TransformerEncoderGraph(nn.Module):
    """The causal Transformer encoder's streaming step (its ``streaming_forward``, key/value
    cache in and out) with the joint's encoder projection and the LID head.

    ``forward(feats (B,T,F), history (B,2,F), conv (B,C,2,F1), seen (B,), keys, values
    (layers,B,heads,P,D/heads)[, cond (B,L)]) -> (proj (B,T',J)[, lid (B,T',L)], history,
    conv, seen, keys, values)``, the cache growing to P + T' frames: the fields of
    :class:`~.encoder.TransformerState`. The rows are streams at the same position (the
    recognizer runs one stream per call), so every row's frames fill the same cache slots.
    """

    def __init__(self, model: RNNT) -> None:
        super().__init__()
        assert isinstance(model.encoder, ConvTransformerEncoder)
        self.encoder = model.encoder
        self.enc_proj = model.joiner.enc_proj
        self.lid_head = model.lid_head

    def forward(self, feats: Tensor, history: Tensor, conv: Tensor, seen: Tensor, keys: Tensor,
                values: Tensor, cond: Tensor | None = None) -> tuple[Tensor, ...]:
        lens = torch.ones_like(seen) * feats.shape[1]
        y, _, state = self.encoder.streaming_forward(
            feats, lens, TransformerState(history, conv, seen, keys, values), cond)
        out = [self.enc_proj(y)]
        if self.lid_head is not None:
            out.append(self.lid_head(y))
        return (*out, state.feats, state.conv, state.seen, state.keys, state.values)


class PredictorGraph(nn.Module):
    """``tokens (N,), slots (N,), h, c (layers,N,H) -> pred (N,J), h, c``: one step of each
    row's prediction network (module doc), as :meth:`TorchPredictionJoint.step`."""

    def __init__(self, tables: TorchPredictionJoint) -> None:
        super().__init__()
        predictor = tables.model.predictor
        self.layers, self.hidden = tables.state_shape
        self.num_nets = len(predictor.lstms)
        self.register_buffer("first", tables.first.clone())
        self.register_buffer("first_offset", tables.first_offset.clone())
        self.register_buffer("net_of_slot", torch.tensor(tables.nets))
        # Every stack's weights side by side: one product gives each row every stack's gates.
        self.register_buffer("recurrent", torch.cat(tables.recurrent).clone())
        for k in range(1, self.layers):
            self.register_buffer(f"weight_{k}", torch.cat([w for w, _ in
                                                           (d[k - 1] for d in tables.deeper)]))
            self.register_buffer(f"bias_{k}", torch.cat([b for _, b in
                                                         (d[k - 1] for d in tables.deeper)]))
        self.pred_proj = tables.model.joiner.pred_proj

    def _own(self, gates: Tensor, net: Tensor) -> Tensor:
        """(N, nets * 4H) gates of every stack -> (N, 4H) of each row's own stack."""
        if self.num_nets == 1:
            return gates
        G = 4 * self.hidden
        return gates.reshape(-1, self.num_nets, G).gather(
            1, net[:, None, None].expand(-1, 1, G))[:, 0]

    def forward(self, tokens: Tensor, slots: Tensor, h: Tensor, c: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        net = self.net_of_slot[slots]
        gates = self.first[tokens + self.first_offset[slots]] + self._own(
            h[0] @ self.recurrent.T, net)
        x, hs, cs = _cell(gates, c[0], self.hidden)
        h_out, c_out = [hs], [cs]
        for k in range(1, self.layers):
            w, b = getattr(self, f"weight_{k}"), getattr(self, f"bias_{k}")
            x, hs, cs = _cell(self._own(torch.cat([x, h[k]], dim=1) @ w.T + b, net), c[k],
                              self.hidden)
            h_out.append(hs)
            c_out.append(cs)
        return self.pred_proj(x), torch.stack(h_out), torch.stack(c_out)


class JoinerGraph(nn.Module):
    """``frames (D,J), frame_of (N,), pred (N,J), slots (N,) -> log_probs (N,V_max)``, as
    :meth:`TorchPredictionJoint.log_probs`."""

    def __init__(self, tables: TorchPredictionJoint) -> None:
        super().__init__()
        self.register_buffer("weight", tables.weight.clone())
        self.register_buffer("bias", tables.bias.clone())
        self.register_buffer("columns", tables.columns.clone())

    def forward(self, frames: Tensor, frame_of: Tensor, pred: Tensor, slots: Tensor) -> Tensor:
        hidden = torch.tanh(frames[frame_of] + pred)
        logits = F.linear(hidden, self.weight, self.bias)
        return torch.log_softmax(logits.gather(1, self.columns[slots]), dim=-1)


def _cell(gates: Tensor, c: Tensor, hidden: int) -> tuple[Tensor, Tensor, Tensor]:
    """One LSTM cell from its summed gate inputs (N, 4H): (output, h, c). The gates are split
    at a constant width ``hidden`` (one Split node; ``chunk`` would be traced as a dozen shape
    computations and slices, each a node onnxruntime runs per call)."""
    i, f, g, o = gates.split(hidden, dim=1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, h, c


# ---------------------------------------------------------------------------------------------
# Export


def encoder_names(model: RNNT) -> tuple[list[str], list[str]]:
    """The encoder graph's input and output names."""
    lid = ["lid"] if model.lid_head is not None else []
    cond = ["cond"] if model.spec.lang_onehot else []
    if isinstance(model.encoder, LSTMEncoder):
        return (["feats", "history", "seen", "h", "c", *cond],
                ["proj", *lid, "history_out", "seen_out", "h_out", "c_out"])
    return (["feats", "history", "conv", "seen", "keys", "values", *cond],
            ["proj", *lid, "history_out", "conv_out", "seen_out", "keys_out", "values_out"])


def export_networks(model: RNNT) -> dict[str, bytes]:
    """The three graphs of ``model`` (in eval mode), by role (:data:`FILES`)."""
    if not isinstance(model.encoder, (LSTMEncoder, ConvTransformerEncoder)):
        raise ConfigError(f"the RNN-T's {type(model.encoder).__name__} does not export to "
                          "ONNX; the LSTM encoder and the causal Transformer encoder do")
    model = model.eval()
    tables = TorchPredictionJoint(model)
    p = next(model.parameters())
    F_, L = model.encoder.feature_dim, len(model.languages)
    cond = [torch.eye(L, dtype=p.dtype)[:1].expand(2, -1).contiguous()] \
        if model.spec.lang_onehot else []
    inputs, outputs = encoder_names(model)
    if isinstance(model.encoder, LSTMEncoder):
        enc = model.encoder
        layers, D = enc.lstm.num_layers, enc.output_dim
        example = [torch.randn(2, 7, F_), torch.zeros(2, enc.stacker.stack - 1, F_),
                   torch.full((2,), 4, dtype=torch.long), torch.zeros(layers, 2, D),
                   torch.zeros(layers, 2, D), *cond]
        axes = {"feats": {0: "B", 1: "T"}, "history": {0: "B"}, "seen": {0: "B"},
                "h": {1: "B"}, "c": {1: "B"}, "cond": {0: "B"}, "proj": {0: "B", 1: "T_out"},
                "lid": {0: "B", 1: "T_out"}, "history_out": {0: "B"}, "seen_out": {0: "B"},
                "h_out": {1: "B"}, "c_out": {1: "B"}}
        encoder = export_graph(LstmEncoderGraph(model), example, inputs, outputs,
                               {k: v for k, v in axes.items() if k in inputs + outputs})
    else:
        # Traced on two streams 5 feature frames in (2 encoder frames cached, an odd stride
        # phase), rows at one position: the graph has no path for rows at different ones.
        state = model.encoder.init_state(2, p.device)
        cache = state.keys.new_zeros(*state.keys.shape[:3], 2, state.keys.shape[4])
        example = [torch.randn(2, 13, F_), torch.randn(state.feats.shape),
                   torch.randn(state.conv.shape), torch.full((2,), 5, dtype=torch.long),
                   torch.randn(cache.shape), torch.randn(cache.shape), *cond]
        axes = {"feats": {0: "B", 1: "T"}, "history": {0: "B"}, "conv": {0: "B"},
                "seen": {0: "B"}, "keys": {1: "B", 3: "S"}, "values": {1: "B", 3: "S"},
                "cond": {0: "B"}, "proj": {0: "B", 1: "T_out"}, "lid": {0: "B", 1: "T_out"},
                "history_out": {0: "B"}, "conv_out": {0: "B"}, "seen_out": {0: "B"},
                "keys_out": {1: "B", 3: "S_out"}, "values_out": {1: "B", 3: "S_out"}}
        encoder = export_graph(TransformerEncoderGraph(model), example, inputs, outputs,
                               {k: v for k, v in axes.items() if k in inputs + outputs})
    layers, H = tables.state_shape
    S, J = len(tables.vocab_sizes), tables.joint_dim
    slots = torch.arange(3) % S
    predictor = export_graph(
        PredictorGraph(tables), [torch.ones(3, dtype=torch.long), slots,
                                 torch.zeros(layers, 3, H), torch.zeros(layers, 3, H)],
        ["tokens", "slots", "h", "c"], ["pred", "h_out", "c_out"],
        {"tokens": {0: "N"}, "slots": {0: "N"}, "h": {1: "N"}, "c": {1: "N"}, "pred": {0: "N"},
         "h_out": {1: "N"}, "c_out": {1: "N"}})
    joiner = export_graph(
        JoinerGraph(tables), [torch.randn(2, J), torch.tensor([0, 1, 1]), torch.randn(3, J),
                              slots],
        ["frames", "frame_of", "pred", "slots"], ["log_probs"],
        {"frames": {0: "D"}, "frame_of": {0: "N"}, "pred": {0: "N"}, "slots": {0: "N"},
         "log_probs": {0: "N"}})
    return {"encoder": encoder, "predictor": predictor, "joiner": joiner}


# ---------------------------------------------------------------------------------------------
# The graphs run by onnxruntime


class _OnnxEncoder:
    """What the ONNX encoders share: one chunk of a stream through the graph, whose state
    inputs are the fields of the stream's state dataclass in their order (``cond``, the
    language one-hot, last and only when given), and whose last outputs are the new state."""

    graph: Any
    model: RNNT
    lid: bool

    @property
    def _run(self) -> Any:
        """The graph's run on a feed it was checked to take (:func:`runner`), made once."""
        run = self.__dict__.get("_runner")
        if run is None:
            run = self.__dict__["_runner"] = runner(
                self.graph, [o.name for o in self.graph.get_outputs()])
        return run

    def __call__(self, feats: Tensor, state: Any) -> tuple[Tensor, Tensor | None, Any]:
        """feats (T, F) -> the chunk's frames (T', J), LID logits or None, the new state."""
        if feats.shape[0] == 0:
            return _no_frames(self.model, self.lid, state)
        names = [f.name for f in fields(state) if f.name != "cond"]
        feed = {"feats": np.ascontiguousarray(feats.numpy(), dtype=np.float32)[None],
                **{name: getattr(state, name) for name in names}}
        if state.cond is not None:
            feed["cond"] = state.cond
        out = self._run(feed)
        lid = torch.from_numpy(out[1][0]) if self.lid else None
        return torch.from_numpy(out[0][0]), lid, type(state)(*out[-len(names):], state.cond)


@dataclass(frozen=True)
class LstmStreamState:
    """An :class:`OnnxLstmEncoder` stream's state: the stacker's last ``stack - 1`` frames
    (1, K, F) and frames seen (1,), the LSTM's h, c (layers, 1, D), the language one-hot
    (1, L) of the onehot variant (else None)."""

    history: np.ndarray
    seen: np.ndarray
    h: np.ndarray
    c: np.ndarray
    cond: np.ndarray | None


class OnnxLstmEncoder(_OnnxEncoder):
    """:class:`~.networks.StreamingEncoder` running the LSTM encoder graph."""

    def __init__(self, graph: Any, model: RNNT) -> None:
        self.graph = graph
        self.model = model
        encoder = model.encoder
        self.history_shape = (1, encoder.stacker.stack - 1, encoder.feature_dim)
        self.state_shape = (encoder.lstm.num_layers, 1, encoder.output_dim)
        self.lid = model.lid_head is not None

    def init_state(self, language: str | None) -> LstmStreamState:
        zeros = np.zeros(self.state_shape, dtype=np.float32)
        return LstmStreamState(np.zeros(self.history_shape, dtype=np.float32),
                               np.zeros(1, dtype=np.int64), zeros, zeros.copy(),
                               _onehot(self.model, language))


@dataclass(frozen=True)
class TransformerStreamState:
    """An :class:`OnnxTransformerEncoder` stream's state: the fields of
    :class:`~.encoder.TransformerState` for one stream (history (1,2,F), conv (1,C,2,F1), seen
    (1,), keys and values (layers,1,heads,P,D/heads)), the language one-hot (1, L) or None."""

    history: np.ndarray
    conv: np.ndarray
    seen: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    cond: np.ndarray | None


class OnnxTransformerEncoder(_OnnxEncoder):
    """:class:`~.networks.StreamingEncoder` running the Transformer encoder's graph: one chunk
    in, its frames out, the key/value cache carried from call to call (a chunk costs its own
    frames plus their attention to the past ones, as in PyTorch)."""

    def __init__(self, graph: Any, model: RNNT) -> None:
        self.graph = graph
        self.model = model
        self.lid = model.lid_head is not None
        # the zero state's shapes, from the encoder's own (built on CPU: the model may be on
        # the meta device)
        encoder = model.encoder
        self.shapes = (
            (1, 2, encoder.feature_dim),
            (1, encoder.subsampling.conv1.out_channels, 2, encoder.subsampling.conv1_width),
            (len(encoder.layers), 1, encoder.heads, 0, encoder.output_dim // encoder.heads))

    def init_state(self, language: str | None) -> TransformerStreamState:
        history, conv, cache = (np.zeros(s, np.float32) for s in self.shapes)
        return TransformerStreamState(history, conv, np.zeros(1, np.int64), cache, cache.copy(),
                                      _onehot(self.model, language))


def _onehot(model: RNNT, language: str | None) -> np.ndarray | None:
    if not model.spec.lang_onehot:
        return None
    ids = model.language_ids(language, 1)  # a DataError without a language
    return np.eye(len(model.languages), dtype=np.float32)[ids.numpy()]


def _no_frames(model: RNNT, lid: bool, state: Any) -> tuple[Tensor, Tensor | None, Any]:
    J = model.joiner.enc_proj.out_features
    return (torch.zeros(0, J), torch.zeros(0, len(model.languages)) if lid else None, state)


class OnnxPredictionJoint:
    """:class:`~.networks.PredictionJoint` running the predictor and joiner graphs."""

    def __init__(self, predictor: Any, joiner: Any, model: RNNT) -> None:
        self.predictor = predictor
        self.joiner = joiner
        self.model = model
        self.blank = model.blank
        routes = [model.route(lang) for lang in slot_languages(model)]
        self.vocab_sizes = tuple(r.vocab_size for r in routes)
        self.state_shape = (model.predictor.num_layers, model.predictor.output_dim)
        self.joint_dim = model.joiner.pred_proj.out_features
        # called many times a frame, on inputs fixed here: without the binding's checks
        self._predict = runner(predictor, ["pred", "h_out", "c_out"])
        self._joint = runner(joiner, ["log_probs"])

    def slot(self, language: str | None) -> int:
        return slot_of(self.model, language)

    def step(self, tokens: np.ndarray, slots: np.ndarray, h: np.ndarray, c: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pred, h, c = self._predict({"tokens": tokens, "slots": slots, "h": h, "c": c})
        return pred, h, c

    def log_probs(self, frames: Tensor, frame_of: np.ndarray, pred: np.ndarray,
                  slots: np.ndarray) -> Tensor:
        return torch.from_numpy(self.log_probs_array(frames.numpy(), frame_of, pred, slots))

    def log_probs_array(self, frames: np.ndarray, frame_of: np.ndarray, pred: np.ndarray,
                        slots: np.ndarray) -> np.ndarray:
        """:meth:`log_probs` on arrays, as the graph takes and gives them."""
        (lp,) = self._joint({"frames": np.ascontiguousarray(frames), "frame_of": frame_of,
                             "pred": pred, "slots": slots})
        return lp


def onnx_networks(model: RNNT, graphs: dict[str, bytes | Path], threads: int = 1
                  ) -> RnntNetworks:
    """:class:`~.networks.RnntNetworks` running ``graphs`` (role -> bytes or file, as
    :func:`export_networks` gives) with onnxruntime; ``model`` describes them (its weights
    may be on the meta device)."""
    encoder_cls = (OnnxLstmEncoder if isinstance(model.encoder, LSTMEncoder)
                   else OnnxTransformerEncoder)
    encoder = session(graphs["encoder"], threads)
    got, (want, _) = [i.name for i in encoder.get_inputs()], encoder_names(model)
    if got != want:
        where = "" if isinstance(graphs["encoder"], bytes) else f"{graphs['encoder']}: "
        raise DataError(f"{where}the encoder graph takes {got}, this speechlab runs one "
                        f"taking {want} (the encoder's streaming state changed); export the "
                        "model again")
    return RnntNetworks(model, encoder_cls(encoder, model),
                        OnnxPredictionJoint(session(graphs["predictor"], threads),
                                            session(graphs["joiner"], threads), model), "onnx")
