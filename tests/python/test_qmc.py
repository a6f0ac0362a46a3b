"""QMC-facing parts of tinyla.jax: slogdet_sum (multi-determinant wavefunctions), folx's forward
Laplacian through tinyla's rules, and use_for_jnp; against jnp, jax.hessian and exact sums."""
import itertools
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import tinyla.jax as tlj
from helpers import random_matrices


def reference_slogdet_sum(xs, weights):
    """Exact sum of exactly rounded... each determinant from numpy in float64, summed exactly
    as rationals (the part slogdet_sum adds: the log-sum-exp)."""
    dets = np.prod([np.linalg.det(np.asarray(x, np.float64)) for x in xs], axis=0)
    out_sign, out_log = [], []
    for row_d, row_w in zip(dets.reshape(-1, dets.shape[-1]), weights.reshape(-1, dets.shape[-1])):
        total = sum(Fraction(float(d)) * Fraction(float(w)) for d, w in zip(row_d, row_w))
        out_sign.append(float(np.sign(float(total))) if total else 0.0)
        out_log.append(math.log(abs(total.numerator)) - math.log(total.denominator) if total else -np.inf)
    return np.reshape(out_sign, dets.shape[:-1]), np.reshape(out_log, dets.shape[:-1])


@pytest.mark.parametrize("sizes", [(3, 2), (4, 4), (1, 0), (5, 3)])
def test_slogdet_sum_matches_exact_sum(sizes):
    rng = np.random.default_rng(sum(sizes))
    xs = [random_matrices((6, 5, n, n), np.float64, seed=n) for n in sizes]
    w = rng.standard_normal((6, 5))
    s, l = tlj.slogdet_sum(xs, w)
    rs, rl = reference_slogdet_sum(xs, w)
    np.testing.assert_array_equal(np.asarray(s), rs)
    np.testing.assert_allclose(np.asarray(l), rl, rtol=1e-12)
    s1, l1 = tlj.slogdet_sum(xs)  # unit weights
    rs1, rl1 = reference_slogdet_sum(xs, np.ones((6, 5)))
    np.testing.assert_array_equal(np.asarray(s1), rs1)
    np.testing.assert_allclose(np.asarray(l1), rl1, rtol=1e-12)


def test_slogdet_sum_huge_range_and_exact_cancellation():
    """Terms of 1e+-600 add without overflow; equal terms with opposite weights give (0, -inf)."""
    a = np.stack([np.eye(3) * 1e200, np.eye(3) * 1e-200, np.eye(3)])[None]  # dets 1e600, 1e-600, 1
    s, l = tlj.slogdet_sum([a], np.array([[1.0, 1.0, 1.0]]))
    np.testing.assert_allclose(np.asarray(l), [600 * np.log(10)], rtol=1e-14)
    b = np.stack([np.eye(2) * 3, np.eye(2) * 3])[None]
    s, l = tlj.slogdet_sum([b], np.array([[2.0, -2.0]]))
    assert float(s[0]) == 0 and float(l[0]) == -np.inf


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_slogdet_sum_opposite_weights_cancel_exactly(dtype):
    """Equal determinants with weights w and -w (any w, not only those whose products are exact):
    psi = 0 exactly, (0, -inf), also where XLA fuses the weights' multiplies into the sum (it
    did, on the CPU: about 1e-16 instead of 0), with two spin blocks and a third, live term."""
    rng = np.random.default_rng(11)
    walkers = 64
    up, down = random_matrices((walkers, 1, 3, 3), dtype, seed=12), random_matrices((walkers, 1, 2, 2), dtype, seed=13)
    xs = [np.concatenate([up, up, up * 2], axis=1), np.concatenate([down, down, down], axis=1)]
    w = rng.standard_normal((walkers, 1)) * np.exp2(rng.integers(-20, 20, (walkers, 1)))
    if np.issubdtype(dtype, np.complexfloating):
        w = w * np.exp(1j * rng.uniform(0, 2 * np.pi, (walkers, 1)))
    for live in (0.0, 1.0):  # the third term's weight: psi = 0, or psi = det of that term
        weights = np.concatenate([w, -w, np.full_like(w, live)], axis=1).astype(dtype)
        for f in (tlj.slogdet_sum, jax.jit(tlj.slogdet_sum)):
            s, l = (np.asarray(v) for v in f(xs, weights))
            if live == 0:
                assert (s == 0).all() and (l == -np.inf).all()
            else:
                expect = np.log(np.abs(np.linalg.det(xs[0][:, 2]) * np.linalg.det(xs[1][:, 2])))
                np.testing.assert_allclose(l, expect, rtol=64 * np.finfo(dtype).eps)


