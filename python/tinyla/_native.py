"""ctypes bindings of the C API (libtinyla) shipped inside the package."""
from __future__ import annotations

import ctypes
import enum
import os

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
LIBTINYLA = os.path.join(_HERE, "libtinyla.so")
LIBTINYLA_XLA = os.path.join(_HERE, "libtinyla_xla.so")
# XLA handlers of the GPU backends, present when the package was built with them
# (pip install -C cmake.define.TINYLA_CUDA=ON / TINYLA_HIP=ON), by jax platform.
LIBTINYLA_XLA_GPU = {"cuda": os.path.join(_HERE, "libtinyla_xla_cuda.so"),
                     "rocm": os.path.join(_HERE, "libtinyla_xla_rocm.so")}

lib = ctypes.CDLL(LIBTINYLA)

_i64, _ptr = ctypes.c_int64, ctypes.c_void_p
_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
           np.dtype(np.complex64): "c64", np.dtype(np.complex128): "c128"}
_ARGS = {  # after (batch, n): the pointer arguments of each op
    "slogdet": [_ptr, _ptr, _ptr],
    "det": [_ptr, _ptr],
    "inv": [_ptr, _ptr, _ptr],
    "solve": [_i64, _ptr, _ptr, _ptr, _ptr],
    "slogdet_inv": [_ptr, _ptr, _ptr, _ptr],
}
for _op, _rest in _ARGS.items():
    for _sfx in _SUFFIX.values():
        _f = getattr(lib, f"tinyla_{_op}_{_sfx}")
        _f.argtypes = [_i64, _i64, *_rest]
        _f.restype = ctypes.c_int
lib.tinyla_status_string.argtypes = [ctypes.c_int]
lib.tinyla_status_string.restype = ctypes.c_char_p
lib.tinyla_set_num_threads.argtypes = [ctypes.c_int]
lib.tinyla_set_num_threads.restype = None
lib.tinyla_get_num_threads.argtypes = []
lib.tinyla_get_num_threads.restype = ctypes.c_int
lib.tinyla_cpu_backend.argtypes = []
lib.tinyla_cpu_backend.restype = ctypes.c_char_p

SUPPORTED = tuple(_SUFFIX)  # the element types with kernels


class Status(enum.IntEnum):
    """tinyla_status of include/tinyla/tinyla.h (C ABI; a test compares the two)."""
    OK = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    OUT_OF_MEMORY = 3
    BACKEND_ERROR = 4


def call(op: str, dtype: np.dtype, batch: int, n: int, *arrays) -> None:
    """Calls tinyla_<op>_<sfx>(batch, n, ...); arrays are C-contiguous numpy
    arrays (or ints, passed through) in the C API's argument order."""
    f = getattr(lib, f"tinyla_{op}_{_SUFFIX[np.dtype(dtype)]}")
    args = [x if isinstance(x, int) else (None if x is None else x.ctypes.data) for x in arrays]
    status = f(batch, n, *args)  # ctypes releases the GIL for the call
    if status:
        message = f"tinyla_{op}: {lib.tinyla_status_string(status).decode()} (batch={batch}, n={n})"
        if status == Status.OUT_OF_MEMORY:
            raise MemoryError(message)
        raise (ValueError if status == Status.INVALID_ARGUMENT else RuntimeError)(message)
