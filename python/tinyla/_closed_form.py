"""n <= 2 as element-wise XLA code: the closed forms of tinyla's kernels (src/kernels/lu.hpp),
written with jnp so that XLA fuses them with their neighbours into one pass (a custom call
cannot fuse), on every backend.

Same numerics as the kernels:
- each row of a 2x2 matrix is scaled by a power of two (exact) so that its largest component
  is in [0.5, 4): no product over- or underflows, and logabsdet is finite wherever the
  determinant is nonzero and the entries finite, even for entries near 1e+-300;
- ad - bc is a difference of *exact* products (Dekker's error-free product: each factor split
  into halves whose products are exact), so it is accurate to a few ulps under cancellation
  and exactly 0 exactly when ad == bc;
- singular: sign 0, logabsdet -inf, inverse and solution NaN-filled; NaN in, NaN out.
Dekker's split rather than an fma: jax has no fma op. The half products are exact whether or
not a compiler contracts them into fmas; a compiler that contracted the rounded product fl(a d)
into the following subtraction would lose the compensation (back to about an ulp of |ad|).
Verified on XLA's CPU backend (tests: exact rational references); not yet on a GPU.

Every function returns what the matching custom call returns (a tuple of arrays).
"""
from __future__ import annotations

import functools

import numpy as np

import jax.numpy as jnp
from jax import lax


def _real_dtype(dt) -> np.dtype:
    return np.finfo(dt).dtype


def _max_component(x):
    """max(|re|, |im|) for complex x, |x| for real (what the pivot search compares)."""
    if jnp.iscomplexobj(x):
        return jnp.maximum(jnp.abs(jnp.real(x)), jnp.abs(jnp.imag(x)))
    return jnp.abs(x)


def _range_scale(m):
    """Powers of two r (and log2 r, as reals) with m r in [0.5, 1) for m >= 0 (in [0.5, 4) for
    m >= 2^1021 in float64, whose reciprocal power is subnormal); 0, inf and NaN get a normal r.
    Integer operations on the exponent field only: cheap, and exact."""
    real = m.dtype
    info = np.finfo(real)
    itype = np.int64 if real.itemsize == 8 else np.int32
    bias = info.maxexp - 1
    biased = lax.shift_right_logical(lax.bitcast_convert_type(m, itype), itype(info.nmant)) & itype(2 * bias + 1)
    r_biased = jnp.clip(itype(2 * bias - 1) - biased, itype(1), itype(2 * bias))
    r = lax.bitcast_convert_type(lax.shift_left(r_biased, itype(info.nmant)), real)
    return r, (r_biased - itype(bias)).astype(real)


