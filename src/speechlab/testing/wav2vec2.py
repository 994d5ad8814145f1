"""wav2vec 2.0 test helpers: a model's weights under fairseq's key names, written as a fairseq
checkpoint would be."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def fairseq_state(model) -> dict[str, torch.Tensor]:
    """``model``'s (a :class:`~speechlab.ssl.wav2vec2.model.Wav2Vec2` with ``group``
    normalisation) weights under fairseq's wav2vec 2.0 key names."""
    from speechlab.ssl.wav2vec2.checkpoint_import import _fairseq_key

    names = ["feature_extractor.conv_layers.0.2.weight", "feature_extractor.conv_layers.0.2.bias",
             "layer_norm.weight", "layer_norm.bias", "post_extract_proj.weight",
             "post_extract_proj.bias", "mask_emb", "encoder.pos_conv.0.weight_g",
             "encoder.pos_conv.0.weight_v", "encoder.pos_conv.0.bias", "encoder.layer_norm.weight",
             "encoder.layer_norm.bias", "quantizer.vars", "quantizer.weight_proj.weight",
             "quantizer.weight_proj.bias", "project_q.weight", "project_q.bias",
             "final_proj.weight", "final_proj.bias"]
    names += [f"feature_extractor.conv_layers.{i}.0.weight"
              for i in range(len(model.config.conv_channels))]
    for i in range(model.config.layers):
        for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                     "self_attn.out_proj", "self_attn_layer_norm", "fc1", "fc2",
                     "final_layer_norm"):
            names += [f"encoder.layers.{i}.{part}.weight", f"encoder.layers.{i}.{part}.bias"]
    own = model.state_dict()
    return {n: own[_fairseq_key(n)].clone() for n in names}


def fairseq_checkpoint(path: str | Path, preset: str = "ci", seed: int = 0,
                       **extra: Any) -> Path:
    """A fairseq-style checkpoint (``{"model": state, ...extra}``) of a random ``preset``
    model."""
    from speechlab.ssl.wav2vec2 import build

    torch.manual_seed(seed)
    state = fairseq_state(build(preset))
    state.update({k: v for k, v in extra.pop("tensors", {}).items()})
    torch.save({"model": state, **extra}, path)
    return Path(path)
