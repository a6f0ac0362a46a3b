"""numpy.linalg's contract on tinyla's batched kernels.

    from tinyla import numpy as tla
    sign, logabsdet = tla.slogdet(a)      # a: (..., n, n)

Same names, shapes, dtypes and errors as ``numpy.linalg``:
- stacked ``(..., n, n)`` input; fewer than 2 dimensions or non-square last two
  -> ``LinAlgError`` (numpy's messages);
- dtypes: float32 / complex64 stay single precision, float64 / complex128
  double; bool and integers compute in float64; float16, longdouble and
  non-numeric dtypes (object, str, bytes, datetime64, timedelta64, structured)
  raise ``TypeError``, as numpy does;
- ``inv`` and ``solve`` return the input's array subclass (``np.matrix``,
  ``MaskedArray``: its ``__array_wrap__``; for ``solve``, b's), as numpy does;
- ``inv`` and ``solve`` raise ``LinAlgError("Singular matrix")`` if any matrix in
  the stack has an exactly zero pivot; ``det`` / ``slogdet`` return 0 /
  (0, -inf) there;
- ``solve(a, b)`` follows numpy 2: ``b`` is a vector only when ``b.ndim == 1``,
  otherwise a stack of ``(n, k)`` matrices; batch dimensions broadcast;
- any strides, byte order or alignment are accepted (copied into a native
  C-contiguous array first), never misread.

``slogdet_inv(a)`` -> ``(sign, logabsdet, inverse)`` from one factorization; a
singular matrix gives sign 0, logabsdet -inf and a NaN-filled inverse (no error).
"""
from __future__ import annotations

import math
import numpy as np
from numpy.linalg import LinAlgError

from tinyla import _native
from tinyla._common import SlogdetInvResult, SlogdetResult, real_dtype, solve_shapes

__all__ = ["slogdet", "det", "inv", "solve", "slogdet_inv", "SlogdetResult", "SlogdetInvResult", "LinAlgError"]


def _common_type(*arrays: np.ndarray) -> np.dtype:
    """numpy.linalg's _commonType: the computation (and result) dtype."""
    double = complex_ = False
    for a in arrays:
        t = a.dtype.type  # byte order aside
        if a.dtype.kind in "fc":
            complex_ |= a.dtype.kind == "c"
            if t in (np.float64, np.complex128):
                double = True
            elif t not in (np.float32, np.complex64):
                raise TypeError(f"array type {a.dtype.name} is unsupported in linalg")
        elif a.dtype.kind in "biu":
            double = True
        else:  # numpy.linalg raises a TypeError (UFuncTypeError) for these too
            raise TypeError(f"array type {a.dtype} is unsupported in linalg: only bool, integer, "
                            "float32/64 and complex64/128 arrays")
    if complex_:
        return np.dtype(np.complex128 if double else np.complex64)
    return np.dtype(np.float64 if double else np.float32)


def _wrapper(a):
    """numpy.linalg's _makearray: how a result is returned as a's array subclass."""
    return getattr(a, "__array_wrap__", np.asarray(a).__array_wrap__)


def _square_stack(a) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim < 2:
        raise LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")
    if a.shape[-1] != a.shape[-2]:
        raise LinAlgError("Last 2 dimensions of the array must be square")
    return a


def _native_layout(a: np.ndarray, t: np.dtype) -> np.ndarray:
    """C-contiguous, aligned, native byte order, dtype t (a copy when needed)."""
    return np.require(a, dtype=t, requirements=["C", "A"])


def _prepared(a) -> tuple[np.ndarray, np.dtype]:
    """A checked (..., n, n) stack in the computation dtype and native layout, and that dtype."""
    a = _square_stack(a)
    t = _common_type(a)
    return _native_layout(a, t), t


def _batch(shape: tuple) -> int:
    return math.prod(shape)


def _check_singular(info: np.ndarray) -> None:
    if info.any():
        raise LinAlgError("Singular matrix")


def slogdet(a) -> SlogdetResult:
    """Sign (complex: phase) and natural log of |det| of each matrix of a (..., n, n)."""
    a, t = _prepared(a)
    sign, logabsdet = np.empty(a.shape[:-2], t), np.empty(a.shape[:-2], real_dtype(t))
    _native.call("slogdet", t, _batch(a.shape[:-2]), a.shape[-1], a, sign, logabsdet)
    return SlogdetResult(sign[()], logabsdet[()])


def det(a) -> np.ndarray:
    """Determinant of each matrix of a (..., n, n)."""
    a, t = _prepared(a)
    d = np.empty(a.shape[:-2], t)
    _native.call("det", t, _batch(a.shape[:-2]), a.shape[-1], a, d)
    return d[()]


def inv(a) -> np.ndarray:
    """Inverse of each matrix of a (..., n, n); LinAlgError if any is singular."""
    wrap = _wrapper(a)
    a, t = _prepared(a)
    batch = _batch(a.shape[:-2])
    x = np.empty(a.shape, t)
    if x.size:  # n = 0: nothing is singular (and a huge empty batch needs no info array)
        info = np.zeros(batch, np.int32)
        _native.call("inv", t, batch, a.shape[-1], a, x, info)
        _check_singular(info)
    return wrap(x)


def solve(a, b) -> np.ndarray:
    """x with a @ x = b. a: (..., n, n); b: (n,) or (..., n, k), batch dimensions
    broadcast (numpy 2 rules). LinAlgError if any matrix is singular."""
    wrap = _wrapper(b)
    a = _square_stack(a)
    b = np.asarray(b)
    t = _common_type(a, b)
    n = a.shape[-1]
    vector, batch_shape = solve_shapes("solve", a.shape, b.shape)
    bm = b[:, None] if vector else b
    k = bm.shape[-1]
    a = _native_layout(np.broadcast_to(a, batch_shape + (n, n)), t)
    bm = _native_layout(np.broadcast_to(bm, batch_shape + (n, k)), t)
    batch = _batch(batch_shape)
    x = np.empty(batch_shape + (n, k), t)
    if n:  # n = 0: nothing is singular; k = 0 still factors a (numpy raises for singular a)
        info = np.zeros(batch, np.int32)
        _native.call("solve", t, batch, n, k, a, bm, x, info)
        _check_singular(info)
    return wrap(x[..., 0] if vector else x)


def slogdet_inv(a) -> SlogdetInvResult:
    """slogdet(a) and inv(a) from one factorization. Singular matrices give
    sign 0, logabsdet -inf and a NaN-filled inverse; no error is raised."""
    a, t = _prepared(a)
    sign, logabsdet = np.empty(a.shape[:-2], t), np.empty(a.shape[:-2], real_dtype(t))
    x = np.empty(a.shape, t)
    _native.call("slogdet_inv", t, _batch(a.shape[:-2]), a.shape[-1], a, sign, logabsdet, x)
    return SlogdetInvResult(sign[()], logabsdet[()], x)
