"""The two acoustic models of the SALAD paper (Fig. 1, Table 1): linguistic frames -> acoustic
frames, one output frame per input frame.

- :class:`MusaRnn`, the baseline: ReLU embedding projection (Sec. 2, ``h_t = max(0, W x_t + b)``),
  an LSTM core of size ``hidden``, dropout 0.5, and a recurrent (LSTM) output layer.
- :class:`Salad`: the same embedding, the sinusoidal positioning code summed to it, ``layers``
  blocks of multi-head self-attention + FFN (post-norm, as the Transformer the paper follows),
  and a linear output layer. Dropout 0.1 in attention, 0.5 in the FFN and after the positions.

Both take ``(x, x_lens)`` for whole utterances and ``streaming_forward(x, x_lens, state)`` for
the paper's stateful training, where each batch continues the previous one: the LSTMs' (h, c)
and SALAD's position index are the carried state (``init_state(batch)`` gives the zero state).

SALAD may attend within windows of ``window`` frames at inference (``forward(..., window=120)``):
the windows are cut from the utterance, batched, and keep their absolute positions, exactly the
condition it was trained in (each training batch is one 120-frame window per stream).

:func:`build` gives the four presets of Table 1 by name; with 364 inputs their parameter counts
are those of Table 2 (1.17M, 1.04M, 9.85M, 9.66M).

Shapes: B batch, T frames, D model dim, L input dim, O output dim (43).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.config import check_fields, ranged
from speechlab.train.card import config_builder, load_trained
from speechlab.errors import ConfigError
from speechlab.nn.dropout import Dropout
from speechlab.nn.mask import lengths_to_mask
from speechlab.nn.transformer import SelfAttention

State = tuple[Tensor, ...]


@dataclass(frozen=True)
class AcousticModelConfig:
    """Sizes of one acoustic model (Table 1). ``kind`` picks the family."""

    kind: Literal["rnn", "salad"] = "salad"
    input_dim: int = ranged(364, ge=1)
    output_dim: int = ranged(43, ge=1)
    emb_dim: int = ranged(128, ge=1)          # Table 1 "Emb" (SALAD's H)
    hidden: int = ranged(450, ge=1)           # RNN: the LSTM core's size ("HidRNN")
    layers: int = ranged(3, ge=1)             # SALAD: decoder blocks N
    heads: int = ranged(8, ge=1)              # SALAD: attention heads
    ff_dim: int = ranged(1024, ge=1)          # SALAD: d_ff
    dropout: float = ranged(0.5, ge=0, lt=1)  # RNN after the core; SALAD FFN and positions
    attention_dropout: float = ranged(0.1, ge=0, lt=1)
    # Beyond the paper (its future work): a 1-D convolution of this width over time replaces
    # SALAD's linear output layer (0: the paper's linear layer).
    output_conv: int = ranged(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.kind == "salad" and self.emb_dim % self.heads:
            raise ConfigError(f"salad: emb_dim {self.emb_dim} is not divisible by {self.heads} heads")
        if self.output_conv and self.output_conv % 2 == 0:
            raise ConfigError(f"output_conv must be odd (centred), got {self.output_conv}")


# Table 1 of the paper. N = 3 blocks and 8 heads are not in the table: 3 blocks are what makes
# the SALAD counts of Table 2 (1.04M, 9.66M) come out at 364 inputs. The tiny/mid presets are
# this project's, for tests and the demo.
PRESETS: dict[str, AcousticModelConfig] = {
    "small_rnn": AcousticModelConfig(kind="rnn", emb_dim=128, hidden=450),
    "small_salad": AcousticModelConfig(kind="salad", emb_dim=128, ff_dim=1024, layers=3),
    "big_rnn": AcousticModelConfig(kind="rnn", emb_dim=512, hidden=1300),
    "big_salad": AcousticModelConfig(kind="salad", emb_dim=512, ff_dim=2048, layers=3),
    "mid_rnn": AcousticModelConfig(kind="rnn", emb_dim=64, hidden=160),
    "mid_salad": AcousticModelConfig(kind="salad", emb_dim=64, ff_dim=256, layers=2, heads=4),
    "mini_rnn": AcousticModelConfig(kind="rnn", emb_dim=32, hidden=96),
    "mini_salad": AcousticModelConfig(kind="salad", emb_dim=32, ff_dim=128, layers=2, heads=4),
    "tiny_rnn": AcousticModelConfig(kind="rnn", emb_dim=16, hidden=24),
    "tiny_salad": AcousticModelConfig(kind="salad", emb_dim=16, ff_dim=32, layers=1, heads=2),
}


def preset(name: str, input_dim: int = 364, output_dim: int = 43) -> AcousticModelConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown TTS model {name!r}; choose one of {sorted(PRESETS)}")
    return replace(PRESETS[name], input_dim=input_dim, output_dim=output_dim)


def positions_at(positions: Tensor, dim: int) -> Tensor:
    """Sec. 2's positioning code at absolute positions: (B, T) -> (B, T, D) with
    ``c[t, 2i] = sin(t / 10000^(2i/D))`` and ``c[t, 2i+1] = cos(t / 10000^(2i/D))``."""
    rate = torch.exp(torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
                     * (-math.log(10000.0) / dim))
    angle = positions.to(torch.float32)[..., None] * rate
    code = torch.zeros(*positions.shape, dim, device=positions.device)
    code[..., 0::2] = torch.sin(angle)
    code[..., 1::2] = torch.cos(angle[..., : dim // 2])
    return code


class Embedding(nn.Module):
    """``h_t = max(0, W x_t + b)``: the shared pre-projection of both models (Sec. 2)."""

    def __init__(self, input_dim: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(input_dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.proj(x))


class MusaRnn(nn.Module):
    """Embedding -> LSTM core -> dropout -> LSTM output layer (MUSA-RNN, Fig. 1 left)."""

    def __init__(self, embedding: Embedding, core: nn.LSTM, output: nn.LSTM, dropout: float) -> None:
        super().__init__()
        self.embedding = embedding
        self.core = core
        self.output = output
        self.drop = Dropout(dropout)

    def init_state(self, batch: int) -> State:
        """Zero (h, c) of the core and of the output layer, each (1, B, size)."""
        # Plain CPU zeros: a quantized LSTM has no float weights to take a device from.
        z = torch.zeros
        return (z(1, batch, self.core.hidden_size), z(1, batch, self.core.hidden_size),
                z(1, batch, self.output.hidden_size), z(1, batch, self.output.hidden_size))

    def streaming_forward(self, x: Tensor, x_lens: Tensor, state: State) -> tuple[Tensor, Tensor, State]:
        """x (B,T,L), x_lens (B,), state from the previous window -> y (B,T,O), y_lens, state.

        Frames past a row's length are zeroed in ``y``; a row's carried state then includes its
        padding, which only ever happens in the last window of an epoch (the next one resets)."""
        h1, c1, h2, c2 = state
        h, (h1, c1) = self.core(self.embedding(x), (h1, c1))
        y, (h2, c2) = self.output(self.drop(h), (h2, c2))
        mask = lengths_to_mask(x_lens, x.shape[1], device=x.device)
        return y.masked_fill(~mask[..., None], 0.0), x_lens, (h1, c1, h2, c2)

    def forward(self, x: Tensor, x_lens: Tensor, window: int | None = None) -> Tensor:
        """Whole utterances from the zero state: x (B,T,L) -> (B,T,O). ``window`` is ignored
        (a recurrent model has no attention to limit)."""
        return self.streaming_forward(x, x_lens, self.init_state(x.shape[0]))[0]


class SaladBlock(nn.Module):
    """``x = LN(x + drop(MHSA(x)))``; ``x = LN(x + drop(W2 drop(relu(W1 x))))`` (post-norm)."""

    def __init__(self, dim: int, heads: int, ff_dim: int, dropout: float,
                 attention_dropout: float) -> None:
        super().__init__()
        self.attn = SelfAttention(dim, heads, attention_dropout)
        self.norm1 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, ff_dim), nn.ReLU(), Dropout(dropout),
                                nn.Linear(ff_dim, dim))
        self.norm2 = nn.LayerNorm(dim)
        self.attn_drop = Dropout(attention_dropout)
        self.ff_drop = Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.norm1(x + self.attn_drop(self.attn(x, mask)))
        return self.norm2(x + self.ff_drop(self.ff(x)))


class Salad(nn.Module):
    """Embedding + positions -> N self-attention blocks -> output layer (Fig. 1 right)."""

    def __init__(self, embedding: Embedding, blocks: nn.ModuleList, output: nn.Module,
                 dropout: float) -> None:
        super().__init__()
        self.embedding = embedding
        self.blocks = blocks
        self.output = output
        self.drop = Dropout(dropout)
        self.dim = blocks[0].norm1.normalized_shape[0]

    def init_state(self, batch: int) -> State:
        """The position index of each row's next frame: (B,) zeros."""
        return (torch.zeros(batch, dtype=torch.long),)

    def _decode(self, x: Tensor, x_lens: Tensor, start: Tensor) -> Tensor:
        """x (B,T,L) whose first frame sits at position ``start`` (B,) -> (B,T,O)."""
        T = x.shape[1]
        mask = lengths_to_mask(x_lens, T, device=x.device)
        # A row with no frame at all (an empty window) would give SDPA nothing to attend to
        # (NaN); let it see its first (padding) key; its output is zeroed below anyway.
        mask[:, 0] = True
        pos = start[:, None] + torch.arange(T, device=x.device)[None, :]
        h = self.drop(self.embedding(x) + positions_at(pos, self.dim))
        for block in self.blocks:
            h = block(h, mask)
        y = self._output(h)
        return y.masked_fill(~lengths_to_mask(x_lens, T, device=x.device)[..., None], 0.0)

    def _output(self, h: Tensor) -> Tensor:
        if isinstance(self.output, nn.Conv1d):
            return self.output(h.transpose(1, 2)).transpose(1, 2)
        return self.output(h)

    def streaming_forward(self, x: Tensor, x_lens: Tensor, state: State) -> tuple[Tensor, Tensor, State]:
        """x (B,T,L) continuing at positions ``state[0]`` (B,) -> y (B,T,O), y_lens, state."""
        (start,) = state
        return self._decode(x, x_lens, start), x_lens, (start + x.shape[1],)

    def forward(self, x: Tensor, x_lens: Tensor, window: int | None = None) -> Tensor:
        """Whole utterances from position 0: x (B,T,L) -> (B,T,O).

        ``window``: attend only within consecutive windows of that many frames (the training
        condition), run as one batch of windows that keep their absolute positions."""
        return windowed(self._decode, x, x_lens, window)


