"""Log-semiring arithmetic for numba kernels (the RNN-T loss, lattices, prefix search)."""

from __future__ import annotations

import math

import numba
import numpy as np

NEG_INF = -np.inf


@numba.njit(cache=True, inline="always")
def log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)), exact for -inf operands (pruned lattices use -inf cells)."""
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))
