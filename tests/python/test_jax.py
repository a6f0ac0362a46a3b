"""tinyla.jax against jax.numpy.linalg and finite differences: values, contract, derivatives
of several orders, transformations, sharding."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

try:
    from jax import shard_map
except ImportError:  # jax < 0.6
    from jax.experimental.shard_map import shard_map

import tinyla.jax as tlj
from helpers import DTYPES, assert_close, eps, exact_adjugate_tangent, random_matrices

SIZES = [0, 1, 2, 3, 4, 8, 17, 33]


def wide(a):
    return np.asarray(a).astype(np.complex128 if np.iscomplexobj(a) else np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_forward_matches_numpy(dtype, n):
    a = random_matrices((2, 3, n, n), dtype, seed=n)
    b = random_matrices((2, 3, n, 2), dtype, seed=n + 1)
    tol = 8 * (n + 1)
    # Eager calls lower the same custom calls as jit'ed ones: both at the edge, the closed forms and
    # the first kernel size; jit'ed only above (as models call them), all ops in one program (XLA's
    # compile time per program dominates this test).
    def ops(a, b):
        return dict(slogdet=tlj.slogdet(a), det=tlj.det(a), inv=tlj.inv(a), solve=tlj.solve(a, b),
                    slogdet_inv=tlj.slogdet_inv(a))

    for got in ([ops(a, b), jax.jit(ops)(a, b)] if n <= 3 else [jax.jit(ops)(a, b)]):
        s, l = got["slogdet"]
        rs, rl = np.linalg.slogdet(wide(a))
        assert s.dtype == dtype and l.dtype == np.finfo(dtype).dtype
        assert_close(s, rs, dtype, tol)
        assert_close(l, rl, dtype, tol, scale=np.abs(rl) + 1)
        rd = np.linalg.det(wide(a))
        assert_close(got["det"], rd, dtype, tol, scale=np.abs(rd))
        assert_close(got["inv"], np.linalg.inv(wide(a)), dtype, tol, scale=1.0)
        assert_close(got["solve"], np.linalg.solve(wide(a), wide(b)), dtype, tol, scale=np.abs(b).max(initial=1))
        fs, fl, fx = got["slogdet_inv"]
        np.testing.assert_array_equal(fs, s)
        np.testing.assert_array_equal(fl, l)
        np.testing.assert_array_equal(fx, got["inv"])


@pytest.mark.parametrize("dtype", [jnp.bool_, jnp.int8, jnp.int32, jnp.int64, jnp.float32, jnp.float64,
                                   jnp.complex64, jnp.complex128])
def test_shapes_and_dtypes_are_jnps(dtype):
    a = jax.ShapeDtypeStruct((5, 3, 3), dtype)
    vec, mat = jax.ShapeDtypeStruct((3,), dtype), jax.ShapeDtypeStruct((2, 1, 3, 4), dtype)
    for op in ("slogdet", "det", "inv"):
        assert jax.eval_shape(getattr(tlj, op), a) == jax.eval_shape(getattr(jnp.linalg, op), a), op
    for b in (vec, mat):
        assert jax.eval_shape(tlj.solve, a, b) == jax.eval_shape(jnp.linalg.solve, a, b)


def test_errors_name_the_op_and_the_shape():
    with pytest.raises(ValueError, match=r"tinyla.jax.slogdet: .*\(\.\.\., n, n\), got \(3, 4\)"):
        tlj.slogdet(jnp.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"tinyla.jax.inv: .*got \(3,\)"):
        jax.jit(tlj.inv)(jnp.zeros(3))
    with pytest.raises(ValueError, match=r"tinyla.jax.solve: .*got b of shape \(4,\)"):
        tlj.solve(jnp.eye(3), jnp.ones(4))
    with pytest.raises(ValueError, match="tinyla.jax.solve: .*do not broadcast"):
        tlj.solve(jnp.ones((2, 3, 3)), jnp.ones((5, 3, 1)))
    with pytest.raises(NotImplementedError, match="tinyla.jax.det: unsupported dtype float8_e4m3fn"):
        tlj.det(jnp.eye(2, dtype=jnp.float8_e4m3fn))
    with pytest.raises(ValueError, match="tinyla.jax.slogdet: method must be None, 'lu' or 'qr', got 'svd'"):
        tlj.slogdet(jnp.eye(2), method="svd")
    # Lists are refused as jnp.linalg refuses them (TypeError), for every argument.
    for op in ("slogdet", "det", "inv", "slogdet_inv"):
        with pytest.raises(TypeError, match=f"tinyla.jax.{op} requires ndarray"):
            getattr(tlj, op)([[1.0, 2.0], [3.0, 4.0]])
        with pytest.raises(TypeError):
            getattr(jnp.linalg, op if op != "slogdet_inv" else "inv")([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match="position 1"):
        tlj.solve(jnp.eye(2), [1.0, 2.0])


def test_raw_targets_check_their_results():
    """The FFI targets are registered process-wide: jax.ffi.ffi_call with results of the wrong
    shape or dtype gets an error naming the result, never a write past a buffer's end."""
    a = jnp.eye(3)[None].repeat(4, 0) * 2
    f64, c128 = jnp.float64, jnp.complex128

    def call(target, results, *args):
        return jax.ffi.ffi_call(target, [jax.ShapeDtypeStruct(s, d) for s, d in results])(*args)

    sign, logabsdet = call("tinyla_slogdet", [((4,), f64), ((4,), f64)], a)  # the right results work
    np.testing.assert_allclose(np.asarray(logabsdet), 3 * np.log(2), rtol=1e-15)
    bad = [("tinyla_slogdet", [((4,), f64), ((3,), f64)], (a,), "result logabsdet must be float64 of shape \\(4,\\)"),
           ("tinyla_slogdet", [((4,), f64), ((4, 1), f64)], (a,), "result logabsdet .* got float64 of shape \\(4, 1\\)"),
           ("tinyla_det", [((4,), c128)], (a,), "result det must be float64 .* got complex128"),
           ("tinyla_inv", [((4, 3, 2), f64)], (a,), "result inverse must be float64 of shape \\(4, 3, 3\\)"),
           ("tinyla_inv_transposed", [((4, 9), f64)], (a,), "result inverse"),
           ("tinyla_solve", [((4, 3, 1), f64)], (a, jnp.ones((4, 3, 2))), "result x must be float64 of shape \\(4, 3, 2\\)"),
           ("tinyla_slogdet_inv", [((4,), f64), ((4,), jnp.float32), ((4, 3, 3), f64)], (a,), "result logabsdet must be float64"),
           ("tinyla_slogdet_inv_transposed", [((4,), f64), ((4,), f64), ((3, 3), f64)], (a,), "result inverse")]
    for target, results, args, message in bad:
        with pytest.raises(Exception, match=f"{target}: {message}"):
            jax.block_until_ready(call(target, results, *args))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_half_precision_computes_in_float32(dtype, n):
    """jnp.linalg computes float16/bfloat16 only in its closed forms (slogdet n <= 2, det
    n <= 3; jax 0.6.2 rejects them, 0.10.2 does not); tinyla computes every op and n in
    float32 and rounds once to the input dtype."""
    a = (jnp.eye(n) * 3 + jnp.triu(jnp.ones((n, n)), 1)).astype(dtype)[None].repeat(4, 0)
    b = jnp.arange(n, dtype=dtype)
    a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)  # LAPACK's float32 (numpy)
    ref32 = {"slogdet": tuple(np.linalg.slogdet(a32)), "det": np.linalg.det(a32), "inv": np.linalg.inv(a32),
             "solve": np.linalg.solve(a32[0], b32)}
    ours = {"slogdet": tlj.slogdet(a), "det": tlj.det(a), "inv": tlj.inv(a), "solve": tlj.solve(a[0], b)}
    for op, got in ours.items():
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref32[op])):
            assert g.dtype == dtype, op
            np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(np.asarray(r).astype(dtype), np.float32))
    if n <= 2:  # where jnp computes them natively, tinyla is at least as accurate
        try:
            jnp_logabsdet = jnp.linalg.slogdet(a)[1]
        except NotImplementedError:  # older jax (0.6.2): LAPACK's path, which has no half-precision types
            jnp_logabsdet = None
        if jnp_logabsdet is not None:
            exact = np.linalg.slogdet(np.asarray(a, np.float64))[1]
            err_ours = np.abs(np.asarray(ours["slogdet"][1], np.float64) - exact).max()
            err_jnp = np.abs(np.asarray(jnp_logabsdet, np.float64) - exact).max()
            assert err_ours <= err_jnp
    g = jax.grad(lambda x: tlj.slogdet(x)[1].sum())(a)  # derivatives through the casts
    assert g.dtype == dtype


