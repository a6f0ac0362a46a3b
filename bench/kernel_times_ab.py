"""Device times of two variants of the GPU kernels side by side: the JSON files that
tinyla_gpu_kernel_times wrote with one (before `--`; e.g. a baseline's libtinyla_cuda.so) and with
the other (after; this checkout's), in interleaved rounds; the best time of each op and N over its
rounds, and first / second (above 1: the second is faster). scripts/gpu-check runs it for each
baseline the bundle carries (scripts/gpu-bundle --baseline), and for TINYLA_GPU_STORES.

  python bench/kernel_times_ab.py [--labels baseline,current] first_1.json first_2.json -- second_1.json ...
"""
from __future__ import annotations

import json
import sys


def best_times(paths: list[str]) -> tuple[dict[tuple[str, int], float], str]:
    best: dict[tuple[str, int], float] = {}
    device = ""
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        device = data.get("device", device)
        for row in data["rows"]:
            key = (row["workload"], int(row["n"]))
            best[key] = min(best.get(key, float("inf")), float(row["tinyla"]))
    return best, device


def main(argv: list[str]) -> int:
    labels = ["baseline", "current"]
    if argv[:1] == ["--labels"] and len(argv) > 1:
        labels, argv = argv[1].split(","), argv[2:]
    if len(labels) != 2 or "--" not in argv or argv.index("--") == 0 or argv.index("--") == len(argv) - 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    split = argv.index("--")
    baseline, device = best_times(argv[:split])
    current, _ = best_times(argv[split + 1:])
    first, second = labels
    print(f"device time on {device}, (4096, 64, N, N) float64, the best of {split} runs ({first}) "
          f"and {len(argv) - split - 1} ({second}):")
    print(f"| workload | N | {first} ms | {second} ms | {first} / {second} |")
    print("|---|---:|---:|---:|---:|")
    for key in sorted(current, key=lambda k: (k[0], k[1])):
        if key in baseline:
            b, c = baseline[key], current[key]
            print(f"| {key[0]} | {key[1]} | {b * 1e3:.3f} | {c * 1e3:.3f} | {b / c:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
