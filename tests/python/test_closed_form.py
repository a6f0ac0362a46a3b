"""n <= 2 in tinyla.jax: element-wise XLA code on GPUs (fusible; no custom call), the kernels
on the CPU at n = 2 -- both with tinyla's numerics: checked against exact rational arithmetic,
each other and jnp. The tests that go through tinyla.jax run twice (the `path` fixture): on
the CPU's kernels and on the closed forms lowered for the CPU (the GPUs' code; conftest.py)."""
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tinyla.jax as tlj
import tinyla.numpy as tln
from tinyla import _closed_form
from helpers import DTYPES, assert_close, random_matrices

OPS = {
    "slogdet": lambda x: tlj.slogdet(x),
    "grad": jax.grad(lambda x: tlj.slogdet(x)[1].sum()),
    "det": tlj.det,
    "inv": tlj.inv,
    "solve": lambda x: tlj.solve(x, x[..., :1] + 1),
    "slogdet_inv": tlj.slogdet_inv,
    "hessian": jax.hessian(lambda x: tlj.slogdet(x)[1].sum()),
}


@pytest.mark.parametrize("platform", ["cpu", "cuda", "rocm"])
@pytest.mark.parametrize("n", [0, 1, 2, 3])
@pytest.mark.parametrize("op", list(OPS))
def test_small_n_lowers_to_closed_forms(platform, n, op):
    """GPUs: n <= 2 is element-wise code, no custom call; the CPU: n = 1 (n = 2 is faster on
    the kernels there). n = 0 has nothing to compute anywhere."""
    x = jnp.ones((3, n, n)) + jnp.eye(n)
    traced = jax.jit(OPS[op]).trace(x)
    if n == 3 and platform not in tlj.GPU_PLATFORMS and platform != "cpu":
        with pytest.raises(NotImplementedError, match="without its"):
            traced.lower(lowering_platforms=(platform,))
        return
    hlo = traced.lower(lowering_platforms=(platform,)).as_text()
    assert ("custom_call" in hlo) == (n > {"cpu": 1}.get(platform, 2)), hlo


def exact_complex_det(m) -> tuple[Fraction, Fraction]:
    """(re, im) of det m, exactly."""
    f = [[(Fraction(float(v.real)), Fraction(float(v.imag))) for v in row] for row in m]
    mul = lambda x, y: (x[0] * y[0] - x[1] * y[1], x[0] * y[1] + x[1] * y[0])  # noqa: E731
    if len(m) == 1:
        return f[0][0]
    (p, q), (r, s) = mul(f[0][0], f[1][1]), mul(f[0][1], f[1][0])
    return p - r, q - s


def exact_det(m) -> Fraction:
    """det m of a real matrix, exactly."""
    return exact_complex_det(m)[0]


def to_float(d: Fraction) -> float:
    try:
        return float(d)
    except OverflowError:
        return math.inf if d > 0 else -math.inf


def exact_logabs(d: Fraction) -> float:
    return math.log(abs(d.numerator)) - math.log(d.denominator)


