"""Forward-Laplacian rules for folx (Li et al., "A computational framework for neural network-based
variational Monte Carlo with Forward Laplacian", arXiv:2307.08214; pip install folx) on tinyla's
ops, registered with folx's public register_function under the names of tinyla's jit entry
points (tinyla_slogdet, tinyla_det, tinyla_slogdet_sum[_weighted]). Imported by tinyla.jax when
folx is installed.

Each rule takes log|det A|, A^-1 and sign from one fused tinyla call, then, for the Jacobian of A
with respect to the inputs x (folx's FwdJacobian) and its Laplacian:
  d_c log det A = tr(A^-1 dA/dx_c),   Delta log det A = tr(A^-1 Delta A) - sum_c tr((A^-1 dA/dx_c)^2).
Where folx's Jacobian is sparse so that every input coordinate enters one row of A only (or one
column) -- a Slater matrix A_ij = phi_j(r_i) of one-electron orbitals -- dA/dx_c = e_i w^T and
tr((A^-1 dA/dx_c)^2) = (d_c log det A)^2: O(n^2) per coordinate instead of O(n^3). Otherwise the
dense Jacobian of one matrix goes to tinyla's log_det_laplacian kernel: A^-1 dA/dx_c formed and
reduced in cache, never written, the Jacobian's zero rows skipped at run time (folx's default
sparsity_threshold = 0 hands every rule a dense Jacobian, even for one-electron orbitals), a stack of
them (K determinants per folx call) too (see _STACK_KERNEL_PLATFORMS).
"""
from __future__ import annotations

import functools
import operator

import numpy as np

import jax
import jax.numpy as jnp
from folx import register_function
from folx.api import JAC_DIM, FwdJacobian, FwdLaplArray

from tinyla import jax as _tlj

assert JAC_DIM == 0, "tinyla's folx rules assume folx keeps the Jacobian's tangent axis first"


def _static_mask(jacobian: FwdJacobian, shape) -> np.ndarray | None:
    """The Jacobian's coordinate index of every (tangent, row, column), shape (k, n, n), when it
    is static and the same at every batch position; None otherwise."""
    idx = jacobian.x0_idx
    if idx is None:
        return None
    k = jacobian.data.shape[0]
    try:
        idx = np.broadcast_to(idx, (k, *shape))
    except ValueError:
        return None
    flat = idx.reshape(k, -1, *shape[-2:])
    if not (flat == flat[:, :1]).all():
        return None
    return flat[:, 0]


def _row_coordinates(mask: np.ndarray):
    """For a mask in which every coordinate enters one row only: (row, coordinate) of each
    (tangent, row) slot as a flat coordinate id per slot (-1: none), plus the sorted unique
    coordinates. None when some slot mixes coordinates or a coordinate spans rows."""
    k, n, _ = mask.shape
    slot = np.full((k, n), -1)
    for t in range(k):
        for i in range(n):
            used = np.unique(mask[t, i][mask[t, i] >= 0])
            if used.size > 1:
                return None
            if used.size == 1:
                slot[t, i] = used[0]
    rows = {}
    for (t, i), c in np.ndenumerate(slot):
        if c >= 0 and rows.setdefault(c, i) != i:
            return None
    if not rows:
        return None
    coords = np.array(sorted(rows))
    return slot, coords


