"""Pretrained wav2vec 2.0 checkpoints from local disk: Hugging Face directories, fairseq files,
and speechlab's own checkpoints, all into :class:`~speechlab.ssl.wav2vec2.model.Wav2Vec2` (or
:class:`~speechlab.ssl.wav2vec2.model.Wav2Vec2CTC` when the checkpoint has a CTC head).

- **Hugging Face** (``transformers``' ``Wav2Vec2Model`` / ``ForPreTraining`` / ``ForCTC``
  ``save_pretrained`` output): ``config.json`` gives the sizes, ``model.safetensors`` (or
  ``pytorch_model.bin``, read with ``weights_only=True``) the weights.
- **fairseq** (``wav2vec_small.pt`` and the like): the sizes are read off the tensor shapes; the
  pickle is read by a restricted unpickler (:class:`_InertUnpickler`) that rebuilds tensors and
  plain containers only. Any other global the file names (fairseq's config classes, argparse
  namespaces, or a planted ``os.system``) becomes an inert placeholder that records its
  arguments and never runs code, so an untrusted file cannot execute anything when loaded.
  Files that ``torch.load(weights_only=True)`` can read are read that way first.
- **speechlab** checkpoints and run directories (``models/<name>``): their ``ModelCard``.

Every tensor is checked against the model's shape, and a mismatch names both keys.
"""

from __future__ import annotations

import json
import logging
import pickle
import re
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from speechlab.errors import DataError
from speechlab.files import read_json
from speechlab.nn.weights import load_weights as checked
from speechlab.ssl.wav2vec2.config import Wav2Vec2Config
from speechlab.ssl.wav2vec2.model import BUILDERS, CtcConfig, build_ctc, build_from_config

log = logging.getLogger(__name__)

# Parameters a checkpoint without pre-training heads (a plain encoder) may lack.
OPTIONAL = ("quantizer.", "project_q.", "final_proj.", "mask_embedding")


# ---------------------------------------------------------------------------------------------
# Key maps: checkpoint key -> speechlab key (None: not a parameter of ours)


#: Each of our parameters and its keys in a Hugging Face and in a fairseq checkpoint (regular
#: expressions; ours may use their group, the layer index). One row per parameter: a name
#: changed on our side changes for both formats.
_CONV = r"^feature_extractor\.conv_layers\.(\d+)\."  # feature-encoder layer N, in both
_BLOCK = r"^encoder\.layers\.(\d+)\."  # Transformer block N, in both
_HF_POS, _FAIRSEQ_POS = r"^encoder\.pos_conv_embed\.conv\.", r"^encoder\.pos_conv\.0\."
_WEIGHT_G = r"(weight_g|parametrizations\.weight\.original0)$"  # torch's old and new names
_WEIGHT_V = r"(weight_v|parametrizations\.weight\.original1)$"
_KEY_MAP = (
    (r"feature_encoder.layers.\1.conv.", _CONV + r"conv\.", _CONV + r"0\."),
    (r"feature_encoder.layers.\1.norm.", _CONV + r"layer_norm\.", _CONV + r"2\.(1\.)?"),
    ("feature_norm.", r"^feature_projection\.layer_norm\.", r"^layer_norm\."),
    ("projection.", r"^feature_projection\.projection\.", r"^post_extract_proj\."),
    ("mask_embedding", r"^masked_spec_embed$", r"^mask_emb$"),
    ("transformer.pos_conv.weight_g", _HF_POS + _WEIGHT_G, _FAIRSEQ_POS + _WEIGHT_G),
    ("transformer.pos_conv.weight_v", _HF_POS + _WEIGHT_V, _FAIRSEQ_POS + _WEIGHT_V),
    ("transformer.pos_conv.bias", _HF_POS + "bias$", _FAIRSEQ_POS + "bias$"),
    ("transformer.norm.", r"^encoder\.layer_norm\.", r"^encoder\.layer_norm\."),
    (r"transformer.blocks.\1.attention.", _BLOCK + r"attention\.", _BLOCK + r"self_attn\."),
    (r"transformer.blocks.\1.attention_norm.", _BLOCK + r"layer_norm\.",
     _BLOCK + r"self_attn_layer_norm\."),
    (r"transformer.blocks.\1.final_norm.", _BLOCK + r"final_layer_norm\.",
     _BLOCK + r"final_layer_norm\."),
    (r"transformer.blocks.\1.feed_forward.fc1.", _BLOCK + r"feed_forward\.intermediate_dense\.",
     _BLOCK + r"fc1\."),
    (r"transformer.blocks.\1.feed_forward.fc2.", _BLOCK + r"feed_forward\.output_dense\.",
     _BLOCK + r"fc2\."),
    ("quantizer.codevectors", r"^quantizer\.codevectors$", r"^quantizer\.vars$"),
    ("quantizer.weight_proj.", r"^quantizer\.weight_proj\.", r"^quantizer\.weight_proj\."),
    ("final_proj.", r"^project_hid\.", r"^final_proj\."),
    ("project_q.", r"^project_q\.", r"^project_q\."),
)
_HF_RULES = tuple((re.compile(hf), ours) for ours, hf, _ in _KEY_MAP)
_FAIRSEQ_RULES = tuple((re.compile(fairseq), ours) for ours, _, fairseq in _KEY_MAP)


