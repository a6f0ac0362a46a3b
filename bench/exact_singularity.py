"""How often exactly singular integer matrices are reported as singular (sign 0): numpy.linalg
(LAPACK getrf) vs tinyla.numpy.

    python bench/exact_singularity.py [--count 10000] [--seed 7]

Rank-deficient matrices with entries in -3..3: n - 1 random rows and one row (or column) that
is a combination of one to three of them with coefficients +-1, +-2, kept when its entries
stay in -3..3; rows shuffled. In exact arithmetic every last pivot is 0; in floating point
it is 0 only when the rounding errors of the elimination cancel, so the count depends on the
order of the operations (fused or separate multiply-adds, reciprocal or division, right- or
left-looking elimination). Prints counts per n for both generators; tinyla's elimination
order was chosen with it (README, "Factorization"), and tests/python/test_numpy.py checks
that tinyla's count stays at least numpy's.
"""
from __future__ import annotations

import argparse

import numpy as np

import tinyla.numpy as tla


def rank_deficient(rng, n: int, count: int, dependent_column: bool) -> np.ndarray:
    out = []
    while len(out) < count:
        rows = rng.integers(-3, 4, (n - 1, n))
        k = rng.integers(1, min(3, n - 1) + 1)
        which = rng.choice(n - 1, k, replace=False)
        coefficients = rng.choice([-2, -1, 1, 2], k)
        extra = (coefficients[:, None] * rows[which]).sum(0)
        if np.abs(extra).max() > 3 or not extra.any():
            continue
        a = np.vstack([rows, extra])[rng.permutation(n)]
        out.append(a.T if dependent_column else a)
    return np.array(out, dtype=np.float64)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"exactly singular reported, of {args.count} rank-deficient integer matrices per n")
    print(f"{'dependent':>9} {'n':>2} {'numpy':>6} {'tinyla':>6}")
    for dependent_column in (False, True):
        for n in range(2, 9):
            a = rank_deficient(rng, n, args.count, dependent_column)
            ours = int((tla.slogdet(a)[0] == 0).sum())
            theirs = int((np.linalg.slogdet(a)[0] == 0).sum())
            print(f"{'column' if dependent_column else 'row':>9} {n:>2} {theirs:>6} {ours:>6}", flush=True)


if __name__ == "__main__":
    main()