def windowed(decode: Callable[[Tensor, Tensor, Tensor], Tensor], x: Tensor, x_lens: Tensor,
             window: int | None) -> Tensor:
    """SALAD's output for whole utterances, x (B,T,L) -> (B,T,O), from ``decode(x, x_lens,
    start)`` (:meth:`Salad._decode`, or its ONNX graph): over each utterance at once, or
    within consecutive windows of ``window`` frames, run as one batch of windows that keep
    their absolute positions."""
    B, T, L = x.shape
    if not window or T <= window:
        return decode(x, x_lens, x.new_zeros(B, dtype=torch.long))
    n = -(-T // window)
    x = F.pad(x, (0, 0, 0, n * window - T)).reshape(B * n, window, L)
    starts = torch.arange(n, device=x.device) * window
    lens = (x_lens[:, None] - starts[None, :]).clamp(0, window).reshape(-1)
    y = decode(x, lens, starts.repeat(B))
    return y.reshape(B, n * window, -1)[:, :T]


def build_from_config(cfg: AcousticModelConfig) -> nn.Module:
    """The model ``cfg`` describes, from its parts."""
    embedding = Embedding(cfg.input_dim, cfg.emb_dim)
    if cfg.kind == "rnn":
        model: nn.Module = MusaRnn(embedding, nn.LSTM(cfg.emb_dim, cfg.hidden, batch_first=True),
                                   nn.LSTM(cfg.hidden, cfg.output_dim, batch_first=True),
                                   cfg.dropout)
        model.config = cfg  # so that a trained model can say what it is (export)
        return model
    blocks = nn.ModuleList(SaladBlock(cfg.emb_dim, cfg.heads, cfg.ff_dim, cfg.dropout,
                                      cfg.attention_dropout) for _ in range(cfg.layers))
    output: nn.Module = (nn.Conv1d(cfg.emb_dim, cfg.output_dim, cfg.output_conv,
                                   padding=cfg.output_conv // 2) if cfg.output_conv
                         else nn.Linear(cfg.emb_dim, cfg.output_dim))
    # The targets are min-max normalized to [0, 1]. Over LayerNorm'd features (unit variance)
    # a default-initialized output layer starts with outputs of std ~0.6 around 0; starting
    # near the middle of the range (small weights, bias 0.5) saves SALAD its first epochs.
    # Not in the paper, which does not say how it initializes; the LSTM output layer's tanh
    # starts near 0 and needs no help.
    with torch.no_grad():
        output.weight.mul_(0.1)
        output.bias.fill_(0.5)
    model = Salad(embedding, blocks, output, cfg.dropout)
    model.config = cfg
    return model


def build(name: str, input_dim: int = 364, output_dim: int = 43) -> nn.Module:
    """One of Table 1's models by name (``small_rnn``, ``small_salad``, ``big_rnn``,
    ``big_salad``; also ``mid_*`` and ``tiny_*``)."""
    return build_from_config(preset(name, input_dim, output_dim))


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------------------------------------
# The family: rebuilding a trained model from its checkpoint's card

FAMILY = "tts"
#: family name -> builder from the config dict, for :func:`speechlab.train.card.load_trained`.
BUILDERS = {FAMILY: config_builder(AcousticModelConfig, build_from_config)}


def load(path: str | Path) -> nn.Module:
    """The acoustic model (SALAD or RNN) trained in ``path`` (a model directory or a
    checkpoint), in eval mode."""
    return load_trained(path, BUILDERS)  # type: ignore[return-value]
