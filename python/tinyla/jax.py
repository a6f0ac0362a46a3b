"""jax.numpy.linalg's contract on tinyla's batched kernels, as XLA FFI calls.

    import tinyla.jax as tlj
    sign, logabsdet = tlj.slogdet(x)          # drop-in for jnp.linalg.slogdet
    jax.jit(jax.grad(lambda x: tlj.slogdet(x)[1].sum()))(x)

``slogdet, det, inv, solve`` take and return what ``jax.numpy.linalg`` does
(shapes ``(..., n, n)``, float32/float64/complex64/complex128, integers and bool
promoted as jnp promotes them), plus ``slogdet_inv(a) -> (sign, logabsdet, inverse)``
from one factorization, ``slogdet_sum`` (multi-determinant sums) and ``use_for_jnp()``
(routes jnp.linalg to tinyla at trace time); ``export_disabled_checks()`` for
``jax.export``. Each op is one custom call over the whole
batch: every leading dimension is batch, so ``jit``, ``vmap`` (nested), empty batches
and n = 0 need nothing special. Small n lowers to element-wise XLA code instead
(_closed_form.py), which XLA fuses with its neighbours: n <= 2 on GPUs, n = 1 on the CPU
(CLOSED_FORM_MAX_N). With folx installed, its forward Laplacian finds
tinyla's rules (_folx.py) by the names of the jit entry points (tinyla_slogdet, ...).

Derivatives of any order come from ``custom_jvp`` rules written with these same
ops, so each order stays on tinyla's kernels and no rule factorizes twice:
  d logabsdet = Re tr(A^-1 dA), d sign = sign * i Im tr(A^-1 dA) (complex; 0 for real),
  the A^-1 coming from the fused slogdet_inv that also gives the primal;
  d A^-1 = -A^-1 dA A^-1;  d det = tr(adj(A) dA), the adjugate and det from one call;
  d solve(A, B) = A^-1 (dB - dA X), with X and A^-1 from one solve against [B | I].

Sharding: the custom calls are registered as batch-partitionable, so XLA's SPMD
partitioner runs them per shard of the leading dimensions (no all-gather of the
batch); under ``shard_map`` each shard calls tinyla on its block.

Platforms: the CPU always; NVIDIA (jax platform "cuda") and AMD ("rocm") GPUs when
the package was built with the GPU backend (``GPU_PLATFORMS`` lists them). On a GPU
the calls run on XLA's stream, give the CPU's bits, and may be captured in command
buffers; on a GPU platform tinyla was not built for, lowering raises an error that
says how to build it.

Singular matrices (an exactly zero pivot): slogdet gives (0, -inf) and det 0, as
jnp does; inv / solve / slogdet_inv's inverse are NaN-filled (jnp gives inf/NaN).
A NaN entry gives NaN sign and logabsdet for that matrix (jnp's LU may report such
a matrix as singular instead). Derivatives at exactly singular matrices are NaN,
except det's: its first derivative is the adjugate at every matrix (finite; at rank
n - 1 formed from the LU with the zero pivots set to 1, at lower rank 0), its second
is finite and accurate at rank n - 1 and near it (_cofactors_tangent), and at n <= 2
every order is finite (the determinant's polynomial, differentiated).
"""
from __future__ import annotations

import ctypes
import functools
import operator
import os
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.extend.mlir.dialects import sdy
from jax.interpreters import batching, mlir
from jax.sharding import NamedSharding, PartitionSpec

from tinyla import _closed_form, _native
from tinyla._common import SlogdetInvResult, SlogdetResult, real_dtype, solve_shapes

__all__ = ["slogdet", "det", "inv", "solve", "slogdet_inv", "slogdet_sum", "use_for_jnp", "SlogdetResult",
           "SlogdetInvResult", "GPU_PLATFORMS", "export_disabled_checks"]

class UnsupportedDtypeError(TypeError, NotImplementedError):
    """A dtype tinyla has no kernels for (jnp.linalg raises NotImplementedError there)."""


_HALF = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


def _is_arraylike(x) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "__jax_array__")


def _inexact(op: str, *arrays):
    """jnp's promote_dtypes_inexact: common dtype; bool and integers up to 32 bits
    -> float32, 64-bit integers -> float64 (float32 without x64). float16 and bfloat16
    compute in float32. Returns the arrays in the computation dtype and a function that
    casts a result (a pytree) to the promoted dtype. Lists raise TypeError, as in jnp."""
    for i, x in enumerate(arrays):
        if not _is_arraylike(x):
            raise TypeError(f"tinyla.jax.{op} requires ndarray or scalar arguments, got {type(x)} at position {i}.")
    arrays = [jnp.asarray(x) for x in arrays]
    dt = np.dtype(jnp.result_type(*arrays))
    if dt.kind in "biu":
        dt = jax.dtypes.canonicalize_dtype(np.float64 if dt.itemsize == 8 else np.float32)
    if dt in _HALF:  # no half-precision kernels: float32 arithmetic, one rounding at the end
        return [x.astype(np.float32) for x in arrays], lambda r: jax.tree.map(lambda y: y.astype(dt), r)
    if dt not in _native.SUPPORTED:
        raise UnsupportedDtypeError(f"tinyla.jax.{op}: unsupported dtype {dt.name} "
                                    f"(supported: float16, bfloat16 via float32, float32, float64, "
                                    f"complex64, complex128)")
    return [x.astype(dt) for x in arrays], lambda r: r


def _check_square(op: str, a: jax.Array) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"tinyla.jax.{op}: argument must have shape (..., n, n), got {a.shape}")