def test_singular_and_nan_matrices():
    a = jnp.array([[[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]], np.eye(3)])
    s, l = tlj.slogdet(a)
    rs, rl = jnp.linalg.slogdet(a)
    np.testing.assert_array_equal(s, rs)
    np.testing.assert_array_equal(l, rl)  # (0, -inf) as jnp
    np.testing.assert_array_equal(tlj.det(a), [0.0, 1.0])
    assert np.isnan(tlj.inv(a)[0]).all() and np.isnan(tlj.solve(a, jnp.ones((2, 3, 1)))[0]).all()
    nan = a.at[1, 0, 0].set(jnp.nan)
    assert np.isnan(tlj.slogdet(nan)[1][1])


@pytest.mark.parametrize("n", [2, 3, 8, 33])
def test_subnormal_pivots_on_the_cpu_give_the_c_librarys_bits(n):
    """XLA's CPU runtime calls custom calls on threads that flush subnormals (FTZ and DAZ); tinyla
    computes every share of a batch in the default environment, so a subnormal pivot gives
    tinyla.numpy's bits on one thread or two (it was read as zero on XLA's thread and kept on
    tinyla's worker: sign 0 and logabsdet -inf for part of the batch)."""
    import tinyla
    from tinyla import numpy as tla
    batch = 20000 if n <= 8 else 400  # enough work for two threads
    a = 2 * np.eye(n) + 0.1 * random_matrices((batch, n, n), np.float64, seed=n)
    a[:, :, 0] *= np.finfo(np.float64).tiny / 4  # column 0 subnormal: so is the first pivot
    expect = tla.slogdet_inv(a)
    assert np.isfinite(expect.logabsdet).all() and np.isfinite(expect.inverse).all()
    try:
        for threads in (1, 2):
            tinyla.set_num_threads(threads)
            got = jax.jit(tlj.slogdet_inv)(jax.device_put(a, jax.devices("cpu")[0]))  # the CPU's, also beside a GPU
            for name, g, e in zip(("sign", "logabsdet", "inverse"), got, expect):
                np.testing.assert_array_equal(np.asarray(g), e, err_msg=f"{name}, {threads} threads")
    finally:
        tinyla.set_num_threads(0)


