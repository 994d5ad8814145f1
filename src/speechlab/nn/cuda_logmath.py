"""Log-semiring arithmetic for the project's CUDA kernels (numba.cuda device functions): the
counterpart of :mod:`speechlab.nn.logmath`'s CPU kernels, for code that numba compiles for a GPU.

Imported only by kernel modules (importing it imports numba's CUDA target). Under numba's
simulator (``NUMBA_ENABLE_CUDASIM=1``) it runs as plain Python.
"""

from __future__ import annotations

import math

from numba import cuda

NEG_INF = -math.inf
POS_INF = math.inf


@cuda.jit(device=True)
def log_add(x, y):
    """log(exp(x) + exp(y)): exact for -inf operands, +inf where either is, NaN stays NaN."""
    if x != x or y != y:
        return math.nan
    if x == NEG_INF:
        return y
    if y == NEG_INF:
        return x
    if x == POS_INF or y == POS_INF:
        return POS_INF
    if x > y:
        return x + math.log1p(math.exp(y - x))
    return y + math.log1p(math.exp(x - y))
