"""A FermiNet-like ansatz for the end-to-end benchmark: one atom, n_el electrons in two spin blocks.

The model follows FermiNet (Pfau et al., Phys. Rev. Research 2, 033429 (2020)) at a size a
2-core CPU can step through: electron-nucleus and electron-electron features, LAYERS layers of
one- and two-electron streams (widths WIDTH_1, WIDTH_2) that mix by spin-block means, then per
spin block K determinants of MLP orbitals times exponential envelopes, combined by a signed
log-sum-exp. Only the determinant step differs between contenders:

  jnp      jnp.linalg.slogdet per block, then the signed log-sum-exp (what FermiNet writes)
  tinyla   the same code with tinyla.jax.slogdet (what tinyla.jax.use_for_jnp() gives it)
  sum      tinyla.jax.slogdet_sum over both blocks, the whole signed sum in one op
  masked, sliced  a zero-cost stand-in of the same shapes: log|product of the diagonal|, then
           the same signed log-sum-exp (the Amdahl limit: everything but the determinant), the
           diagonal taken two ways (qmc_workload.STANDINS); each row's limit is the faster
  every_entry (--every-entry) a stand-in that reads every entry, log|sum of the entries|, whose
           derivatives are dense like a determinant's: the diagonal stand-in's cotangents and
           tangents are zero off the diagonal, which XLA may exploit in the model's own
           derivatives (docs/benchmarks.md, Table 3)

Workloads (over a batch of walkers, float64):
  E_L folx      local energy, the kinetic term by folx's forward Laplacian (sparsity_threshold 6,
                as FermiNet calls it)
  E_L hessian   local energy, the Laplacian as the Hessian's trace, forward over reverse as in
                FermiNet's default (jax.linearize of the gradient, one coordinate per loop step)
  VMC step      folx local energy + jit(grad) of the VMC loss with respect to the parameters

Times are each contender's best call. Where a step goes: "det share of jnp" = 1 - stand-in / jnp,
what a perfect determinant could save; "det share of tinyla" = 1 - stand-in / tinyla, what
tinyla's determinant still costs; the rest of both is the model, which the stand-in runs too.
The "per round" columns are the median over rounds of
two contenders' ratio in the same round, with a 95 % interval for it (qmc_workload.paired_ratio),
and the line under the table counts the rows whose interval lies at or above 0.95 of the
stand-in's speed (the target), below it, or across it.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # jnp's LAPACK threads spin after a call (qmc_workload.py)

if __name__ == "__main__":
    # One core for every contender: XLA's CPU pool of one thread (set before jax starts) and
    # tinyla's pool of one (main). jnp.linalg's batched LAPACK calls (jaxlib 0.10) wait inside
    # XLA's pool for work queued on that same pool, so when as many run at once as the pool has
    # threads the process hangs -- this model's Hessian trace on a 2- or 4-thread pool did; with
    # one thread they run inline. A larger pool than cores made the timings swing by 30 %.
    os.environ.setdefault("PJRT_NPROC", "1")

import argparse
import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

import tinyla.jax as tlj
from qmc_workload import (FERMINET_FOLX_SPARSITY, STANDINS, fastest_standin, machine, max_rel_diff, paired_cell,
                          paired_ratio, rounds_note, time_calls)

K = 16
LAYERS = 2
WIDTH_1 = 64
WIDTH_2 = 16


def spins(n_el: int) -> tuple[int, int]:
    return (n_el + 1) // 2, n_el // 2


def init_params(n_el: int, seed: int = 0) -> dict:
    """Random parameters scaled so that activations stay O(1) and the orbital matrices are
    well conditioned (an identity-like term per determinant, as a trained model's would be)."""
    rng = np.random.default_rng(seed)
    n_up, n_dn = spins(n_el)
    params = {"layers": [], "orbitals": [], "sigma": []}
    d1, d2 = 4, 4  # |r_i|, r_i; |r_ij|, r_ij
    for _ in range(LAYERS):
        d_in = 3 * d1 + 2 * d2
        params["layers"].append({
            "w1": jnp.asarray(rng.standard_normal((d_in, WIDTH_1)) / np.sqrt(d_in)),
            "b1": jnp.asarray(rng.standard_normal(WIDTH_1) * 0.1),
            "w2": jnp.asarray(rng.standard_normal((d2, WIDTH_2)) / np.sqrt(d2)),
            "b2": jnp.asarray(rng.standard_normal(WIDTH_2) * 0.1)})
        d1, d2 = WIDTH_1, WIDTH_2
    for n_s in (n_up, n_dn):
        params["orbitals"].append(jnp.asarray(rng.standard_normal((WIDTH_1, K * n_s)) / np.sqrt(WIDTH_1)))
        params["sigma"].append(jnp.asarray(1.0 + rng.random((K, n_s))))
    return params


def _signed_logsumexp(signs, logs):
    """log|sum_k signs_k exp(logs_k)| and its sign, shifted by the largest term."""
    shift = jax.lax.stop_gradient(jnp.max(logs, axis=-1, keepdims=True))
    total = jnp.sum(signs * jnp.exp(logs - shift), axis=-1)
    return jnp.sign(total), jnp.log(jnp.abs(total)) + shift[..., 0]


def _per_block(slogdet):
    def combine(blocks):
        signs, logs = 1.0, 0.0
        for phi in blocks:
            s, l = slogdet(phi)
            signs, logs = signs * s, logs + l
        return _signed_logsumexp(signs, logs)
    return combine


DETERMINANTS = {
    "jnp": _per_block(jnp.linalg.slogdet),
    "tinyla": _per_block(tlj.slogdet),
    "sum": lambda blocks: tuple(tlj.slogdet_sum(blocks)),
    **{name: _per_block(standin) for name, standin in STANDINS.items()},
}


def _every_entry(a):
    total = jnp.sum(a, axis=(-2, -1))
    return jnp.sign(total), jnp.log(jnp.abs(total))



def make_log_psi(n_el: int, contender: str):
    """log|psi(params, x)| for one walker, x of shape (3 n_el,) (the nucleus, charge n_el, at 0)."""
    n_up, _ = spins(n_el)
    determinants = DETERMINANTS[contender]
    eye = jnp.eye(n_el)

    def log_psi(params, x):
        r = x.reshape(n_el, 3)
        r_ae = jnp.linalg.norm(r, axis=-1, keepdims=True)
        ee = r[:, None, :] - r[None, :, :]
        # |r_ij| with the diagonal held at 1, so that its derivative exists (FermiNet's trick).
        r_ee = jnp.sqrt(jnp.sum(ee * ee, -1, keepdims=True) + eye[..., None]) * (1 - eye)[..., None]
        h1 = jnp.concatenate([r_ae, r], -1)
        h2 = jnp.concatenate([r_ee, ee], -1)
        for layer in params["layers"]:
            g1 = [jnp.broadcast_to(jnp.mean(b, 0), b.shape[1:]) for b in (h1[:n_up], h1[n_up:])]
            g2 = [jnp.mean(h2[:, :n_up], 1), jnp.mean(h2[:, n_up:], 1)]
            f = jnp.concatenate([h1, jnp.broadcast_to(g1[0], h1.shape), jnp.broadcast_to(g1[1], h1.shape), *g2], -1)
            new1 = jnp.tanh(f @ layer["w1"] + layer["b1"])
            new2 = jnp.tanh(h2 @ layer["w2"] + layer["b2"])
            h1 = new1 + h1 if new1.shape == h1.shape else new1
            h2 = new2 + h2 if new2.shape == h2.shape else new2
        blocks = []
        for (lo, hi), w, sigma in zip(((0, n_up), (n_up, n_el)), params["orbitals"], params["sigma"]):
            n_s = hi - lo
            orb = (h1[lo:hi] @ w).reshape(n_s, K, n_s).transpose(1, 0, 2)  # (K, electron, orbital)
            envelope = jnp.exp(-sigma[:, None, :] * r_ae[lo:hi, 0][None, :, None])
            blocks.append((orb + jnp.eye(n_s)) * envelope)
        return determinants(blocks)[1]

    return log_psi


def potential(n_el: int, x):
    r = x.reshape(n_el, 3)
    ee = r[:, None, :] - r[None, :, :]
    i, j = np.triu_indices(n_el, 1)
    return -n_el * jnp.sum(1 / jnp.linalg.norm(r, axis=-1)) + jnp.sum(1 / jnp.linalg.norm(ee[i, j], axis=-1))


def local_energy(n_el: int, contender: str, laplacian: str):
    """E_L(params, x) = -(lap log|psi| + |grad log|psi||^2) / 2 + V for one walker."""
    log_psi = make_log_psi(n_el, contender)

    def e_l(params, x):
        f = lambda x: log_psi(params, x)  # noqa: E731
        if laplacian == "folx":
            import folx
            out = folx.forward_laplacian(f, sparsity_threshold=FERMINET_FOLX_SPARSITY)(x)
            lap, grad = out.laplacian, out.jacobian.dense_array
        else:
            # FermiNet's default: linearize the gradient, one tangent per coordinate in a loop.
            grad, dgrad = jax.linearize(jax.grad(f), x)
            eye = jnp.eye(x.shape[0], dtype=x.dtype)
            lap = jax.lax.fori_loop(0, x.shape[0], lambda i, acc: acc + dgrad(eye[i])[i], 0.0)
        return -0.5 * (lap + jnp.sum(grad * grad)) + potential(n_el, x)

    return e_l


def walkers(n_el: int, count: int, seed: int = 0):
    """Walker positions: electrons spread around the nucleus at radii of about one bohr."""
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.standard_normal((count, 3 * n_el)))