def _cofactors(m):
    """adj(m)^T of an integer matrix from its minors' determinants (numpy's, rounded: exact)."""
    n = m.shape[-1]
    if n == 1:
        return np.ones_like(m)
    c = np.empty_like(m)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(m, i, 0), j, 1)
            d = np.linalg.det(minor)
            c[i, j] = (-1) ** (i + j) * (np.round(d.real) + 1j * np.round(d.imag) if np.iscomplexobj(d)
                                         else np.round(d))
    return c


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_det_derivatives_at_singular_matrices(dtype, path):
    """det's first derivative is the adjugate at every matrix, singular ones too: n <= 2 from the
    kernels or the closed forms (`path`; every order the polynomial's own, also where det
    overflows), n >= 3 from the
    kernel's LU with its zero pivots set to 1 -- exact for integer matrices of rank n - 1 whose
    zero pivot is not the last (where jnp's LU-based rule is not) and 0 at lower rank. The
    second derivative at n >= 3 is exact at rank n - 1 too (jnp's is where the zero pivot is
    last), and not finite where adj(A) = 0, as documented."""
    a = jnp.array([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [0.0, 0.0]], np.zeros((2, 2)),
                   [[1e300, 3e300], [2e300, -1e300]], [[1.0, 2.0], [3.0, 4.0]]], dtype)
    holomorphic = np.issubdtype(dtype, np.complexfloating)
    grad = functools.partial(jax.grad, holomorphic=holomorphic)
    # The reference at n <= 2 is the polynomial differentiated by jax (a, and ad - bc): exact
    # here, entries products of two at most. Not jnp.linalg.det's rule: jax 0.11's gives 0 at
    # [[0, 1], [0, 0]] and where det overflows, and a NaN second derivative at singular matrices.
    polynomial = {1: lambda x: x[..., 0, 0], 2: lambda x: x[..., 0, 0] * x[..., 1, 1] - x[..., 0, 1] * x[..., 1, 0]}
    for n in (1, 2):
        x = a[:, :n, :n]
        for f in (grad, lambda g: jax.jacfwd(grad(g), holomorphic=holomorphic)):
            np.testing.assert_array_equal(jax.jit(f(lambda x: tlj.det(x).sum()))(x),
                                          jax.jit(f(lambda x: polynomial[n](x).sum()))(x))
    rng = np.random.default_rng(5)
    for n in (3, 4, 6, 9, 33):
        m = rng.integers(-3, 4, size=(6, n, n)).astype(dtype)
        if holomorphic:
            m = m + 1j * rng.integers(-3, 4, size=(6, n, n))
        m[0] = np.arange(1, n * n + 1).reshape(n, n)  # rank 2
        m[1, 2] = m[1, 0] + 2 * m[1, 1]  # a dependent row: rank n - 1
        m[2, :, 1] = -3 * m[2, :, 0]  # a dependent column (an exact zero pivot before the last)
        m[3, 1] = 0  # a zero row
        m[4, 1], m[4, 2] = m[4, 0], 2 * m[4, 0]  # rank n - 2: adj = 0
        first = jax.jit(jax.vmap(grad(tlj.det)))(jnp.asarray(m))
        assert np.isfinite(first).all()
        ref = np.array([_cofactors(x) for x in m])
        rtol = 1e-13 if n < 10 else 1e-9  # (numpy's determinants of the 32 x 32 minors: not exact)
        np.testing.assert_allclose(first, ref, rtol=rtol, atol=rtol * np.abs(ref).max(), err_msg=f"n={n}")
        if n > 6:  # (the exact reference's rational arithmetic)
            continue
        e = rng.integers(-3, 4, size=(n, n)).astype(dtype)
        second = jax.jit(lambda x: jax.jvp(grad(tlj.det), (x,), (jnp.asarray(e),))[1])
        for i in ((0, 1, 2, 3) if n == 3 else (1, 2, 3)):  # rank n - 1, the zero pivot anywhere
            ref = exact_adjugate_tangent(m[i], e).T  # d cofactors = (d adj)^T
            np.testing.assert_allclose(second(jnp.asarray(m[i])), ref, rtol=1e-13,
                                       atol=1e-13 * np.abs(ref).max(), err_msg=f"n={n} matrix {i}")
        assert not np.isfinite(second(jnp.asarray(m[4]))).all()  # rank n - 2: adj(A) = 0


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_det_second_derivative_near_singular_matrices(dtype):
    """d adj(A) (det's second derivative) where A is near singular: accurate to a few ulps of
    the exact value, where the textbook (tr(adj dA) adj - adj dA adj) / det lost eps * cond(A)
    (1e-1 at cond 1e15) and gave NaN where det is out of range. Exact references in rational
    arithmetic."""
    rng = np.random.default_rng(11)
    complex_ = np.issubdtype(dtype, np.complexfloating)

    def random(n):
        x = rng.standard_normal((n, n))
        return x + 1j * rng.standard_normal((n, n)) if complex_ else x

    # (the last two: det out of range where the result is not, 1e450 and 1e-400)
    for n, smallest, scale in [(n, smallest, 1.0) for n in (3, 5, 8) for smallest in (1.0, 1e-6, 1e-15)] + [
            (3, 1e-15, 1e150), (4, 1e-15, 1e-100)]:
        u, _ = np.linalg.qr(random(n))
        v, _ = np.linalg.qr(random(n))
        s = np.exp(rng.uniform(-1, 1, n))
        s[rng.integers(n)] = smallest
        a, e = (scale * (u * s) @ v.conj().T).astype(dtype), random(n).astype(dtype)
        got = jax.jvp(jax.grad(tlj.det, holomorphic=complex_), (jnp.asarray(a),), (jnp.asarray(e),))[1]
        ref = exact_adjugate_tangent(a, e).T
        err = np.abs(np.asarray(got) - ref).max() / np.abs(ref).max()
        assert err < 64 * eps(dtype), f"n={n} sigma_min={smallest} scale={scale}: relative error {err:.1e}"