# Platforms on which a stack of matrices (K determinants per folx call, FermiNet's form) with a
# dense Jacobian goes to the log_det_laplacian kernel too; elsewhere XLA contracts it (_log_det).
# The kernel needs the Jacobian written out where XLA's contraction fuses the Jacobian's producer
# into its loop; on the CPU the kernel was faster all the same: bench/ansatz.py's folx energy 8-16 %
# faster at n = 5..14 and 24 (best against best), at 16 in 3 of 5 runs, equal at n = 2, 3, with as
# much memory (docs/benchmarks.md, Table 3). GPUs too, by memory: compiled for an H100 without a
# device (tests/gpu_programs; bench/ansatz.py, 256 walkers, docs/gpu.md), XLA's form held more
# temporary memory than folx + jnp at n_el = 16 and 32 -- the folx energy 652 and 765 MiB against
# 589 and 685, the VMC step at 32 997 against 708 -- and the kernel 589, 729 and 703, in fewer
# kernels; in time the kernel on stacks equalled XLA's form at n_el = 4 on an H200, and on one
# matrix it was 0.99-1.31x as fast (Table 2). bench/ansatz.py times XLA's form beside it on a GPU.
_STACK_KERNEL_PLATFORMS = ("cpu", "cuda", "rocm")
# For XLA's form (bench/ansatz.py's comparison): M_c = A^-1 dA/dx_c as a dot for these n,
# elsewhere as _matmul lowers it (fused element-wise products up to n = 4 on GPUs, a dot above).
# The fused form takes folx's Jacobian into its loop, so when that Jacobian is itself a fused
# expression (the product rule of the orbitals) XLA recomputes it for each of the n terms of every
# entry; a dot's operand is written once. Measured on the CPU (the folx Laplacian of
# bench/qmc_workload.py's Slater ansatz, 256 walkers, both in one process, when the CPU took this
# form): the dot 5-16 % faster at n = 7..15, the fused form 12-14 % faster at n = 4..6 and 1-8 % at
# n = 16..24 (there XLA writes the Jacobian out itself). tr(M_c M_c) is a reduction: on an H100
# (jax 0.11.2, bench/ansatz.py's folx local energy, n_el = 16, 4096 walkers, stacks of K = 16
# blocks of n = 8, all in one process) jnp 45.1 ms, tinyla with the pair sums as element-wise adds
# 50.5, with the reduction 40.5, the zero-cost stand-in 31.9.
_DOT_PRODUCTS_N = range(7, 16)


def _add_all(terms):
    return functools.reduce(operator.add, terms)


def _sum_tangents(x):
    """The sum over folx's tangent axis (the first), as element-wise adds."""
    return _add_all(x[c] for c in range(x.shape[0])) if x.shape[0] else jnp.zeros(x.shape[1:], x.dtype)


def _static_segment_sum(x, segment: np.ndarray, count: int):
    """jax.ops.segment_sum(x, segment, count) for segment ids known when tracing, every id below
    count present: a gather per occurrence and adds (one gather where each coordinate has one
    slot, the Slater matrix's case), where segment_sum is a scatter-add. folx's Laplacian of
    bench/qmc_workload.py's Slater ansatz at FermiNet's sparsity, 256 walkers, a Zen 5 guest, both
    forms in one process, two runs: 0.216 and 0.210 -> 0.202 and 0.201 ms at n_el = 4 (the
    zero-cost stand-in 0.168), 0.497 and 0.544 -> 0.487 and 0.535 at 8; at 16 and 32 within +-5 %
    either way (16: 1 % faster in three more runs)."""
    order = np.argsort(segment, kind="stable")  # slots by coordinate, in slot order
    counts = np.bincount(segment, minlength=count)
    if counts.min() == counts.max():  # row s: coordinate s's slots
        slots = order.reshape(count, -1)
        return _add_all(x[slots[:, m]] for m in range(slots.shape[1]))
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    padded = jnp.concatenate([x, jnp.zeros_like(x[:1])])  # row len(x): zero, for coordinates with fewer slots
    return _add_all(padded[np.where(counts > m, order[np.minimum(first + m, len(order) - 1)], len(x))]
                    for m in range(int(counts.max())))