def _hf_key(key: str) -> str | None:
    key = key.removeprefix("wav2vec2.")
    if key.startswith("lm_head."):
        return "head." + key[len("lm_head."):]
    return _apply(_HF_RULES, key)


def _fairseq_key(key: str) -> str | None:
    if key.startswith("w2v_encoder.proj."):
        return "head." + key[len("w2v_encoder.proj."):]
    return _apply(_FAIRSEQ_RULES, key.removeprefix("w2v_encoder.w2v_model."))


def _apply(rules: tuple[tuple[re.Pattern[str], str], ...], key: str) -> str | None:
    for pattern, repl in rules:
        new, n = pattern.subn(repl, key)
        if n:
            return new
    return None


# ---------------------------------------------------------------------------------------------
# Reading files


def _not_a_checkpoint(path: Path, why: str) -> DataError:
    return DataError(f"{path} is not a wav2vec 2.0 checkpoint ({why}): give a Hugging Face "
                     "model directory (config.json and weights), a fairseq .pt file, or a "
                     "speechlab checkpoint or run directory")


class _Inert:
    """Stands in for an object of a class the restricted unpickler will not import: it keeps
    what the pickle gave it (constructor arguments, state, items) and does nothing else."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __setitem__(self, key: Any, value: Any) -> None:
        self.__dict__.setdefault("items", {})[key] = value

    def append(self, value: Any) -> None:
        self.__dict__.setdefault("values", []).append(value)

    def extend(self, values: Any) -> None:
        for v in values:
            self.append(v)


# Globals a tensor checkpoint legitimately needs; everything else becomes an _Inert class.
_ALLOWED = {
    ("torch._utils", "_rebuild_tensor"), ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"), ("torch._utils", "_rebuild_parameter_with_state"),
    ("torch", "Size"), ("collections", "OrderedDict"), ("builtins", "set"),
    ("builtins", "frozenset"), ("builtins", "complex"), ("_codecs", "encode"),
}


class _InertUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        return type(name, (_Inert,), {"__module__": f"inert.{module}"})


# torch.load's pickle_module: its Unpickler subclasses ours, so storages are read by torch and
# every other global goes through _InertUnpickler.find_class.
_inert_pickle = types.SimpleNamespace(Unpickler=_InertUnpickler, load=None,
                                      __name__="inert_pickle")


def _inert_load(f, **kwargs: Any) -> Any:
    return _InertUnpickler(f, **kwargs).load()


_inert_pickle.load = _inert_load


def _reason(e: BaseException) -> str:
    """The exception's type and the first line of its message (which may be empty)."""
    first = next(iter(str(e).splitlines()), "").strip()
    return f"{type(e).__name__}: {first[:120]}" if first else type(e).__name__