def test_det_derivatives_from_one_factorization():
    """det's derivative is one det_cofactors call: no second factorization for A^-1."""
    a = random_matrices((4, 5, 5), np.float64, seed=2)
    hlo = jax.jit(jax.grad(lambda x: tlj.det(x).sum())).lower(a).as_text()
    assert hlo.count("stablehlo.custom_call") == 1 and "@tinyla_det_cofactors" in hlo
    np.testing.assert_allclose(jax.grad(lambda x: tlj.det(x).sum())(a),
                               jax.grad(lambda x: jnp.linalg.det(x).sum())(a), rtol=1e-12)
    np.testing.assert_allclose(jax.hessian(tlj.det)(a[0]), jax.hessian(jnp.linalg.det)(a[0]), rtol=1e-10,
                               atol=1e-12)


def test_empty_batch_and_n_zero_under_jit_and_grad():
    e = jnp.zeros((0, 4, 4))
    assert jax.jit(tlj.slogdet)(e)[0].shape == (0,)
    assert jax.grad(lambda x: tlj.slogdet(x)[1].sum())(e).shape == (0, 4, 4)
    z = jnp.zeros((3, 0, 0))
    s, l = jax.jit(tlj.slogdet)(z)
    np.testing.assert_array_equal(s, np.ones(3))
    np.testing.assert_array_equal(l, np.zeros(3))
    np.testing.assert_array_equal(jax.jit(tlj.det)(z), np.ones(3))
    assert jax.jit(tlj.inv)(z).shape == (3, 0, 0)