def test_cancellation_is_exact_to_an_ulp_and_singular_exactly(path):
    """ad - bc under heavy cancellation: a few ulps of the exact value (a plain ad - bc has
    no correct digit here); exactly 0 when ad == bc."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4000, 2, 2))
    a[:, 1, 1] = a[:, 0, 1] * a[:, 1, 0] / a[:, 0, 0] * (1 + rng.standard_normal(4000) * 1e-13)
    a[:100, 1] = a[:100, 0] * 2  # exactly proportional rows: singular
    det = np.asarray(jax.jit(tlj.det)(a))
    exact = np.array([float(exact_det(m)) for m in a])
    nonzero = exact != 0
    assert (det[~nonzero] == 0).all() and (exact[:100] == 0).all()
    assert np.max(np.abs(det[nonzero] - exact[nonzero]) / np.abs(exact[nonzero])) < 4 * np.finfo(float).eps
    s, l = jax.jit(tlj.slogdet)(a[:100])
    assert (np.asarray(s) == 0).all() and (np.asarray(l) == -np.inf).all()
    assert np.isnan(np.asarray(jax.jit(tlj.inv)(a[:100]))).all()


@pytest.mark.parametrize("scale", [1e-300, 1e-150, 1.0, 1e150, 1e300])
def test_extreme_entries_keep_logabsdet_finite(scale, path):
    """Entries near 1e+-300 (and rows scaled differently): logabsdet finite and right where
    det itself over- or underflows; jnp's closed form gives +-inf or 0 there."""
    rng = np.random.default_rng(2)
    a = rng.uniform(0.5, 2, (200, 2, 2)) * scale
    a[100:, 0] *= 1e-200 if scale > 1 else 1e200  # rows of very different size
    s, l = jax.jit(tlj.slogdet)(a)
    exact = [exact_det(m) for m in a]
    np.testing.assert_array_equal(np.asarray(s), [(d > 0) - (d < 0) for d in exact])
    # logabsdet = log|det'| + row exponents: absolute error a few ulps of the larger part
    np.testing.assert_allclose(np.asarray(l), [exact_logabs(d) for d in exact], rtol=1e-14, atol=2e-13)
    d = np.asarray(jax.jit(tlj.det)(a))
    np.testing.assert_allclose(d, [to_float(e) for e in exact], rtol=1e-14)  # 0 / inf where out of range
    x = np.asarray(jax.jit(tlj.inv)(a))
    # componentwise backward error: |A X - I| <= c u |A| |X| (rows of different size cancel in A X)
    residual = np.abs(np.einsum("bij,bjk->bik", a, x) - np.eye(2))
    assert (residual <= 8 * np.finfo(float).eps * np.einsum("bij,bjk->bik", np.abs(a), np.abs(x))).all()


def _split_edge_matrices(dtype, count, seed):
    """2x2 matrices whose entries sit on the edges of _split's rounding: mantissas of all ones
    (the rounding carries into the exponent), exact ties at the rounded-off bit, powers of two,
    random ones; a third exactly singular (proportional rows), a third nearly so."""
    real = np.dtype(dtype).type(0).real.dtype
    info = np.finfo(real)
    low = (info.nmant + 2) // 2
    rng = np.random.default_rng(seed)
    mant = rng.random((count, 2, 2)) + 1  # [1, 2)
    scale = np.exp2(info.nmant).astype(real)
    ones = (2 - np.exp2(-info.nmant)).astype(real)  # all mantissa bits set
    tie = (np.floor(mant * np.exp2(info.nmant - low)) * np.exp2(low) + np.exp2(low - 1)) / scale  # ...1000 at the cut
    kind = rng.integers(0, 4, (count, 2, 2))
    m = np.where(kind == 0, ones, np.where(kind == 1, tie, np.where(kind == 2, 1.0, mant))).astype(real)
    m = m * rng.choice([-1, 1], m.shape) * np.exp2(rng.integers(-3, 2, m.shape))
    third = count // 3
    m[:third, 1] = m[:third, 0] * np.exp2(rng.integers(-2, 3, (third, 1)))  # exactly proportional rows
    near = m[third:2 * third]  # d = b c / a, rounded: nearly singular (or exactly, where it rounds so)
    near[:, 1, 1] = (near[:, 0, 1] * near[:, 1, 0] / near[:, 0, 0]).astype(real)
    return m.astype(dtype)


def _rounded_products_meeting_additions(fn, *args):
    """Products in fn's jaxpr, evaluated on args, that feed an addition or a subtraction (directly
    or negated) and are not exact: the ones that a compiler's contraction of a multiply and an
    add into an fma would change. Returns a description of each."""
    found = []

    def literal(v):
        return type(v).__name__ == "Literal"

    def run(jaxpr, consts, args):
        env, producer = {}, {}
        read = lambda v: v.val if literal(v) else env[v]  # noqa: E731
        env.update(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, args))
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
            if inner is not None:
                outs = run(inner.jaxpr, inner.consts, ins)
            else:
                outs = eqn.primitive.bind(*ins, **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v], producer[v] = o, eqn
            if eqn.primitive.name not in ("add", "sub"):
                continue
            for v in eqn.invars:
                source = None if literal(v) else producer.get(v)
                if source is not None and source.primitive.name == "neg" and not literal(source.invars[0]):
                    source = producer.get(source.invars[0])
                if source is None or source.primitive.name != "mul":
                    continue
                x, y, p = np.broadcast_arrays(*(np.asarray(read(w)) for w in (*source.invars, source.outvars[0])))
                if not np.issubdtype(p.dtype, np.floating):
                    continue
                inexact = sum(Fraction(float(a)) * Fraction(float(b)) != Fraction(float(c))
                              for a, b, c in zip(x.ravel(), y.ravel(), p.ravel())
                              if np.isfinite(a) and np.isfinite(b) and np.isfinite(c))
                if inexact:
                    found.append(f"{source} ({inexact} of {p.size} inexact)")
        return [read(v) for v in jaxpr.outvars]

    closed = jax.make_jaxpr(fn)(*args)
    run(closed.jaxpr, closed.consts, args)
    return found