def _log_det(a: FwdLaplArray, inverse_t):
    """The Jacobian (FwdJacobian) and Laplacian of log det A from A^-T (complex for complex A:
    the real parts belong to log|det A|, the imaginary ones to the phase)."""
    shape = a.x.shape
    mask = _static_mask(a.jacobian, shape)
    for transposed in (False, True):
        plan = None if mask is None else _row_coordinates(np.swapaxes(mask, -1, -2) if transposed else mask)
        if plan is None:
            continue
        slot, coords = plan
        data = jnp.broadcast_to(a.jacobian.data, (a.jacobian.data.shape[0], *shape))
        inv_t = inverse_t
        if transposed:
            data, inv_t = jnp.swapaxes(data, -1, -2), jnp.swapaxes(inverse_t, -1, -2)
        m = np.swapaxes(mask, -1, -2) if transposed else mask
        data = jnp.where(m.reshape(m.shape[0], *(1,) * (len(shape) - 2), *m.shape[1:]) >= 0, data, 0)
        # slot (t, i): sum_j dA_ij/dx_c A^-1_ji; coordinate c: the sum over its slots
        per_slot = jnp.sum(data * inv_t, axis=-1)  # (k, ..., n)
        per_slot = jnp.moveaxis(per_slot, -1, 1).reshape(-1, *shape[:-2])  # (k n, ...)
        ids = slot.reshape(-1)
        used = ids >= 0
        segment = np.searchsorted(coords, ids[used])
        grad = _static_segment_sum(per_slot[np.flatnonzero(used)], segment, coords.size)
        laplacian = jnp.sum(inverse_t * a.laplacian, axis=(-2, -1)) - _sum_tangents(grad * grad)  # tr(A^-1 Delta A)
        index = np.broadcast_to(coords.reshape(-1, *(1,) * (grad.ndim - 1)), grad.shape)
        return FwdJacobian(grad, index), laplacian
    dense = jnp.broadcast_to(a.jacobian.dense_array, (a.jacobian.data.shape[0], *shape))  # (K, ..., n, n)
    if shape[-1] == 0:  # det of a 0 x 0 matrix: 1 whatever x is
        return (FwdJacobian.from_dense(jnp.zeros(dense.shape[:-2], dense.dtype)),
                jnp.zeros(shape[:-2], inverse_t.dtype))
    lap_a = jnp.broadcast_to(a.laplacian, shape)
    if len(shape) == 2:  # one matrix per folx call (vmap over walkers, as folx is used)
        grad, laplacian = _kernel_contraction(inverse_t, lap_a, dense)
    else:
        branches = {p: _kernel_contraction for p in _STACK_KERNEL_PLATFORMS}
        grad, laplacian = jax.lax.platform_dependent(inverse_t, lap_a, dense, **branches, default=_xla_contraction)
    return FwdJacobian.from_dense(grad), laplacian


def _kernel_contraction(inverse_t, lap_a, dense):
    """(tr M_c (C, ...), the Laplacian (...)) by tinyla's log_det_laplacian kernel: each
    M_c = A^-1 dA/dx_c formed in cache only, the Jacobian's zero rows skipped at run time."""
    grad, laplacian = _tlj._log_det_laplacian(inverse_t, lap_a, jnp.moveaxis(dense, 0, -3))
    return jnp.moveaxis(grad, -1, 0), laplacian


def _xla_contraction(inverse_t, lap_a, dense):
    """The same as XLA code (see _STACK_KERNEL_PLATFORMS)."""
    n = inverse_t.shape[-1]
    inverse = jnp.swapaxes(inverse_t, -1, -2)
    if n in _DOT_PRODUCTS_N:
        products = jnp.einsum("...ij,k...jd->k...id", inverse, dense, precision=jax.lax.Precision.HIGHEST)
    else:
        products = _tlj._matmul(inverse, dense)
    grad = _add_all(products[..., i, i] for i in range(n))  # tr M_c
    squares = jnp.sum(products * jnp.swapaxes(products, -1, -2), axis=(-2, -1))  # tr(M_c M_c)
    return grad, jnp.sum(inverse_t * lap_a, axis=(-2, -1)) - _sum_tangents(squares)  # tr(A^-1 Delta A) - ...


def _padded(data, width: int):
    """A dense Jacobian (C, ...) padded with zero tangents to width C."""
    if data.shape[0] < width:
        data = jnp.concatenate([data, jnp.zeros((width - data.shape[0], *data.shape[1:]), data.dtype)])
    return data


def _sum_terms(x):
    """The sum over the determinants' axis K (the last), as element-wise adds."""
    return _add_all(x[..., k] for k in range(x.shape[-1])) if x.shape[-1] else jnp.zeros(x.shape[:-1], x.dtype)