# ---- the custom calls: one primitive per op ------------------------------------------------
# Own primitives rather than jax.ffi.ffi_call, because XLA's partitioners must learn that
# every leading dimension is batch, which ffi_call cannot say: the lowering attaches a
# frontend attribute num_batch_dims (GSPMD; the target is registered batch-partitionable)
# and an sdy.sharding_rule (Shardy), as jax's own linalg custom calls do, and abstract
# evaluation carries the batch sharding over to the results (explicit sharding). Matrix
# dimensions must be replicated: a kernel needs whole matrices.

_handlers = ctypes.CDLL(_native.LIBTINYLA_XLA)


def _load_gpu_handlers() -> dict[str, ctypes.CDLL]:
    handlers = {}
    for platform, path in _native.LIBTINYLA_XLA_GPU.items():
        if not os.path.exists(path):
            continue
        try:  # loads without a GPU too: the runtime is reached at the first call
            handlers[platform] = ctypes.CDLL(path)
        except OSError as e:
            warnings.warn(f"tinyla.jax: {os.path.basename(path)} did not load ({e}); "
                          f"tinyla will not run on {platform}", RuntimeWarning, stacklevel=2)
    return handlers


_gpu_handlers = _load_gpu_handlers()
GPU_PLATFORMS: tuple[str, ...] = tuple(_gpu_handlers)  # jax platforms with tinyla kernels, e.g. ("cuda",)


@functools.cache
def _default_platform() -> str:
    """The platform jax lowers for on its default backend: "cpu", "cuda", "rocm" or "other"
    (jax.default_backend() says "gpu" for both GPUs). Asked of lax.platform_dependent itself."""
    names = ("cpu", "cuda", "rocm")
    branches = {p: (lambda i=i: jnp.int32(i)) for i, p in enumerate(names)}
    index = int(jax.jit(lambda: jax.lax.platform_dependent(**branches, default=lambda: jnp.int32(-1)))())
    return names[index] if index >= 0 else "other"


def _result_types(op: str, avals) -> list[tuple[tuple, np.dtype]]:
    a = avals[0]
    batch, real = a.shape[:-2], real_dtype(a.dtype)
    if op == "slogdet":
        return [(batch, a.dtype), (batch, real)]
    if op == "det":
        return [(batch, a.dtype)]
    if op in ("inv", "inv_transposed"):
        return [(a.shape, a.dtype)]
    if op == "solve":
        return [(avals[1].shape, a.dtype)]
    if op == "det_cofactors":
        return [(batch, a.dtype), (a.shape, a.dtype)]
    if op == "log_det_laplacian":  # (inverse_t, lap_a, da): grad (..., k), laplacian (...)
        return [(avals[2].shape[:-2], a.dtype), (batch, a.dtype)]
    return [(batch, a.dtype), (batch, real), (a.shape, a.dtype)]  # slogdet_inv, slogdet_inv_transposed


def _abstract_eval(*avals, op):
    batch_rank = avals[0].ndim - 2
    batch_spec = None
    for i, aval in enumerate(avals):
        spec = tuple(aval.sharding.spec)
        spec += (None,) * (aval.ndim - len(spec))
        if any(s is not None for s in spec[batch_rank:]):
            raise ValueError(f"tinyla.jax.{op}: operand {i} is sharded along its matrix dimensions "
                             f"({PartitionSpec(*spec)}); shard only the leading (batch) dimensions")
        if batch_spec is None:
            batch_spec = spec[:batch_rank]
        elif spec[:batch_rank] != batch_spec:
            raise ValueError(f"tinyla.jax.{op}: operands are sharded differently along the batch dimensions "
                             f"({PartitionSpec(*batch_spec)} vs {PartitionSpec(*spec[:batch_rank])})")

    def result(shape, dtype):  # update() keeps what else the aval carries (shard_map's varying axes)
        spec = PartitionSpec(*batch_spec, *(None,) * (len(shape) - batch_rank))
        sharding = avals[0].sharding
        return avals[0].update(shape=shape, dtype=dtype, weak_type=False, sharding=NamedSharding(
            sharding.mesh, spec, memory_kind=sharding.memory_kind))

    return [result(shape, dtype) for shape, dtype in _result_types(op, avals)]


def _sdy_sharding_rule(avals_in, avals_out, batch_rank: int):
    """Shardy: the batch dimensions are factors shared by all operands and results;
    every other dimension is a factor of its own that must be replicated."""
    factor_sizes = list(avals_in[0].shape[:batch_rank])
    mappings = []
    for aval in (*avals_in, *avals_out):
        dims = [sdy.DimMappingAttr.get(factor_indices=[i]) for i in range(batch_rank)]
        for size in aval.shape[batch_rank:]:
            factor_sizes.append(size)
            dims.append(sdy.DimMappingAttr.get(factor_indices=[len(factor_sizes) - 1]))
        mappings.append(sdy.TensorMappingAttr.get(dim_mappings=dims))
    return sdy.OpShardingRuleAttr.get(
        factor_sizes=factor_sizes, operand_mappings=mappings[:len(avals_in)],
        result_mappings=mappings[len(avals_in):], is_custom=True,
        need_replication_factors=list(range(batch_rank, len(factor_sizes))))


def _lowering(ctx, *args, op):
    batch_rank = len(ctx.avals_in[0].shape) - 2
    extra = None
    if batch_rank > 0:
        extra = {"mhlo.frontend_attributes": mlir.ir.DictAttr.get(
            {"num_batch_dims": mlir.ir.StringAttr.get(str(batch_rank))})}
        if jax.config.jax_use_shardy_partitioner:
            extra["sdy.sharding_rule"] = _sdy_sharding_rule(ctx.avals_in, ctx.avals_out, batch_rank)
    return jax.ffi.ffi_lowering(f"tinyla_{op}", extra_attributes=extra)(ctx, *args)


