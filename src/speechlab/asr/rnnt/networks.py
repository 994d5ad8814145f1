"""What decoding runs of an RNN-T, behind two small interfaces, so that the searches
(:mod:`.search`, :mod:`.multilingual_decode`) and the recognizer are one code whatever runs the
networks: PyTorch (here) or ONNX Runtime (:mod:`.onnx_graphs`).

- :class:`StreamingEncoder`: one stream's feature chunks in, each encoder frame's projection
  for the joint network (``W_e enc``) and the LID head's logits out; the state is explicit.
- :class:`PredictionJoint`: the prediction network's step and the joint network's
  log-probabilities, each batched over rows (hypotheses) of any decoders.

:class:`RnntNetworks` bundles the two with the model they run (for the ONNX backend a
description whose weights are on the meta device: the graphs hold them).

A *slot* is one decoder the model can run: a language of the multi-softmax variants (its
embedding table, prediction network and output layer) and of the onehot variant (its
one-hot), the one decoder of the mono and vanilla models. Rows of a batch say their slot.

Shapes: N rows, T frames, F feature dim, J joint dim, H prediction dim, V vocabulary,
L languages, S slots, D decoders of a search (each reads its own projected frame).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from speechlab.asr.rnnt.model import RNNT
from speechlab.devices import device_of, move
from speechlab.errors import DataError


class StreamingEncoder(Protocol):
    """One stream's encoder with the joint's encoder projection and the LID head on top."""

    def init_state(self, language: str | None) -> Any:
        """The state before the first chunk of a stream in ``language`` (None: not needed)."""
        ...

    def __call__(self, feats: Tensor, state: Any) -> tuple[Tensor, Tensor | None, Any]:
        """feats (T, F) the next chunk -> projected encoder frames (T', J), the LID head's
        logits (T', L) or None (a model without one), the new state."""
        ...


class PredictionJoint(Protocol):
    """The prediction and joint networks of every slot, as the search calls them."""

    blank: int
    vocab_sizes: tuple[int, ...]  # per slot
    state_shape: tuple[int, int]  # (layers, H) of the prediction network's LSTM state
    joint_dim: int  # J

    def slot(self, language: str | None) -> int:
        """The slot a decoder of ``language`` runs (a DataError for one the model lacks)."""
        ...

    def step(self, tokens: np.ndarray, slots: np.ndarray, h: np.ndarray, c: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Feed one label per row: tokens (N,), slots (N,) int64, LSTM state h, c
        (layers, N, H) float32 -> the output's joint projection ``W_p pred`` (N, J) and the new
        h, c."""
        ...

    def log_probs(self, frames: Tensor, frame_of: np.ndarray, pred: np.ndarray,
                  slots: np.ndarray) -> Tensor:
        """frames (D, J) projected encoder frames, frame_of (N,) which one row i joins,
        pred (N, J) its prediction projection, slots (N,) -> float32 (N, V_max)
        ``log_softmax(out_slot(tanh(frame + pred)))`` over each slot's own vocabulary, -inf
        beyond it."""
        ...


def slot_languages(model: RNNT) -> tuple[str | None, ...]:
    """The language of each slot of ``model`` (module doc): its languages when decoders differ
    by language (multi-softmax, onehot), else one slot, None."""
    if model.spec.lang_output or model.spec.lang_onehot:
        return tuple(model.languages)
    return (None,)


def slot_of(model: RNNT, language: str | None) -> int:
    """The slot a decoder of ``language`` runs; a DataError naming the model's languages if it
    has no such decoder."""
    model.route(language)  # checks the language (and that multi-softmax decoders have one)
    slots = slot_languages(model)
    if slots == (None,):
        return 0
    if language is None:
        raise DataError(f"the {model.variant} model needs the language of each decoder (one of "
                        f"{list(model.languages)})")
    return slots.index(language)


# ---------------------------------------------------------------------------------------------
# PyTorch


class TorchEncoder:
    """:class:`StreamingEncoder` of a PyTorch RNN-T (its ``streaming_encode``), on the device
    of ``model``'s weights; what it returns is on the CPU, where the search runs."""

    def __init__(self, model: RNNT) -> None:
        self.model = model
        self.device = device_of(model)

    def init_state(self, language: str | None) -> tuple[Any, str | None]:
        return move(self.model.init_state(1), self.device), language

    @torch.inference_mode()
    def __call__(self, feats: Tensor, state: tuple[Any, str | None]
                 ) -> tuple[Tensor, Tensor | None, tuple[Any, str | None]]:
        encoder_state, language = state
        device = self.device
        enc, lens, encoder_state = self.model.streaming_encode(
            feats[None].to(device), torch.tensor([feats.shape[0]], device=device),
            encoder_state, language)
        enc = enc[0, : int(lens[0])]
        lid = self.model.lid_head(enc) if self.model.lid_head is not None else None
        frames = self.model.joiner.project_encoder(enc)
        if device.type != "cpu":
            frames, lid = frames.float().cpu(), None if lid is None else lid.float().cpu()
        return frames, lid, (encoder_state, language)


class TorchPredictionJoint:
    """:class:`PredictionJoint` of a PyTorch RNN-T, with its work done once where it can be.

    Every slot's output layer lives in one matrix (the concatenated heads). A joint step
    multiplies each run of rows of one slot by that slot's own head only (a row of a
    multi-softmax decoder needs its language's ~1/L of the columns), or, when the slots of
    the rows are too mixed for that, all rows by the whole matrix, each row then reading its
    own slot's columns. The first LSTM layer's input gates of every label a slot can feed
    (its embedding, its language one-hot, both biases) are worked out once, so a prediction
    step starts from a lookup; deeper layers multiply ``[input, h]`` by ``[W_ih, W_hh]`` in one
    product. The LSTM stacks are stepped once per stack in use (one, but for the LSP variant).
    These tables are also what the ONNX graphs are made of (:mod:`.onnx_graphs`).

    A step is a few small products on a handful of rows, so the tiny operations around them
    cost as much as the products: the products run in torch, the element-wise rest of an LSTM
    cell and the joint's tanh in numpy, on the arrays the search keeps (numpy's float32 tanh,
    within one unit in the last place, costs about a twentieth of torch's on the benchmark
    machine).
    """

    def __init__(self, model: RNNT) -> None:
        self.model = model
        self.blank = model.blank
        p = next(model.parameters())
        self.slot_languages = slot_languages(model)
        routes = [model.route(lang) for lang in self.slot_languages]
        self.vocab_sizes = tuple(r.vocab_size for r in routes)
        self.nets = [r.net for r in routes]
        joiner, predictor = model.joiner, model.predictor
        self.state_shape = (predictor.num_layers, predictor.output_dim)
        self.joint_dim = joiner.pred_proj.out_features
        heads = list(joiner.outputs)
        starts = [0]
        for head in heads:
            starts.append(starts[-1] + head.out_features)
        # one more output, always -inf: where a slot's vocabulary ends
        self.weight = torch.cat([*[h.weight for h in heads],
                                 torch.zeros(1, heads[0].in_features, dtype=p.dtype)]).detach()
        self.bias = torch.cat([*[h.bias for h in heads],
                               torch.full((1,), float("-inf"), dtype=p.dtype)]).detach()
        v_max = max(self.vocab_sizes)
        pad = starts[-1]
        self.columns = torch.tensor([[starts[r.head] + v if v < r.vocab_size else pad
                                      for v in range(v_max)] for r in routes])
        languages = list(self.slot_languages)
        ids = model.language_ids(languages, len(languages)) if model.spec.lang_onehot else None
        cond = model.language_onehot(ids, p.device)  # (S, L) for the onehot variant
        first, offsets = [], [0]
        with torch.inference_mode():
            for s, r in enumerate(routes):
                lstm = predictor.lstms[r.net]
                x = predictor.embeddings[r.table].weight
                if cond is not None:
                    x = torch.cat([x, cond[s].expand(x.shape[0], -1).to(x.dtype)], dim=1)
                first.append(F.linear(x, lstm.weight_ih_l0, lstm.bias_ih_l0 + lstm.bias_hh_l0))
                offsets.append(offsets[-1] + x.shape[0])
        # Rows of slot s start at first_offset[s].
        self.first = torch.cat(first)
        self.first_offset = torch.tensor(offsets[:-1])
        self.deeper = [[(torch.cat([getattr(lstm, f"weight_ih_l{k}"),
                                    getattr(lstm, f"weight_hh_l{k}")], dim=1).detach(),
                         (getattr(lstm, f"bias_ih_l{k}") + getattr(lstm, f"bias_hh_l{k}")).detach())
                        for k in range(1, lstm.num_layers)] for lstm in predictor.lstms]
        self.recurrent = [lstm.weight_hh_l0.detach() for lstm in predictor.lstms]
        # For the per-head joint: each slot's head (bias, transposed weight) and vocabulary.
        self._heads = [(self.bias[starts[r.head]: starts[r.head] + r.vocab_size],
                        self.weight[starts[r.head]: starts[r.head] + r.vocab_size].T,
                        r.vocab_size) for r in routes]
        # For the step: numpy views of the lookup, transposed products for addmm.
        self._first = self.first.numpy()
        self._first_offset = self.first_offset.numpy()
        self._net_of_slot = np.array(self.nets, dtype=np.int64)
        self._recurrent_t = [w.T for w in self.recurrent]
        self._deeper_t = [[(b, w.T) for w, b in layers] for layers in self.deeper]
        self._pred_proj = (joiner.pred_proj.bias.detach(), joiner.pred_proj.weight.detach().T)

    def slot(self, language: str | None) -> int:
        return slot_of(self.model, language)

    def step(self, tokens: np.ndarray, slots: np.ndarray, h: np.ndarray, c: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The LSTM recurrence of ``nn.LSTM`` (gates i, f, g, o), written out so that the first
        layer's input product is a lookup."""
        lookup = tokens + self._first_offset[slots]
        if len(self.recurrent) == 1:  # one LSTM stack for every slot (all but LSP): no gathers
            return self._step_stack(0, lookup, h, c)
        nets = self._net_of_slot[slots]
        proj = np.empty((len(tokens), self.joint_dim), dtype=np.float32)
        h2, c2 = np.empty_like(h), np.empty_like(c)
        for net in np.unique(nets).tolist():  # one pass per LSTM stack in use (LSP: per language)
            idx = np.flatnonzero(nets == net)
            proj[idx], h2[:, idx], c2[:, idx] = self._step_stack(net, lookup[idx], h[:, idx],
                                                                 c[:, idx])
        return proj, h2, c2

    def _step_stack(self, net: int, lookup: np.ndarray, h: np.ndarray, c: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`step` of rows that all run LSTM stack ``net``: lookup (N,) their rows of
        ``first``, h, c (layers, N, H) -> the output's projection (N, J), the new h, c."""
        h2, c2 = np.empty_like(h), np.empty_like(c)
        gates = self._first[lookup]  # a copy: layer 0's input product, both biases
        torch.from_numpy(gates).addmm_(torch.from_numpy(h[0]), self._recurrent_t[net])
        _cell(gates, c[0], h2[0], c2[0])
        for k, (b, w_t) in enumerate(self._deeper_t[net], start=1):
            x = torch.from_numpy(np.concatenate([h2[k - 1], h[k]], axis=1))
            _cell(torch.addmm(b, x, w_t).numpy(), c[k], h2[k], c2[k])
        b, w_t = self._pred_proj
        return torch.addmm(b, torch.from_numpy(h2[-1]), w_t).numpy(), h2, c2

    def log_probs(self, frames: Tensor, frame_of: np.ndarray, pred: np.ndarray,
                  slots: np.ndarray) -> Tensor:
        every = frames.detach().numpy()
        # One frame for all rows (a stream's decoders) is a broadcast, not a gather.
        same = frames.shape[0] == 1 or frames.stride(0) == 0
        hidden = pred + every[0] if same else every[frame_of] + pred
        hidden = torch.from_numpy(np.tanh(hidden, out=hidden))
        # The search passes rows grouped by decoder, so a slot's rows are usually one run:
        # each run is multiplied by its own head only, into its columns of an all -inf
        # (N, V_max). Rows of more runs than there are heads take the one product of all heads.
        of = slots.tolist()
        begins = [i for i in range(1, len(of)) if of[i] != of[i - 1]]  # where a new run begins
        if len(begins) >= len(self._heads):
            logits = F.linear(hidden, self.weight, self.bias).gather(
                1, self.columns[torch.from_numpy(slots)])
        elif not begins and self._heads[of[0]][2] == self.columns.shape[1]:
            bias, weight_t, _ = self._heads[of[0]]  # one slot, with the widest vocabulary
            logits = torch.addmm(bias, hidden, weight_t)
        else:
            logits = torch.full((len(of), self.columns.shape[1]), float("-inf"),
                                dtype=hidden.dtype, device=hidden.device)
            for begin, end in zip([0, *begins], [*begins, len(of)]):
                bias, weight_t, vocab = self._heads[of[begin]]
                torch.addmm(bias, hidden[begin:end], weight_t, out=logits[begin:end, :vocab])
        return torch.log_softmax(logits.float(), dim=-1)


def _cell(gates: np.ndarray, c: np.ndarray, h_out: np.ndarray, c_out: np.ndarray) -> None:
    """One LSTM cell from its summed gate inputs gates (N, 4H) and c (N, H): the new h, c
    into h_out, c_out (N, H) (the output is h)."""
    H = c.shape[1]
    sig = torch.sigmoid(torch.from_numpy(gates)).numpy()  # the g quarter's is not used
    g = np.tanh(gates[:, 2 * H: 3 * H])
    g *= sig[:, :H]
    np.multiply(sig[:, H: 2 * H], c, out=c_out)
    c_out += g
    np.tanh(c_out, out=h_out)
    h_out *= sig[:, 3 * H:]


# ---------------------------------------------------------------------------------------------
# The bundle


@dataclass(frozen=True)
class RnntNetworks:
    """An RNN-T as decoding runs it: ``model`` says what it is (variant, languages,
    vocabularies; with ``backend="onnx"`` its weights are on the meta device and only describe
    it), ``encoder`` and ``prediction_joint`` run it."""

    model: RNNT
    encoder: StreamingEncoder
    prediction_joint: PredictionJoint
    backend: str = "torch"

    @classmethod
    def torch(cls, model: RNNT) -> RnntNetworks:
        """The networks of a PyTorch model (put it in eval mode first: dropout)."""
        return cls(model, TorchEncoder(model), TorchPredictionJoint(model), "torch")

    def encoder_on(self, device: torch.device) -> RnntNetworks:
        """The same networks with the encoder (and LID head) on ``device``: the encoder is
        the one big product per chunk; the search's prediction and joint steps are a few
        small products per label, which stay on the CPU (their tables are built from the
        CPU weights)."""
        import copy

        on_device = copy.deepcopy(self.model).to(device).eval()
        return replace(self, encoder=TorchEncoder(on_device))


def networks_of(model: RNNT | RnntNetworks) -> RnntNetworks:
    """``model`` as networks: a PyTorch model's own, or the networks given."""
    return model if isinstance(model, RnntNetworks) else RnntNetworks.torch(model)


def rows_of(values: Sequence[int]) -> np.ndarray:
    """Row indices, token ids or slots as the int64 array the networks take."""
    return np.fromiter(values, dtype=np.int64, count=len(values))
