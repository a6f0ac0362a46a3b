"""tinyla.jax's programs as XLA's CUDA compiler builds them for an H100, on a machine without a
GPU: jax's CUDA plugin compiles for a described device (jax.experimental.topologies with
h100.pbtxt, XLA's "deviceless" compilation), and the compiled program says what that GPU would
run: its kernels (fusions, custom calls, copies) and XLA's temporary memory. Each program is
checked against jnp.linalg's of the same shapes and dtype.

Run by scripts/gpu-programs (scripts/test runs it): tinyla's CUDA handlers from a release build,
jax's CUDA plugin on the path, JAX_PLATFORMS=cpu, so that no device is looked for. XLA's Triton
GEMMs are off there: without a device to tune on, XLA found no Triton tiling for some of the
models' own dots and failed to compile them; cuBLAS takes those dots instead."""
from __future__ import annotations

import pathlib
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import topologies
from jax.sharding import NamedSharding, PartitionSpec

import tinyla.jax as tlj

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))  # the benchmarks' models
BATCH = (4096, 64)  # the reports' workload: (4096, 64, N, N)

if "cuda" not in tlj.GPU_PLATFORMS:
    raise RuntimeError("tinyla was loaded without its CUDA handlers (libtinyla_xla_cuda.so): "
                       "run these tests through scripts/gpu-programs")


@pytest.fixture(scope="module")
def cuda():
    """compile(fn, *args) for the H100: args are arrays or ShapeDtypeStructs (their shapes)."""
    target = (pathlib.Path(__file__).with_name("h100.pbtxt")).read_text()
    topology = topologies.get_topology_desc(platform="cuda", target_config=target, topology="1x1x1")
    sharding = NamedSharding(topologies.make_mesh(topology, (1,), ("x",)), PartitionSpec())

    def compile(fn, *args):
        specs = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), args)
        return jax.jit(fn).lower(*specs).compile()

    return compile


def kernels(compiled) -> list[str]:
    """The entry computation's instructions that run on the GPU, as opcode or opcode:target
    (custom calls) or opcode:kind (fusions); parameters, constants, tuples and bitcasts are none."""
    text = compiled.as_text()
    entry = text[text.index("\nENTRY") + 1:]
    entry = entry[:entry.index("\n}")]
    found = []
    for line in entry.splitlines()[1:]:
        opcode = re.search(r"[\]})] ([a-z][a-z0-9-]*)\(", line).group(1)
        if opcode in ("parameter", "constant", "get-tuple-element", "tuple", "bitcast"):
            continue
        detail = re.search(r'custom_call_target="([^"]+)"', line) or re.search(r"kind=(k\w+)", line)
        found.append(opcode + (f":{detail.group(1)}" if detail else ""))
    return found


def temp_bytes(compiled) -> int:
    return compiled.memory_analysis().temp_size_in_bytes


def first_order(la) -> dict:
    """The ops and first derivatives users call, for tinyla.jax or jnp.linalg (la)."""
    return {
        "slogdet": la.slogdet,
        "det": la.det,
        "inv": la.inv,
        "grad of slogdet": jax.grad(lambda a: la.slogdet(a)[1].sum()),
    }


def second_order(la) -> dict:
    """Forward over reverse (the Hessian's trace in FermiNet's local energy) and the inverse's
    tangent (second derivatives of log det, derivatives of inv)."""
    return {
        "hvp of slogdet": lambda a, t: jax.jvp(jax.grad(lambda a: la.slogdet(a)[1].sum()), (a,), (t,))[1],
        "jvp of inv": lambda a, t: jax.jvp(la.inv, (a,), (t,))[1],
    }


DTYPES = [np.float64, np.complex128]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2])
def test_closed_forms_are_fused_xla_code(cuda, n, dtype):
    """n <= 2: element-wise code that XLA fuses -- no custom call (jnp's inverse and solve call
    cuSOLVER and cuBLAS here), at most three passes over the batch -- whose intermediates take no
    more memory than jnp's program or the result. XLA keeps values that a matrix's entries share
    (the determinant's reciprocal, exponents) between passes rather than recompute the closed
    form's ~100 operations for each entry; jnp's unscaled ad - bc is cheap enough to recompute."""
    a = jax.ShapeDtypeStruct((*BATCH, n, n), dtype)
    ops, reference = first_order(tlj), first_order(jnp.linalg)
    ops["solve"], reference["solve"] = tlj.solve, jnp.linalg.solve
    for name in ops:
        args = (a, jax.ShapeDtypeStruct((*BATCH, n, 3), dtype)) if name == "solve" else (a,)
        ours, theirs = cuda(ops[name], *args), cuda(reference[name], *args)
        assert len(kernels(ours)) <= 3 and not any(k.startswith("custom-call") for k in kernels(ours)), (
            name, kernels(ours))
        result_bytes = ours.memory_analysis().output_size_in_bytes
        assert temp_bytes(ours) <= max(temp_bytes(theirs), result_bytes), (
            name, temp_bytes(ours), temp_bytes(theirs), result_bytes)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [3, 9, 32])  # per thread, warp teams, the largest