def _batching_rule(args, dims, *, prim):
    """vmap: the mapped axis becomes one more leading batch dimension."""
    size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
    args = [jnp.broadcast_to(x, (size, *x.shape)) if d is None else jnp.moveaxis(x, d, 0)
            for x, d in zip(args, dims)]
    out = prim.bind(*args)
    return out, [0] * len(out)


def _missing_gpu_lowering(ctx, *args, op, platform):
    raise NotImplementedError(
        f"tinyla.jax.{op}: this tinyla was built without its {platform} backend; reinstall it with "
        f"pip install -C cmake.define.TINYLA_{'CUDA' if platform == 'cuda' else 'HIP'}=ON . "
        f"(docs/gpu.md), or run on the CPU")


def _by_size(small, max_n, large):
    """The lowering `small` for n <= max_n() (called when lowering), `large` above."""
    def lowering(ctx, *args):
        return (small if ctx.avals_in[0].shape[-1] <= max_n() else large)(ctx, *args)
    return lowering


def _make_primitive(op: str, gpu_reference=None, gpu_kernel_max_n=None, closed_form: bool = False) -> Primitive:
    """gpu_reference: the jnp function that GPUs lower where tinyla has no GPU kernel for the op:
    at every n, or with gpu_kernel_max_n (a function, called when lowering) above it, and where
    tinyla was built without that GPU's backend. closed_form: small n lowers to _closed_form's
    code (CLOSED_FORM_MAX_N)."""
    target = f"tinyla_{op}"
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(_handlers, f"tinyla_xla_{op}")), platform="cpu")
    has_gpu_kernel = gpu_reference is None or gpu_kernel_max_n is not None
    for platform, lib in _gpu_handlers.items() if has_gpu_kernel else ():
        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(lib, f"tinyla_xla_{op}")),
                                    platform=platform.upper())
    jax.ffi.register_ffi_target_as_batch_partitionable(target)
    prim = Primitive(target)
    prim.multiple_results = True
    prim.def_impl(lambda *args: jax.jit(prim.bind)(*args))  # eager use: compile the one call
    prim.def_abstract_eval(functools.partial(_abstract_eval, op=op))
    batching.primitive_batchers[prim] = functools.partial(_batching_rule, prim=prim)
    if not hasattr(jax, "shard_map"):
        # jax < 0.6: jax.experimental.shard_map checks replication by a rule per primitive
        # (newer jax carries it in the avals, which _abstract_eval keeps). Each result is
        # computed from the operands' same batch entries: the standard rule.
        from jax.experimental import shard_map as legacy_shard_map
        legacy_shard_map.register_standard_check(prim)
        legacy_shard_map.register_standard_rewrite(prim)
    for platform in ("cpu", "cuda", "rocm"):
        kernel = functools.partial(_lowering, op=op)
        if platform != "cpu" and gpu_reference is not None:
            rule = mlir.lower_fun(gpu_reference, multiple_results=True)
            if has_gpu_kernel and platform in _gpu_handlers:
                rule = _by_size(kernel, gpu_kernel_max_n, rule)
        elif platform == "cpu" or platform in _gpu_handlers:
            rule = kernel
        else:
            rule = functools.partial(_missing_gpu_lowering, op=op, platform=platform)
        if closed_form:  # the closed form's XLA code where n is small enough (CLOSED_FORM_MAX_N)
            rule = _by_size(mlir.lower_fun(functools.partial(_closed_form.call, op), multiple_results=True),
                            lambda platform=platform: CLOSED_FORM_MAX_N.get(platform, 0), rule)
        mlir.register_lowering(prim, rule, platform=platform)
    return prim


_OPS = ("slogdet", "det", "inv", "inv_transposed", "solve", "slogdet_inv", "slogdet_inv_transposed", "det_cofactors")
# Largest n lowered to element-wise XLA code (_closed_form.py) instead of tinyla's kernels, per
# jax platform; read when a function is lowered (after a change, jax.clear_caches()).
# GPUs: n <= 2, fused with its neighbours into one kernel (the n = 1, 2 case of
# ROCm/rocm-jax#259). The CPU: n = 1 only. At n = 2 XLA's CPU loops evaluate the closed form's
# ~100 scalar operations per matrix once per output entry, and the kernel is faster:
# (4096, 64, 2, 2), a Zen 4 guest, grad 0.60 vs 2.1 ms float64 and 1.2 vs 21 ms complex128,
# forward 0.56 vs 1.3 ms; inside a FermiNet-like step with 2 x 2 blocks no difference
# (docs/benchmarks.md). At n = 1 the closed form is one operation per matrix.
CLOSED_FORM_MAX_N = {"cpu": 1, "cuda": 2, "rocm": 2}
_PRIMITIVES = {op: _make_primitive(op, closed_form=True) for op in _OPS}


def _log_det_laplacian_jnp(inverse_t, lap_a, da):
    """What the log_det_laplacian kernel computes, in jnp: from A^-T, the Laplacian of A and the
    tangents dA/dx_c (..., k, n, n), grad_c = tr(A^-1 dA/dx_c) and
    laplacian = tr(A^-1 lap_a) - sum_c tr((A^-1 dA/dx_c)^2)."""
    products = jnp.einsum("...ji,...cjk->...cik", inverse_t, da, precision=jax.lax.Precision.HIGHEST)
    grad = jnp.trace(products, axis1=-2, axis2=-1)
    squares = jnp.sum(products * jnp.swapaxes(products, -1, -2), axis=(-3, -2, -1))
    return grad, jnp.sum(inverse_t * lap_a, axis=(-2, -1)) - squares


