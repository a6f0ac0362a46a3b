"""What tinyla.numpy and tinyla.jax share: the result types, the real dtype of an element
type, and solve's reading of b (numpy 2 and jnp agree: a vector only when b.ndim == 1)."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class SlogdetResult(NamedTuple):
    sign: Any  # np.ndarray from tinyla.numpy, jax.Array from tinyla.jax
    logabsdet: Any


class SlogdetInvResult(NamedTuple):
    sign: Any
    logabsdet: Any
    inverse: Any


def real_dtype(dt) -> np.dtype:
    return np.finfo(dt).dtype  # float32 for complex64, float64 for complex128


def solve_shapes(op: str, a_shape: tuple, b_shape: tuple) -> tuple[bool, tuple]:
    """(vector, batch): whether b is one vector (b.ndim == 1, then solved as (n, 1)), and the
    broadcast batch shape of a (..., n, n) and b (..., n, k). ValueError naming `op` otherwise."""
    n = a_shape[-1]
    vector = len(b_shape) == 1
    bm_shape = (*b_shape, 1) if vector else tuple(b_shape)
    if len(bm_shape) < 2 or bm_shape[-2] != n:
        raise ValueError(f"{op}: a has shape {tuple(a_shape)}, so b must have shape (n,) or (..., n, k) "
                         f"with n = {n}; got b of shape {tuple(b_shape)}")
    try:
        batch = np.broadcast_shapes(tuple(a_shape[:-2]), bm_shape[:-2])
    except ValueError:
        raise ValueError(f"{op}: batch dimensions of a {tuple(a_shape)} and b {tuple(b_shape)} "
                         "do not broadcast") from None
    return vector, batch
