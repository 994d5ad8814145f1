"""wav2vec 2.0 assembled from its parts (Fig. 1 of the local-attention paper): the feature
encoder, the feature projection with span masking, the Transformer, the quantizer and the two
projections the contrastive loss compares; and the fine-tuning model with a CTC head.

:func:`build` makes a pre-training model from a preset or a :class:`Wav2Vec2Config`; the parts
are built by :func:`build_parts` and injected, so a variant (which blocks are local) is a config
value, never another class.

Shapes: B batch, S samples, T frames, C conv channels, D model dim, F final dim, V vocabulary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from speechlab.config import check_fields, ranged
from speechlab.train.card import config_builder, load_trained
from speechlab.nn import lengths_to_mask
from speechlab.nn.dropout import Dropout
from speechlab.ssl.wav2vec2.config import Wav2Vec2Config
from speechlab.ssl.wav2vec2.feature_encoder import FbankEncoder, FeatureEncoder
from speechlab.ssl.wav2vec2.quantizer import GumbelQuantizer
from speechlab.ssl.wav2vec2.transformer import AttentionSink, Block, PositionalConv, Transformer


@dataclass
class PretrainOutput:
    """context (B, T, F): the Transformer's output projected (``final_proj``); targets
    (B, T, F): the quantized latent frames projected (``project_q``); lens (B,);
    perplexity and num_vars of the quantizer; feature_penalty: mean squared conv feature."""

    context: Tensor
    targets: Tensor
    lens: Tensor
    perplexity: Tensor
    num_vars: int
    feature_penalty: Tensor


class Wav2Vec2(nn.Module):
    """The pre-training model. ``forward(wav, wav_lens, mask, tau)`` -> :class:`PretrainOutput`;
    :meth:`encode` is the context network alone (fine-tuning, inspection)."""

    def __init__(self, config: Wav2Vec2Config, *, feature_encoder: FeatureEncoder | FbankEncoder,
                 transformer: Transformer, quantizer: GumbelQuantizer) -> None:
        super().__init__()
        c = config
        self.config = c
        self.feature_encoder = feature_encoder
        self.feature_norm = nn.LayerNorm(c.feature_dim, eps=c.layer_norm_eps)
        self.projection = nn.Linear(c.feature_dim, c.dim)
        self.mask_embedding = nn.Parameter(torch.empty(c.dim).uniform_())
        self.transformer = transformer
        self.quantizer = quantizer
        self.project_q = nn.Linear(c.codevector_dim, c.final_dim)
        self.final_proj = nn.Linear(c.dim, c.final_dim)
        self.feature_dropout = Dropout(c.feature_dropout)
        self.quantizer_dropout = Dropout(c.quantizer_dropout)

    def features(self, wav: Tensor, wav_lens: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """(B, S), (B,) -> conv features (B, T, C), frame lengths (B,)."""
        return self.feature_encoder(wav, wav_lens)

    def encode(self, feats: Tensor, lens: Tensor, mask: Tensor | None = None, *,
               on_attention: AttentionSink | None = None, per_head: bool = False,
               hidden: list[Tensor] | None = None) -> Tensor:
        """Conv features (B, T, C) -> context (B, T, D); ``mask`` (B, T) frames replaced by the
        learned mask embedding (see :meth:`Transformer.forward` for the other arguments)."""
        x = self.feature_dropout(self.projection(self.feature_norm(feats)))
        if mask is not None:
            x = torch.where(mask[:, :, None], self.mask_embedding.to(x.dtype), x)
        return self.transformer(x, lens, on_attention=on_attention, per_head=per_head,
                                hidden=hidden)

    def forward(self, wav: Tensor, wav_lens: Tensor | None, mask: Tensor,
                tau: float = 2.0) -> PretrainOutput:
        feats, lens = self.features(wav, wav_lens)
        penalty = feats.float().pow(2).mean()
        normed = self.feature_norm(feats)
        x = self.feature_dropout(self.projection(normed))
        x = torch.where(mask[:, :, None], self.mask_embedding.to(x.dtype), x)
        context = self.transformer(x, lens)
        valid = lengths_to_mask(lens, feats.shape[1], device=feats.device)
        q = self.quantizer(self.quantizer_dropout(normed), valid, tau)
        return PretrainOutput(self.final_proj(context), self.project_q(q.vectors), lens,
                              q.perplexity, q.num_vars, penalty)


def build_parts(config: Wav2Vec2Config) -> dict[str, nn.Module]:
    c = config
    local = set(c.local_blocks)
    blocks = [Block(c.dim, c.heads, c.ffn_dim, radius=c.radius if i in local else None,
                    chunk=c.local_chunk, layer_norm_first=c.layer_norm_first,
                    eps=c.layer_norm_eps, dropout=c.dropout,
                    attention_dropout=c.attention_dropout,
                    activation_dropout=c.activation_dropout)
              for i in range(1, c.layers + 1)]
    return {
        "feature_encoder": FbankEncoder() if c.front_end == "fbank" else
        FeatureEncoder(c.conv_channels, c.conv_kernels, c.conv_strides, norm=c.feature_norm,
                       bias=c.conv_bias),
        "transformer": Transformer(PositionalConv(c.dim, c.pos_conv_kernel, c.pos_conv_groups),
                                   blocks, dim=c.dim, eps=c.layer_norm_eps,
                                   layer_norm_first=c.layer_norm_first, dropout=c.dropout),
        "quantizer": GumbelQuantizer(c.feature_dim, c.codebook_groups, c.codebook_entries,
                                     c.codevector_dim),
    }


def _init_linear(module: nn.Module, std: float) -> None:
    """BERT-style initialisation of the Transformer's and the projections' linear layers
    (normal, std ``std``: 0.02 as wav2vec 2.0 trains from; zero bias)."""
    if isinstance(module, nn.Linear) and not getattr(module, "_keep_init", False):
        nn.init.normal_(module.weight, 0.0, std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def build_from_config(config: Wav2Vec2Config) -> Wav2Vec2:
    model = Wav2Vec2(config, **build_parts(config))
    model.quantizer.weight_proj._keep_init = True  # its own init (unit normal)
    model.apply(lambda m: _init_linear(m, config.init_std))
    return model


def build(preset: str | Wav2Vec2Config = "base", local_blocks: tuple[int, ...] = (),
          radius: int = 30, **changes) -> Wav2Vec2:
    """The pre-training model of ``preset`` (a name of
    :data:`~speechlab.ssl.wav2vec2.config.PRESETS` or a config) with ``local_blocks``
    (1-based) made local with ``radius``; ``changes`` replace other config fields."""
    from speechlab.ssl.wav2vec2.config import preset as named

    cfg = preset if isinstance(preset, Wav2Vec2Config) else named(preset)
    cfg = dataclasses.replace(cfg, local_blocks=tuple(sorted(set(local_blocks))), radius=radius,
                              **changes)
    return build_from_config(cfg)


@dataclass(frozen=True)
class CtcConfig:
    """A fine-tuned model: the wav2vec 2.0 sizes and a CTC head over ``vocab`` symbols (blank
    0)."""

    model: Wav2Vec2Config = dataclasses.field(default_factory=Wav2Vec2Config)
    vocab: int = ranged(32, ge=2)

    def __post_init__(self) -> None:
        check_fields(self)


class Wav2Vec2CTC(nn.Module):
    """wav2vec 2.0 with a linear CTC head. ``forward(x, x_lens, mask=None,
    freeze_encoder=False)``: x (B, S) waveforms or (B, T, C) conv features (the feature encoder
    is frozen in fine-tuning, so its outputs can be computed once) -> log-probs (B, T, V), lens
    (B,). ``freeze_encoder`` runs everything below the head without gradients (the first
    updates of fine-tuning)."""

    def __init__(self, encoder: Wav2Vec2, vocab: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.dim, vocab)

    @property
    def config(self) -> CtcConfig:
        return CtcConfig(self.encoder.config, self.head.out_features)

    def from_features(self, feats: Tensor, lens: Tensor, mask: Tensor | None = None,
                      **inspect) -> tuple[Tensor, Tensor]:
        context = self.encoder.encode(feats, lens, mask, **inspect)
        return self.head(context).log_softmax(-1), lens

    def forward(self, x: Tensor, x_lens: Tensor | None = None, mask: Tensor | None = None,
                freeze_encoder: bool = False) -> tuple[Tensor, Tensor]:
        if x.dim() == 2:
            feats, lens = self.encoder.features(x, x_lens)
        else:
            feats = x
            lens = x_lens if x_lens is not None else torch.full((x.shape[0],), x.shape[1],
                                                                device=x.device)
        if freeze_encoder:
            with torch.no_grad():
                context = self.encoder.encode(feats, lens, mask)
            return self.head(context).log_softmax(-1), lens
        return self.from_features(feats, lens, mask)


def build_ctc(config: CtcConfig) -> Wav2Vec2CTC:
    return Wav2Vec2CTC(build_from_config(config.model), config.vocab)


# ---------------------------------------------------------------------------------------------
# The families: rebuilding a trained model from its checkpoint's card

FAMILY = "wav2vec2"          # the pre-training model
CTC_FAMILY = "wav2vec2_ctc"  # fine-tuned with CTC
#: family name -> builder from the config dict, for :func:`speechlab.train.card.load_trained`.
BUILDERS = {FAMILY: config_builder(Wav2Vec2Config, build_from_config),
            CTC_FAMILY: config_builder(CtcConfig, build_ctc)}


def load(path: str | Path) -> Wav2Vec2 | Wav2Vec2CTC:
    """The wav2vec 2.0 model trained in ``path`` (a model directory or a checkpoint): the
    pre-training model or the CTC model, whichever its card says."""
    return load_trained(path, BUILDERS)  # type: ignore[return-value]