@pytest.mark.parametrize("a_shape,b_shape", [((2, 2), (2, 0)), ((3, 2, 2), (3, 2, 0)), ((0, 2, 2), (0, 2, 3)),
                                              ((0, 0), (0,)), ((0, 0), (0, 5)), ((3, 0, 0), (3, 0, 2))])
def test_solve_with_empty_operands_under_jit_and_derivatives(a_shape, b_shape):
    a = jnp.zeros(a_shape) + jnp.eye(a_shape[-1])
    b = jnp.ones(b_shape)
    for f in (tlj.solve, jax.jit(tlj.solve)):
        assert f(a, b).shape == jnp.linalg.solve(a, b).shape
    jac = jax.jit(jax.jacfwd(tlj.solve))(a, b)
    assert jac.shape == jax.jacfwd(jnp.linalg.solve)(a, b).shape
    assert jax.jit(jax.grad(lambda a: tlj.solve(a, b).sum()))(a).shape == a.shape


# ---- derivatives ----------------------------------------------------------------------------

FUNCTIONS = {  # name -> (tinyla version, jnp version) of a function of one matrix stack
    "logabsdet": (lambda a: tlj.slogdet(a)[1], lambda a: jnp.linalg.slogdet(a)[1]),
    "sign": (lambda a: tlj.slogdet(a)[0], lambda a: jnp.linalg.slogdet(a)[0]),
    "det": (tlj.det, jnp.linalg.det),
    "inv": (tlj.inv, jnp.linalg.inv),
    "solve": (lambda a: tlj.solve(a, a[..., :1] + 1), lambda a: jnp.linalg.solve(a, a[..., :1] + 1)),
    "fused_logabsdet": (lambda a: tlj.slogdet_inv(a)[1], lambda a: jnp.linalg.slogdet(a)[1]),
    "fused_inverse": (lambda a: tlj.slogdet_inv(a)[2], jnp.linalg.inv),
}


def cases(dtypes, sizes):
    """(name, n, dtype) for every function, leaving out a real sign (piecewise constant)."""
    return [(name, n, dt) for name in FUNCTIONS for n in sizes for dt in dtypes
            if name != "sign" or np.issubdtype(dt, np.complexfloating)]


# The rules are the same code at every n (custom_jvp rules around the ops; JAX never
# differentiates the closed forms or kernels themselves), so they are checked against finite
# differences at n = 1 (the shapes' edge) and 3; each n's ops are checked against jnp above
# and below. (n = 2 took half of this test's time: the closed forms' second-order graphs.)
@pytest.mark.parametrize("name,n,dtype", cases([np.float64, np.complex128], [1, 3]))
def test_derivatives_match_finite_differences(name, n, dtype):
    """Forward and reverse mode, first and second order, against central differences."""
    ours, _ = FUNCTIONS[name]
    a = jnp.asarray(random_matrices((2, n, n), dtype, seed=n))
    check_grads(ours, (a,), order=2, modes=("fwd", "rev"), atol=1e-6, rtol=1e-6, eps=1e-5)


