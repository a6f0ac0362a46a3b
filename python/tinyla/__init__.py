"""tinyla: linear algebra for huge batches of tiny matrices.

    import tinyla.numpy as tla      # numpy.linalg's contract: slogdet, det, inv, solve (+ slogdet_inv)
    import tinyla.jax as tlj        # jax.numpy.linalg's contract, as XLA FFI calls, any-order derivatives

The package root holds the process-wide CPU settings.
"""
from tinyla._native import lib as _lib

__version__ = "0.1.0"


def set_num_threads(n: int) -> None:
    """Threads used by later calls (0 = all hardware threads, the default unless
    TINYLA_NUM_THREADS is set). Results are bit-identical for every count. Idle threads poll
    for work TINYLA_SPIN_US microseconds (environment, read here; default 100, 0 = sleep at
    once) before they sleep."""
    if int(n) < 0:
        raise ValueError(f"set_num_threads: n must be >= 0, got {n}")
    _lib.tinyla_set_num_threads(int(n))


def get_num_threads() -> int:
    """Threads tinyla's CPU backend uses."""
    return _lib.tinyla_get_num_threads()


def cpu_backend() -> str:
    """The CPU code path in use: "avx512", "avx2", "vec128" or "scalar" (env TINYLA_ISA)."""
    return _lib.tinyla_cpu_backend().decode()


__all__ = ["set_num_threads", "get_num_threads", "cpu_backend", "__version__"]