# GPUs: tinyla's kernel up to n = LOG_DET_LAPLACIAN_GPU_MAX_N (at most 32: src/gpu/kernels.hpp), its jnp
# form above and where tinyla was built without the GPU's backend. Read when a function is lowered
# (0: the jnp form at every n, to compare the two on a GPU; after a change, jax.clear_caches()).
LOG_DET_LAPLACIAN_GPU_MAX_N = 32
_PRIMITIVES["log_det_laplacian"] = _make_primitive(
    "log_det_laplacian", gpu_reference=_log_det_laplacian_jnp,
    gpu_kernel_max_n=lambda: min(LOG_DET_LAPLACIAN_GPU_MAX_N, 32))


def _call(op: str, *args) -> list[jax.Array]:
    if args[0].shape[-1] == 0:  # nothing to compute: constants, on every platform
        return _closed_form.call(op, *args)
    return _PRIMITIVES[op].bind(*args)


# ---- derivative rules: written with the ops themselves, so every order is a rule -------

_HIGHEST = jax.lax.Precision.HIGHEST  # no reduced-precision matmuls in tangents (GPU)


# Largest contraction size k at which _matmul is one element-wise expression, per platform;
# above it, a dot. Measured inside FermiNet's local energy (bench/ansatz.py's Hessian trace, a
# Zen 5 guest, one thread, both forms in one process): the fused form 15-23 % faster at k = 5, 7,
# the dot 4 % faster at k = 8, equal at 12, 6 % faster at 16 (where the step then reaches the
# zero-cost stand-in). Alone, on a (B, 64, k, k) input, the fused form is the faster, 1.3-1.7x at
# k = 8, 16; why the model turns this around was not found (forcing the fused form's operands or
# its result into memory did not change it). XLA's GPU compiler splits the fused form into 20-70
# kernels from k = 5 on (k = 6 for some device descriptions) and the Hessian-vector product then
# holds 1.2-1.4x jnp's temporary memory, where the dot is 4 kernels and 0.94-0.99x jnp's memory
# ((4096, 64, k, k) float64, compiled for an H100 and an H200 by tests/gpu_programs).
_FUSED_MATMUL_MAX_K = {"cpu": 7, "gpu": 4}


def _matmul(x, y):
    """x @ y in the form that platform compiles best (_FUSED_MATMUL_MAX_K, read when tracing): a
    sum of rank-1 products, in the order a dot's would run, or a dot; the platform's form is
    picked when lowering (lax.platform_dependent)."""
    k = x.shape[-1]

    def fused(x, y):
        return functools.reduce(operator.add, (x[..., :, j, None] * y[..., None, j, :] for j in range(k)))

    def dot(x, y):
        return jnp.matmul(x, y, precision=_HIGHEST)

    cpu, gpu = (fused if 0 < k <= _FUSED_MATMUL_MAX_K[p] else dot for p in ("cpu", "gpu"))
    if cpu is gpu:
        return cpu(x, y)
    return jax.lax.platform_dependent(x, y, cpu=cpu, default=gpu)


def _trace_with_inverse(inverse, da, transposed: bool):
    """tr(A^-1 dA) per matrix from inverse = A^-1 (or A^-T when transposed): an elementwise
    product and a sum, which XLA fuses; with A^-T not even a transposition."""
    inverse_t = inverse if transposed else jnp.swapaxes(inverse, -1, -2)
    return jnp.sum(inverse_t * da, axis=(-2, -1))


def _inverse_tangent(inverse, da, transposed: bool):
    """d A^-1 = -A^-1 dA A^-1; its transpose -A^-T dA^T A^-T when transposed."""
    return -_matmul(_matmul(inverse, jnp.swapaxes(da, -1, -2) if transposed else da), inverse)


def _slogdet_tangents(sign, t):
    """Tangents of (sign, logabsdet) from t = tr(A^-1 dA)."""
    if jnp.iscomplexobj(sign):
        return sign * (t - jnp.real(t)), jnp.real(t)  # d phase = phase * i Im t
    return jnp.zeros_like(sign), t


@jax.custom_jvp
def _slogdet(a):
    return tuple(_call("slogdet", a))


@_slogdet.defjvp
def _slogdet_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    if a.shape[-1] <= 2:
        # No factorization to share: kept apart, so that only the inverse is computed when only
        # the gradient is used -- XLA drops a closed form's unused value, and the CPU's n = 2
        # kernel for the inverse alone takes 0.50 ms at (4096, 64, 2, 2) where slogdet_inv
        # takes 0.73 (value_and_grad then pays two calls there: 1.19 ms).
        (sign, logabsdet), inverse_t = _slogdet(a), _inv(a, True)
    else:
        # One factorization for the value and the gradient; the kernel writes A^-T, the
        # gradient of logabsdet itself, so reverse mode needs no transposition pass.
        sign, logabsdet, inverse_t = _slogdet_inv(a, True)
    return (sign, logabsdet), _slogdet_tangents(sign, _trace_with_inverse(inverse_t, da, True))


# transposed (static): the inverse output is A^-T, bit for bit the transpose of A^-1.
@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _slogdet_inv(a, transposed: bool = False):
    return tuple(_call("slogdet_inv_transposed" if transposed else "slogdet_inv", a))


@_slogdet_inv.defjvp
def _slogdet_inv_jvp(transposed, primals, tangents):
    (a,), (da,) = primals, tangents
    sign, logabsdet, inverse = _slogdet_inv(a, transposed)
    dsign, dlogabsdet = _slogdet_tangents(sign, _trace_with_inverse(inverse, da, transposed))
    return (sign, logabsdet, inverse), (dsign, dlogabsdet, _inverse_tangent(inverse, da, transposed))