# n = 2: the kernels on the CPU (GPUs: the closed forms, whose values test_closed_form.py checks
# on both paths); 3: the kernels (the rules do not depend on n; n = 1 against finite
# differences above; the ops' values at every n: test_forward_matches_numpy and the C++ suite).
# float32 at one size: the rules are dtype-generic, float64/complex128 check their math.
@pytest.mark.parametrize("name,n,dtype", cases([np.float64, np.complex128], [2, 3]) + cases([np.float32], [3]))
def test_derivatives_match_jnp(name, n, dtype):
    """grad, jvp, vjp, jacfwd, jacrev, hessian against jnp.linalg's own rules, all in one jit'ed
    program per side, as models use them (one program per transform took 2.5x as long: XLA's
    compile time per program dominates; the finite-difference test above runs the rules eagerly)."""
    assert_derivatives_match_jnp(name, n, dtype)


@pytest.mark.parametrize("form", ["rank-1 sums", "dot"])
@pytest.mark.parametrize("name", ["logabsdet", "det", "inv", "solve"])  # each rule with a product
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_derivative_products_in_both_forms(name, dtype, form):
    """The rules' matrix products (-A^-1 dA A^-1 and its kin) lower to rank-1 sums or a dot by
    platform and size (tinyla/jax.py, _matmul: the CPU sums up to k = 7, GPUs up to 4): both
    forms, on the CPU, at n = 5 against jnp's rules to second order."""
    saved = dict(tlj._FUSED_MATMUL_MAX_K)
    tlj._FUSED_MATMUL_MAX_K["cpu"] = 32 if form == "rank-1 sums" else 0
    jax.clear_caches()  # the form is chosen when tracing the rules, which jax caches
    try:
        assert_derivatives_match_jnp(name, 5, dtype)
    finally:
        tlj._FUSED_MATMUL_MAX_K.update(saved)
        jax.clear_caches()


def assert_derivatives_match_jnp(name, n, dtype):
    ours, theirs = FUNCTIONS[name]
    a = jnp.asarray(random_matrices((3, n, n), dtype, seed=10 + n))
    da = jnp.asarray(random_matrices((3, n, n), dtype, seed=20 + n))
    tol = dict(rtol=2e3 * eps(dtype), atol=2e3 * eps(dtype))
    real = not np.issubdtype(dtype, np.complexfloating)  # jacfwd / jacrev / hessian want real inputs

    def transforms(f, a, da):
        real_sum = lambda x: jnp.sum(jnp.real(f(x)))  # noqa: E731
        out = {"grad": jax.grad(real_sum)(a), "jvp": jax.jvp(f, (a,), (da,))[1],
               "vjp": jax.vjp(f, a)[1](jnp.ones_like(f(a)))[0]}
        one = a[0]
        if real:
            out |= {"jacfwd": jax.jacfwd(f)(one), "jacrev": jax.jacrev(f)(one)}
            if np.ndim(jax.eval_shape(f, one)) == 0:
                out["hessian"] = jax.hessian(f)(one)
        return out

    got, want = (jax.jit(functools.partial(transforms, f))(a, da) for f in (ours, theirs))
    for key in want:
        np.testing.assert_allclose(got[key], want[key], err_msg=key, **tol)


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_laplacian_of_log_psi(n):
    """What QMC codes differentiate: log|det A(r)| with A_ij = phi_j(r_i); the Laplacian is
    the trace of the Hessian, taken forward-over-reverse (grad inside jvp), and jit'ed."""
    rng = np.random.default_rng(n)
    w = jnp.asarray(rng.standard_normal((n, n, 3)))

    def orbitals(r):  # r: (n electrons, 3) -> (n, n)
        return jnp.tanh(jnp.einsum("ik,jk->ij", r, w.sum(0)) + w[:, :, 0]) + jnp.eye(n)

    def laplacian(logdet, r):
        g = jax.grad(lambda r: logdet(orbitals(r)))
        basis = jnp.eye(r.size).reshape(r.size, *r.shape)
        return sum(jax.jvp(g, (r,), (e,))[1].ravel() @ e.ravel() for e in basis)

    r = jnp.asarray(rng.standard_normal((n, 3)))
    ours = jax.jit(lambda r: laplacian(lambda a: tlj.slogdet(a)[1], r))(r)
    theirs = jax.jit(lambda r: laplacian(lambda a: jnp.linalg.slogdet(a)[1], r))(r)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n", [3, 9])
