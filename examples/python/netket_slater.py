"""NetKet's Slater determinant (nk.models.Slater2nd, complex orbitals) for the Fermi-Hubbard
model on a 4x4 lattice with 4 + 4 electrons: one VMC energy-and-gradient step with
jnp.linalg.slogdet and routed to tinyla by tinyla.jax.use_for_jnp(). NetKet calls
jnp.linalg.slogdet in nk.jax.logdet_cmplx, so nothing else changes."""
import os
import time

# One thread for XLA's CPU pool and tinyla's alike. jnp.linalg.slogdet's batched LAPACK calls
# (jaxlib 0.10) wait inside XLA's pool for work they queue on that same pool: on a 2-core
# machine two of them at once (this step's) hung the process for good. With one thread they run
# inline. Set before jax starts.
os.environ.setdefault("PJRT_NPROC", "1")

import jax  # noqa: E402
import netket as nk  # noqa: E402

import tinyla  # noqa: E402
import tinyla.jax as tlj  # noqa: E402

tinyla.set_num_threads(1)

jax.config.update("jax_enable_x64", True)
graph = nk.graph.Square(4)
hilbert = nk.hilbert.SpinOrbitalFermions(graph.n_nodes, s=1 / 2, n_fermions_per_spin=(4, 4))
hamiltonian = nk.operator.FermiHubbardJax(hilbert, t=1.0, U=4.0, graph=graph)
sampler = nk.sampler.MetropolisFermionHop(hilbert, graph=graph)


def timed_vmc_step(repeats=3):
    # A new state, so its functions are traced (and routed) here; same seeds, same samples.
    state = nk.vqs.MCState(sampler, nk.models.Slater2nd(hilbert, param_dtype=complex),
                           n_samples=1024, seed=0, sampler_seed=1)
    energy, _ = state.expect_and_grad(hamiltonian)
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(state.expect_and_grad(hamiltonian))
    return energy.mean, (time.perf_counter() - start) / repeats


e_jnp, t_jnp = timed_vmc_step()
with tlj.use_for_jnp():
    e_tinyla, t_tinyla = timed_vmc_step()
print(f"NetKet Slater2nd, 4x4 Hubbard, 1024 samples: energy jnp {complex(e_jnp):.10f}, "
      f"tinyla {complex(e_tinyla):.10f}; jnp {t_jnp * 1e3:.0f} ms, tinyla {t_tinyla * 1e3:.0f} ms "
      f"per sample + energy + gradient step")