def test_this_session_contracts_as_xlas_default_level():
    """scripts/test runs this suite with XLA's CPU backend at a lower optimization level (0 on
    most hosts: a quarter less CPU time, compiling is most of it), the lowest that it probes to
    contract as the default does. The closed forms' tests below check what users' programs
    compute only where XLA fuses a product into an fma as at its default level (3): a*a + c
    with a = 1 + 2^-30 and c = -(1 + 2^-29) is 2^-60 with the fma and 0 without."""
    a = jnp.full(8, 1 + 2.0**-30)
    c = jnp.full(8, -(1 + 2.0**-29))
    f = lambda a, c: a * a + c  # noqa: E731
    at_default = jax.jit(f, compiler_options={"xla_backend_optimization_level": 3})(a, c)
    np.testing.assert_array_equal(jax.jit(f)(a, c), at_default)


@pytest.mark.parametrize("dtype", DTYPES)
def test_no_rounded_product_meets_an_addition(dtype):
    """Compilers fuse a multiply and a following add into an fma where they may (GPU backends
    wherever XLA allows it; XLA's CPU backend too where the product has one use). Dekker's
    compensation survives that only if no rounded product feeds an addition: walk the closed
    forms' jaxprs on inputs at the edges of the split, singular, nearly singular and spanning
    the exponent range, and require every product that reaches an addition to be exact."""
    a = _split_edge_matrices(dtype, 48, seed=3)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * _split_edge_matrices(dtype, 48, seed=4)
    a[-4:] *= np.array([[1e-30, 1e30], [1e-30, 1e30]]).astype(a.real.dtype)  # rows spanning the range (float32's too)
    b = random_matrices((48, 2, 3), dtype, seed=5)
    for op, args in (("det", (a,)), ("inv_transposed", (a,)), ("solve", (a, b))):
        assert _rounded_products_meeting_additions(lambda *x: _closed_form.call(op, *x), *args) == [], op


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_split_edges_against_exact_arithmetic(dtype, path):
    """Entries whose split rounds up into the next binade or sits on a tie, exactly singular and
    nearly singular: det to a few ulps of the exact value, 0 exactly when ad == bc."""
    a = _split_edge_matrices(dtype, 600, seed=7)
    exact = np.array([float(exact_det(m)) for m in a])
    det = np.asarray(jax.jit(tlj.det)(a)).astype(np.float64)
    np.testing.assert_array_equal(det == 0, exact == 0)
    assert (exact == 0).sum() >= 200
    nonzero = exact != 0
    assert np.max(np.abs(det[nonzero] - exact[nonzero]) / np.abs(exact[nonzero])) < 4 * np.finfo(dtype).eps


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rows_spanning_the_exponent_range(dtype, path):
    """A = diag(2^l) B diag(2^r) with rows (or columns) spanning 2^+-s, s up to nearly the whole
    exponent range (rows like [1e-300, 1e300]), B moderate, nearly singular (ad/bc = 1 + 1e-5)
    or exactly singular: each row scaled into range alone would flush its small entry to 0;
    the values match exact rational arithmetic as for moderate entries."""
    rng = np.random.default_rng(5)
    count, emax = 400, np.finfo(dtype).maxexp - 24  # entries, inverses and solutions stay normal
    b = rng.uniform(0.5, 2, (count, 2, 2)) * rng.choice([-1, 1], (count, 2, 2))
    b[100:200, 1, 1] = b[100:200, 0, 1] * b[100:200, 1, 0] / b[100:200, 0, 0] * (1 + 1e-5)
    b[200:250, 1] = -b[200:250, 0] / 2  # exactly proportional rows: singular
    s = rng.integers(emax - emax // 3, emax, count)
    left = rng.integers(-(emax - s), emax - s + 1, (2, count)).T
    right = np.stack([-s, s], axis=1)
    left[::2], right[::2] = right[::2], left[::2].copy()  # columns spanning the range
    a = np.ldexp(b, left[:, :, None] + right[:, None, :]).astype(dtype)
    eps = np.finfo(dtype).eps
    exact = [exact_det(m) for m in a]
    sign, logabs = (np.asarray(v) for v in jax.jit(tlj.slogdet)(a))
    np.testing.assert_array_equal(sign, [(d > 0) - (d < 0) for d in exact])
    ok = sign != 0
    assert ok.sum() == count - 50 and (logabs[~ok] == -np.inf).all()
    reference = np.array([exact_logabs(d) for d in np.array(exact)[ok]])
    # absolute error: a few ulps of the scale's log (up to 2 emax ln 2) that cancels with log|det'|
    np.testing.assert_allclose(logabs[ok], reference, rtol=8 * eps, atol=8 * eps * emax)
    np.testing.assert_allclose(np.asarray(jax.jit(tlj.det)(a)), [to_float(d) for d in exact], rtol=8 * eps)

    # Residuals of the unscaled problem (A's products over- and underflow): with A = L B R,
    # X = A^-1 gives B (R X L) = I, and A y = c gives B (R y) = L^-1 c -- exactly rescaled.
    b = b[ok].astype(dtype).astype(np.float64)
    left, right = left[ok], right[ok]
    x = np.ldexp(np.asarray(jax.jit(tlj.inv)(a[ok])).astype(np.float64), right[:, :, None] + left[:, None, :])
    residual = np.abs(np.einsum("bij,bjk->bik", b, x) - np.eye(2))
    assert (residual <= 8 * eps * np.einsum("bij,bjk->bik", np.abs(b), np.abs(x))).all()
    c = rng.standard_normal((count, 2, 3)).astype(dtype)
    y = np.asarray(jax.jit(tlj.solve)(a, c)).astype(np.float64)
    assert np.isnan(y[~ok]).all()
    y = np.ldexp(y[ok], right[:, :, None])
    residual = np.abs(np.einsum("bij,bjk->bik", b, y) - np.ldexp(c[ok].astype(np.float64), -left[:, :, None]))
    assert (residual <= 8 * eps * np.einsum("bij,bjk->bik", np.abs(b), np.abs(y))).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2])