def test_slogdet_sum_complex_and_errors():
    xs = [random_matrices((4, 3, 3, 3), np.complex128, seed=1), random_matrices((4, 3, 2, 2), np.complex128, seed=2)]
    w = random_matrices((4, 3), np.complex128, seed=3)
    s, l = tlj.slogdet_sum(xs, w)
    psi = np.sum(w * np.linalg.det(xs[0]) * np.linalg.det(xs[1]), axis=-1)
    np.testing.assert_allclose(np.asarray(s), psi / np.abs(psi), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(l), np.log(np.abs(psi)), rtol=1e-12)
    with pytest.raises(ValueError, match="share their leading dims"):
        tlj.slogdet_sum([np.ones((2, 3, 3, 3)), np.ones((2, 4, 2, 2))])
    with pytest.raises(ValueError, match="weights must have shape"):
        tlj.slogdet_sum([np.ones((2, 3, 3, 3))], np.ones(5))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_slogdet_sum_derivatives(dtype):
    """First and second order against jnp's slogdet summed by hand (and finite differences)."""
    xs = [random_matrices((2, 4, 3, 3), dtype, seed=4), random_matrices((2, 4, 2, 2), dtype, seed=5)]
    w = jnp.asarray(random_matrices((2, 4), dtype, seed=6))

    def ref(x0, x1, w):
        psi = jnp.sum(w * jnp.linalg.det(x0) * jnp.linalg.det(x1), axis=-1)
        return jnp.log(jnp.abs(psi))

    ours = lambda x0, x1, w: tlj.slogdet_sum([x0, x1], w)[1]  # noqa: E731
    args = (*map(jnp.asarray, xs), w)
    # jit'ed, the gradients with respect to all three in one program per side (op by op, the
    # reference's Hessian alone took seconds); check_grads runs eagerly
    grads = lambda f: jax.jit(jax.grad(lambda *a: f(*a).sum(), argnums=(0, 1, 2)))(*args)  # noqa: E731
    for got, want in zip(grads(ours), grads(ref)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    if dtype == np.float64:
        np.testing.assert_allclose(jax.jit(jax.hessian(lambda x: ours(x, args[1], w).sum()))(args[0]),
                                   jax.jit(jax.hessian(lambda x: ref(x, args[1], w).sum()))(args[0]),
                                   rtol=1e-8, atol=1e-10)
    check_grads(lambda x0: ours(x0, args[1], w), (args[0],), order=2, modes=("fwd", "rev"),
                              atol=1e-6, rtol=1e-6, eps=1e-5)


# ---- folx -----------------------------------------------------------------------------------

folx = pytest.importorskip("folx", reason="folx is part of the test extra")


def slater(n, one_electron: bool, seed=0):
    """log|det phi_j(r_i)| of an MLP-orbital x envelope model; one_electron: phi_j(r_i) depends on
    r_i only (folx's Jacobian row-sparse), else also on the electrons' mean (dense)."""
    rng = np.random.default_rng(seed)
    w, u = jnp.asarray(rng.standard_normal((3, n))), jnp.asarray(rng.standard_normal((n, n))) * 0.3

    def orbitals(r):
        h = jnp.tanh(r @ w)
        if not one_electron:
            h = h + jnp.tanh(jnp.mean(r, 0) @ w)[None]
        return (h @ u + jnp.eye(n)) * jnp.exp(-jnp.linalg.norm(r, axis=-1))[:, None]

    return orbitals


def log_det_laplacian_kernel_runs(n: int) -> bool:
    """Whether log_det_laplacian lowers to tinyla's kernel here (else its jnp form)."""
    platform = tlj._default_platform()
    return platform == "cpu" or (platform in tlj.GPU_PLATFORMS and n <= tlj.LOG_DET_LAPLACIAN_GPU_MAX_N)


def hessian_trace(f):
    """The reference Laplacian, jit'ed (op by op it took seconds per test)."""
    return jax.jit(lambda x: jnp.trace(jax.hessian(f)(x)))


# n = 1: the closed form; 2, 3, 8: compile-time-size kernels (GPUs: n = 2 a closed form); 32: a
# run-time-size one
@pytest.mark.parametrize("n", [1, 2, 3, 8, 32])
@pytest.mark.parametrize("one_electron", [True, False])
def test_folx_laplacian_equals_hessian_trace(n, one_electron):
    orbitals = slater(n, one_electron, seed=n)
    f = lambda x: tlj.slogdet(orbitals(x.reshape(n, 3)))[1]  # noqa: E731
    x = jnp.asarray(np.random.default_rng(n).standard_normal(3 * n))
    result = jax.jit(folx.forward_laplacian(f))(x)
    np.testing.assert_allclose(result.laplacian, hessian_trace(f)(x), rtol=1e-10)
    np.testing.assert_allclose(result.jacobian.dense_array, jax.jit(jax.grad(f))(x), rtol=1e-10, atol=1e-12)
    hlo = jax.jit(folx.forward_laplacian(f)).lower(x).as_text()
    # the rule's one fused call, not folx's generic path (which a closed form's XLA code takes)
    if n > tlj.CLOSED_FORM_MAX_N.get(tlj._default_platform(), 0):
        assert hlo.count("tinyla_slogdet_inv_transposed") >= 1 and "tinyla_inv" not in hlo.replace(
            "tinyla_inv_transposed", "")
    if not one_electron:  # a dense Jacobian: the log_det_laplacian kernel (GPUs: up to its size, else its jnp form)
        assert ("tinyla_log_det_laplacian" in hlo) == log_det_laplacian_kernel_runs(n)


@pytest.mark.parametrize("segment", [[2, 0, 1], [1, 1, 0, 0, 2, 2], [0, 2, 2, 1, 2, 0, 3]])
def test_static_segment_sum_matches_segment_sum(segment):
    """The sparse rule's sum of each coordinate's slots (a permutation, equal counts, uneven
    counts) equals jax.ops.segment_sum, as gathers and adds: no scatter in its program."""
    from tinyla._folx import _static_segment_sum
    segment = np.asarray(segment)
    count = int(segment.max()) + 1
    x = jnp.asarray(np.random.default_rng(len(segment)).standard_normal((len(segment), 4, 2)))
    fn = jax.jit(lambda x: _static_segment_sum(x, segment, count))
    np.testing.assert_allclose(fn(x), jax.ops.segment_sum(x, segment, num_segments=count), rtol=1e-15)
    assert "scatter" not in fn.lower(x).as_text()


def test_folx_stack_rule_takes_the_kernel_everywhere():
    """A stack of matrices (K determinants) with a dense Jacobian: the rule contracts it with the
    log_det_laplacian op on every platform (GPUs without tinyla's backend: the op's jnp form);
    the Laplacian is the Hessian's trace. XLA's contraction (the GPUs' form until 2026-11-30,
    which bench/ansatz.py times beside the kernel on a GPU) agrees with the kernel."""
    n = 4
    orbitals = slater(n, False, seed=7)
    scales = jnp.asarray([1.0, 1.3, 0.7])[:, None, None]
    f = lambda x: tlj.slogdet(orbitals(x.reshape(n, 3)) * scales + jnp.eye(n))[1].sum()  # noqa: E731
    x = jnp.asarray(np.random.default_rng(7).standard_normal(3 * n))
    result = jax.jit(folx.forward_laplacian(f))(x)
    np.testing.assert_allclose(result.laplacian, hessian_trace(f)(x), rtol=1e-10)
    np.testing.assert_allclose(result.jacobian.dense_array, jax.jit(jax.grad(f))(x), rtol=1e-10, atol=1e-12)
    # The rule's contraction alone (the whole Laplacian's GPU lowering needs a GPU build's kernels)
    from folx.api import FwdJacobian, FwdLaplArray
    from tinyla._folx import _kernel_contraction, _log_det, _xla_contraction
    for size, dtype in itertools.product((n, 8), (np.float64, np.complex128)):  # 8: XLA's form by a dot
        a, jacobian, lap_a, inverse_t = (random_matrices(shape, dtype, seed=i) for i, shape in enumerate(
            [(3, size, size), (3 * size, 3, size, size), (3, size, size), (3, size, size)]))
        kernel, xla = (jax.jit(form)(inverse_t, lap_a, jacobian) for form in (_kernel_contraction, _xla_contraction))
        for got, want in zip(xla, kernel):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    traced = jax.jit(lambda *ops: _log_det(FwdLaplArray(ops[0], FwdJacobian.from_dense(ops[1]), ops[2]), ops[3])).trace(
        a, jacobian, lap_a, inverse_t)
    assert "tinyla_log_det_laplacian" in traced.lower(lowering_platforms=("cpu",)).as_text()
    for p in ("cuda", "rocm"):
        text = traced.lower(lowering_platforms=(p,)).as_text()
        assert ("tinyla_log_det_laplacian" in text) == (p in tlj.GPU_PLATFORMS), p
        if p not in tlj.GPU_PLATFORMS:  # the op's jnp form
            assert "dot_general" in text and "custom_call" not in text, p


def test_folx_laplacian_differentiates_like_jnps():
    """d/dtheta of a folx Laplacian (a loss on the local energy) through tinyla's rule (the
    log_det_laplacian kernel's jvp) equals the same through folx's own rule on jnp, to second order."""
    n = 5
    orbitals = slater(n, False, seed=3)
    x = jnp.asarray(np.random.default_rng(3).standard_normal(3 * n))

    def laplacian(slogdet):
        def of_theta(theta):
            f = lambda x: slogdet(orbitals(x.reshape(n, 3)) + theta * jnp.outer(x[:n], x[-n:]))[1]  # noqa: E731
            return folx.forward_laplacian(f)(x).laplacian
        return jax.jit(jax.grad(jax.grad(of_theta)))

    np.testing.assert_allclose(laplacian(tlj.slogdet)(0.3), laplacian(jnp.linalg.slogdet)(0.3), rtol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128, np.float32])
