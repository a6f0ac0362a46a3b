"""n <= 2 as element-wise XLA code: the closed forms of tinyla's kernels (src/kernels/lu.hpp),
written with jnp so that XLA fuses them with their neighbours into one pass (a custom call
cannot fuse), on every backend.

Same numerics as the kernels:
- each row of a 2x2 matrix is scaled by a power of two (exact) so that its largest component
  is in [0.5, 4): no product over- or underflows, and logabsdet is finite wherever the
  determinant is nonzero and the entries finite, even for entries near 1e+-300 (a complex 1x1
  too; a real 1x1 needs no scaling);
- ad - bc is a difference of *exact* products (Dekker's error-free product: each factor split
  into halves whose products are exact), so it is accurate to a few ulps under cancellation
  and exactly 0 exactly when ad == bc;
- singular: sign 0, logabsdet -inf, inverse and solution NaN-filled; NaN in, NaN out.
Dekker's scheme rather than an fma: jax has no fma op. Compilers contract a multiply and a
following addition into an fma where they may: LLVM's GPU backends wherever XLA allows it
(which it does), XLA's CPU backend where the product has one use (jit(lambda a, b, x: a*x + b*x)
is fma(a, x, b*x) on jax 0.10's CPU). A rounded product fused into the subtraction that was to
compensate it would lose the compensation (exactly singular matrices then get a nonzero
determinant), so here no rounded product meets an addition: the split is done on the bits and
every product that reaches an addition is exact (tests walk the jaxpr to check it), which
makes the result the same with or without any such fusion. Verified on XLA's CPU backend
(tests: exact rational references); not yet run on a GPU.

Every function returns what the matching custom call returns (a tuple of arrays).
"""
from __future__ import annotations

import functools

import numpy as np

import jax.numpy as jnp
from jax import lax

from tinyla._common import real_dtype


def _float_layout(real):
    """finfo, the integer type of the same width (the exponent arithmetic is done in it:
    conversions between integer widths cost XLA's CPU loops), the bias."""
    info = np.finfo(real)
    return info, (np.int64 if np.dtype(real).itemsize == 8 else np.int32), info.maxexp - 1


def _exponent_field(x):
    """The biased exponent field of max(|re|, |im|) (0 for 0 and subnormals, all ones for inf
    and NaN), from the bits: integer operations only, in the integer type of x's width."""
    if jnp.iscomplexobj(x):
        return jnp.maximum(_exponent_field(jnp.real(x)), _exponent_field(jnp.imag(x)))
    info, itype, bias = _float_layout(x.dtype)
    bits = lax.bitcast_convert_type(x, itype)
    return lax.shift_right_logical(bits, itype(info.nmant)) & itype(2 * bias + 1)


def _pow2(k, real):
    """2^k for integers k, clamped to the normal range."""
    info, itype, bias = _float_layout(real)
    biased = jnp.clip(k + itype(bias), itype(1), itype(2 * bias))
    return lax.bitcast_convert_type(lax.shift_left(biased, itype(info.nmant)), real)


def _times_pow2(x, k):
    """x 2^k for integers k of either sign beyond the exponent range (three factors, each a
    normal power of two; the result over- or underflows only where x 2^k does)."""
    real = real_dtype(x.dtype)
    _, itype, bias = _float_layout(real)
    k = jnp.clip(k, itype(-3 * (bias - 1)), itype(3 * (bias - 1))).astype(np.int32)
    # about a third, and half the rest, by a multiply and shifts in int32 (an integer division
    # is not vectorized by XLA's CPU backend, nor an int64 multiply on AVX2)
    k1 = lax.shift_right_arithmetic(k * np.int32(21845), np.int32(16))
    k2 = lax.shift_right_arithmetic(k - k1, np.int32(1))
    for part in (k1, k2, k - k1 - k2):
        x = _mul_real(x, _pow2(part.astype(itype), real))
    return x


def _log2_range_scale(fields, real, clamp=True):
    """The integer k with 2^k x in [0.5, 1) for the largest x whose exponent fields are given;
    clamped to the normal range (then [0.5, 4) for x >= 2^1021 in float64, whose reciprocal
    power is subnormal; 0, inf and NaN get a normal 2^k)."""
    _, itype, bias = _float_layout(real)
    k = itype(bias - 1) - functools.reduce(jnp.maximum, fields)
    return jnp.clip(k, itype(1 - bias), itype(bias)) if clamp else k