def test_ops_and_gradients_are_one_kernel(cuda, n, dtype):
    """n >= 3: each op, and the gradient of slogdet (A^-T from the same factorization), is
    tinyla's custom call alone: XLA adds no layout copy, no transposition, no other kernel."""
    a = jax.ShapeDtypeStruct((*BATCH, n, n), dtype)
    expected = {"slogdet": "slogdet", "det": "det", "inv": "inv", "grad of slogdet": "slogdet_inv_transposed"}
    ops = first_order(tlj)
    ops["slogdet_inv"], expected["slogdet_inv"] = tlj.slogdet_inv, "slogdet_inv"
    ops["solve"], expected["solve"] = tlj.solve, "solve"
    for name, op in ops.items():
        args = (a, jax.ShapeDtypeStruct((*BATCH, n, 3), dtype)) if name == "solve" else (a,)
        assert kernels(cuda(op, *args)) == [f"custom-call:tinyla_{expected[name]}"], name


@pytest.mark.parametrize("n", [3, 5, 6, 8, 12, 16, 24, 32])
def test_second_derivatives_no_larger_than_jnps(cuda, n):
    """The inverse's tangent -A^-1 dA A^-1 as XLA compiles it for the GPU: no more kernels and no
    more temporary memory than jnp's program. Written as fused rank-1 sums for every n, XLA split
    it from n = 5 on into 20-70 kernels holding up to 1.4x jnp's memory (tinyla/jax.py, _matmul).
    (n = 2, the closed forms: 5 kernels and 12 MiB against jnp's 2 and 2 MiB; docs/gpu.md.)"""
    a = jax.ShapeDtypeStruct((*BATCH, n, n), np.float64)
    ours, reference = second_order(tlj), second_order(jnp.linalg)
    for name in ours:
        mine, theirs = cuda(ours[name], a, a), cuda(reference[name], a, a)
        assert len(kernels(mine)) <= len(kernels(theirs)), (name, kernels(mine), kernels(theirs))
        assert temp_bytes(mine) <= temp_bytes(theirs), (name, temp_bytes(mine), temp_bytes(theirs))
        assert sum(k.startswith("custom-call:tinyla_") for k in kernels(mine)) == 1, (name, kernels(mine))


@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_det_second_derivative_no_larger_than_jnps(cuda, n):
    """det's second derivative (tinyla/jax.py, _cofactors_tangent: two more det_cofactors calls
    and a rank-one change of A where A is near singular): no more kernels or temporary memory than
    jnp's LU-based rule. (n = 3: 18 kernels and 86 MiB against jnp's closed form's 1 and 0;
    docs/python.md.)"""
    a = jax.ShapeDtypeStruct((*BATCH, n, n), np.float64)
    hvp = {la: (lambda a, t, la=la: jax.jvp(jax.grad(lambda a: la.det(a).sum()), (a,), (t,))[1])
           for la in (tlj, jnp.linalg)}
    mine, theirs = cuda(hvp[tlj], a, a), cuda(hvp[jnp.linalg], a, a)
    assert len(kernels(mine)) <= len(kernels(theirs)), (kernels(mine), kernels(theirs))
    assert temp_bytes(mine) <= temp_bytes(theirs), (temp_bytes(mine), temp_bytes(theirs))


@pytest.mark.parametrize("sparsity", [0, 6])
@pytest.mark.parametrize("n_el", [4, 8, 16, 32])
def test_folx_laplacian_memory_no_higher_than_jnps(cuda, n_el, sparsity):
    """folx's forward Laplacian of bench/qmc_workload.py's Slater ansatz (256 walkers, folx's
    default sparsity and FermiNet's), tinyla's folx rule against folx's own with jnp.linalg:
    XLA's temporary memory on the GPU no higher (the CPU's is in that benchmark's table), up to
    less than one array of the walkers' matrices, (256, n, n): at n_el = 16 and 32 tinyla's
    program peaked 32-64 KiB higher because XLA's schedule kept two (256, 16) reductions that
    both programs compute live beside the model's largest product, not because of an array of
    tinyla's (the buffer assignments, 2026-11-30). An extra array of the matrices' size or
    larger -- Delta A, A^-1, folx's Jacobian -- fails."""
    import folx
    from qmc_workload import slater_log_psi

    x = jax.ShapeDtypeStruct((256, 3 * n_el), np.float64)
    sizes = {}
    for name, slogdet in (("tinyla", tlj.slogdet), ("jnp", jnp.linalg.slogdet)):
        f = slater_log_psi(n_el, slogdet)
        fn = jax.vmap(lambda x, f=f: folx.forward_laplacian(f, sparsity_threshold=sparsity)(x).laplacian)
        compiled = cuda(fn, x)
        sizes[name] = temp_bytes(compiled)
        if name == "tinyla":
            assert any(k.startswith("custom-call:tinyla_") for k in kernels(compiled)), kernels(compiled)
    matrices = 256 * n_el * n_el * 8
    assert sizes["tinyla"] < sizes["jnp"] + matrices / 2, (sizes, matrices)


@pytest.mark.parametrize("workload", ["E_L folx", "E_L hessian"])
def test_ansatz_step_memory_no_higher_than_jnps(cuda, workload):
    """bench/ansatz.py's FermiNet-like local energy at n_el = 16 (K = 16 determinants of 8 x 8 per
    spin block, 256 walkers), by folx's Laplacian and by the Hessian's trace: no more temporary
    memory than the same model on jnp.linalg. Before 2026-11-30 both held more: folx's stacks
    contracted by XLA (652 MiB against 589) and the Hessian's products as rank-1 sums (110
    against 104; docs/gpu.md)."""
    import ansatz

    n_el = 16
    params = ansatz.init_params(n_el)
    xs = jax.ShapeDtypeStruct((256, 3 * n_el), np.float64)
    sizes = {c: temp_bytes(cuda(ansatz.workloads(n_el, c)[workload], params, xs)) for c in ("tinyla", "jnp")}
    assert sizes["tinyla"] <= sizes["jnp"], sizes
