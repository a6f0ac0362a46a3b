"""What tinyla's inverse tangent costs inside FermiNet's Hessian trace: bench/ansatz.py's E_L hessian
workload with variants of tinyla.jax's rule for d A^-1 = -A^-1 dA A^-1, all compiled in one process
and timed interleaved (qmc_workload.time_calls), beside the zero-cost stand-ins.

  tinyla        the rule as it is (_matmul: XLA's fused rank-1 sums for n <= 7 on the CPU, a dot above)
  fused         the products as rank-1 sums at every n up to --fused-k (_FUSED_MATMUL_MAX_K)
  elementwise   the tangent replaced by an element-wise product of the same shapes: wrong values,
                timing only -- what a free product would leave
  masked, sliced, every_entry  the stand-ins (bench/ansatz.py)

Each pair's per-round ratio is printed as its median with a 95 % interval (qmc_workload.paired_ratio).

    python bench/hessian_rule_variants.py --electrons 10,16 --walkers 64 --rounds 30
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
if __name__ == "__main__":
    os.environ.setdefault("PJRT_NPROC", "1")  # one XLA thread, as bench/ansatz.py

import argparse
import functools

import jax

import tinyla.jax as tlj
import ansatz
from qmc_workload import machine, paired_ratio, time_calls

WORKLOAD = "E_L hessian"


def compiled(n_el, params, xs, fused_k=None, elementwise=False):
    """tinyla's E_L hessian compiled under one variant of the rule (chosen when tracing, so the
    variant is set, the function built and lowered anew, and the rule put back)."""
    saved_k, saved_tangent = dict(tlj._FUSED_MATMUL_MAX_K), tlj._inverse_tangent
    if fused_k is not None:
        tlj._FUSED_MATMUL_MAX_K["cpu"] = fused_k
    if elementwise:
        tlj._inverse_tangent = lambda inverse, da, transposed: -inverse * da * inverse
    jax.clear_caches()
    try:
        fn = ansatz.workloads(n_el, "tinyla")[WORKLOAD].lower(params, xs).compile()
    finally:
        tlj._FUSED_MATMUL_MAX_K.update(saved_k)
        tlj._inverse_tangent = saved_tangent
        jax.clear_caches()
    return functools.partial(fn, params)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--electrons", default="10,16")
    ap.add_argument("--walkers", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--fused-k", type=int, default=16, help="the fused variant's largest n of rank-1 sums")
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", True)
    import tinyla
    tinyla.set_num_threads(1)
    ansatz.DETERMINANTS.setdefault("every_entry", ansatz._per_block(ansatz._every_entry))
    print(f"machine: {machine()}; jax {jax.__version__}; {WORKLOAD}, float64, one thread")
    for n_el in (int(s) for s in args.electrons.split(",")):
        params, xs = ansatz.init_params(n_el), ansatz.walkers(n_el, args.walkers)
        fns = {"tinyla": compiled(n_el, params, xs),
               "fused": compiled(n_el, params, xs, fused_k=args.fused_k),
               "elementwise": compiled(n_el, params, xs, elementwise=True)}
        for standin in ("masked", "sliced", "every_entry"):
            fns[standin] = functools.partial(ansatz.workloads(n_el, standin)[WORKLOAD], params)
        best, _, rounds = time_calls(fns, xs, args.rounds)
        print(f"\nn_el = {n_el} (blocks {'+'.join(map(str, ansatz.spins(n_el)))}), {args.walkers} walkers, "
              f"{len(rounds['tinyla'])} rounds; best ms: " + ", ".join(f"{c} {t * 1e3:.1f}" for c, t in best.items()))
        print("| ratio of times | per-round median | 95 % interval |")
        print("|---|---:|---|")
        for a, b in [("fused", "tinyla"), ("elementwise", "tinyla"), ("masked", "tinyla"), ("sliced", "tinyla"),
                     ("every_entry", "tinyla"), ("masked", "elementwise")]:
            median, low, high = paired_ratio([x / y for x, y in zip(rounds[a], rounds[b])])
            print(f"| {a} / {b} | {median:.3f} | {low:.3f}–{high:.3f} |")


if __name__ == "__main__":
    main()
