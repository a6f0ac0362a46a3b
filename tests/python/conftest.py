# Four CPU devices for the sharding tests and float64 for everything: both must be set
# before jax initialises its backends, so here, ahead of any test module's imports.
import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)


def pytest_collection_modifyitems(items):
    """The longest tests first (stable otherwise): under pytest-xdist one that starts last
    keeps a worker busy after the others have run out of tests."""
    longest = ("test_ansatz_step_matches_jnp", "test_slogdet_sum_derivatives")
    items.sort(key=lambda item: not item.name.startswith(longest))


@pytest.fixture(params=["kernels", "closed_form"])
def path(request):
    """n <= 2 in tinyla.jax on the CPU's kernels, then on the closed forms (what GPUs lower it
    to; the CPU, n = 1 only): tests that take this fixture check both."""
    import tinyla.jax as tlj
    saved = dict(tlj.CLOSED_FORM_MAX_N)
    tlj.CLOSED_FORM_MAX_N["cpu"] = 0 if request.param == "kernels" else 2
    jax.clear_caches()  # the choice is made when lowering
    yield request.param
    tlj.CLOSED_FORM_MAX_N.update(saved)
    jax.clear_caches()