def _split(x):
    """(hi, lo) with x = hi + lo exactly, hi x rounded to its leading 26 bits (float64; 12 for
    float32) by integer operations on its bits, so that lo fits in as many: each product of
    halves is exact. Integer operations, not Veltkamp's multiply by 2^27 + 1, which a compiler
    that contracts multiply-adds into fmas turns into a split with no such property."""
    info, itype, _ = _float_layout(x.dtype)
    low = (info.nmant + 2) // 2  # mantissa bits rounded off: 27 of float64's 52, 12 of float32's 23
    bits = lax.bitcast_convert_type(x, itype)
    hi = lax.bitcast_convert_type((bits + itype(1 << (low - 1))) & itype(~((1 << low) - 1)), x.dtype)
    return hi, x - hi


def _two_product(x, y):
    """(p, e): p within an ulp of x y and x y = p + e exactly, for |x|, |y| <= 4 (no underflow),
    from the exact products of their halves and additions only (Dekker's scheme). No rounded
    product meets an addition, so a compiler that fuses multiplies into the following additions
    (GPU backends do, and XLA's CPU backend where a product has one use) changes no bit: every
    product it could fuse is exact."""
    (xh, xl), (yh, yl) = _split(x), _split(y)
    high, middle, low = xh * yh, xh * yl + xl * yh, xl * yl  # middle: both terms on one grid, exact
    p = high + (middle + low)
    return p, ((high - p) + middle) + low


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
    # An infinite or NaN entry: its halves are NaN, so the plain products' difference, inf
    # propagating as in the kernels (the selects keep those products away from the subtraction).
    plain_p, plain_w = x * y, u * v
    finite = jnp.isfinite(plain_p) & jnp.isfinite(plain_w)
    zero = jnp.zeros_like(p)
    plain = jnp.where(finite, zero, plain_p) - jnp.where(finite, zero, plain_w)
    return jnp.where(finite, (p - w) + (ep - ew), plain)


def unit(z):
    """Sign (real) or phase z / |z| (complex, computed on z scaled into range); 0 for 0."""
    if not jnp.iscomplexobj(z):
        return jnp.sign(z)
    real = real_dtype(z.dtype)
    zs = _mul_real(z, _pow2(_log2_range_scale([_exponent_field(z)], real), real))
    return jnp.where(z == 0, jnp.zeros_like(z), zs / jnp.abs(zs).astype(z.dtype))


def _mul_real(x, r):
    """x times the real r; for complex x part by part (a complex product would make inf * 0)."""
    if jnp.iscomplexobj(x):
        return lax.complex(jnp.real(x) * r, jnp.imag(x) * r)
    return x * r


def _nan_where(singular, x):
    return jnp.where(singular, jnp.full_like(x, np.nan), x)


_LN2 = np.log(2.0)


class _Scaled:
    """A stack of 1x1 or 2x2 matrices equilibrated by powers of two, A' = diag(r) A diag(c): rows
    first, so that each row's largest component is in [0.5, 1), then columns, so that each
    column's is (in [0.5, 4) where that factor would be subnormal: entries >= 2^(emax - 1));
    the exponents are worked out on integers, so no entry is rounded on the way.
    Every row and column of A' then holds a component of at least 1/2, so one of a'd', b'c' is
    at least 1/4 in magnitude: an entry that underflows in A' is negligible beside it (a row
    spanning 1e-300..1e300 keeps its small entry where it matters), and a'd' == b'c' exactly
    when ad == bc. det(A) = det(A') / (prod r prod c); (A^-T)_ij = r_i c_j (A'^-T)_ij."""

    def __init__(self, a):
        n = a.shape[-1]
        self.real = real_dtype(a.dtype)
        # One real entry: its log, reciprocal and quotients are each one rounding, over- or
        # underflowing only where the result does: nothing to equilibrate (at (4096, 64, 1, 1)
        # the scaling took a sixth of slogdet's time). Complex: |z| can overflow, so scaled.
        self.scaled = n > 1 or jnp.iscomplexobj(a)
        if not self.scaled:
            self.det = a[..., 0, 0]
            return
        entries = [[a[..., i, j] for j in range(n)] for i in range(n)]
        fields = [[_exponent_field(x) for x in row] for row in entries]
        self.log2r = [_log2_range_scale(row, self.real) for row in fields]
        # Not clamped above: a column of tiny entries beside huge ones in its rows needs a c
        # beyond the range; r_i c_j (clamped, below) is in range for every entry that is not
        # negligible. Clamped below so that every r_i c_j is normal: a row whose largest entry
        # is >= 2^(emax - 1) is scaled into [1, 4) only (its r_i is the least normal power), and a
        # c_j < 1 beside it would make r_i c_j subnormal, which _pow2 cannot make (nor XLA's
        # CPU keep: it flushes subnormals): A' would then no longer be diag(r) A diag(c), and
        # det(1e308 I) came out 4x too large. Entries of A' stay below 4 either way.
        _, itype, bias = _float_layout(self.real)
        lowest = itype(1 - bias) - functools.reduce(jnp.minimum, self.log2r)
        self.log2c = [jnp.maximum(_log2_range_scale([row[j] + lr for row, lr in zip(fields, self.log2r)], self.real,
                                                    clamp=False), lowest)
                      for j in range(n)]
        self.f = [[_pow2(lr + lc, self.real) for lc in self.log2c] for lr in self.log2r]  # r_i c_j
        self.log2_scale = sum(self.log2r) + sum(self.log2c)
        self.m = [[_mul_real(x, f) for x, f in zip(row, fs)] for row, fs in zip(entries, self.f)]  # A
        if n == 1:
            self.det = self.m[0][0]
        else:
            (a_, b_), (c_, d_) = self.m
            self.det = _diff_of_products(a_, d_, b_, c_)

    def logabsdet(self):
        mag = jnp.abs(self.det)
        if not self.scaled:
            return jnp.log(mag)
        if jnp.iscomplexobj(self.det):  # a NaN part beside an infinite one is NaN, as in the kernels
            mag = jnp.where(jnp.isnan(self.det), jnp.full_like(mag, np.nan), mag)
        return jnp.log(mag) - self.log2_scale.astype(self.real) * np.asarray(_LN2, self.real)

    def determinant(self):
        return _times_pow2(self.det, -self.log2_scale) if self.scaled else self.det

    def inverse_t(self):
        """A^-T, NaN-filled where singular: x[i][j] = (A^-T)_ij. One reciprocal, NaN where
        det' == 0, then multiplies (XLA's CPU fusion recomputes a shared subexpression for
        every use inside a plane, so each is used once)."""
        q = 1 / jnp.where(self.det == 0, jnp.full_like(self.det, np.nan), self.det)
        if not self.scaled:
            return [[q]]
        f = self.f
        if len(self.m) == 1:
            return [[_mul_real(q, f[0][0])]]
        (a_, b_), (c_, d_) = self.m
        return [[d_ * _mul_real(q, f[0][0]), -c_ * _mul_real(q, f[0][1])],
                [-b_ * _mul_real(q, f[1][0]), a_ * _mul_real(q, f[1][1])]]