def _two_product(x, y):
    """(p, e) with p = fl(x y) and x y = p + e exactly, for |x|, |y| <= 4 (Dekker)."""
    info = np.finfo(x.dtype)
    splitter = np.asarray(2.0 ** ((info.nmant + 2) // 2) + 1, x.dtype)

    def split(v):
        t = splitter * v
        hi = t - (t - v)
        return hi, v - hi

    (xh, xl), (yh, yl) = split(x), split(y)
    p = x * y
    return p, ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def _diff_of_products(x, y, u, v):
    """x y - u v to a few ulps under cancellation, exactly 0 when x y == u v; entries <= 4."""
    if jnp.iscomplexobj(x):
        # pairs of real products that cancel exactly when the rows are proportional
        re = (_diff_of_products(x.real, y.real, u.real, v.real)
              - _diff_of_products(x.imag, y.imag, u.imag, v.imag))
        im = (_diff_of_products(x.real, y.imag, u.imag, v.real)
              + _diff_of_products(x.imag, y.real, u.real, v.imag))
        return lax.complex(re, im)
    p, ep = _two_product(x, y)
    w, ew = _two_product(u, v)
    # an infinite product has no error term (the split would make it NaN): inf propagates
    return (p - w) + jnp.where(jnp.isfinite(p) & jnp.isfinite(w), ep - ew, jnp.zeros_like(p))


def unit(z):
    """Sign (real) or phase z / |z| (complex, computed on z scaled into range); 0 for 0."""
    if not jnp.iscomplexobj(z):
        return jnp.sign(z)
    zs = _mul_real(z, _range_scale(_max_component(z))[0])
    return jnp.where(z == 0, jnp.zeros_like(z), zs / jnp.abs(zs).astype(z.dtype))


def _mul_real(x, r):
    """x times the real r; for complex x part by part (a complex product would make inf * 0)."""
    if jnp.iscomplexobj(x):
        return lax.complex(jnp.real(x) * r, jnp.imag(x) * r)
    return x * r


def _nan_where(singular, x):
    return jnp.where(singular, jnp.full_like(x, np.nan), x)


_LN2 = np.log(2.0)


def _assemble(entries):
    """(..., 2, 2) from [[x00, x01], [x10, x11]] as a sum of zero-padded planes: XLA's CPU
    fusion computes each output element from its own plane only (a stack would select)."""
    out = 0
    for i, row in enumerate(entries):
        for j, x in enumerate(row):
            out = out + jnp.pad(x[..., None, None], [(0, 0)] * x.ndim + [(i, 1 - i), (j, 1 - j)])
    return out


class _Scaled:
    """A stack of 1x1 or 2x2 matrices with each row scaled by a power of two into range:
    A = diag(1/r) A'. det' = det(A') = det(A) r0 r1; logabsdet = log|det'| - log r0 - log r1."""

    def __init__(self, a):
        n = a.shape[-1]
        rows = [[a[..., i, j] for j in range(n)] for i in range(n)]
        scales = [_range_scale(functools.reduce(jnp.maximum, map(_max_component, row))) for row in rows]
        self.r = [r for r, _ in scales]
        self.log2r = sum(log2r for _, log2r in scales)
        self.m = [[_mul_real(x, r) for x in row] for row, r in zip(rows, self.r)]  # A', by entry
        if n == 1:
            self.det = self.m[0][0]
        else:
            (a_, b_), (c_, d_) = self.m
            self.det = _diff_of_products(a_, d_, b_, c_)

    def logabsdet(self):
        return jnp.log(jnp.abs(self.det)) - self.log2r * np.asarray(_LN2, self.log2r.dtype)

    def inverse_t(self):
        """A^-T = diag(r) adj(A')^T / det', NaN-filled where singular: x[i][j] = (A^-T)_ij.
        One reciprocal, NaN where det' == 0, then multiplies (XLA's CPU fusion recomputes a
        shared subexpression for every use inside a plane, so each is used once)."""
        q = 1 / jnp.where(self.det == 0, jnp.full_like(self.det, np.nan), self.det)
        if len(self.m) == 1:
            return [[_mul_real(q, self.r[0])]]
        (a_, b_), (c_, d_) = self.m
        q0, q1 = (_mul_real(q, r) for r in self.r)
        return [[d_ * q0, -c_ * q0], [-b_ * q1, a_ * q1]]


def _slogdet(a):
    if a.shape[-1] == 0:
        batch = a.shape[:-2]
        return jnp.ones(batch, a.dtype), jnp.zeros(batch, _real_dtype(a.dtype))
    q = _Scaled(a)
    return unit(q.det), q.logabsdet()


def _det(a):
    if a.shape[-1] == 0:
        return (jnp.ones(a.shape[:-2], a.dtype),)
    q = _Scaled(a)
    det = q.det
    for r in q.r:
        det = _mul_real(det, 1 / r)  # exact unless the determinant is out of range: 1/r is a power of two
    return (det,)


def _inv(a, transposed: bool):
    if a.shape[-1] == 0:
        return (a,)
    x = _Scaled(a).inverse_t()
    if not transposed:
        x = [list(col) for col in zip(*x)]
    return (x[0][0][..., None, None] if a.shape[-1] == 1 else _assemble(x),)


def _solve(a, b):
    n = a.shape[-1]
    if n == 0:
        return (b,)
    q = _Scaled(a)
    rows = [_mul_real(b[..., i, :], r[..., None]) for i, r in enumerate(q.r)]  # A' x = diag(r) b
    # each right-hand side scaled into range too, so that its products cannot overflow
    rb = _range_scale(functools.reduce(jnp.maximum, map(_max_component, rows)))[0]
    rows = [_mul_real(row, rb) for row in rows]
    det = q.det[..., None]
    if n == 1:
        x = [rows[0] / det]
    else:
        (a_, b_), (c_, d_) = [[v[..., None] for v in row] for row in q.m]
        x = [_diff_of_products(d_, rows[0], b_, rows[1]) / det, _diff_of_products(a_, rows[1], c_, rows[0]) / det]
    x = jnp.stack([_nan_where(det == 0, _mul_real(v, 1 / rb)) for v in x], -2)
    return (x,)


def call(op: str, *args):
    """The closed-form equivalent of the custom call `op` (n = a.shape[-1] <= 2)."""
    a = args[0]
    if op == "slogdet":
        return _slogdet(a)
    if op == "det":
        return _det(a)
    if op in ("inv", "inv_transposed"):
        return _inv(a, op == "inv_transposed")
    if op == "solve":
        return _solve(a, args[1])
    if op in ("slogdet_inv", "slogdet_inv_transposed"):
        return (*_slogdet(a), *_inv(a, op == "slogdet_inv_transposed"))
    raise ValueError(f"no closed form for {op}")
