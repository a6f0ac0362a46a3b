"""DeepQMC's PsiFormer on LiH: local energies of a batch of walkers with jnp.linalg.slogdet
and routed to tinyla by tinyla.jax.use_for_jnp(). DeepQMC calls jnp.linalg.slogdet inside its
wave function (deepqmc.wf.nn_wave_function.eval_log_slater), so nothing else changes."""
import os
import time

import deepqmc  # before jax: it sets NVIDIA_TF32_OVERRIDE
import jax
import jax.numpy as jnp
from deepqmc.app import instantiate_ansatz
from deepqmc.hamil import MolecularHamiltonian
from deepqmc.molecule import Molecule
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import tinyla.jax as tlj

jax.config.update("jax_enable_x64", True)
hamil = MolecularHamiltonian(mol=Molecule.from_name("LiH"))
with initialize_config_dir(version_base=None, config_dir=os.path.join(os.path.dirname(deepqmc.__file__), "conf/ansatz")):
    ansatz_config = compose(config_name="psiformer")
ansatz = instantiate_ansatz(hamil, instantiate(ansatz_config, _recursive_=True, _convert_="all"))
walkers = hamil.init_sample(jax.random.PRNGKey(0), hamil.mol.coords, 256)
params = ansatz.init(jax.random.PRNGKey(1), walkers[0])
local_energy = jax.vmap(hamil.local_energy(ansatz.apply), (None, None, 0))


def timed_local_energy(repeats=5):
    f = jax.jit(local_energy)  # traced here: inside use_for_jnp() it calls tinyla
    energy = jax.block_until_ready(f(None, params, walkers)[0])
    start = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(f(None, params, walkers))
    return energy, (time.perf_counter() - start) / repeats


e_jnp, t_jnp = timed_local_energy()
with tlj.use_for_jnp():
    e_tinyla, t_tinyla = timed_local_energy()
print(f"DeepQMC PsiFormer, LiH, 256 walkers: max |E_L(tinyla) - E_L(jnp)| = "
      f"{float(jnp.max(jnp.abs(e_tinyla - e_jnp))):.1e} Ha; "
      f"jnp {t_jnp * 1e3:.0f} ms, tinyla {t_tinyla * 1e3:.0f} ms per local-energy batch")