def workloads(n_el: int, contender: str) -> dict:
    """The benchmark's jitted functions of (params, xs) for one contender."""
    log_psi = make_log_psi(n_el, contender)
    e_folx = jax.vmap(local_energy(n_el, contender, "folx"), (None, 0))
    e_hess = jax.vmap(local_energy(n_el, contender, "hessian"), (None, 0))

    def loss(params, xs, e_l):
        centred = jax.lax.stop_gradient(e_l - jnp.mean(e_l))
        return 2 * jnp.mean(centred * jax.vmap(log_psi, (None, 0))(params, xs))

    def step(params, xs):
        """The energy and the loss's gradient, as one vector (what an optimizer step takes)."""
        e_l = e_folx(params, xs)
        return jnp.concatenate([jnp.mean(e_l)[None], ravel_pytree(jax.grad(loss)(params, xs, e_l))[0]])

    return {"E_L folx": jax.jit(e_folx), "E_L hessian": jax.jit(e_hess), "VMC step": jax.jit(step)}


def lowered_with_xla_form(build, *args):
    """The function `build()` makes, lowered while tinyla's folx rule contracts stacks of matrices
    with XLA's code on this platform (tinyla/_folx.py, _STACK_KERNEL_PLATFORMS) instead of the
    log_det_laplacian kernel: the comparison a GPU run prints (XLA's form was the GPUs' default
    until 2026-11-30). `build` makes the jitted function anew: jax reuses a jitted function's
    trace for arguments of the same types whatever that setting is, so a function traced under
    one form and lowered under the other keeps the first form's program."""
    from tinyla import _folx
    saved = _folx._STACK_KERNEL_PLATFORMS
    _folx._STACK_KERNEL_PLATFORMS = tuple(p for p in saved if p != tlj._default_platform())
    try:
        return build().lower(*args)
    finally:
        _folx._STACK_KERNEL_PLATFORMS = saved


