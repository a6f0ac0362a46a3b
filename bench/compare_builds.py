"""Two builds of libtinyla compared op by op on the CPU, robust to where each file lands.

Where the page cache puts a library's code moved identical builds by up to 25 % on a KVM guest
(docs/benchmarks.md, "Per-round ratios"): byte-identical copies of libtinyla.so, each loaded alone,
ran complex128 slogdet_inv_transposed at n = 8 in 186 ns a matrix or 231, by copy. So each build
is copied to fresh files (new pages) --copies times, each copy timed in a process of its own,
old and new alternating; per (dtype, op, n) the median over copies of each process's median
time a matrix, and old / new of those (above 1: the new build is faster), with the range of the
copies' ratios paired in order.

  python bench/compare_builds.py OLD/libtinyla.so NEW/libtinyla.so [--copies 5] [--kib 256]
      [--ops slogdet,inv,...] [--dtypes f64,f32,c128,c64] [--sizes 3-8] [--threads 1]

TINYLA_ISA picks the ISA in both (e.g. avx2 on an AVX-512 machine).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

DTYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128}
OPS = ("slogdet", "det", "inv", "inv_transposed", "slogdet_inv", "slogdet_inv_transposed", "det_adjugate", "solve")


def sizes(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def ptr(x: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(x.ctypes.data)


def call_for(lib, op: str, dtype: str, a: np.ndarray):
    """A no-argument function that runs op once on the batch a, and checks its status."""
    batch, n = a.shape[0], a.shape[1]
    real = np.float32 if dtype in ("f32", "c64") else np.float64
    sign, logdet = np.empty(batch, a.dtype), np.empty(batch, real)
    x, info = np.empty_like(a), np.empty(batch, np.int32)
    rhs, solution = np.ones((batch, n, 1), a.dtype), np.empty((batch, n, 1), a.dtype)
    fn = getattr(lib, f"tinyla_{op}_{dtype}")
    args = {
        "slogdet": (ptr(a), ptr(sign), ptr(logdet)),
        "det": (ptr(a), ptr(sign)),
        "inv": (ptr(a), ptr(x), ptr(info)),
        "inv_transposed": (ptr(a), ptr(x), ptr(info)),
        "slogdet_inv": (ptr(a), ptr(sign), ptr(logdet), ptr(x)),
        "slogdet_inv_transposed": (ptr(a), ptr(sign), ptr(logdet), ptr(x)),
        "det_adjugate": (ptr(a), ptr(sign), ptr(x)),
    }
    head = (ctypes.c_int64(batch), ctypes.c_int64(n))
    full = head + ((ctypes.c_int64(1), ptr(a), ptr(rhs), ptr(solution), ptr(info)) if op == "solve" else args[op])
    keep = (sign, logdet, x, info, rhs, solution)  # alive as long as the closure

    def run():
        if fn(*full) != 0:
            raise RuntimeError(f"tinyla_{op}_{dtype} failed")
        return keep

    return run


def child(opts) -> None:
    """Times each (dtype, op, n) with the library opts.child; prints a JSON list of rows."""
    lib = ctypes.CDLL(opts.child)
    lib.tinyla_set_num_threads(opts.threads)
    rows = []
    rng = np.random.default_rng(0)
    for dtype in opts.dtypes.split(","):
        t = DTYPES[dtype]
        for op in opts.ops.split(","):
            for n in sizes(opts.sizes):
                batch = max(8, int(opts.kib * 1024 // (np.dtype(t).itemsize * n * n)))
                a = rng.standard_normal((batch, n, n)) - 0.5
                if np.issubdtype(t, np.complexfloating):
                    a = a + 1j * rng.standard_normal((batch, n, n))
                a = np.ascontiguousarray(a.astype(t))
                run = call_for(lib, op, dtype, a)
                run()
                times, start = [], time.perf_counter()
                while len(times) < 31 or time.perf_counter() - start < opts.seconds:
                    t0 = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - t0)
                rows.append({"dtype": dtype, "op": op, "n": n, "ns": statistics.median(times) / batch * 1e9})
    print(json.dumps(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", nargs="?")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--kib", type=float, default=256, help="input per call")
    parser.add_argument("--ops", default="slogdet,slogdet_inv_transposed,inv")
    parser.add_argument("--dtypes", default="f64")
    parser.add_argument("--sizes", default="3-8", help="n, or a range first-last")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=0.3, help="time each row at least this long")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        child(opts)
        return 0
    if not (opts.old and opts.new) or not all(op in OPS for op in opts.ops.split(",")):
        parser.error(f"two library paths are needed, and ops among {', '.join(OPS)}")
    forward = [a for a in sys.argv[1:] if a not in (opts.old, opts.new)]
    times: dict[str, dict[tuple, list[float]]] = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for copy in range(opts.copies):
            for tag in ("old", "new") if copy % 2 == 0 else ("new", "old"):
                path = os.path.join(tmp, f"{tag}{copy}.so")
                shutil.copyfile(opts.old if tag == "old" else opts.new, path)  # a fresh file: new pages
                out = subprocess.run([sys.executable, __file__, *forward, "--child", path],
                                     capture_output=True, text=True, check=True).stdout
                os.remove(path)
                for row in json.loads(out):
                    times[tag].setdefault((row["dtype"], row["op"], row["n"]), []).append(row["ns"])
    print(f"old / new, ns a matrix: the median over {opts.copies} copies of each build (one process each) "
          f"of each process's median; in brackets the copies' ratios, paired in order, lowest-highest")
    for key in times["old"]:
        old, new = times["old"][key], times["new"][key]
        ratios = sorted(o / n for o, n in zip(old, new))
        print(f"{key[0]:5s} {key[1]:24s} n={key[2]:<3d} {statistics.median(old) / statistics.median(new):5.2f} "
              f"({ratios[0]:.2f}-{ratios[-1]:.2f})  {statistics.median(old):8.1f} / {statistics.median(new):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