def _split_log(sign, logabsdet, grad, laplacian):
    """(sign, FwdLaplArray of log|.|) from the derivatives of a complex or real log."""
    if jnp.iscomplexobj(grad):
        phase, phase_laplacian = jnp.imag(grad), jnp.imag(laplacian)
        sign = FwdLaplArray(sign, FwdJacobian.from_dense(1j * sign * phase),
                            sign * (1j * phase_laplacian - _sum_tangents(phase * phase)))
        grad, laplacian = jnp.real(grad), jnp.real(laplacian)
    return sign, FwdLaplArray(logabsdet, FwdJacobian.from_dense(grad), laplacian)


def _slogdet_rule(args, kwargs, sparsity_threshold):
    (a,) = args
    if not isinstance(a, FwdLaplArray):
        return tuple(_tlj._slogdet(a))
    sign, logabsdet, inverse_t = _tlj._slogdet_inv(a.x, True)  # one factorization
    jacobian, laplacian = _log_det(a, inverse_t)
    if not jnp.iscomplexobj(laplacian):
        return sign, FwdLaplArray(logabsdet, jacobian, laplacian)
    return _split_log(sign, logabsdet, jacobian.dense_array, laplacian)


def _det_rule(args, kwargs, sparsity_threshold):
    """det = exp(log det): d det = det d log det, Delta det = det (Delta log det + |d log det|^2)."""
    (a,) = args
    if not isinstance(a, FwdLaplArray):
        return _tlj._det(a)
    det = _tlj._det(a.x)  # rounded once from tinyla's mantissa and exponent
    jacobian, laplacian = _log_det(a, _tlj._inv(a.x, True))
    grad = jacobian.dense_array
    return FwdLaplArray(det, FwdJacobian.from_dense(det * grad),
                        det * (laplacian + _sum_tangents(grad * grad)))


def _slogdet_sum_rule(weighted: bool):
    """log psi, psi = sum_k w_k prod_s det A_ks: with p_k = w_k prod_s det A_ks / psi,
    d log psi = sum_k p_k d L_k and Delta log psi = sum_k p_k (Delta L_k + |d L_k|^2) - |d log psi|^2,
    L_k = sum_s log det A_ks (weights constant in x)."""

    def rule(args, kwargs, sparsity_threshold):
        xs, weights = (args[:-1], args[-1]) if weighted else (args, None)
        if isinstance(weights, FwdLaplArray):
            raise NotImplementedError("tinyla.jax.slogdet_sum under folx: weights must not depend on the "
                                      "differentiated inputs")
        if not any(isinstance(x, FwdLaplArray) for x in xs):
            return tuple(_tlj._slogdet_sum(tuple(xs), weights))
        values = [x.x if isinstance(x, FwdLaplArray) else x for x in xs]
        products, shift, inverses_t, total = _tlj._determinant_products(tuple(values), weights)  # one call per block
        sign, logabsdet = _tlj._sign_and_log(total, shift)
        terms = products if weights is None else products * weights
        p = terms / total[..., None]  # (..., K)
        blocks = [_log_det(x, inv_t) for x, inv_t in zip(xs, inverses_t) if isinstance(x, FwdLaplArray)]
        jacobians = [jac.dense_array for jac, _ in blocks]
        width = max(jac.shape[0] for jac in jacobians)
        grad_terms = _add_all(_padded(jac, width) for jac in jacobians)  # (C, ..., K)
        laplacian_terms = _add_all(lap for _, lap in blocks)
        grad = _sum_terms(p * grad_terms)
        laplacian = (_sum_terms(p * (laplacian_terms + _sum_tangents(grad_terms * grad_terms)))
                     - _sum_tangents(grad * grad))
        if not jnp.iscomplexobj(grad):
            return sign, FwdLaplArray(logabsdet, FwdJacobian.from_dense(grad), laplacian)
        return _split_log(sign, logabsdet, grad, laplacian)

    return rule


register_function("tinyla_slogdet", _slogdet_rule)
register_function("tinyla_det", _det_rule)
register_function("tinyla_slogdet_sum", _slogdet_sum_rule(False))
register_function("tinyla_slogdet_sum_weighted", _slogdet_sum_rule(True))