def within_5_percent(standin_over_tinyla) -> str:
    """The target "every step within 5 % of the stand-in's time", judged on the per-round ratios'
    median: 'met' where its 95 % interval lies at or above 0.95, 'missed' where below, else 'open'."""
    _, low, high = paired_ratio(standin_over_tinyla)
    return "met" if low >= 0.95 else "missed" if high < 0.95 else "open"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="64 walkers, 3 repeats")
    ap.add_argument("--electrons", default="4,10,16,32")
    ap.add_argument("--walkers", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--png", default="ansatz_step.png")
    ap.add_argument("--every-entry", action="store_true",
                    help="also the stand-in that reads every entry (contender every_entry, last columns)")
    args = ap.parse_args()
    if args.every_entry:
        DETERMINANTS["every_entry"] = _per_block(_every_entry)
    extra = " every-entry stand-in ms | every-entry / tinyla |" if args.every_entry else ""
    jax.config.update("jax_enable_x64", True)
    import tinyla
    tinyla.set_num_threads(1)
    count = args.walkers or (64 if args.quick else 256)
    repeats = args.repeats or (3 if args.quick else 6)  # 6: the per-round columns' 95 % interval
    print(f"machine: {machine()}; jax {jax.__version__}; threads: XLA {os.environ.get('PJRT_NPROC', 'default')}, "
          f"tinyla {tinyla.get_num_threads()}")
    print(f"\nFermiNet-like ansatz step ({LAYERS} layers of widths {WIDTH_1}/{WIDTH_2}, K = {K} determinants, "
          f"two spin blocks, envelopes), float64, one thread; time per call, best of {repeats} or more, interleaved ({rounds_note()})")
    print("| n_el | blocks | walkers | workload | jnp ms | tinyla ms | slogdet_sum ms | stand-in ms | jnp / tinyla | "
          "jnp / slogdet_sum | stand-in / tinyla | jnp / tinyla per round | stand-in / tinyla per round | "
          "det share of jnp | det share of tinyla | max rel. diff |" + extra)
    print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|---:|" * bool(extra))
    rows, stack_rows, verdicts = [], [], []
    on_tinyla_gpu = tlj._default_platform() in tlj.GPU_PLATFORMS
    for n_el in (int(s) for s in args.electrons.split(",")):
        n_walkers = count if n_el <= 16 else max(count // 4, 1)  # n_el = 32: a quarter, to bound the run time
        params, xs = init_params(n_el), walkers(n_el, n_walkers)
        contenders = {c: workloads(n_el, c) for c in DETERMINANTS}
        for workload in contenders["jnp"]:
            fns = {c: functools.partial(contenders[c][workload], params) for c in contenders}
            if on_tinyla_gpu and workload != "E_L hessian":  # the folx workloads
                xla_form = lowered_with_xla_form(lambda: workloads(n_el, "tinyla")[workload], params, xs)
                fns["tinyla, XLA's form"] = functools.partial(xla_form.compile(), params)
            print(f"  n_el={n_el} {workload} ...", end="", file=sys.stderr, flush=True)
            best, outs, rounds = time_calls(fns, xs, repeats)
            print(" ".join(f"{c} {best[c] * 1e3:.1f} ms" for c in fns), file=sys.stderr, flush=True)
            diff = max(max_rel_diff(outs[c], outs["jnp"])
                       for c in ("tinyla", "sum", "tinyla, XLA's form") if c in outs)
            standin, standin_time = fastest_standin(best)
            over_jnp = [j / t for j, t in zip(rounds["jnp"], rounds["tinyla"])]
            over_standin = [s / t for s, t in zip(rounds[standin], rounds["tinyla"])]
            verdicts.append(within_5_percent(over_standin))
            rows.append({"n_el": n_el, "workload": workload, **best, "standin": standin_time})
            if "tinyla, XLA's form" in best:
                xla_form = best["tinyla, XLA's form"]
                stack_rows.append(f"| {n_el} | {workload} | {xla_form * 1e3:.1f} | {best['tinyla'] * 1e3:.1f} | "
                                  f"{standin_time * 1e3:.1f} | {xla_form / best['tinyla']:.2f}x |")
            print(f"| {n_el} | {'+'.join(map(str, spins(n_el)))} | {n_walkers} | {workload} | " +
                  " | ".join(f"{best[c] * 1e3:.1f}" for c in ("jnp", "tinyla", "sum")) +
                  f" | {standin_time * 1e3:.1f} ({standin}) | **{best['jnp'] / best['tinyla']:.2f}x** | "
                  f"{best['jnp'] / best['sum']:.2f}x | {standin_time / best['tinyla']:.2f} | "
                  f"{paired_cell(over_jnp)} | {paired_cell(over_standin)} | "
                  f"{share(standin_time, best['jnp']):.0%} | {share(standin_time, best['tinyla']):.0%} | {diff:.1e} |" +
                  (f" {best['every_entry'] * 1e3:.1f} | {best['every_entry'] / best['tinyla']:.2f} |" if extra else ""))
    print(f"\nWithin 5 % of the stand-in (per round, the interval at or above 0.95): {verdicts.count('met')} of "
          f"{len(verdicts)} rows; below (the interval under 0.95): {verdicts.count('missed')}; not resolved by "
          f"these rounds (the interval spans 0.95): {verdicts.count('open')}.")
    if stack_rows:
        print("\ntinyla's folx rule on stacks of matrices: XLA's contraction (the GPUs' default until 2026-11-30) "
              "against the log_det_laplacian kernel (every platform's now), the same run:")
        print("| n_el | workload | XLA form ms | kernel ms | stand-in ms | XLA form / kernel |")
        print("|---:|---|---:|---:|---:|---:|")
        print("\n".join(stack_rows))
    if args.png:
        plot(rows, args.png)
        print(f"\nplot: {args.png}")
    return 0


def share(standin_time: float, time: float) -> float:
    """The determinant's share of a step, 1 - stand-in / step (rounded to a percent, so that a
    share just below zero prints as 0 %, not -0 %)."""
    return round(1 - standin_time / time, 2) + 0.0


def plot(rows, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({r["workload"] for r in rows})
    sizes = sorted({r["n_el"] for r in rows})
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 4), sharey=True)
    for ax, name in zip(np.atleast_1d(axes), names):
        bars = (("tinyla", "tinyla.jax.slogdet"), ("sum", "tinyla.jax.slogdet_sum"), ("standin", "zero-cost stand-in (its faster form)"))
        for k, (who, label) in enumerate(bars):
            ys = [next(r["jnp"] / r[who] for r in rows if r["n_el"] == n and r["workload"] == name) for n in sizes]
            ax.bar(np.arange(len(sizes)) + (k - 1) * 0.27, ys, 0.27, label=label)
        ax.axhline(1, color="black", linewidth=0.8)
        ax.set_xticks(np.arange(len(sizes)), [str(n) for n in sizes])
        ax.set_xlabel("electrons")
        ax.set_title(name)
    np.atleast_1d(axes)[0].set_ylabel("speed-up over jnp.linalg per step")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.suptitle("FermiNet-like ansatz step, float64, one CPU thread")
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
