"""Writes the fuzz harness's seed corpus (the input format is described in fuzz_ops.cpp):
special values, every dtype and base, sizes around the closed forms (n <= 2), the unrolled
sizes and the LAPACK path (n > 32), and the reproducers of bugs fixed earlier.

    python3 tests/fuzz/seeds.py OUTDIR
"""
import pathlib
import struct
import sys

F32, F64, C64, C128 = range(4)
UNIFORM, INTEGERS, DEPENDENT_ROW, IDENTITY, DOUBLED_ROW = range(5)
RAW, SPECIAL, SMALL_INT = range(3)
IMAG = 4
# Indices into fuzz_ops.cpp's palette.
ZERO, NEG_ZERO, ONE, DENORM_MIN, REAL_MIN, REAL_MAX, INF, NAN, TINY, BIG, THREE_QUARTERS_MAX = 0, 1, 2, 7, 9, 11, 13, 15, 16, 17, 19


def seed(dtype, n, base, batch=1, nrhs=1, rng_seed=1, scale=0, overrides=()):
    size = n if n < 11 else next(b for b in range(192, 256) if b % 41 == n)
    head = bytes([dtype, size, batch - 1, nrhs, base]) + struct.pack("<Qb", rng_seed, scale)
    body = b""
    for at, kind, payload in overrides:
        if isinstance(payload, float):
            payload = struct.pack("<d" if dtype in (F64, C128) else "<f", payload).ljust(8, b"\0")
        else:
            payload = struct.pack("<Q", payload)
        body += struct.pack("<HB", at, kind) + payload
    return head + body


def entry(n, i, j):
    return i * n + j


def seeds():
    out = {}
    for dtype in range(4):
        for n in (0, 1, 2, 3, 4, 5, 8, 9, 16, 32, 33):
            for base in range(5):
                out[f"d{dtype}_n{n}_b{base}"] = seed(dtype, n, base, batch=3, nrhs=2)
        for value in (ZERO, NEG_ZERO, DENORM_MIN, REAL_MIN, REAL_MAX, INF, NAN, TINY, BIG):
            for n in (1, 2, 3, 7, 33):
                out[f"d{dtype}_n{n}_special{value}"] = seed(dtype, n, UNIFORM, overrides=[(entry(n, n // 2, n // 2), SPECIAL, value)])
        out[f"d{dtype}_scaled_up"] = seed(dtype, 32, UNIFORM, scale=125)  # entries near 2^1000
        out[f"d{dtype}_scaled_down"] = seed(dtype, 32, UNIFORM, scale=-125)
    # A complex subnormal pivot (1x1, and diag(2, 1e-310 + 1e-311 i, 3 + i)).
    out["c128_denorm_min_1x1"] = seed(C128, 1, IDENTITY, overrides=[(0, SPECIAL, DENORM_MIN), (0, SPECIAL | IMAG, ZERO)])
    out["c64_denorm_min_1x1"] = seed(C64, 1, IDENTITY, overrides=[(0, SPECIAL, DENORM_MIN)])
    out["c128_subnormal_diagonal"] = seed(C128, 3, IDENTITY, overrides=[
        (0, RAW, 2.0), (4, RAW, 1e-310), (4, RAW | IMAG, 1e-311), (8, RAW, 3.0), (8, RAW | IMAG, 1.0)])
    # max + max i alone: modulus past the largest number, logabsdet finite, det the entry.
    for dtype in (C64, C128):
        out[f"d{dtype}_max_plus_max_i_1x1"] = seed(dtype, 1, IDENTITY, overrides=[
            (0, SPECIAL, REAL_MAX), (0, SPECIAL | IMAG, REAL_MAX)])
    # The LAPACK path with one subnormal pivot: eye(33), A[5,5] = 1e-310.
    out["f64_eye33_subnormal_pivot"] = seed(F64, 33, IDENTITY, overrides=[(entry(33, 5, 5), RAW, 1e-310)])
    # Exactly singular, then an overflowing pivot: [[1,1,b],[1,1,-b],[0,0,1]], b = 0.75 max.
    for dtype in (F64, C128):
        out[f"d{dtype}_singular_then_overflow"] = seed(dtype, 3, IDENTITY, overrides=[
            (0, RAW, 1.0), (1, RAW, 1.0), (2, SPECIAL, THREE_QUARTERS_MAX), (3, RAW, 1.0), (4, RAW, 1.0),
            (5, RAW, -0.75 * 1.7976931348623157e308), (6, RAW, 0.0), (7, RAW, 0.0), (8, RAW, 1.0)])
    # [[1,2,3],[4,5,6],[7,8,9]]: exactly singular for LAPACK.
    out["f64_one_to_nine"] = seed(F64, 3, IDENTITY, overrides=[(i, RAW, float(i + 1)) for i in range(9)])
    # Rows spanning the exponent range at n = 2: [[1e-300, 1e300], [2e-300, 1e300]].
    out["f64_2x2_spanning"] = seed(F64, 2, IDENTITY, overrides=[(0, RAW, 1e-300), (1, RAW, 1e300), (2, RAW, 2e-300), (3, RAW, 1e300)])
    # A NaN entry and an infinite one meeting in a pivot (NaN, inf): gave logabsdet +inf.
    h = float.fromhex
    found = [(h("-0x1.3c3c3c3p+61"), h("-0x1.09df122340eaep-25")), (h("-0x1.c7db5c0f1413ap-25"), h("-0x1.6fe127a2b018cp-25")),
             (h("0x1.0fea77d390274p-25"), h("0x1.aef02b012ad6cp-25")), (h("-0x1.000000000c3c3p-943"), h("-0x1.4f74eece3923p-25")),
             (h("-0x1.1882c48dbd7fp-25"), h("0x1.77f536cffd0f8p-27")), (float("nan"), h("-0x1.d1f2b4d4caf23p-25")),
             (h("0x1.9a266a3e8d7dp-26"), h("0x0.000000000ffffp-1022")), (h("0x1.1a8af0346b9eep-25"), h("0x1.9ad6743bc15d2p-25")),
             (h("0x1.91104bcf7e7f8p-26"), float("inf"))]
    out["c128_nan_meets_inf"] = seed(C128, 3, IDENTITY, overrides=[
        (i, RAW | part, v) for i, z in enumerate(found) for part, v in ((0, z[0]), (IMAG, z[1]))])
    # A complex 2x2 whose larger parts cancel exactly, det = e s i subnormal (e = 9 x the least
    # subnormal), beside a neighbour outside the closed form's safe range: the unscaled form took
    # det's reciprocal unlifted, the split form lifted it (the inverse depended on the neighbour).
    for dtype, e, outside in ((C128, 9 * 2.0**-1074, 2.0**-600), (C64, 9 * 2.0**-149, 2.0**-100)):
        out[f"d{dtype}_2x2_subnormal_det_beside_split"] = seed(dtype, 2, IDENTITY, batch=2, overrides=[
            (0, RAW, outside), (1, RAW, 1.0), (2, RAW, 1.0), (3, RAW, 1.0),
            (4, RAW, -4096.0), (5, RAW, -12288.0), (5, RAW | IMAG, e), (6, RAW, -4096.0), (7, RAW, -12288.0)])
    return out


def main():
    target = pathlib.Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    for name, data in seeds().items():
        (target / name).write_bytes(data)
    print(f"{len(seeds())} seeds in {target}")


if __name__ == "__main__":
    main()
