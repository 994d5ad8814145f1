"""Masks over padded batches: the one place that turns lengths into a validity mask.

Every padded tensor in speechlab travels with its lengths (``x (B, T, ...)``, ``x_lens (B,)``);
code that must ignore padding asks :func:`lengths_to_mask` instead of writing the comparison
again, and code that takes lengths from a caller checks them with :func:`checked_lengths`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from speechlab.errors import DataError


def lengths_to_mask(lengths: Tensor, max_len: int | None = None, *, inclusive: bool = False,
                    device: torch.device | None = None) -> Tensor:
    """``(B,)`` lengths -> ``(B, max_len)`` bool mask, True on valid positions.

    ``max_len`` defaults to the largest length. ``inclusive`` marks positions ``0..length``
    (``length + 1`` of them), e.g. the U+1 prediction-network outputs of U labels. The mask is
    on ``device`` if given, else on the device of ``lengths``.
    """
    lengths = torch.as_tensor(lengths)
    device = lengths.device if device is None else device
    lengths = lengths.to(device)
    if max_len is None:
        max_len = int(lengths.max()) + int(inclusive) if lengths.numel() else 0
    positions = torch.arange(max_len, device=device)[None, :]
    return positions <= lengths[:, None] if inclusive else positions < lengths[:, None]


def checked_lengths(lengths: object, batch: int, least: int, most: int, *, owner: str,
                    name: str, item: str, span: str, hint: str = "") -> np.ndarray:
    """``(B,)`` lengths -> int64 numpy ``(B,)``, checked against the padded tensor they go with.

    They must be ``batch`` integers, each in ``least..most``. The DataError starts with
    ``owner`` (who checks: "rnnt loss"), names the argument ``name``, the first bad ``item``
    ("utterance", "batch index") and its value, and says what bounds it (``span``: "T of the
    padded input"); ``hint`` is added to an out-of-range error, e.g. what to do about it.
    """
    t = torch.as_tensor(lengths)
    if t.shape != (batch,) or t.is_floating_point() or t.is_complex():
        raise DataError(f"{owner}: {name} must be ({batch},) integers, got shape "
                        f"{tuple(t.shape)} dtype {t.dtype}")
    n = t.detach().cpu().to(torch.int64).numpy()
    bad = np.flatnonzero((n < least) | (n > most))
    if bad.size:
        b = int(bad[0])
        raise DataError(f"{owner}: {item} {b}: {name}[{b}] = {n[b]} is outside {least}..{most} "
                        f"({span}){hint}")
    return n
