"""The QMC workload benchmark: tinyla.jax vs jnp.linalg on what FermiNet-style codes run.

    python bench/qmc_workload.py [--quick] [--png PATH] [--sizes 1,2,3,4,8,16]

Workloads, x of shape (walkers, determinants, N, N) float64 (the shape of ROCm/rocm-jax#259,
(4096, 64, N, N); smaller walker counts for N >= 8, stated in the table):
  grad     jit(grad(lambda x: slogdet(x)[1].sum()))   the training step's determinant part
  forward  jit(lambda x: slogdet(x)[1])
  inv      jit(inv)
Contenders, all measured in this run on the same input:
  jnp      jnp.linalg.slogdet / jnp.linalg.inv
  closed   the report's hand-written closed form (N <= 2): log(|a| + 1e-20), log(|ad - bc| + 1e-20)
  tinyla   tinyla.jax.slogdet / tinyla.jax.inv
Each time is the best of several calls after compilation and a warm-up call, the
contenders' calls interleaved so that all see the same (shared, noisy) machine. The "per
round" columns take the two times of each round instead: the median of their ratio over the
rounds and a 95 % interval for that median (paired_ratio), which says whether a difference
smaller than the spread between runs is there. The interval covers the rounds of this run,
not the spread between processes, which can be larger (docs/benchmarks.md). Results
are also checked against jnp (max relative difference printed). "floor" is one elementwise
XLA pass (x * 2) producing an output of the same size as the workload's: what any op pays
to allocate and write its result (XLA's buffers of 32 MiB and more come from mmap, so each
call page-faults them in anew). "tinyla GB/s" is the input plus output bytes over tinyla's
time: on a GPU, the fraction of HBM bandwidth reached. Runs on jax's default device (the
GPU where jax has one). Progress goes to stderr; the table to stdout; a PNG plot
of the ratios to --png.

Then the folx Laplacian of a Slater ansatz (below; at folx's default sparsity and FermiNet's;
on the CPU once more with XLA's reductions taken back from YNNPACK, YNN_REDUCTIONS_OFF, and once
with that and tcmalloc preloaded, TCMALLOC)
and, from bench/ansatz.py, a FermiNet-like ansatz step (local energies and the VMC gradient)
with the determinant's share of it.
"""
from __future__ import annotations

import argparse
import ctypes.util
import json
import math
import os
import platform
import subprocess
import sys
import time

# OpenBLAS (scipy's, which jaxlib's CPU LAPACK kernels call for jnp.linalg) leaves its worker
# threads spinning for a while after a call. Interleaved, that spin took a core from whichever
# contender ran next, always tinyla in the fixed order the rounds had then: in the folx table
# at n_el = 32 with folx's sparsity 6, tinyla's median went 95 -> 65 ms with one OpenBLAS thread, jnp's
# and the stand-ins' stayed (113, 61 ms). jnp's batched LAPACK calls run on XLA's threads
# either way. Set before numpy or jax loads OpenBLAS; bench/ansatz.py and det_grad.py do too.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import tinyla  # noqa: E402
import tinyla.jax as tlj  # noqa: E402


def closed_form_slogdet(x):
    """The hand-written replacement of ROCm/rocm-jax#259 (N = 1, 2), verbatim in spirit:
    log|det| + 1e-20, the sign left out (the loss only needs logabsdet)."""
    n = x.shape[-1]
    if n == 1:
        det = x[..., 0, 0]
    else:
        a, b, c, d = x[..., 0, 0], x[..., 0, 1], x[..., 1, 0], x[..., 1, 1]
        det = a * d - b * c
    return None, jnp.log(jnp.abs(det) + 1e-20)


SLOGDET = {"jnp": jnp.linalg.slogdet, "closed": closed_form_slogdet, "tinyla": tlj.slogdet}
INV = {"jnp": jnp.linalg.inv, "tinyla": tlj.inv}


def make_fn(workload: str, contender: str):
    if workload == "inv":
        return jax.jit(INV[contender])
    slogdet = SLOGDET[contender]
    if workload == "forward":
        return jax.jit(lambda x: slogdet(x)[1])
    return jax.jit(jax.grad(lambda x: slogdet(x)[1].sum()))