@jax.custom_jvp
def _det(a):
    return _call("det", a)[0]


@_det.defjvp
def _det_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    # d det = tr(adj(A) dA) with det from the same factorization: no division by det, so finite
    # at singular matrices too, and where det overflows but its cofactors do not.
    d, cofactors = _det_cofactors(a)
    return d, jnp.sum(cofactors * da, axis=(-2, -1))


@jax.custom_jvp
def _det_cofactors(a):
    """(det A, adj(A)^T): the determinant, rounded once from tinyla's mantissa and exponent, and
    its derivative d det / dA (the kernel's adjugate, transposed; n <= 2: A's own entries)."""
    return tuple(_call("det_cofactors", a))


@_det_cofactors.defjvp
def _det_cofactors_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    d, cofactors = _det_cofactors(a)
    d_det = jnp.sum(cofactors * da, axis=(-2, -1))
    n = a.shape[-1]
    if n <= 2:  # the cofactors are linear in A (n = 2) or constant
        d_cofactors = _closed_form.cofactors(da) if n == 2 else jnp.zeros_like(da)
    else:
        d_cofactors = _cofactors_tangent(a, da)
    return (d, cofactors), (d_det, d_cofactors)


def _cofactors_tangent(a, da):
    """d adj(A)^T (det's second derivative: d of its cofactors) along da for n >= 3, accurate also
    where A is near singular. The textbook form, det (tr(A^-1 dA) A^-1 - A^-1 dA A^-1) =
    (tr(adj dA) adj - adj dA adj) / det, has two terms that cancel there: it lost eps * cond(A)
    relative (1e-1 at cond 1e15, NaN at singular A), where jnp's LU-based rule keeps 1e-16.
    Instead, for B = A - delta e_q e_p^T (a rank-one change of A's entry (q, p), (p, q) the
    largest entry of adj(A)), K = B^-1 and G = adj(B), the matrix determinant lemma and
    Sherman-Morrison give, exactly for every delta,
        adj(A) = G + delta (K_pq G - G e_q e_p^T K),
    and where A is near rank n - 1, B with delta of A's size is well conditioned, so that
        dG = tr(K dA) G - K dA G,  e_p^T dK = -e_p^T K dA K  (dB = dA; delta, p, q held)
    lose only about eps * cond(B). delta takes det's phase over adj_pq's, so that det B =
    det A - delta adj_pq does not cancel. Per matrix the rule keeps B = A (delta = 0) unless the
    changed B's max|B| max|K|, times the amplification of the delta terms (1 + |delta| max|K|),
    is smaller than A's max|A| max|A^-1|. G and det B from one det_cofactors call each, K = G /
    det B. NaN where adj(A) = 0 (rank n - 2 or less); near that, no better than the textbook
    form. 2-6x the textbook form's time on the CPU (two more factorizations, and XLA's
    element-wise passes over tiny matrices), below jnp's rule's (docs/python.md)."""
    n = a.shape[-1]
    held = jax.lax.stop_gradient

    # A's largest entry to about 1 (times s, a power of 2: exactly) and factored anew:
    # d adj(A) = s^-(n-2) d adj(sA), so that det and adj stay in range wherever the result is
    # (entries 1e+-100..150 at n = 3..5 gave NaN from det or adj(A) out of range otherwise).
    exponent = jnp.frexp(jnp.max(jnp.abs(held(a)), axis=(-2, -1)))[1][..., None, None]
    a = _closed_form._times_pow2(a, -exponent)
    det_a, cofactors_a = _det_cofactors(a)

    def phase(z):  # z / |z|, 1 where that is 0 or not finite
        u = _closed_form.unit(z)
        return jnp.where((u == 0) | ~jnp.isfinite(u), jnp.ones_like(u), u)

    def largest(x, axis=(-2, -1)):  # max |x|; for real x without a pass for |x| (XLA's CPU made one)
        x = held(x)
        if jnp.iscomplexobj(x):
            return jnp.max(jnp.abs(x), axis=axis)
        return jnp.maximum(jnp.max(x, axis=axis), -jnp.min(x, axis=axis))

    # (q, p): the first largest |entry| of cofactors = adj^T: its row q by the rows' maxima,
    # then the column in that row (XLA's argmax, a variadic reduction, and any reduction over
    # all n^2 entries took several times one pass over them on the CPU)
    def first_largest(x):  # (..., m) -> index of the first largest entry, and that entry
        top = jnp.max(x, axis=-1)
        rank = jnp.arange(x.shape[-1], 0, -1, dtype=x.dtype)
        return x.shape[-1] - jnp.max(jnp.where(x == top[..., None], rank, 0), axis=-1).astype(jnp.int32), top

    q, adj_max = first_largest(largest(cofactors_a, axis=-1))
    p, _ = first_largest(jnp.abs(jnp.take_along_axis(held(cofactors_a), q[..., None, None], axis=-2)[..., 0, :]))
    flat = q * n + p
    iota = jnp.arange(n)
    e_q, e_p = (iota == q[..., None]).astype(a.dtype), (iota == p[..., None]).astype(a.dtype)
    w = e_q[..., :, None] * e_p[..., None, :]

    def entry(m):  # m[..., q, p]
        return jnp.take_along_axis(m.reshape(*m.shape[:-2], n * n), flat[..., None], axis=-1)[..., 0]

    def row(m, i):  # m[..., i, :]
        return jnp.take_along_axis(m, i[..., None, None], axis=-2)[..., 0, :]

    size = largest(a)  # about 1
    delta = held(-size * phase(held(det_a)) * jnp.conj(phase(entry(held(cofactors_a)))))
    b = a - delta[..., None, None] * w

    det_b, cofactors_b = _det_cofactors(b)

    def inverse_max(det, cofactors_max):  # max|x^-1| = max|adj x| / |det x|; inf where singular or det out of range
        value = cofactors_max / jnp.abs(held(det))
        return jnp.where(jnp.isfinite(value) & (det != 0), value, jnp.inf)

    k_a_max, k_b_max = inverse_max(det_a, adj_max), inverse_max(det_b, largest(cofactors_b))
    b_max = jnp.maximum(size, jnp.abs(held(entry(b))))  # max|B| or more, where A's largest entry was (q, p)
    changed = b_max * k_b_max * (1 + jnp.abs(delta) * k_b_max) < size * k_a_max
    # In transposed form (what det_cofactors gives, and the caller wants): Ct = adj(B)^T = G^T,
    # times s^-(n-2), and Kt = B^-T = Ct / det B; A's own where unchanged; NaN where adj(A) = 0
    # (rank n - 2 or less) or det is 0 or out of range.
    cofactors = jnp.where(changed[..., None, None], cofactors_b, cofactors_a)
    det = jnp.where(changed, det_b, det_a)
    usable = jnp.isfinite(det) & (det != 0) & (adj_max != 0)
    kt = cofactors / jnp.where(usable, det, jnp.nan)[..., None, None]
    ct = _closed_form._times_pow2(cofactors, (n - 2) * exponent)
    delta = jnp.where(changed, delta, 0)[..., None, None]

    # With dK = -K dA K, d adj(A) is dG M + delta (g_q (e_p^T dK) + (e_p^T dK e_q) G), where
    # M = (1 + delta K_pq) I - delta e_q e_p^T K takes the terms in dG into one product:
    # tr(K dA) G M - K dA G M, and e_p^T dK = -(e_p^T K dA) K. Transposed, with k_p = K^T e_p
    # (Kt's column p) and g_q = G e_q (Ct's row q):
    #   tr(Kt^T dA) Mt - Mt dA^T Kt + delta ((e_p^T K dA K)^T g_q^T - (e_p^T K dA k_q) Ct),
    # Mt = (G M)^T = (1 + delta Kt_qp) Ct - delta k_p g_q^T. Every term holds one factor from Ct,
    # which carries s^-(n-2) (above).
    k_p = jnp.take_along_axis(kt, p[..., None, None], axis=-1)[..., 0]
    g_q, k_q = row(ct, q), row(kt, q)
    mt = ct * (1 + delta * entry(kt)[..., None, None]) - delta * k_p[..., :, None] * g_q[..., None, :]
    r = jnp.sum(k_p[..., :, None] * da, axis=-2)  # e_p^T K dA
    r_k = jnp.sum(kt * r[..., None, :], axis=-1)  # (e_p^T K dA K)^T
    r_kq = jnp.sum(r * k_q, axis=-1)[..., None, None]
    trace = jnp.sum(kt * da, axis=(-2, -1))[..., None, None]
    return (trace * mt - _matmul(_matmul(mt, jnp.swapaxes(da, -1, -2)), kt)
            + delta * (r_k[..., :, None] * g_q[..., None, :] - r_kq * ct))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _inv(a, transposed: bool = False):
    return _call("inv_transposed" if transposed else "inv", a)[0]


