"""Test inputs and tolerances shared by the numpy and JAX tests."""
import numpy as np

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def random_matrices(shape, dtype, seed=0) -> np.ndarray:
    """Random matrices; square ones are I + G / (2 sqrt(n)) with G standard normal: the
    eigenvalues of G / sqrt(n) lie in the unit disc, so these are well conditioned and
    their determinants stay far from overflow."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1]:
        a = np.eye(shape[-1]) + a / (2 * np.sqrt(shape[-1]))
    return a.astype(dtype)


def assert_close(x, ref, dtype, factor=64.0, scale=None):
    """|x - ref| <= factor * n-independent eps * max(|ref|, scale, 1) elementwise."""
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    bound = factor * eps(dtype) * np.maximum(np.abs(ref) if scale is None else scale, 1.0)
    err = np.abs(x.astype(np.complex128) - ref.astype(np.complex128))
    assert np.all(err <= bound), f"max error {err.max():.3e}, bound {bound.min():.3e}"


class _Exact:
    """A Gaussian rational (re + i im, both fractions.Fraction): exact arithmetic for the
    references of det's derivatives, real and complex."""

    def __init__(self, re, im=0):
        from fractions import Fraction
        self.re, self.im = Fraction(re), Fraction(im)

    def __add__(self, o):
        return _Exact(self.re + o.re, self.im + o.im)

    def __sub__(self, o):
        return _Exact(self.re - o.re, self.im - o.im)

    def __mul__(self, o):
        return _Exact(self.re * o.re - self.im * o.im, self.re * o.im + self.im * o.re)

    def __truediv__(self, o):
        d = o.re * o.re + o.im * o.im
        return _Exact((self.re * o.re + self.im * o.im) / d, (self.im * o.re - self.re * o.im) / d)

    def __bool__(self):
        return bool(self.re) or bool(self.im)

    def __complex__(self):
        return complex(float(self.re), float(self.im))


def _exact_adjugate(m):
    """adj(m) of a matrix of _Exact by Gauss-Jordan on [m | I] (det A^-1); None if singular."""
    n = len(m)
    one, zero = _Exact(1), _Exact(0)
    a = [row[:] + [one if i == j else zero for j in range(n)] for i, row in enumerate(m)]
    det = one
    for k in range(n):
        pivot = next((r for r in range(k, n) if a[r][k]), None)
        if pivot is None:
            return None
        if pivot != k:
            a[k], a[pivot] = a[pivot], a[k]
            det = zero - det
        det = det * a[k][k]
        a[k] = [v / a[k][k] for v in a[k]]
        for r in range(n):
            if r != k and a[r][k]:
                f = a[r][k]
                a[r] = [v - f * w for v, w in zip(a[r], a[k])]
    return [[det * a[i][n + j] for j in range(n)] for i in range(n)]


def exact_adjugate_tangent(a, e) -> np.ndarray:
    """d adj(A)[E] = d/dt adj(A + tE) at t = 0, exactly, for float or complex numpy matrices a, e
    (every float is a rational): adj(A + tE) is a polynomial of degree n - 1 in t, so its
    derivative at 0 is that of its interpolant through n + 1 nodes t where A + tE is
    nonsingular, in rational arithmetic. Rounded once to complex128."""
    n = a.shape[-1]
    A = [[_Exact(complex(v).real, complex(v).imag) for v in row] for row in a]
    E = [[_Exact(complex(v).real, complex(v).imag) for v in row] for row in e]
    nodes, values, t = [], [], 1
    while len(nodes) < n + 1:
        adj = _exact_adjugate([[A[i][j] + _Exact(t) * E[i][j] for j in range(n)] for i in range(n)])
        if adj is not None:
            nodes.append(_Exact(t))
            values.append(adj)
        t += 1
    out = [[_Exact(0)] * n for _ in range(n)]
    for k, tk in enumerate(nodes):  # L_k'(0) = sum_{m != k} 1/(t_k - t_m) prod_{l != k, m} (0 - t_l)/(t_k - t_l)
        weight = _Exact(0)
        for m, tm in enumerate(nodes):
            if m != k:
                term = _Exact(1) / (tk - tm)
                for l, tl in enumerate(nodes):
                    if l not in (k, m):
                        term = term * (_Exact(0) - tl) / (tk - tl)
                weight = weight + term
        out = [[out[i][j] + weight * values[k][i][j] for j in range(n)] for i in range(n)]
    return np.array([[complex(v) for v in row] for row in out])
