"""The multi-softmax RNN-T family: one model class, one factory, six variants.

``RNNT(encoder, predictor, joiner, ...)`` receives ready-built parts; :func:`build` builds them
for a variant of :data:`config.VARIANTS` (mono, vanilla, onehot, multisoftmax, multisoftmax_lsp,
multisoftmax_lid) from per-language vocabulary sizes and a size preset. A *route* says which
embedding table, prediction network and output layer a language uses; in the multi-softmax
variants a batch is language-homogeneous, so only its language's parameters get gradient.

Label ids: in the mono and multi-softmax variants a language's labels are local ids
``0..V_l-1`` (0 = blank); the vanilla and onehot variants use union ids (:class:`UnionMap`:
blank, then each language's non-blank labels in ``vocab_sizes`` order).

Shapes: B batch, T frames, U labels, V vocabulary, L languages, D dims.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from speechlab.asr.rnnt.config import VARIANTS, ModelDims, RNNTConfig, VariantSpec
from speechlab.asr.rnnt.encoder import ConvTransformerEncoder, EncoderState, LSTMEncoder, TransformerState
from speechlab.asr.rnnt.joiner import Joiner
from speechlab.asr.rnnt.predictor import Predictor
from speechlab.asr.rnnt.presets import PAPER_TABLE6, PAPER_VOCAB_SIZES, get_preset
from speechlab.train.card import config_builder, load_trained
from speechlab.errors import ConfigError, DataError
from speechlab.nn.mask import lengths_to_mask
from speechlab.text.graphemes import GraphemeTokenizer, UnionMap, join_symbols

Language = str | Sequence[str] | None


@dataclass(frozen=True)
class RNNTOutput:
    """What :meth:`RNNT.forward` returns for one batch (B batch, T' encoder frames, U labels,
    D dims, V the batch language's softmax size, L languages).

    - ``enc`` (B,T',D), ``enc_lens`` (B,): encoder output and its lengths.
    - ``pred`` (B,U+1,D): prediction-network output (blank-prefixed targets).
    - ``joint``: ``(enc (B,t,D), pred (B,u,D)) -> logits (B,t,u,V)`` with the batch's output
      layer, for losses that compute the lattice in chunks.
    - ``vocab_size``: V.
    - ``language_ids`` (B,) or None (a model that needs no language id).
    - ``logits`` (B,T',U+1,V) or None when not asked for.
    - ``lid_logits`` (B,T',L) for a model with a LID head, else None.
    - ``ctc_logits`` (B,T',V) when asked for (the auxiliary CTC loss), else None.
    """

    enc: Tensor
    enc_lens: Tensor
    pred: Tensor
    joint: Callable[[Tensor, Tensor], Tensor]
    vocab_size: int
    language_ids: Tensor | None = None
    logits: Tensor | None = None
    lid_logits: Tensor | None = None
    ctc_logits: Tensor | None = None


@dataclass(frozen=True)
class Route:
    """The parts one language uses: embedding ``table``, prediction ``net``, output ``head``."""

    table: int
    net: int
    head: int
    vocab_size: int


class RNNT(nn.Module):
    """Encoder + prediction network + joint network, optionally a LID head on the encoder.

    Build with :func:`build`; ``languages`` / ``vocab_sizes`` are per language (sizes include
    blank), ``routes`` maps each language to its parts.
    """

    def __init__(self, encoder: LSTMEncoder | ConvTransformerEncoder, predictor: Predictor, joiner: Joiner, *,
                 variant: str, languages: Sequence[str], vocab_sizes: Sequence[int],
                 routes: dict[str, Route], lid_head: nn.Module | None = None, blank: int = 0) -> None:
        super().__init__()
        self.encoder = encoder
        self.predictor = predictor
        self.joiner = joiner
        self.lid_head = lid_head
        self.variant = variant
        self.spec: VariantSpec = VARIANTS[variant]
        self.languages = tuple(languages)
        self.vocab_sizes = tuple(vocab_sizes)
        self.union = UnionMap(self.languages, self.vocab_sizes)
        self.routes = dict(routes)
        self.blank = blank
        self.config: RNNTConfig | None = None  # set by build(), so a checkpoint can rebuild it
        self.dims: ModelDims | None = None  # the sizes it was built with (the preset's or given)

    # ---- languages -------------------------------------------------------------------------
    def language_id(self, language: str) -> int:
        try:
            return self.languages.index(language)
        except ValueError:
            raise DataError(f"unknown language {language!r}; this {self.variant} model knows "
                            f"{list(self.languages)}") from None

    def language_ids(self, language: Language, batch: int) -> Tensor | None:
        """Per-row language ids (B,), or None when none was given and the encoder needs none."""
        if language is None:
            if self.spec.single_language:
                return torch.zeros(batch, dtype=torch.long)
            if not self.spec.lang_onehot:
                return None  # the encoder does not depend on it; route() asks where needed
            raise DataError(f"the {self.variant} model needs the language of each utterance")
        names = [language] * batch if isinstance(language, str) else list(language)
        if len(names) != batch:
            raise DataError(f"got {len(names)} languages for a batch of {batch}")
        return torch.tensor([self.language_id(n) for n in names], dtype=torch.long)

    def route(self, language: Language = None) -> Route:
        """The parts a batch in ``language`` uses (one language per batch unless union vocab)."""
        if self.spec.union_vocab or self.spec.single_language:
            if language is not None:
                for n in [language] if isinstance(language, str) else language:
                    self.language_id(n)
            return self.routes[self.languages[0]]
        names = {language} if isinstance(language, str) else set(language or ())
        if len(names) != 1:
            raise DataError(f"a {self.variant} batch must hold exactly one language (its own "
                            f"softmax is used), got {sorted(names) if names else 'none'}")
        name = names.pop()
        self.language_id(name)
        return self.routes[name]

    def language_onehot(self, ids: Tensor | None, device: torch.device) -> Tensor | None:
        if not self.spec.lang_onehot:
            return None
        dtype = next(self.parameters()).dtype
        return F.one_hot(ids, len(self.languages)).to(device=device, dtype=dtype)

    # ---- encoder ---------------------------------------------------------------------------
    def init_state(self, batch: int) -> EncoderState | TransformerState:
        return self.encoder.init_state(batch)

    def encode(self, x: Tensor, x_lens: Tensor, language: Language = None) -> tuple[Tensor, Tensor]:
        """x (B,T,F), x_lens (B,) -> enc (B,T',D), enc_lens (B,)."""
        cond = self.language_onehot(self.language_ids(language, x.shape[0]), x.device)
        return self.encoder(x, x_lens, cond)

    def streaming_encode(self, x: Tensor, x_lens: Tensor, state: EncoderState | TransformerState,
                         language: Language = None) -> tuple[Tensor, Tensor, EncoderState | TransformerState]:
        """Next chunk: x (B,T,F), x_lens (B,) -> enc (B,T',D), enc_lens (B,), new state."""
        cond = self.language_onehot(self.language_ids(language, x.shape[0]), x.device)
        return self.encoder.streaming_forward(x, x_lens, state, cond)

    def lid_logits(self, enc: Tensor) -> Tensor:
        """enc (B,T,D) -> per-frame language logits (B,T,L) (Section 4.2)."""
        if self.lid_head is None:
            raise ConfigError(f"the {self.variant} model has no LID head; use multisoftmax_lid")
        return self.lid_head(enc)

    def ctc_logits(self, enc: Tensor, language: Language = None) -> Tensor:
        """enc (B,T,D) -> (B,T,V) logits of the joint network with the prediction network's
        input left out: ``out_l(tanh(W_e enc))``. The auxiliary CTC loss of
        :class:`speechlab.asr.rnnt.task.TaskConfig` trains the encoder through it; it adds no
        parameters, so the model (and Table 6) is the same with or without it."""
        return self.joiner.outputs[self.route(language).head](torch.tanh(self.joiner.project_encoder(enc)))

    # ---- training --------------------------------------------------------------------------
    def forward(self, x: Tensor, x_lens: Tensor, targets: Tensor, target_lens: Tensor,
                language: Language = None, compute_logits: bool = True,
                ctc: bool = False) -> RNNTOutput:
        """One batch: x (B,T,F) features, x_lens (B,), targets (B,U) label ids (local ids of
        ``language`` in mono/multi-softmax models, union ids in vanilla/onehot), target_lens
        (B,). ``compute_logits=False`` leaves the (B,T',U+1,V) joint logits to the loss
        (the fused loss computes them in chunks); ``ctc`` adds :meth:`ctc_logits`."""
        route = self.route(language)
        ids = self.language_ids(language, x.shape[0])
        targets = self._checked_targets(targets, target_lens, route, language)
        cond = self.language_onehot(ids, x.device)
        enc, enc_lens = self.encoder(x, x_lens, cond)
        pred = self.predictor(targets, route.table, route.net, cond)
        joint: Callable[[Tensor, Tensor], Tensor] = functools.partial(self.joiner, head=route.head)
        return RNNTOutput(
            enc=enc, enc_lens=enc_lens, pred=pred, joint=joint, vocab_size=route.vocab_size,
            language_ids=ids, logits=joint(enc, pred) if compute_logits else None,
            lid_logits=self.lid_head(enc) if self.lid_head is not None else None,
            ctc_logits=self.ctc_logits(enc, language) if ctc else None)

    def _checked_targets(self, targets: Tensor, target_lens: Tensor, route: Route, language: Language) -> Tensor:
        """Targets with padding set to blank (any pad value, e.g. -1, is then safe to embed)."""
        if targets.dim() != 2 or target_lens.shape != (targets.shape[0],):
            raise DataError(f"targets must be (B, U) with lengths (B,), got {tuple(targets.shape)} "
                            f"and {tuple(target_lens.shape)}")
        mask = lengths_to_mask(target_lens, targets.shape[1], device=targets.device)
        real = targets[mask]
        if real.numel() and (int(real.min()) < 1 or int(real.max()) >= route.vocab_size):
            bad = real[(real < 1) | (real >= route.vocab_size)][0].item()
            raise DataError(f"label id {bad} is outside 1..{route.vocab_size - 1} of the "
                            f"{self.variant} model for language {language!r} (0 is blank)")
        return targets.long().masked_fill(~mask, self.blank)


def lid_ce_loss(lid_logits: Tensor, enc_lens: Tensor, language_ids: Tensor,
                reduction: Literal["utterance", "frame"] = "frame") -> Tensor:
    """Frame-level LID cross-entropy (Section 4.2), padding frames left out.

    lid_logits (B,T,L), enc_lens (B,), language_ids (B,): every frame of row b is labelled with
    its utterance's language. Added to the RNN-T loss, it trains the encoder and the LID head
    only (nothing else is upstream of ``lid_logits``).

    ``reduction="frame"`` averages over all real frames (the usual frame-level CE). It is about
    T times smaller (T = encoder frames per utterance) than the per-utterance RNN-T loss it is
    added to; ``"utterance"`` sums each utterance's frames and averages over the batch, a
    per-sequence negative log-likelihood on the RNN-T loss's scale, which pulls the shared
    encoder that much harder towards separating languages.
    """
    B, T, L = lid_logits.shape
    mask = lengths_to_mask(enc_lens, T, device=lid_logits.device)
    labels = language_ids.to(lid_logits.device)[:, None].expand(B, T)
    ce = F.cross_entropy(lid_logits.reshape(B * T, L), labels.reshape(B * T), reduction="none")
    total = (ce * mask.reshape(-1)).sum()
    if reduction == "utterance":
        return total / B
    if reduction == "frame":
        return total / mask.sum().clamp(min=1)
    raise ValueError(f"unknown LID loss reduction {reduction!r}: 'utterance' or 'frame'")


def build_encoder(dims: ModelDims, cond_dim: int = 0) -> LSTMEncoder | ConvTransformerEncoder:
    """The encoder ``dims.encoder`` names (see :class:`ModelDims`)."""
    if dims.encoder == "transformer":
        return ConvTransformerEncoder(dims.feature_dim, dims.encoder_dim, dims.encoder_layers,
                                      dims.heads, dims.ffn_dim, dims.conv_channels,
                                      cond_dim=cond_dim, dropout=dims.dropout)
    return LSTMEncoder(dims.feature_dim, dims.stack, dims.stride, dims.encoder_dim,
                       dims.encoder_layers, cond_dim=cond_dim, dropout=dims.dropout)


def build_lid_head(dims: ModelDims, languages: int) -> nn.Module:
    """Per-frame language classifier on the encoder output: linear, or with a hidden layer of
    ``dims.lid_dim`` LID-only parameters."""
    if dims.lid_dim == 0:
        return nn.Linear(dims.encoder_dim, languages)
    return nn.Sequential(nn.Linear(dims.encoder_dim, dims.lid_dim), nn.ReLU(),
                         nn.Linear(dims.lid_dim, languages))


def build_from_config(cfg: RNNTConfig) -> RNNT:
    """Build the model described by ``cfg`` (see :func:`build`)."""
    spec = VARIANTS.get(cfg.variant)
    if spec is None:
        raise ConfigError(f"unknown RNN-T variant {cfg.variant!r}; choose one of {list(VARIANTS)}")
    dims: ModelDims = cfg.dims if cfg.dims is not None else get_preset(cfg.preset)
    languages = list(cfg.vocab_sizes)
    sizes = [int(v) for v in cfg.vocab_sizes.values()]
    if not languages:
        raise ConfigError("vocab_sizes is empty: give each language's vocabulary size (with blank)")
    if spec.single_language and len(languages) != 1:
        raise ConfigError(f"the mono variant takes exactly one language, got {languages}")
    for lang, v in zip(languages, sizes):
        if v < 2:
            raise ConfigError(f"vocabulary of {lang!r} has {v} symbols; it needs blank + at least one")
    L = len(languages)
    union = UnionMap(tuple(languages), tuple(sizes))

    # One softmax per language in the multi-softmax family, otherwise one over all symbols
    # (the union for the pooled models, the language's own for mono).
    softmaxes = sizes if spec.lang_output else [union.size]
    routes = {
        lang: Route(table=i if spec.lang_output else 0,
                    net=i if spec.lang_predictor else 0,
                    head=i if spec.lang_output else 0,
                    vocab_size=softmaxes[i if spec.lang_output else 0])
        for i, lang in enumerate(languages)
    }
    cond_dim = L if spec.lang_onehot else 0
    encoder = build_encoder(dims, cond_dim)
    predictor = Predictor(softmaxes, dims.embed_dim, dims.predictor_dim, dims.predictor_layers,
                          num_networks=L if spec.lang_predictor else 1, cond_dim=cond_dim,
                          dropout=dims.dropout)
    joiner = Joiner(dims.encoder_dim, dims.predictor_dim, dims.joint_dim, softmaxes)
    lid_head = build_lid_head(dims, L) if spec.lid_head else None
    model = RNNT(encoder, predictor, joiner, variant=cfg.variant, languages=languages,
                 vocab_sizes=sizes, routes=routes, lid_head=lid_head)
    model.config = cfg
    model.dims = dims
    return model


def build(variant: str, vocab_sizes: dict[str, int], preset: str | ModelDims = "paper") -> RNNT:
    """The RNN-T of ``variant`` for ``vocab_sizes`` (language -> size incl. blank, in id order).

    ``preset`` names a :data:`presets.PRESETS` entry or is a :class:`ModelDims`.
    """
    if isinstance(preset, ModelDims):
        cfg = RNNTConfig(variant=variant, vocab_sizes=dict(vocab_sizes), preset="custom", dims=preset)
    else:
        cfg = RNNTConfig(variant=variant, vocab_sizes=dict(vocab_sizes), preset=preset)
    return build_from_config(cfg)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def parameter_table(preset: str | ModelDims = "paper",
                    vocab_sizes: dict[str, int] | None = None) -> list[dict[str, object]]:
    """Parameter counts of the six variants next to Table 6 of the paper.

    Built on the meta device, so no memory is allocated. The mono model is the first language's
    (En-IN in the paper). Rows: variant, params (int), params_m, paper_m, rel_diff.
    """
    vocab_sizes = dict(PAPER_VOCAB_SIZES if vocab_sizes is None else vocab_sizes)
    first = next(iter(vocab_sizes))
    rows = []
    for variant, spec in VARIANTS.items():
        sizes = {first: vocab_sizes[first]} if spec.single_language else vocab_sizes
        with torch.device("meta"):
            n = count_parameters(build(variant, sizes, preset))
        paper = PAPER_TABLE6[variant]
        rows.append({"variant": variant, "params": n, "params_m": n / 1e6, "paper_m": paper,
                     "rel_diff": n / 1e6 / paper - 1.0})
    return rows


def format_parameter_table(rows: list[dict[str, object]]) -> str:
    """Plain-text Table 6: ours vs the paper's, in millions."""
    lines = [f"{'variant':<18}{'ours (M)':>10}{'paper (M)':>11}{'diff':>9}"]
    for r in rows:
        lines.append(f"{r['variant']:<18}{r['params_m']:>10.2f}{r['paper_m']:>11.2f}"
                     f"{100 * r['rel_diff']:>8.2f}%")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The family: rebuilding a trained model from its checkpoint's card

FAMILY = "rnnt"
#: family name -> builder from the config dict, for :func:`speechlab.train.card.load_trained`.
BUILDERS = {FAMILY: config_builder(RNNTConfig, build_from_config)}


def load(path: str | Path) -> RNNT:
    """The RNN-T trained in ``path`` (a model directory or a checkpoint), in eval mode."""
    return load_trained(path, BUILDERS)  # type: ignore[return-value]


def text_of(model: RNNT, tokens: Sequence[int], language: str | None,
            tokenizers: Mapping[str, GraphemeTokenizer]) -> str:
    """Label ids -> words: union ids for pooled models, local ids of ``language`` otherwise."""
    if model.spec.union_vocab:
        syms = []
        for t in tokens:
            lang, j = model.union.to_local(int(t))
            if lang is not None:
                syms.append(tokenizers[lang].symbols[j])
        return join_symbols(syms)
    return tokenizers[language].decode(tokens)