@_inv.defjvp
def _inv_jvp(transposed, primals, tangents):
    (a,), (da,) = primals, tangents
    inverse = _inv(a, transposed)
    return inverse, _inverse_tangent(inverse, da, transposed)


@jax.custom_jvp
def _solve(a, b):
    return _call("solve", a, b)[0]


@_solve.defjvp
def _solve_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    k = b.shape[-1]
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    x_and_inverse = _solve(a, jnp.concatenate([b, eye], axis=-1))  # one factorization for both
    x, inverse = x_and_inverse[..., :k], x_and_inverse[..., k:]
    return x, _matmul(inverse, db - _matmul(da, x))


@jax.custom_jvp
def _log_det_laplacian(inverse_t, lap_a, da):
    """(grad (..., k), laplacian (...)) of log det A along the tangents da (..., k, n, n), from
    A^-T and the Laplacian of A: one pass, A^-1 dA/dx_c never written (_folx.py's rules)."""
    return tuple(_PRIMITIVES["log_det_laplacian"].bind(inverse_t, lap_a, da))


@_log_det_laplacian.defjvp
def _log_det_laplacian_jvp(primals, tangents):
    # The outputs are polynomials in the inputs: their jnp form differentiates to any order.
    return _log_det_laplacian(*primals), jax.jvp(_log_det_laplacian_jnp, primals, tangents)[1]


# ---- named entry points ----------------------------------------------------------------------
# Each public op runs through a jax.jit named tinyla_<op>: inside an outer jit it is inlined, and
# interpreters that dispatch on names see it as one call. folx does: it finds tinyla's forward-
# Laplacian rules (tinyla/_folx.py) by these names, where a custom_jvp would meet its generic path.

def _named(name: str, fn):
    def call(*args):
        return fn(*args)
    call.__name__ = call.__qualname__ = name
    return jax.jit(call)


_slogdet_named = _named("tinyla_slogdet", _slogdet)
_det_named = _named("tinyla_det", _det)
_inv_named = _named("tinyla_inv", _inv)
_solve_named = _named("tinyla_solve", _solve)
_slogdet_inv_named = _named("tinyla_slogdet_inv", _slogdet_inv)


# ---- the public ops ------------------------------------------------------------------------

_jnp_slogdet = jnp.linalg.slogdet  # jnp's own, whatever use_for_jnp routes later