def test_gradient_is_one_call_and_nothing_else(n):
    """value_and_grad(logabsdet) compiles to one fused call whose A^-T output is the
    gradient: no second factorization, no transposition pass, no LAPACK. (n <= 2: the rules
    keep value and inverse apart, so that XLA drops the value when only the gradient is used;
    lowerings: test_closed_form.py.)"""
    f = jax.jit(jax.value_and_grad(lambda x: tlj.slogdet(x)[1].sum()))
    hlo = f.lower(jnp.ones((4, 2, n, n))).compile().as_text()
    assert hlo.count("custom-call(") == 1 and 'custom_call_target="tinyla_slogdet_inv_transposed"' in hlo
    assert "transpose(" not in hlo and "getrf" not in hlo
    a = random_matrices((4, 2, n, n), np.float64)
    np.testing.assert_allclose(f(a)[1], np.swapaxes(np.linalg.inv(a), -1, -2), rtol=1e-12, atol=1e-12)


# ---- transformations ---------------------------------------------------------------------------

def test_nested_vmap_is_one_call_over_all_batch_dims():
    a = jnp.asarray(random_matrices((4, 3, 5, 5), np.float64))
    b = jnp.asarray(random_matrices((4, 5, 2), np.float64, seed=2))
    got = jax.vmap(jax.vmap(tlj.slogdet))(a)
    want = tlj.slogdet(a)
    np.testing.assert_array_equal(got[1], want[1])
    x = jax.vmap(jax.vmap(tlj.solve, in_axes=(0, None)), in_axes=(0, 0))(a, b)
    np.testing.assert_allclose(x, jnp.linalg.solve(a, b[:, None]), rtol=1e-12)
    x = jax.vmap(tlj.inv, in_axes=2, out_axes=1)(jnp.moveaxis(a, 1, 2))  # a mapped axis in the middle
    np.testing.assert_allclose(jnp.moveaxis(x, 1, 0), jnp.moveaxis(tlj.inv(a), 1, 0), rtol=1e-12)
    hlo = jax.jit(jax.vmap(jax.vmap(tlj.slogdet))).lower(a).compile().as_text()
    assert hlo.count("custom-call(") == 1


def test_export_round_trip():
    """jax.export with export_disabled_checks(): the serialized module calls tinyla's targets by
    name and gives the jitted function's bits (kernels, derivative rules, a closed form); without
    the checks jax refuses tinyla's custom calls."""
    from jax import export
    a = jnp.asarray(random_matrices((4, 2, 5, 5), np.float64))
    b = jnp.asarray(random_matrices((4, 2, 5, 3), np.float64, seed=1))

    def model(a, b):
        return (tlj.slogdet(a)[1], jax.grad(lambda x: tlj.slogdet(x)[1].sum())(a), tlj.det(a), tlj.inv(a),
                tlj.solve(a, b), tlj.slogdet_sum([a, a[..., ::-1, :]]).logabsdet, tlj.slogdet(a[..., :2, :2])[1])

    f = jax.jit(model)
    with pytest.raises(ValueError, match="tinyla_"):
        export.export(f)(a, b)
    blob = export.export(f, disabled_checks=tlj.export_disabled_checks())(a, b).serialize()
    got = export.deserialize(blob).call(a, b)
    for g, w in zip(got, f(a, b), strict=True):
        np.testing.assert_array_equal(g, w)