@pytest.mark.parametrize("n", [0, 1, 3, 8, 33])
def test_log_det_laplacian_kernel_matches_its_jnp_form(n, dtype):
    """The kernel behind the dense folx rule against its definition in jnp, with batch dimensions,
    tangents with zero rows, under vmap, and its derivatives of first and second order."""
    from tinyla.jax import _log_det_laplacian, _log_det_laplacian_jnp
    inverse_t, lap_a = (jnp.asarray(random_matrices((2, 3, n, n), dtype, seed=10 * n + i)) for i in range(2))
    da = random_matrices((2, 3, 2 * n + 1, n, n), dtype, seed=10 * n + 2)
    da[:, :, ::2, : max(n - 1, 0)] = 0  # every other tangent: one non-zero row
    da = jnp.asarray(da)
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    # the jnp form jit'ed: op by op, its compiles took most of this test's time
    for got, want in zip(_log_det_laplacian(inverse_t, lap_a, da), jax.jit(_log_det_laplacian_jnp)(inverse_t, lap_a, da)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(n, 1) ** 2)
    vmapped = jax.vmap(_log_det_laplacian, in_axes=(1, 1, 1), out_axes=1)(inverse_t, lap_a, da)
    for got, want in zip(vmapped, _log_det_laplacian(inverse_t, lap_a, da)):
        if log_det_laplacian_kernel_runs(n):  # the kernel: each matrix's bits whatever the batch
            np.testing.assert_array_equal(got, want)
        else:  # the jnp form: XLA's products, whose rounding follows the layout
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14 * max(n, 1) ** 2)
    if dtype != np.float64:
        return

    def loss(fn):
        return lambda *ops: sum(jnp.sum(jnp.sin(y)) for y in fn(*ops))

    ops = (inverse_t, lap_a, da)
    directions = tuple(jnp.asarray(random_matrices(x.shape, dtype, seed=i)) for i, x in enumerate(ops))
    first = lambda fn: jax.grad(loss(fn), argnums=(0, 1, 2))  # noqa: E731
    second = lambda fn: lambda *ops: jax.jvp(first(fn), ops, directions)[1]  # noqa: E731 (Hessian x direction)
    for order in (first, second):
        got = jax.jit(order(_log_det_laplacian))(*ops)
        want = jax.jit(order(_log_det_laplacian_jnp))(*ops)
        for g, w in zip(got, want):
            # sums of up to n^3 products: an entry's error is relative to the largest (the
            # second order at n = 33 differed by 3e-10 on entries of 0.06 beside ones of 70 on
            # jax 0.6's XLA, whose jnp form sums in another order)
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10 * np.abs(np.asarray(w)).max(initial=1.0))