def slogdet(a, *, method: str | None = None) -> SlogdetResult:
    """Sign (complex: phase) and log|det| of each matrix of a (..., n, n); as jnp.linalg.slogdet.
    method: None or "lu" (tinyla: LU with partial pivoting); "qr" is jnp's own QR-based slogdet
    (tinyla has none), so that code asking for it runs unchanged under use_for_jnp()."""
    if method == "qr":
        return _jnp_slogdet(a, method=method)
    if method not in (None, "lu"):
        raise ValueError(f"tinyla.jax.slogdet: method must be None, 'lu' or 'qr', got {method!r}")
    (a,), result = _inexact("slogdet", a)
    _check_square("slogdet", a)
    return result(SlogdetResult(*_slogdet_named(a)))


def det(a) -> jax.Array:
    """Determinant of each matrix of a (..., n, n); as jnp.linalg.det."""
    (a,), result = _inexact("det", a)
    _check_square("det", a)
    return result(_det_named(a))


def inv(a) -> jax.Array:
    """Inverse of each matrix of a (..., n, n); as jnp.linalg.inv (singular: NaN-filled)."""
    (a,), result = _inexact("inv", a)
    _check_square("inv", a)
    return result(_inv_named(a))


def solve(a, b) -> jax.Array:
    """x with a @ x = b; as jnp.linalg.solve: b is a vector (n,) when b.ndim == 1, else a
    stack (..., n, k) whose batch dimensions broadcast with a's."""
    (a, b), result = _inexact("solve", a, b)
    _check_square("solve", a)
    n = a.shape[-1]
    vector, batch = solve_shapes("tinyla.jax.solve", a.shape, b.shape)
    bm = b[:, None] if vector else b
    # Through one concatenate, so that a and b vary over the same shard_map axes (jnp inserts
    # the casts); XLA folds the slices of the concatenation back into the operands.
    ab = jnp.concatenate([jnp.broadcast_to(a, batch + (n, n)), jnp.broadcast_to(bm, batch + bm.shape[-2:])], -1)
    x = _solve_named(ab[..., :n], ab[..., n:])
    return result(x[..., 0] if vector else x)


def slogdet_inv(a) -> SlogdetInvResult:
    """slogdet(a) and inv(a) from one factorization (what a forward Laplacian needs).
    Singular matrices: sign 0, logabsdet -inf, NaN-filled inverse."""
    (a,), result = _inexact("slogdet_inv", a)
    _check_square("slogdet_inv", a)
    return result(SlogdetInvResult(*_slogdet_inv_named(a)))


# ---- sums of products of determinants (multi-determinant wavefunctions) ----------------------

def _determinant_products(xs, weights):
    """Per term k, P_k = prod_s det(xs[s][..., k, :, :]) / e^m with m = max_k log|w_k P_k e^m|
    (the shift that keeps the largest term at magnitude 1), m, each block's A^-T, which comes
    from the same fused call as its determinant, and psi / e^m = sum_k w_k P_k."""
    logs, signs, inverses_t = 0, 1, []
    for x in xs:
        sign, logabsdet, inverse_t = _slogdet_inv(x, True)
        logs, signs = logs + logabsdet, signs * sign
        inverses_t.append(inverse_t)
    weighted, phases = logs, signs  # log|w_k P_k e^m| and the phase of w_k P_k
    if weights is not None:
        weighted, phases = logs + jnp.log(jnp.abs(weights)), signs * _closed_form.unit(weights)
    shift = jnp.max(weighted, axis=-1)
    # all terms zero (or an empty sum): no shift; the result is then (0, -inf)
    shift = jax.lax.stop_gradient(jnp.where(jnp.isfinite(shift), shift, jnp.zeros_like(shift)))
    total = jnp.sum(_signed_exp(phases, weighted - shift[..., None]), axis=-1)
    return signs * jnp.exp(logs - shift[..., None]), shift, inverses_t, total


def _signed_exp(phases, x):
    """phases * exp(x) with no rounded product meeting the sum that follows, so that terms that are
    exact negatives of each other (equal determinants, opposite weights) cancel exactly also where
    a compiler fuses a multiply into the next addition (XLA's CPU backend fused w_k P_k into the
    sum: (w, -w) gave a term of about 1e-16, not 0). Real phases are -1, 0 or 1: exact products;
    a complex phase's parts multiply exp(x) as the closed forms' exact products of halves do."""
    e = jnp.exp(x)
    if not jnp.iscomplexobj(phases):
        return phases * e
    part = lambda c: _closed_form._two_product(c, e)[0]  # noqa: E731
    return jax.lax.complex(part(jnp.real(phases)), part(jnp.imag(phases)))


def _weighted_sum(products, weights):
    return jnp.sum(products if weights is None else products * weights, axis=-1)


def _sign_and_log(total, shift):
    return _closed_form.unit(total), shift + jnp.log(jnp.abs(total))


@jax.custom_jvp
def _slogdet_sum(xs, weights):
    _, shift, _, total = _determinant_products(xs, weights)
    return _sign_and_log(total, shift)


@_slogdet_sum.defjvp
def _slogdet_sum_jvp(primals, tangents):
    (xs, weights), (dxs, dweights) = primals, tangents
    products, shift, inverses_t, total = _determinant_products(xs, weights)
    # d psi / e^m = sum_k (w_k P_k sum_s tr(A_ks^-1 dA_ks) + P_k dw_k); d log psi = that / (psi / e^m)
    dlog_products = sum(_trace_with_inverse(inv_t, dx, True) for inv_t, dx in zip(inverses_t, dxs))
    dtotal = _weighted_sum(products * dlog_products, weights)
    if weights is not None:
        dtotal = dtotal + jnp.sum(products * dweights, axis=-1)
    sign, logabsdet = _sign_and_log(total, shift)
    return (sign, logabsdet), _slogdet_tangents(sign, dtotal / total)