def read_pickled(path: Path) -> Any:
    """A ``torch.save`` file read without running pickled code (module doc)."""
    if path.is_file() and path.stat().st_size == 0:
        raise _not_a_checkpoint(path, "the file is empty")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        pass  # a global outside torch's allow-list: read again, inertly
    except Exception as e:
        raise _not_a_checkpoint(path, _reason(e)) from None
    try:
        return torch.load(path, map_location="cpu", weights_only=False,
                          pickle_module=_inert_pickle)
    except Exception as e:
        raise _not_a_checkpoint(path, _reason(e)) from None


def _plain(obj: Any) -> Any:
    """An inert config object (omegaconf DictConfig, argparse Namespace) as plain values, as
    far as its pickled state shows them."""
    if isinstance(obj, _Inert):
        state = getattr(obj, "state", None)
        if isinstance(state, dict) and "_content" in state:
            return _plain(state["_content"])
        if isinstance(state, dict) and "_val" in state:
            return _plain(state["_val"])
        if isinstance(state, tuple) and state and isinstance(state[-1], dict):
            state = state[-1]
        if isinstance(state, dict):
            return {k: _plain(v) for k, v in state.items()}
        return None
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


# ---------------------------------------------------------------------------------------------
# Configs


def _conv_shape(weights: Mapping[str, Tensor]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    channels, kernels = [], []
    i = 0
    while f"feature_encoder.layers.{i}.conv.weight" in weights:
        w = weights[f"feature_encoder.layers.{i}.conv.weight"]
        channels.append(int(w.shape[0]))
        kernels.append(int(w.shape[2]))
        i += 1
    return tuple(channels), tuple(kernels)


def _fairseq_config(weights: Mapping[str, Tensor], cfg: Mapping[str, Any]) -> Wav2Vec2Config:
    """Sizes from the (renamed) tensor shapes; heads, groups, norm placement and strides from
    the checkpoint's own config where it could be read, else wav2vec 2.0's (64 dims a head)."""
    channels, kernels = _conv_shape(weights)
    if not channels:
        raise DataError("no feature-encoder convolution in the checkpoint")
    strides = tuple(int(s) for s in re.findall(r"\(\s*\d+\s*,\s*\d+\s*,\s*(\d+)\s*\)",
                                               str(cfg.get("conv_feature_layers", ""))))
    if len(strides) != len(channels):
        strides = (5, 2, 2, 2, 2, 2, 2) if len(channels) == 7 else (2,) * len(channels)
    dim = int(weights["projection.weight"].shape[0])
    layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("transformer.blocks."))
    pos = weights["transformer.pos_conv.weight_v"]
    q = weights.get("quantizer.codevectors")
    groups = int(cfg.get("latent_groups", 2))
    return Wav2Vec2Config(
        conv_channels=channels, conv_kernels=kernels, conv_strides=strides,
        conv_bias="feature_encoder.layers.0.conv.bias" in weights,
        feature_norm="layer" if "feature_encoder.layers.1.norm.weight" in weights else "group",
        dim=dim, layers=layers, heads=int(cfg.get("encoder_attention_heads", dim // 64) or 1),
        ffn_dim=int(weights["transformer.blocks.0.feed_forward.fc1.weight"].shape[0]),
        layer_norm_first=bool(cfg.get("layer_norm_first", False)),
        pos_conv_kernel=int(pos.shape[2]), pos_conv_groups=dim // int(pos.shape[1]),
        codebook_groups=groups,
        codebook_entries=int(q.shape[1]) // groups if q is not None else 320,
        codevector_dim=int(q.shape[2]) * groups if q is not None else 256,
        final_dim=int(weights["final_proj.weight"].shape[0]) if "final_proj.weight" in weights
        else 256)


def hf_config(config: Mapping[str, Any]) -> Wav2Vec2Config:
    """A ``transformers`` ``Wav2Vec2Config`` (as its config.json dict) -> ours."""
    def get(key: str, default: Any) -> Any:
        return config.get(key, default)

    return Wav2Vec2Config(
        conv_channels=tuple(get("conv_dim", (512,) * 7)),
        conv_kernels=tuple(get("conv_kernel", (10, 3, 3, 3, 3, 2, 2))),
        conv_strides=tuple(get("conv_stride", (5, 2, 2, 2, 2, 2, 2))),
        conv_bias=bool(get("conv_bias", False)), feature_norm=get("feat_extract_norm", "group"),
        dim=int(get("hidden_size", 768)), layers=int(get("num_hidden_layers", 12)),
        heads=int(get("num_attention_heads", 12)), ffn_dim=int(get("intermediate_size", 3072)),
        layer_norm_first=bool(get("do_stable_layer_norm", False)),
        layer_norm_eps=float(get("layer_norm_eps", 1e-5)),
        pos_conv_kernel=int(get("num_conv_pos_embeddings", 128)),
        pos_conv_groups=int(get("num_conv_pos_embedding_groups", 16)),
        codebook_groups=int(get("num_codevector_groups", 2)),
        codebook_entries=int(get("num_codevectors_per_group", 320)),
        codevector_dim=int(get("codevector_dim", 256)),
        final_dim=int(get("proj_codevector_dim", 256)))


# ---------------------------------------------------------------------------------------------
# Loading


def load_weights(model: nn.Module, weights: Mapping[str, Tensor], source: object,
                 optional: tuple[str, ...] = OPTIONAL) -> None:
    """Copy renamed ``weights`` into ``model`` (:func:`speechlab.nn.weights.load_weights`):
    every shape must match, every model parameter must be given unless it starts with
    ``optional`` (the pre-training heads, also inside a CTC model's ``encoder``)."""
    optional = optional + tuple("encoder." + p for p in optional)
    skipped = [k for k in model.state_dict() if k not in weights]
    checked(model, weights, source, optional=optional,
            hint=": the checkpoint and its config disagree")
    if skipped:
        log.info("%s: no pre-training heads in the checkpoint (%d tensors left at their "
                 "initial values)", source, len(skipped))


def _renamed(state: Mapping[str, Any], key_map: Callable[[str], str | None]) -> dict[str, Tensor]:
    out = {}
    for k, v in state.items():
        new = key_map(k)
        if new is not None and isinstance(v, Tensor):
            out[new] = v
    return out


def _model_for(config: Wav2Vec2Config, weights: Mapping[str, Tensor]
               ) -> tuple[nn.Module, dict[str, Tensor]]:
    """The model the weights fit (with a CTC head if they have one) and the weights under its
    keys."""
    if "head.weight" in weights:
        model = build_ctc(CtcConfig(config, int(weights["head.weight"].shape[0])))
        weights = {("encoder." + k if not k.startswith("head.") else k): v
                   for k, v in weights.items()}
        return model, weights
    return build_from_config(config), dict(weights)


def load_hf(directory: Path) -> nn.Module:
    cfg_path = directory / "config.json"
    try:
        loaded = json.loads(cfg_path.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict):
            raise TypeError(f"it holds a JSON {type(loaded).__name__}, not an object")
        config = hf_config(loaded)
    except (json.JSONDecodeError, TypeError, ValueError) as e:
        raise DataError(f"{cfg_path}: not a Wav2Vec2 config ({_reason(e)})") from None
    if (directory / "model.safetensors").is_file():
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            state = load_file(directory / "model.safetensors")
        except (SafetensorError, OSError) as e:
            raise _not_a_checkpoint(directory / "model.safetensors", str(e)) from None
    elif (directory / "pytorch_model.bin").is_file():
        state = read_pickled(directory / "pytorch_model.bin")
    else:
        raise _not_a_checkpoint(directory, "config.json but no model.safetensors or "
                                "pytorch_model.bin")
    model, weights = _model_for(config, _renamed(state, _hf_key))
    load_weights(model, weights, directory)
    return model.eval()


def load_fairseq(path: Path, ckpt: Mapping[str, Any]) -> nn.Module:
    state = ckpt["model"]
    weights = _renamed(state, _fairseq_key)
    if "projection.weight" not in weights:
        raise _not_a_checkpoint(path, "its 'model' holds no wav2vec 2.0 tensors")
    cfg = _plain(ckpt.get("cfg")) or {}
    model_cfg = cfg.get("model", {}) if isinstance(cfg, dict) else {}
    if isinstance(model_cfg, dict) and isinstance(model_cfg.get("w2v_args"), dict):
        model_cfg = model_cfg["w2v_args"].get("model", model_cfg)  # fine-tuned: the encoder's
    if not model_cfg:
        args = _plain(ckpt.get("args"))
        model_cfg = args if isinstance(args, dict) else {}
    try:
        config = _fairseq_config(weights, model_cfg)
    except (KeyError, ValueError) as e:
        raise _not_a_checkpoint(path, f"cannot read its sizes: {e}") from None
    model, weights = _model_for(config, weights)
    load_weights(model, weights, path)
    return model.eval()


def load_pretrained(path: str | Path) -> nn.Module:
    """A wav2vec 2.0 model (pre-training or CTC) from any checkpoint kind of the module doc,
    in ``eval()`` mode."""
    from speechlab.package import is_package, load_network
    from speechlab.package import read_card as read_package_card
    from speechlab.train.card import best_or_latest, read_card
    from speechlab.train.checkpoint import load_model_weights

    path = Path(path)
    if not path.exists():
        raise DataError(f"{path} does not exist: give a checkpoint file or model directory")
    if path.is_dir():
        if (path / "config.json").is_file():
            return load_hf(path)
        if is_package(path):  # speechlab export
            card = read_package_card(path)
            if card.family not in BUILDERS:
                raise DataError(f"{path}: a package of a {card.family!r} model, not wav2vec 2.0")
            return load_network(path, card, BUILDERS)
        path = best_or_latest(path)  # a speechlab run directory
    ckpt = read_pickled(path)
    if not isinstance(ckpt, dict):
        raise _not_a_checkpoint(path, f"it holds a {type(ckpt).__name__}, not a dict")
    if "format_version" in ckpt and "model_config" in ckpt:
        card = read_card(path)
        if card.family not in ("wav2vec2", "wav2vec2_ctc"):
            raise DataError(f"{path} holds a {card.family!r} model, not wav2vec 2.0")
        model = card.build(BUILDERS, path)
        load_model_weights(model, path)
        return model.eval()
    if isinstance(ckpt.get("model"), dict):
        return load_fairseq(path, ckpt)
    raise _not_a_checkpoint(path, "no 'model' state dict and no speechlab model card")


def wants_normalized(path: str | Path) -> bool:
    """Whether the model at ``path`` reads each recording normalized to zero mean and unit
    variance: a Hugging Face directory's ``do_normalize`` (its preprocessor config; transformers'
    default True), a package's card; speechlab's and fairseq's own models read raw audio."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file():
        pre_path = path / "preprocessor_config.json"
        if not pre_path.is_file():
            return True
        pre = read_json(pre_path, "Hugging Face preprocessor config")
        if not isinstance(pre, dict):
            raise DataError(f"{pre_path}: expected a JSON object")
        if pre.get("sampling_rate", 16000) != 16000:
            raise DataError(f"{pre_path}: sampling_rate {pre.get('sampling_rate')}; speechlab "
                            "reads wav2vec 2.0 models at 16000 Hz")
        return bool(pre.get("do_normalize", True))
    if path.is_dir():
        from speechlab.package import is_package, read_card

        if is_package(path):
            return bool(read_card(path).data.get("normalize", False))
    return False