def test_folx_det_and_slogdet_sum():
    n = 4
    orbitals = slater(n, True, seed=1)
    x = jnp.asarray(np.random.default_rng(1).standard_normal(3 * n))
    for f in (lambda x: tlj.det(orbitals(x.reshape(n, 3))),
              lambda x: tlj.slogdet_sum([jnp.stack([orbitals(x.reshape(n, 3)), 2 * orbitals(x.reshape(n, 3)[::-1])])],
                                        jnp.array([1.0, -0.3]))[1]):
        result = jax.jit(folx.forward_laplacian(f))(x)
        np.testing.assert_allclose(result.laplacian, hessian_trace(f)(x), rtol=1e-10)


# ---- use_for_jnp --------------------------------------------------------------------------------

@pytest.fixture
def switch():
    """use_for_jnp() as a plain call, each such switch ended after the test whatever happened in
    it (ending one twice changes nothing): a failed assertion must not leave jnp.linalg routed for
    the tests after it."""
    made = []
    yield lambda: made.append(tlj.use_for_jnp()) or made[-1]
    for s in made:
        s.restore()


def test_use_for_jnp_routes_traced_code_and_restores(switch):
    a = jnp.asarray(random_matrices((3, 4, 4), np.float64))
    f = jax.jit(lambda a: jnp.linalg.slogdet(a)[1] + jnp.linalg.inv(a).sum((-2, -1)))
    assert "tinyla" not in f.lower(a).as_text()
    f(a)  # compiled (and cached) without tinyla
    with tlj.use_for_jnp():
        assert jnp.linalg.slogdet is tlj.slogdet
        assert "tinyla_slogdet" in f.lower(a).as_text()  # traced anew, not the cached version
        inside = f(a)
        # a method tinyla does not implement stays jnp's
        qr = jax.jit(lambda a: jnp.linalg.slogdet(a, method="qr"))
        assert "tinyla" not in qr.lower(a).as_text()
        inside_qr = qr(a)
    assert "tinyla" not in f.lower(a).as_text()
    np.testing.assert_allclose(inside, f(a), rtol=1e-12)
    np.testing.assert_array_equal(inside_qr, qr(a))
    plain = switch()  # a plain call, until restore()
    assert jnp.linalg.det is tlj.det
    plain.restore()
    assert jnp.linalg.det is not tlj.det