# flat arguments, as folx's rules receive them
_slogdet_sum_named = _named("tinyla_slogdet_sum", lambda *xs: _slogdet_sum(xs, None))
_slogdet_sum_weighted_named = _named("tinyla_slogdet_sum_weighted", lambda *args: _slogdet_sum(args[:-1], args[-1]))


def slogdet_sum(xs, weights=None) -> SlogdetResult:
    """Sign (complex: phase) and log|psi| of psi = sum_k w_k prod_s det(xs[s][..., k, :, :]): the
    multi-determinant form of FermiNet, Psiformer and DeepQMC (one array per spin block).

    xs: a sequence of arrays of shapes (..., K, n_s, n_s) with the same leading dims and K
    (n_s may differ, 0 included); weights: (..., K) or None (all ones). Each block is one fused
    call (determinant and inverse); the sum is a log-sum-exp shifted by the largest term, so
    terms spanning any dynamic range add without overflow, and terms that cancel exactly give
    (0, -inf). Derivatives of any order, the inverses coming from the same calls."""
    xs = list(xs)
    if not xs:
        raise ValueError("tinyla.jax.slogdet_sum: xs must hold at least one array")
    arrays, result = _inexact("slogdet_sum", *xs, *([] if weights is None else [weights]))
    xs, weights = arrays[:len(xs)], (None if weights is None else arrays[-1])
    lead = None
    for x in xs:
        _check_square("slogdet_sum", x)
        if x.ndim < 3:
            raise ValueError(f"tinyla.jax.slogdet_sum: each block must have shape (..., K, n, n), got {x.shape}")
        if lead is None:
            lead = x.shape[:-2]
        elif x.shape[:-2] != lead:
            raise ValueError(f"tinyla.jax.slogdet_sum: blocks must share their leading dims (..., K): "
                             f"{lead} vs {x.shape[:-2]}")
    if weights is not None:
        try:
            weights = jnp.broadcast_to(weights, lead)
        except ValueError:
            raise ValueError(f"tinyla.jax.slogdet_sum: weights must have shape {lead}, got {weights.shape}") from None
    if weights is None:
        return result(SlogdetResult(*_slogdet_sum_named(*xs)))
    return result(SlogdetResult(*_slogdet_sum_weighted_named(*xs, weights)))


# ---- routing jnp.linalg to tinyla ------------------------------------------------------------

_ROUTED = ("slogdet", "det", "inv", "solve")


class use_for_jnp:
    """Routes jnp.linalg.slogdet / det / inv / solve to tinyla.jax, for code traced while it is
    in effect: as a context manager (restored on exit) or a plain call (until .restore()).

        with tinyla.jax.use_for_jnp():
            energy = jax.jit(local_energy)(params, walkers)   # model code calls jnp.linalg.slogdet

    It acts at trace time: jax caches traced functions, so entering and leaving clear jax's
    caches (jax.clear_caches()) where the routing changes; a function compiled under one routing
    is traced again under the other. Switches may overlap, ended in any order: the routing holds
    while any is in effect. Code that imported the functions by name (from jax.numpy.linalg
    import slogdet) before the call keeps its own reference and is not routed."""

    # Switches in effect, and jnp.linalg's functions from before the first: the routing holds
    # while any switch does, whatever order they are restored in (a switch that saved and put
    # back its own predecessor would leave tinyla routed after an out-of-order restore).
    _in_effect = 0
    _saved: dict | None = None
    _lock = threading.Lock()

    def __init__(self):
        with use_for_jnp._lock:
            if use_for_jnp._in_effect == 0:
                use_for_jnp._saved = {name: getattr(jnp.linalg, name) for name in _ROUTED}
                for name in _ROUTED:
                    setattr(jnp.linalg, name, globals()[name])
                jax.clear_caches()
            use_for_jnp._in_effect += 1
        self._active = True

    def restore(self) -> None:
        """Ends this switch (again: nothing); jnp's own functions return with the last one."""
        with use_for_jnp._lock:
            if not self._active:
                return
            self._active = False
            use_for_jnp._in_effect -= 1
            if use_for_jnp._in_effect == 0:
                for name, fn in use_for_jnp._saved.items():
                    setattr(jnp.linalg, name, fn)
                use_for_jnp._saved = None
                jax.clear_caches()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.restore()


# ---- jax.export --------------------------------------------------------------------------------

def export_disabled_checks() -> list:
    """The safety checks to disable when exporting code that calls tinyla with jax.export:

        exported = jax.export.export(jax.jit(f), disabled_checks=tinyla.jax.export_disabled_checks())(x)
        blob = exported.serialize()

    jax.export refuses custom calls that lack jax's compatibility guarantee, as tinyla's targets
    (tinyla_slogdet, ...) do; the exported module calls them by name, so the process that runs it
    must have imported tinyla.jax (which registers them; use the same tinyla version). n <= 2
    lowers to no custom call at all. Exporting for a GPU platform needs a tinyla built with that
    platform's backend (GPU_PLATFORMS), as running there does."""
    from jax import export  # not imported with jax itself

    return [export.DisabledSafetyCheck.custom_call(prim.name) for prim in _PRIMITIVES.values()]


try:  # forward-Laplacian rules for folx, when it is installed (pip install tinyla[folx])
    import folx as _folx_module  # noqa: F401
except ImportError:
    pass
else:
    from tinyla import _folx  # noqa: E402, F401