# Rounds beyond `repeats` while a row has taken less than this (seconds; --row-budget).
row_budget_s = 2.0
MAX_ROUNDS = 400


def rounds_note() -> str:
    return (f"each round in its own order; more rounds, up to {MAX_ROUNDS}, while a row has taken under "
            f"{row_budget_s:g} s")


def time_calls(fns: dict, x, repeats: int) -> tuple[dict, dict, dict]:
    """Best time of each function over rounds of one call each, the calls interleaved so that
    every contender sees the same machine; each function's result; and each function's time in
    every round, in round order (for paired_ratio). Each round runs the
    contenders in an order of its own (a seeded shuffle): in a fixed order a contender always
    follows the same one and inherits what it leaves (OpenBLAS's spinning threads took a core
    from the one after jnp; freed memory, a busy cache). `repeats` rounds at least, then more
    while the rounds have taken less than row_budget_s (up to MAX_ROUNDS): rows of a few
    milliseconds, whose gaps are tenths of one, get hundreds of calls, which narrows their best
    times' spread on a shared machine; slow rows stay at `repeats`."""
    outs = {}
    for name, fn in fns.items():  # compile + warm-up
        outs[name] = np.asarray(jax.block_until_ready(fn(x)))
    rounds = {name: [] for name in fns}
    order = list(fns)
    shuffle = np.random.default_rng(0).shuffle
    start = time.perf_counter()
    while len(rounds[order[0]]) < repeats or (
            len(rounds[order[0]]) < MAX_ROUNDS and time.perf_counter() - start < row_budget_s):
        shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            jax.block_until_ready(fns[name](x))
            rounds[name].append(time.perf_counter() - t0)
    return {name: min(times) for name, times in rounds.items()}, outs, rounds


def paired_ratio(ratios) -> tuple[float, float, float]:
    """The median of per-round ratios (two contenders' times in the same round, so that what the
    host did to that round cancels) and a distribution-free interval for it: the sign test's
    order statistics r_(k) and r_(m+1-k) of the m rounds' ratios, k the largest for which they
    enclose the median with probability at least 95 % when rounds are independent (m >= 6; with
    fewer rounds the extremes: 94 % at m = 5). Where best-of times of two contenders differ by
    less than the host's spread between runs, this says whether the difference is there."""
    r = np.sort(np.asarray(ratios, dtype=float))
    m = len(r)
    tail = [math.comb(m, i) / 2.0**m for i in range(m + 1)]  # P(Bin(m, 1/2) = i)
    k = 1
    while k < m // 2 and 2 * sum(tail[:k + 1]) <= 0.05:  # [r_(k+1), r_(m-k)] still covers 95 %
        k += 1
    return float(np.median(r)), float(r[k - 1]), float(r[m - k])


def paired_cell(ratios, spec: str = ".2f") -> str:
    """A table cell: "median (low–high)" of paired_ratio, each formatted by spec; "-" for none."""
    if not ratios:
        return "-"
    median, low, high = paired_ratio(ratios)
    return f"{median:{spec}} ({low:{spec}}–{high:{spec}})"


def max_rel_diff(x: np.ndarray, ref: np.ndarray) -> float:
    scale = np.maximum(np.abs(ref), 1.0)
    return float(np.max(np.abs(x - ref) / scale)) if x.size else 0.0