def cofactors(a):
    """The cofactor matrix adj(A)^T, d det(A) / dA, of n <= 2 matrices: A's own entries."""
    if a.shape[-1] < 2:
        return jnp.ones_like(a)
    (p, q), (r, s) = [[a[..., i, j] for j in range(2)] for i in range(2)]
    return jnp.stack([jnp.stack([s, -r], -1), jnp.stack([-q, p], -1)], -2)


def _slogdet(a):
    if a.shape[-1] == 0:
        batch = a.shape[:-2]
        return jnp.ones(batch, a.dtype), jnp.zeros(batch, real_dtype(a.dtype))
    q = _Scaled(a)
    return unit(q.det), q.logabsdet()


def _det(a):
    if a.shape[-1] == 0:
        return (jnp.ones(a.shape[:-2], a.dtype),)
    return (_Scaled(a).determinant(),)


def _inv(a, transposed: bool):
    if a.shape[-1] == 0:
        return (a,)
    x = _Scaled(a).inverse_t()
    if not transposed:
        x = [list(col) for col in zip(*x)]
    return (jnp.stack([jnp.stack(row, -1) for row in x], -2),)


def _solve(a, b):
    """A x = b as A' y = diag(r) b, x = diag(c) y."""
    n = a.shape[-1]
    if n == 0:
        return (b,)
    q = _Scaled(a)
    if not q.scaled:
        det = q.det[..., None, None]
        return (_nan_where(det == 0, b / det),)
    rows = [_mul_real(b[..., i, :], _pow2(lr, q.real)[..., None]) for i, lr in enumerate(q.log2r)]
    # each right-hand side scaled into range too, so that its products cannot overflow
    log2s = _log2_range_scale([_exponent_field(row) for row in rows], q.real)
    rows = [_mul_real(row, _pow2(log2s, q.real)) for row in rows]
    det = q.det[..., None]
    if n == 1:
        y = [rows[0] / det]
    else:
        (a_, b_), (c_, d_) = [[v[..., None] for v in row] for row in q.m]
        y = [_diff_of_products(d_, rows[0], b_, rows[1]) / det, _diff_of_products(a_, rows[1], c_, rows[0]) / det]
    x = [_nan_where(det == 0, _times_pow2(v, lc[..., None] - log2s)) for v, lc in zip(y, q.log2c)]
    return (jnp.stack(x, -2),)


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
    if op == "det_cofactors":
        return (*_det(a), cofactors(a))
    if op in ("slogdet_inv", "slogdet_inv_transposed"):
        return (*_slogdet(a), *_inv(a, op == "slogdet_inv_transposed"))
    raise ValueError(f"no closed form for {op}")
