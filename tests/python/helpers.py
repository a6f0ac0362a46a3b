"""Test inputs and tolerances shared by the numpy and JAX tests."""
import numpy as np

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def random_matrices(shape, dtype, seed=0) -> np.ndarray:
    """Random matrices; square ones are I + G / (2 sqrt(n)) with G standard normal: the
    eigenvalues of G / sqrt(n) lie in the unit disc, so these are well conditioned and
    their determinants stay far from overflow."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.standard_normal(shape)
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1]:
        a = np.eye(shape[-1]) + a / (2 * np.sqrt(shape[-1]))
    return a.astype(dtype)


def assert_close(x, ref, dtype, factor=64.0, scale=None):
    """|x - ref| <= factor * n-independent eps * max(|ref|, scale, 1) elementwise."""
    x, ref = np.asarray(x), np.asarray(ref)
    assert x.shape == ref.shape, (x.shape, ref.shape)
    bound = factor * eps(dtype) * np.maximum(np.abs(ref) if scale is None else scale, 1.0)
    err = np.abs(x.astype(np.complex128) - ref.astype(np.complex128))
    assert np.all(err <= bound), f"max error {err.max():.3e}, bound {bound.min():.3e}"