def test_entries_at_the_top_of_the_exponent_range(dtype, n, path):
    """Rows whose largest entry is at least 2^(emax - 1), which no normal power of two scales
    below 1 (the closed forms once made det(1e308 I) 4x too large there, logabsdet off by
    log 4): sign or phase, logabsdet and det (inf only where it overflows) as exact rational
    arithmetic says, beside rows of moderate and small entries. A complex det whose modulus
    overflows while its parts do not keeps finite parts (the kernels once gave inf + inf i)."""
    rng = np.random.default_rng(6)
    count, emax = 300, np.finfo(dtype).maxexp
    b = rng.uniform(0.5, 1.9, (count, n, n)) * rng.choice([-1, 1], (count, n, n))
    if np.issubdtype(dtype, np.complexfloating):
        b = b * np.exp(1j * rng.uniform(0, 2 * np.pi, (count, n, n))) / np.sqrt(2)
    exponents = rng.choice([emax - 1, emax - 2, emax - 3, 0, -emax // 3], (count, n))
    exponents[:, 0] = emax - 1 - rng.integers(0, 2, count)  # the top row: largest entries >= 2^(emax - 2)
    a = (b * np.ldexp(1.0, exponents)[..., None]).astype(dtype)
    assert np.isfinite(a).all()
    exact = [exact_complex_det(m) for m in a]
    sign, logabs = (np.asarray(v) for v in jax.jit(tlj.slogdet)(a))
    eps = np.finfo(dtype).eps
    # |det|^2 = re^2 + im^2, exactly; its log halved
    reference = np.array([exact_logabs(re * re + im * im) / 2 for re, im in exact])
    np.testing.assert_allclose(logabs, reference, rtol=8 * eps, atol=8 * eps * n * emax)
    phase = np.array([complex(to_float(re / max(abs(re), abs(im))), to_float(im / max(abs(re), abs(im))))
                      for re, im in exact])
    np.testing.assert_allclose(sign, phase / np.abs(phase), rtol=0, atol=8 * eps)
    det = np.asarray(jax.jit(tlj.det)(a)).astype(np.complex128)
    ref = np.array([complex(to_float(re), to_float(im)) for re, im in exact])
    with np.errstate(over="ignore"):  # past the dtype's range: inf there too
        ref = ref.astype(np.result_type(dtype, np.complex64)).astype(np.complex128)
    np.testing.assert_allclose(det, ref, rtol=8 * eps)
    assert np.isfinite(det).sum() > count // 4 and (n == 1 or np.isinf(det).any())  # both kinds covered


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2])
def test_same_results_as_the_kernels(dtype, n, path):
    """The closed forms here and tinyla's C kernels: same conventions, values to a few ulps."""
    a = random_matrices((64, n, n), dtype, seed=n)
    b = random_matrices((64, n, 3), dtype, seed=n + 7)
    s, l = jax.jit(tlj.slogdet)(a)
    rs, rl = tln.slogdet(a)
    assert_close(s, rs, dtype, 8)
    assert_close(l, rl, dtype, 8, scale=np.abs(rl) + 1)
    assert_close(jax.jit(tlj.det)(a), tln.det(a), dtype, 8, scale=np.abs(tln.det(a)))
    inv = tln.inv(a)
    assert_close(jax.jit(tlj.inv)(a), inv, dtype, 16, scale=np.abs(inv).max(axis=(-2, -1), keepdims=True))
    x = tln.solve(a, b)
    assert_close(jax.jit(tlj.solve)(a, b), x, dtype, 16, scale=np.abs(x).max(axis=(-2, -1), keepdims=True))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_special_values(dtype, path):
    """NaN in, NaN out (that matrix only); a zero matrix and a zero column are singular;
    complex phases of tiny and huge entries are unit."""
    m = np.array([[[np.nan, 1], [2, 3]], [[0, 0], [0, 0]], [[0, 1], [0, 2]], [[1, 2], [3, 4]]], dtype)
    s, l = tlj.slogdet(m)
    assert np.isnan(s[0]) and np.isnan(l[0])
    np.testing.assert_array_equal(np.asarray(s[1:3]), [0, 0])
    np.testing.assert_array_equal(np.asarray(l[1:3]), [-np.inf, -np.inf])
    np.testing.assert_allclose(np.asarray(l[3]), np.log(2.0), rtol=1e-15)
    inv = np.asarray(tlj.inv(m))
    assert np.isnan(inv[:3]).all() and np.isfinite(inv[3]).all()
    if np.iscomplexobj(m):
        z = np.array([[[1e-300 + 1e-300j]], [[1e300 - 1e300j]]])
        s, l = tlj.slogdet(z)
        np.testing.assert_allclose(np.abs(np.asarray(s)), 1, rtol=1e-15)
        np.testing.assert_allclose(np.asarray(l), np.log(np.sqrt(2.0)) + np.log([1e-300, 1e300]), rtol=1e-14)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_complex_nan_part_beside_inf_is_nan(n, path):
    """A complex entry with a NaN part gives NaN sign and logabsdet, also beside an infinite
    part (which C99's cabs counts as an infinity), in the closed forms and the kernels alike."""
    entries = [complex(np.inf, np.nan), complex(np.nan, -np.inf), complex(np.nan, 1), complex(1, np.nan)]
    m = np.stack([np.diag([e if i == n // 2 else 2 for i in range(n)]) for e in entries]).astype(np.complex128)
    for s, l in (tlj.slogdet(m), jax.jit(tlj.slogdet)(m), tln.slogdet(m)):
        assert np.isnan(np.asarray(s)).all() and np.isnan(np.asarray(l)).all(), (s, l)


@pytest.mark.parametrize("n", [1, 2])
def test_third_derivatives_match_jnp(n, path):
    """Any order: the closed forms' rules are element-wise code, differentiated again."""
    a = jnp.asarray(random_matrices((n, n), np.float64, seed=5)) + 2 * jnp.eye(n)
    ours = jax.jit(jax.jacfwd(jax.hessian(lambda x: tlj.slogdet(x)[1])))(a)
    theirs = jax.jit(jax.jacfwd(jax.hessian(lambda x: jnp.linalg.slogdet(x)[1])))(a)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)
