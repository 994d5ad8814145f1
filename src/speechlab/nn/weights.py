"""Weights into a model, checked: the one loader for exported packages and for checkpoints of
other toolkits (Hugging Face, fairseq), and the check of a single tensor that the trainer's
checkpoint loader shares.

A tensor with no place in the model, a shape that differs, integer "weights" where the model
has floating point, NaN or inf values, a tensor the model needs that is missing: each is one
error naming the source and the tensor, before the model is touched.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from speechlab.errors import DataError, SpeechlabError


def check_weight(key: str, value: torch.Tensor, expected: torch.Tensor, source: object) -> None:
    """SpeechlabError naming ``source`` and ``key`` unless ``value`` can stand for the model's
    tensor ``expected``: of a floating-point type where that is (integer "weights" are not a
    model's) and finite (NaN or inf weights make every output NaN: a model whose training
    diverged, or a corrupt file, would give noise or silence without a word)."""
    if not expected.is_floating_point():
        return
    if not (value.is_floating_point() or value.is_complex()):
        raise SpeechlabError(f"{source}: weight {key!r} is of type {value.dtype}, not floating "
                             "point: not a model's weights (a corrupt or foreign file)")
    bad = int((~torch.isfinite(value)).sum())
    if bad:
        raise SpeechlabError(f"{source}: weight {key!r} holds {bad} non-finite value(s) (NaN "
                             "or inf): the training diverged or the file is corrupt; use an "
                             "earlier checkpoint or retrain")


def load_weights(model: nn.Module, weights: Mapping[str, torch.Tensor], source: object, *,
                 optional: tuple[str, ...] = (), hint: str = "") -> nn.Module:
    """``weights`` into ``model`` (put in eval mode), every tensor checked first: it has a
    place in the model, the model's shape, and a usable type and values (:func:`check_weight`);
    every model tensor is given unless its name starts with one of ``optional`` (those keep
    their initial values). Tensors are cast to the model's dtype. ``hint`` ends each error
    (what to do about it)."""
    own = model.state_dict()
    extra = sorted(set(weights) - set(own))
    if extra:
        raise DataError(f"{source}: {len(extra)} tensor(s) have no place in the model, e.g. "
                        f"{extra[:3]}{hint}")
    for key, value in weights.items():
        if tuple(value.shape) != tuple(own[key].shape):
            raise DataError(f"{source}: tensor {key!r} has shape {tuple(value.shape)}, the model "
                            f"expects {tuple(own[key].shape)}{hint}")
        check_weight(key, value, own[key], source)
    missing = [k for k in own if k not in weights and not k.startswith(optional)]
    if missing:
        raise DataError(f"{source}: {len(missing)} tensor(s) missing, e.g. {missing[:3]}{hint}")
    model.load_state_dict({**own, **{k: v.to(own[k].dtype) for k, v in weights.items()}})
    return model.eval()
