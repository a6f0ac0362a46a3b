"""jax.grad of det: jnp.linalg vs tinyla.jax (one det_cofactors call, the adjugate), and the rule
it replaced (det * A^-T: a det and an inverse call), float64, one jit each, best of 15 or more
calls interleaved as in the QMC workload's tables (qmc_workload.time_calls).

    python bench/det_grad.py
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # jnp's LAPACK threads spin after a call (qmc_workload.py)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)
import tinyla.jax as tlj  # noqa: E402
from qmc_workload import time_calls  # noqa: E402


def main():
    rng = np.random.default_rng(0)
    contenders = {
        "jnp": jax.jit(jax.grad(lambda a: jnp.linalg.det(a).sum())),
        "det * A^-T": jax.jit(lambda a: tlj._det(a)[..., None, None] * tlj._inv(a, True)),
        "tinyla": jax.jit(jax.grad(lambda a: tlj.det(a).sum())),
    }
    print("| n | batch | jnp ms | det * A^-T ms | tinyla ms | jnp / tinyla | det * A^-T / tinyla |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, batch in ((3, 65536), (4, 65536), (8, 16384), (16, 4096), (32, 1024)):
        x = jnp.asarray(rng.standard_normal((batch, n, n)))
        t = {k: 1e3 * v for k, v in time_calls(contenders, x, 15)[0].items()}
        print(f"| {n} | {batch} | {t['jnp']:.3f} | {t['det * A^-T']:.3f} | {t['tinyla']:.3f} | "
              f"{t['jnp'] / t['tinyla']:.2f} | {t['det * A^-T'] / t['tinyla']:.2f} |")


if __name__ == "__main__":
    main()