def _mesh(axis_type):
    return jax.make_mesh((4,), ("b",), axis_types=(axis_type,))


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto])
@pytest.mark.parametrize("name", ["slogdet", "grad", "inv", "solve", "det"])
@pytest.mark.parametrize("n", [1, 2, 3])  # the CPU: a closed form at n = 1, the kernels above (GPUs: n <= 2 closed)
def test_batch_sharded_input_runs_per_shard(axis_type, name, n):
    """A batch-sharded input stays sharded: each device's custom call (or closed form) sees its
    shard, no all-gather appears, and the results equal the unsharded ones."""
    assert jax.device_count() == 4
    fn = {"slogdet": lambda x: tlj.slogdet(x)[1], "grad": jax.grad(lambda x: tlj.slogdet(x)[1].sum()),
          "inv": tlj.inv, "solve": lambda x: tlj.solve(x, x[..., :2]), "det": tlj.det}[name]
    a = random_matrices((8, 6, n, n), np.float64)
    mesh = _mesh(axis_type)
    x = jax.device_put(a, NamedSharding(mesh, P("b")))
    compiled = jax.jit(fn).lower(x).compile().as_text()
    assert "all-gather" not in compiled and "all-to-all" not in compiled
    assert ("custom-call(" in compiled) == (n > tlj.CLOSED_FORM_MAX_N.get(tlj._default_platform(), 0))
    assert f"f64[2,6,{n},{n}]" in compiled  # the per-device shard
    out = jax.jit(fn)(x)
    assert out.sharding.spec[0] == "b"
    np.testing.assert_array_equal(out, jax.jit(fn)(a))


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto])
def test_det_second_derivative_batch_sharded(axis_type):
    """det's second derivative (its per-matrix choices, gathers and two more factorizations) stays
    per shard too: no all-gather, the unsharded bits."""
    fn = jax.jit(lambda x: jax.jvp(jax.grad(lambda y: tlj.det(y).sum()), (x,), (x[..., ::-1, :],))[1])
    a = random_matrices((8, 6, 4, 4), np.float64)
    x = jax.device_put(a, NamedSharding(_mesh(axis_type), P("b")))
    compiled = fn.lower(x).compile().as_text()
    assert "all-gather" not in compiled and "all-to-all" not in compiled and "f64[2,6,4,4]" in compiled
    np.testing.assert_array_equal(fn(x), fn(a))


def test_shard_map():
    mesh = _mesh(AxisType.Auto)
    a = random_matrices((8, 2, 4, 4), np.float64)
    f = jax.jit(shard_map(lambda x: tlj.slogdet(x)[1], mesh=mesh, in_specs=P("b"), out_specs=P("b")))
    np.testing.assert_array_equal(f(a), tlj.slogdet(a)[1])
    g = jax.jit(shard_map(lambda x, y: tlj.solve(x, y), mesh=mesh, in_specs=(P("b"), P()), out_specs=P("b")))
    y = random_matrices((2, 4, 1), np.float64, seed=1)  # the same right-hand sides on every device
    np.testing.assert_allclose(g(a, y), tlj.solve(a, y), rtol=1e-13)


def test_sharding_along_matrix_dims_is_refused():
    mesh = _mesh(AxisType.Explicit)
    x = jax.device_put(random_matrices((2, 4, 4), np.float64), NamedSharding(mesh, P(None, "b")))
    with pytest.raises(ValueError, match="tinyla.jax.slogdet: operand 0 is sharded along its matrix dimensions"):
        jax.jit(tlj.slogdet)(x)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_gpu_lowering(platform):
    """Lowered for a GPU platform (no GPU needed): with that backend built, each gradient is
    the same single custom call as on the CPU; without it, a clear error says how to build it."""
    a = random_matrices((4, 5, 5), np.float64, seed=3)
    traced = jax.jit(jax.grad(lambda x: tlj.slogdet(x)[1].sum())).trace(a)
    det_grad = jax.jit(jax.grad(lambda x: tlj.det(x).sum())).trace(a)
    if platform in tlj.GPU_PLATFORMS:
        hlo = traced.lower(lowering_platforms=(platform,)).as_text()
        assert hlo.count("stablehlo.custom_call") == 1 and "@tinyla_slogdet_inv_transposed" in hlo
        hlo = det_grad.lower(lowering_platforms=(platform,)).as_text()
        assert hlo.count("stablehlo.custom_call") == 1 and "@tinyla_det_cofactors" in hlo
    else:
        for t in (traced, det_grad):
            with pytest.raises(NotImplementedError, match=f"built without its {platform} backend"):
                t.lower(lowering_platforms=(platform,))
