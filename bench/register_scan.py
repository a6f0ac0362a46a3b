"""Registers and local memory of every CUDA kernel under each launch-bounds register cap.

ptxas places a kernel's registers differently under each cap its launch bounds imply, and not
monotonically: a kernel that spills at the registers of its own choosing may keep nothing in
local memory under a lower cap (sm_90, nvcc 13: the float64 team solve kept 80 bytes at 72
registers and none at 64). src/gpu/plan.hpp's per_thread_register_cap and team_register_cap
were chosen from this scan; rerun it after changing a kernel, and compare with what
scripts/gpu-report prints for the build.

The kernels are compiled as the build folder's build.ninja compiles them (its nvcc command,
with -cubin for one architecture and -Xptxas -v), once as built and once per minimum of
blocks per SM m given to every kernel (TINYLA_SCAN_MIN_BLOCKS in src/gpu/kernels.cu): the cap
is 64 Ki registers / (m x the launch bounds' threads: 256 per-thread, 128 team). Prints per
kernel registers / local-memory bytes (ptxas's stack frame) and the warps per SM its
registers allow (an H100 SM partition: 16 Ki registers, allocated 8 per thread; blocks not
counted), and marks the variant with no local memory at the most warps (fewest registers
among those) where it beats the build.

  python3 bench/register_scan.py --build build-gpu [--arch sm_90] [--min-blocks 1,2,3,4,5,6,7,8] [--all]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import tempfile


def nvcc_command(build: str) -> list[str]:
    """build.ninja's nvcc invocation of the CUDA kernels (run there from the build folder)."""
    with open(os.path.join(build, "build.ninja")) as f:
        for line in f:
            if "--fatbin" in line and "nvcc" in line and "COMMAND" in line:
                steps = line.split("=", 1)[1].split("&&")
                return shlex.split(next(s for s in steps if "--fatbin" in s))
    sys.exit(f"no nvcc --fatbin command in {build}/build.ninja: configure with -DTINYLA_CUDA=ON")


def scan_command(base: list[str], arch: str, out: str, min_blocks: int | None) -> list[str]:
    args, skip = [], False
    for a in base:  # without the fatbin's output, architectures, depfile and threads
        if skip:
            skip = False
        elif a in ("-gencode", "-o", "-MF", "--threads"):
            skip = True
        elif a not in ("--fatbin", "-MD") and not a.startswith("-arch="):
            args.append(a)
    args += ["-cubin", f"-arch={arch}", "-Xptxas", "-v", "-o", out]
    if min_blocks is not None:
        args.append(f"-DTINYLA_SCAN_MIN_BLOCKS={min_blocks}")
    return args


def compile_and_parse(command: list[str], cwd: str) -> dict[str, tuple[int, int]]:
    run = subprocess.run(command, capture_output=True, text=True, cwd=cwd)
    if run.returncode != 0:
        sys.exit(f"{shlex.join(command)} failed:\n{run.stderr[-4000:]}")
    kernels, name, frame = {}, None, 0
    for line in run.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            name, frame = m.group(1), 0
        elif m := re.search(r"(\d+) bytes stack frame", line):
            frame = int(m.group(1))
        elif (m := re.search(r"Used (\d+) registers", line)) and name:
            kernels[name] = (int(m.group(1)), frame)
    return kernels


def warps_per_sm(registers: int) -> int:
    allocated = -(-registers // 8) * 8
    return min(64, 4 * (16384 // (allocated * 32)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="CMake build folder with the CUDA backend")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--min-blocks", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--all", action="store_true", help="every kernel, not only those a variant improves")
    args = ap.parse_args()
    base = nvcc_command(args.build)
    variants: list[int | None] = [None] + [int(m) for m in args.min_blocks.split(",")]
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [
            pool.submit(compile_and_parse, scan_command(base, args.arch, os.path.join(tmp, f"{i}.cubin"), m), args.build)
            for i, m in enumerate(variants)
        ]
        results = [f.result() for f in futures]
    built = results[0]
    header = ["kernel", "built"] + [f"m={m}" for m in variants[1:]] + ["best"]
    print(f"{args.arch}: registers / local bytes (warps per SM by registers); m: minimum blocks per SM")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in sorted(built):
        cells = [results[i].get(name) for i in range(len(variants))]
        best = None
        for i, cell in enumerate(cells):
            if cell and cell[1] == 0:
                key = (warps_per_sm(cell[0]), -cell[0])
                if best is None or key > best[0]:
                    best = (key, i)
        regs, local = built[name]
        improves = best is not None and (local > 0 or best[0][0] > warps_per_sm(regs))
        if not (improves or args.all):
            continue
        text = [f"{c[0]}/{c[1]} ({warps_per_sm(c[0])})" if c else "-" for c in cells]
        mark = ("built" if best[1] == 0 else f"m={variants[best[1]]}") if best else "none"
        print(f"| {name} | " + " | ".join(text) + f" | {mark} |")


if __name__ == "__main__":
    main()