def test_use_for_jnp_switches_overlap_in_any_order(switch):
    """Routed while any switch is in effect, jnp's own functions back after the last one,
    whichever order plain calls and context managers end in; restoring twice changes nothing."""
    own = {name: getattr(jnp.linalg, name) for name in ("slogdet", "det", "inv", "solve")}
    routed = lambda: all(getattr(jnp.linalg, name) is getattr(tlj, name) for name in own)  # noqa: E731
    unrouted = lambda: all(getattr(jnp.linalg, name) is fn for name, fn in own.items())  # noqa: E731
    first, second = switch(), switch()
    first.restore()  # out of order: the second still holds
    assert routed()
    first.restore()
    assert routed()
    second.restore()
    assert unrouted()
    with tlj.use_for_jnp():
        plain = switch()
        with tlj.use_for_jnp():
            assert routed()
    assert routed()  # the plain call outlives the blocks
    plain.restore()
    assert unrouted()
    with pytest.raises(RuntimeError), tlj.use_for_jnp():  # an exception leaving the block restores
        raise RuntimeError
    assert unrouted()


# ---- the benchmark's FermiNet-like ansatz: tinyla and jnp agree on every workload ----------------

def test_ansatz_step_matches_jnp(monkeypatch):
    """Local energies (folx, and the Hessian-trace loop through it) and the VMC step of
    bench/ansatz.py, with tinyla.jax.slogdet per block, or slogdet_sum for the whole sum: jnp's
    numbers. Blocks 3 + 2: the kernels at both sizes (GPUs: a closed form at 2). One layer of the
    electron streams, not the benchmark's two: the determinants' inputs and derivatives are the
    same code, and each of the eight programs compiles in three quarters of the time."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import ansatz
    monkeypatch.setattr(ansatz, "LAYERS", 1)

    n_el = 5
    params, xs = ansatz.init_params(n_el, seed=n_el), ansatz.walkers(n_el, 4, seed=n_el)
    ref = ansatz.workloads(n_el, "jnp")
    for contender in ("tinyla", "sum"):
        ours = ansatz.workloads(n_el, contender)
        for name in ("E_L folx", "VMC step"):
            np.testing.assert_allclose(ours[name](params, xs), ref[name](params, xs), rtol=1e-9, atol=1e-9,
                                       err_msg=f"{contender}: {name}")
        # the Hessian-trace Laplacian against folx's (independent derivations; jnp's own
        # Hessian trace would only repeat what its folx one showed above)
        np.testing.assert_allclose(ours["E_L hessian"](params, xs), ours["E_L folx"](params, xs), rtol=1e-10,
                                   err_msg=contender)
    # The GPUs' A/B in bench/ansatz.py: the rule's XLA form on stacks, lowered after the
    # kernel's program was traced (above), holds no kernel, and agrees with it.
    kernel_form = ansatz.workloads(n_el, "tinyla")["E_L folx"]
    assert "tinyla_log_det_laplacian" in kernel_form.lower(params, xs).as_text()
    xla_form = ansatz.lowered_with_xla_form(lambda: ansatz.workloads(n_el, "tinyla")["E_L folx"], params, xs)
    assert "tinyla_log_det_laplacian" not in xla_form.as_text()
    np.testing.assert_allclose(xla_form.compile()(params, xs), kernel_form(params, xs), rtol=1e-10)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("n", [4, 32, 33])
def test_log_det_laplacian_gpu_lowering(platform, n):
    """GPU lowerings (no GPU needed): tinyla's kernel up to n = 32 where tinyla has that GPU's
    backend, else (and above n = 32) the op's jnp form; the CPU's always the kernel."""
    from tinyla.jax import _log_det_laplacian
    ops = [random_matrices(shape, np.float64, seed=i) for i, shape in enumerate([(3, n, n), (3, n, n), (3, 5, n, n)])]
    traced = jax.jit(_log_det_laplacian).trace(*ops)
    hlo = traced.lower(lowering_platforms=(platform,)).as_text()
    if platform in tlj.GPU_PLATFORMS and n <= tlj.LOG_DET_LAPLACIAN_GPU_MAX_N:
        assert "tinyla_log_det_laplacian" in hlo and "dot_general" not in hlo
    else:
        assert "custom_call" not in hlo and "dot_general" in hlo
    assert "tinyla_log_det_laplacian" in traced.lower(lowering_platforms=("cpu",)).as_text()
