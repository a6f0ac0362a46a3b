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
    """Drawn in batches of candidates, the rejected ones (entries out of range) dropped."""
    batches, have = [], 0
    while have < count:
        m = 4 * (count - have) + 64
        rows = rng.integers(-3, 4, (m, n - 1, n))
        k = rng.integers(1, min(3, n - 1) + 1, m)
        # the k rows combined: the first k of a random order of the n - 1, each times +-1 or +-2
        which = rng.permuted(np.tile(np.arange(n - 1), (m, 1)), axis=1)
        coefficients = rng.choice([-2, -1, 1, 2], (m, n - 1)) * (np.arange(n - 1) < k[:, None])
        weights = np.zeros((m, n - 1), dtype=np.int64)
        np.put_along_axis(weights, which, coefficients, axis=1)
        extra = np.einsum("mr,mrc->mc", weights, rows)
        keep = (np.abs(extra).max(axis=1) <= 3) & extra.any(axis=1)
        a = np.concatenate([rows, extra[:, None, :]], axis=1)[keep]
        order = rng.permuted(np.tile(np.arange(n), (len(a), 1)), axis=1)  # the rows shuffled
        batches.append(np.take_along_axis(a, order[:, :, None], axis=1))
        have += len(a)
    out = np.concatenate(batches)[:count].astype(np.float64)
    return out.transpose(0, 2, 1).copy() if dependent_column else out


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
