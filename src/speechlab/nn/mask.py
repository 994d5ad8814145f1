"""Masks over padded batches: the one place that turns lengths into a validity mask.

Every padded tensor in speechlab travels with its lengths (``x (B, T, ...)``, ``x_lens (B,)``);
code that must ignore padding asks :func:`lengths_to_mask` instead of writing the comparison
again.
"""

from __future__ import annotations

import torch
from torch import Tensor


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
