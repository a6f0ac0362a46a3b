# Four CPU devices for the sharding tests and float64 for everything: both must be set
# before jax initialises its backends, so here, ahead of any test module's imports.
import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)


def pytest_collection_modifyitems(items):
    """The longest tests first (stable otherwise): under pytest-xdist one that starts last
    keeps a worker busy after the others have run out of tests."""
    longest = ("test_ansatz_step_matches_jnp", "test_slogdet_sum_derivatives")
    items.sort(key=lambda item: not item.name.startswith(longest))