def walkers_for(n: int, quick: bool, walkers: int | None = None) -> int:
    """4096 walkers (the report's shape) up to N = 4; above, as many as keep x at 16 MiB
    (a CPU's step); `walkers` if given, at every N."""
    walkers = walkers or (4096 if n <= 4 else 32768 // (n * n))
    return max(walkers // 8, 16) if quick else walkers


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def plot(rows, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    workloads = ["grad", "forward", "inv"]
    sizes = sorted({r["n"] for r in rows})
    width = 0.8 / len(workloads)
    for k, w in enumerate(workloads):
        ys = [next((r["jnp"] / r["tinyla"] for r in rows if r["n"] == n and r["workload"] == w), np.nan) for n in sizes]
        ax.bar(np.arange(len(sizes)) + (k - 1) * width, ys, width, label=f"{w}: jnp / tinyla")
    ax.axhline(10, color="gray", linestyle="--", linewidth=1, label="10x target (N = 3..16)")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(sizes)), [str(n) for n in sizes])
    ax.set_xlabel("N (matrix size)")
    ax.set_ylabel("speed-up over jnp.linalg (log)")
    ax.set_title(f"tinyla.jax vs jnp.linalg, float64, CPU ({os.cpu_count()} cores)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def slater_log_psi(n: int, slogdet):
    """log|det phi_j(r_i)| of a Slater ansatz: MLP orbitals (3 -> 64 -> n) of each electron times
    an exponential envelope; r: (n, 3). What folx's forward Laplacian differentiates."""
    rng = np.random.default_rng(n)
    w1, w2 = jnp.asarray(rng.standard_normal((3, 64)) / 2), jnp.asarray(rng.standard_normal((64, n)) / 8)

    def log_psi(x):
        r = x.reshape(n, 3)
        phi = (jnp.tanh(r @ w1) @ w2 + jnp.eye(n)) * jnp.exp(-jnp.linalg.norm(r, axis=-1))[:, None]
        return slogdet(phi)[1]

    return log_psi


def _log_abs_product(d):
    return jnp.sign(jnp.prod(d, -1)), jnp.sum(jnp.log(jnp.abs(d)), -1)


def standin_masked(a):
    """A zero-cost stand-in of the same shapes: log|prod of the diagonal|, the diagonal as a
    masked sum. Not jnp.diagonal: its jaxpr holds a platform-dependent cond in jax 0.10 and
    later, which folx has no rule for (folx took a dense Hessian through it)."""
    return _log_abs_product(jnp.sum(a * jnp.eye(a.shape[-1], dtype=a.dtype), axis=-1))


def standin_sliced(a):
    """The same stand-in, the diagonal as n static slices."""
    return _log_abs_product(jnp.stack([a[..., i, i] for i in range(a.shape[-1])], -1))


# The Amdahl limit: the model with a determinant that costs nothing. No form of such a function
# is free under folx and XLA, and none is the cheapest everywhere: under folx the masked sum
# multiplies the whole dense Jacobian by the mask, and in bench/ansatz.py's folx rows it took
# 1.5x the sliced form's time at n_el = 16 and 32, yet in the Slater ansatz below at n_el = 16
# the masked one was the faster (docs/benchmarks.md). Each row times both; the faster is the limit.
STANDINS = {"masked": standin_masked, "sliced": standin_sliced}


def fastest_standin(best: dict) -> tuple[str, float]:
    """(name, time) of the faster stand-in among the timed contenders."""
    return min(((name, best[name]) for name in STANDINS), key=lambda item: item[1])


def temp_mib(fn, *args) -> float:
    """Scratch memory of a jitted function beyond its arguments and results, from XLA's buffer
    assignment: tinyla's kernels (n <= 32) keep their matrix group on the stack and getrf (jnp)
    takes no workspace, so this is the difference in peak memory."""
    return fn.lower(*args).compile().memory_analysis().temp_size_in_bytes / 2**20


# folx's sparsity_threshold as FermiNet's local energy passes it (ferminet/hamiltonian.py). The
# folx table runs each n_el at folx's default 0, which hands every rule a dense Jacobian, and at
# this, which keeps the Slater matrix's Jacobian sparse (one electron's 3 coordinates per row),
# so that both rules take their sparse paths; bench/ansatz.py's folx energy uses it.
FERMINET_FOLX_SPARSITY = 6


def folx_table(quick: bool, repeats: int) -> None:
    """The kinetic-energy part of a local energy: folx's forward Laplacian of log|psi| over
    walkers, with jnp.linalg.slogdet (folx's own rule), tinyla.jax.slogdet (tinyla's rule) and the
    stand-ins; the determinant's share is 1 - standin / jnp with the faster stand-in."""
    try:
        import folx
    except ImportError:
        print("\nfolx Laplacian: folx is not installed (pip install folx)")
        return
    walkers = 64 if quick else 256
    print(f"\nfolx {folx.__version__ if hasattr(folx, '__version__') else ''} forward Laplacian of a Slater "
          f"ansatz (MLP orbitals x envelope), {walkers} walkers, float64; time per call, best of {repeats} or more ({rounds_note()})")
    print("| n_el | folx sparsity | jnp ms | tinyla ms | stand-in ms | jnp / tinyla | det share of jnp | "
          "Amdahl bound | reached | reached per round | XLA temp MiB jnp / tinyla | max rel. diff |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    # On a GPU tinyla has a backend for, tinyla's rule also with log_det_laplacian's jnp form (the
    # lowering before that op had a GPU kernel: LOG_DET_LAPLACIAN_GPU_MAX_N = 0), timed beside the rest.
    on_tinyla_gpu = tlj._default_platform() in tlj.GPU_PLATFORMS
    jnp_form_rows = []
    for sparsity in (0, FERMINET_FOLX_SPARSITY):
        for n in (4, 8, 16, 32):
            x = jnp.asarray(np.random.default_rng(n).standard_normal((walkers, 3 * n)))
            slogdets = {"jnp": jnp.linalg.slogdet, "tinyla": tlj.slogdet, **STANDINS}
            fns = {name: jax.jit(jax.vmap(lambda x, f=slater_log_psi(n, sl): folx.forward_laplacian(
                       f, sparsity_threshold=sparsity)(x).laplacian)) for name, sl in slogdets.items()}
            if on_tinyla_gpu:
                kernel_max_n, tlj.LOG_DET_LAPLACIAN_GPU_MAX_N = tlj.LOG_DET_LAPLACIAN_GPU_MAX_N, 0
                try:  # compiled now, while the jnp form is what lowers
                    fns["tinyla, jnp form"] = jax.jit(jax.vmap(lambda x, f=slater_log_psi(n, tlj.slogdet): (
                        folx.forward_laplacian(f, sparsity_threshold=sparsity)(x).laplacian))).lower(x).compile()
                finally:
                    tlj.LOG_DET_LAPLACIAN_GPU_MAX_N = kernel_max_n
            print(f"  folx n_el={n} sparsity={sparsity} ...", end="", file=sys.stderr, flush=True)
            best, outs, rounds = time_calls(fns, x, repeats)
            if on_tinyla_gpu:
                jnp_form_rows.append(f"| {n} | {sparsity} | {best['tinyla'] * 1e3:.3f} | "
                                     f"{best['tinyla, jnp form'] * 1e3:.3f} | "
                                     f"{best['tinyla, jnp form'] / best['tinyla']:.2f}x |")
            print(" ".join(f"{c} {best[c] * 1e3:.2f} ms" for c in fns), file=sys.stderr, flush=True)
            standin, standin_time = fastest_standin(best)
            share = 1 - standin_time / best["jnp"]
            bound = best["jnp"] / standin_time
            speedup = best["jnp"] / best["tinyla"]
            reached = (speedup - 1) / (bound - 1) if bound > 1 else float("nan")
            # Per round, the same fraction from that round's three times (a round whose stand-in
            # read no faster than jnp has no bound to reach: left out).
            reached_per_round = [(j / t - 1) / (j / s - 1)
                                 for j, t, s in zip(rounds["jnp"], rounds["tinyla"], rounds[standin]) if j > s]
            print(f"| {n} | {sparsity} | {best['jnp'] * 1e3:.2f} | {best['tinyla'] * 1e3:.2f} | "
                  f"{standin_time * 1e3:.2f} ({standin}) | **{speedup:.2f}x** | {share:.0%} | {bound:.2f}x | "
                  f"{reached:.0%} | {paired_cell(reached_per_round, '.0%')} | {temp_mib(fns['jnp'], x):.1f} / {temp_mib(fns['tinyla'], x):.1f} | "
                  f"{max_rel_diff(outs['tinyla'], outs['jnp']):.1e} |")
    if jnp_form_rows:
        print("\ntinyla's rule with log_det_laplacian's GPU kernel against its jnp form (the same run):")
        print("| n_el | folx sparsity | kernel ms | jnp form ms | jnp form / kernel |")
        print("|---:|---:|---:|---:|---:|")
        print("\n".join(jnp_form_rows))


# XLA's CPU backend (jax 0.10.2 and 0.11 at least) hands reductions to YNNPACK, which on these
# small arrays is slower than XLA's own loops; the flag below takes them back (jax-ml/jax#37465,
# "CPU performance regression"). In the folx table it made the step with jnp's rule up to 4.1x
# faster, with tinyla's up to 4.6x (n_el = 32, sparse), and moved the Amdahl fractions either way
# row by row (docs/qmc_codes.md), so the table is timed again with it: what users who set the
# flag get. An XLA without YNNPACK rejects the flag.
YNN_REDUCTIONS_OFF = "--xla_cpu_experimental_ynn_fusion_type=-reduce"


# glibc's malloc serves every request of 32 MiB or more with a fresh mmap, returned when freed,
# so a program whose XLA temporaries reach 32 MiB faults in and zeroes them on every call. In the
# folx table that is the dense rows at n_el = 16, 32 for every contender, and, with the flag above,
# n_el = 32 sparse for jnp (32.8 MiB) and tinyla (32.7) but not for the stand-in (30.8): there the
# stand-in's lead was mostly page faults (docs/qmc_codes.md). An allocator that keeps freed
# memory (tcmalloc, Debian's libtcmalloc-minimal4) removes that, so the table is timed with it
# too: what the kernels and XLA's code cost, and what users who preload it get.
TCMALLOC = ctypes.util.find_library("tcmalloc_minimal")


def folx_table_again(quick: bool, repeats: int, what: str, xla_flags: str = "", preload: str = "") -> None:
    """The folx table again, in a process with XLA_FLAGS added (XLA reads them when it starts) or a
    library preloaded. Only on the CPU, and where the process starts (an XLA that does not know a
    flag rejects it)."""
    if tlj._default_platform() != "cpu":
        return
    env = dict(os.environ)
    if xla_flags:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {xla_flags}".strip()
    if preload:
        env["LD_PRELOAD"] = f"{preload} {env.get('LD_PRELOAD', '')}".strip()
    probe = subprocess.run([sys.executable, "-c", "import jax; jax.numpy.zeros(1).block_until_ready()"],
                           env=env, capture_output=True)
    if probe.returncode != 0:
        print(f"\n(the folx table {what}: this jax did not start so: {probe.stderr.decode().strip()[-300:]})")
        return
    print(f"\nThe same {what}:")
    sys.stdout.flush()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--only-folx", "--repeats", str(repeats),
                    "--row-budget", str(row_budget_s), *(["--quick"] if quick else [])], env=env, check=True)


def main() -> int:
    global row_budget_s
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1/8 of the walkers, fewer repeats")
    ap.add_argument("--sizes", default="1,2,3,4,8,16")
    ap.add_argument("--png", default="qmc_workload.png")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--row-budget", type=float, default=row_budget_s,
                    help="seconds a row may take before it stops adding rounds beyond --repeats (0: exactly --repeats)")
    ap.add_argument("--walkers", type=int, default=None,
                    help="walkers at every N (default: 4096 up to N = 4, x of 16 MiB above; a GPU needs "
                         "the report's 4096 at every N to fill it, and scripts/gpu-report predicts for that)")
    ap.add_argument("--json", help="also write the table's rows here (scripts/gpu-report --measured reads them)")
    ap.add_argument("--skip-folx", action="store_true", help="leave out the folx Laplacian table")
    ap.add_argument("--skip-ansatz", action="store_true", help="leave out the ansatz step table (bench/ansatz.py)")
    ap.add_argument("--only-folx", action="store_true", help="the folx Laplacian table alone")
    args = ap.parse_args()
    row_budget_s = args.row_budget
    sizes = [int(s) for s in args.sizes.split(",")]
    repeats = args.repeats or (5 if args.quick else 15)

    if args.only_folx:
        folx_table(args.quick, repeats)
        return 0
    print(f"machine: {machine()}")
    print(f"jax {jax.__version__} on {jax.devices()[0].platform} ({jax.devices()[0].device_kind}); tinyla {tinyla.__version__} "
          f"(backend {tinyla.cpu_backend()}, {tinyla.get_num_threads()} threads); numpy {np.__version__}")
    print(f"float64; time = best of {repeats} or more calls (interleaved; {rounds_note()}) after compile + warm-up; "
          "ratio = other / tinyla\n")

    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        walkers = walkers_for(n, args.quick, args.walkers)
        x = jnp.asarray(rng.standard_normal((walkers, 64, n, n)))
        for workload in ("grad", "forward", "inv"):
            print(f"  N={n:2d} {workload:7s} x = ({walkers}, 64, {n}, {n}) ...", end="",
                  file=sys.stderr, flush=True)
            contenders = ["jnp", "closed", "tinyla"] if workload != "inv" and n <= 2 else ["jnp", "tinyla"]
            fns = {c: make_fn(workload, c) for c in contenders}
            # The floor: one elementwise XLA pass producing an output of the same size.
            fns["floor"] = jax.jit(lambda x: x * 2.0) if workload != "forward" else jax.jit(lambda x: x[..., 0, 0] * 2.0)
            best, outs, rounds = time_calls(fns, x, repeats)
            row = {"n": n, "walkers": walkers, "workload": workload, **best,
                   "paired": [j / t for j, t in zip(rounds["jnp"], rounds["tinyla"])],
                   "diff": max_rel_diff(outs["tinyla"], outs["jnp"]),
                   "gbps": (x.nbytes + outs["tinyla"].nbytes) / best["tinyla"] / 1e9}  # bytes in + out
            print(" ".join(f"{c} {best[c] * 1e3:.2f} ms" for c in fns), file=sys.stderr, flush=True)
            rows.append(row)

    header = ("| workload | N | x shape | jnp ms | closed form ms | tinyla ms | jnp / tinyla | "
              "jnp / tinyla per round | closed / tinyla | floor ms | tinyla GB/s | max rel. diff vs jnp |")
    print(header)
    print("|" + "---|" * 3 + "---:|" * 9)
    for r in rows:
        closed = r.get("closed")
        cells = [r["workload"], str(r["n"]), f"({r['walkers']}, 64, {r['n']}, {r['n']})", f"{r['jnp'] * 1e3:.2f}",
                 f"{closed * 1e3:.2f}" if closed else "-", f"{r['tinyla'] * 1e3:.2f}",
                 f"**{r['jnp'] / r['tinyla']:.1f}x**", paired_cell(r.pop("paired")),
                 f"{closed / r['tinyla']:.2f}x" if closed else "-",
                 f"{r['floor'] * 1e3:.2f}", f"{r['gbps']:.0f}", f"{r['diff']:.1e}"]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        device = jax.devices()[0]
        with open(args.json, "w") as f:
            json.dump({"device": f"{device.platform} ({device.device_kind})", "rows": rows}, f, indent=1)
    if not args.skip_folx:
        folx_table(args.quick, repeats)
        folx_table_again(args.quick, repeats, f"with XLA_FLAGS={YNN_REDUCTIONS_OFF} (XLA's own loops for "
                         "reductions, not YNNPACK's)", xla_flags=YNN_REDUCTIONS_OFF)
        if TCMALLOC:
            folx_table_again(args.quick, repeats, f"with that flag and tcmalloc (LD_PRELOAD={TCMALLOC}: XLA's "
                             "temporaries of 32 MiB and more not mapped afresh every call)",
                             xla_flags=YNN_REDUCTIONS_OFF, preload=TCMALLOC)
        elif tlj._default_platform() == "cpu":
            print("\n(tcmalloc is not installed: the folx table is not timed with it; scripts/deps installs it)")
    if args.png:
        plot(rows, args.png)
        print(f"\nplot: {args.png}")
    if not args.skip_ansatz:
        # its own process: it runs jax with other threading (see bench/ansatz.py)
        sys.stdout.flush()
        png = os.path.join(os.path.dirname(args.png) or ".", "ansatz_step.png") if args.png else ""
        ansatz = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ansatz.py")
        subprocess.run([sys.executable, ansatz, "--png", png, *(["--quick"] if args.quick else [])], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
