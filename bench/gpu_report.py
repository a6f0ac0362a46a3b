"""What the compilers say of tinyla's GPU kernels, and what that predicts for the QMC workload.

Reads the device images the library is built with (the CUDA fatbin and the HIP offload bundle
of a CMake build folder) and the launch plans (tinyla_gpu_plans, built from src/gpu/plan.hpp):
- per kernel, for sm_90 (H100) and gfx942 (MI300X): registers, local memory / scratch and spill
  instructions, and global loads in flight per thread where the kernel brings its matrices in
  (its first loads in program order): the loads issued before the first instruction that needs
  one of them (SASS: the first use of a loaded register; AMD ISA: the first s_waitcnt vmcnt that
  retires one);
- per op and n of the (4096, 64, n, n) float64 workload: the planned block (threads, dynamic
  shared memory), the theoretical occupancy and which limit binds, and a prediction: the
  longest of (bytes moved) / (HBM bandwidth), (flops) / (FP64 peak), (bytes read) / (the
  bandwidth the loads in flight can draw by Little's law: resident threads x loads in flight x
  bytes per load / memory latency, per SM or CU); for the per-thread kernels (the cache lines
  their warps' accesses touch, a line per thread where matrices are a line apart) / (lines L1
  serves per clock); for the team kernels (the shared-memory operands of their dot products, or
  a warp team's shuffles) / (shared-memory bandwidth) and (their inverse's and solves' accesses
  to global memory) / (L1 bandwidth, taken as shared memory's); for a warp team (its step loop's
  instructions, read from the code, x n steps) / (the instructions an SM or CU issues a clock).
The prediction is a bound from static facts, not a timing: on an H200 the measured times were
1.0-4.1x it for the per-thread kernels at n = 3..8 (at n = 1, 2 a launch's microseconds
dominate), 1.4-2.2x for the warp teams, and 2.7-4.4x for the LU in shared memory, whose
barriers and instructions it does not price (docs/gpu.md).
scripts/gpu-check prints measured times beside it on a GPU (--measured).

  python3 bench/gpu_report.py --build build [--tools DIR] [--markdown] [--json OUT] [--measured IN ...]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Gpu:
    name: str
    arch: str
    units: int  # SMs / CUs
    hbm_bytes_per_s: float
    fp64_flops_per_s: float  # vector FP64 (no tensor/matrix cores: the kernels use none)
    latency_s: float  # loaded HBM latency assumed for Little's law (a parameter, not a datum)
    shared_bytes_per_s: float  # shared memory / LDS: 128 bytes per clock per SM / CU at the boost clock
    warp: int
    max_warps: int  # per SM / CU
    max_blocks: int  # per SM / CU
    shared_bytes: int  # per SM / CU
    clock_hz: float  # boost clock
    issue_per_clock: float  # warp / wave instructions an SM / CU issues per clock


# Public figures: NVIDIA H100 SXM5 (132 SMs, 3.35 TB/s, 34 TFLOP/s FP64; 1.98 GHz boost), AMD Instinct MI300X
# (304 CUs, 5.3 TB/s, 81.7 TFLOP/s FP64 vector; 2.1 GHz), H200 (H100's SMs, 4.8 TB/s, for
# measurements taken on one); per-SM limits from the CUDA occupancy rules
# for compute capability 9.0, per-CU limits of CDNA3 (4 SIMDs x 8 waves, 64 KiB LDS). Issue: an
# SM's 4 schedulers issue a warp instruction a clock each; a CDNA3 SIMD is 16 lanes wide, so a
# wave64 instruction takes it 4 clocks: 1 a clock per CU.
H100 = Gpu("H100 SXM", "sm_90", 132, 3.35e12, 34e12, 600e-9, 132 * 128 * 1.98e9, 32, 64, 32, 228 * 1024, 1.98e9, 4)
H200 = Gpu("H200", "sm_90", 132, 4.8e12, 34e12, 600e-9, 132 * 128 * 1.98e9, 32, 64, 32, 228 * 1024, 1.98e9, 4)
MI300X = Gpu("MI300X", "gfx942", 304, 5.3e12, 81.7e12, 800e-9, 304 * 128 * 2.1e9, 64, 32, 16, 64 * 1024, 2.1e9, 1)
# Cache lines an SM's / CU's L1 serves per clock: the most the per-thread float64 determinants
# drew on an H200 (n = 7: 1.25 a clock; n = 8 ran at 0.8 with L1 89 % busy: docs/gpu.md), so
# that the bound stays optimistic there; taken for gfx942 too (an assumption, not measured).
L1_LINES_PER_CLOCK, LINE_BYTES = 1.25, 128


@dataclass
class Kernel:
    name: str
    regs: int = 0  # sm_90: registers; gfx942: VGPRs (arch + acc, as allocated)
    sgprs: int = 0
    agprs: int = 0
    local_bytes: int = 0  # sm_90: stack frame; gfx942: private segment (scratch)
    spill_ops: int = 0  # sm_90: STL/LDL instructions in the kernel's own code; gfx942: VGPR + SGPR spills
    call_save_ops: int = 0  # sm_90: STL/LDL in the subroutines it calls (registers they save and restore)
    static_shared: int = 0
    loads: int = 0  # global load instructions
    in_flight: int = 0  # global loads in flight where the matrices come in (the first loads)
    load_bytes: int = 0  # the widest of those loads
    store_bytes: int = 0  # sm_90: the widest global store (a per-thread inverse's rows: 16 where aligned)
    # A warp team's LU steps: (instructions, shuffles) of each chunk's loop (step_loops).
    step_loops: list[tuple[int, int]] = field(default_factory=list)


# ---- sm_90: cuobjdump ------------------------------------------------------------------

def run(cmd: list[str], env: dict | None = None) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def cuda_kernels(fatbin: str, cuobjdump: str) -> dict[str, Kernel]:
    kernels: dict[str, Kernel] = {}
    fn = None
    for line in run([cuobjdump, "--dump-resource-usage", "-arch", "sm_90", fatbin]).splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            fn = kernels.setdefault(m.group(1), Kernel(m.group(1)))
            continue
        if fn and "REG:" in line:
            fields = dict(re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line))
            fn.regs, fn.local_bytes = int(fields["REG"]), int(fields["STACK"]) + int(fields["LOCAL"])
            fn.static_shared = int(fields["SHARED"])
    # The SASS of every kernel (~140 MB of text): split at its headers and each instruction
    # read once, without regular expressions where a prefix test does (a third of the time).
    sass = run([cuobjdump, "-sass", "-arch", "sm_90", fatbin])
    for chunk in sass.split("Function : ")[1:]:
        name, _, body = chunk.partition("\n")
        k = kernels.get(name.strip())
        if k is not None:
            code = [(int(a, 16), unpredicated(t.strip())) for a, t in _SASS_INSTRUCTION.findall(body)]
            sass_loads(k, [text for _, text in code])
            targets = [int(m.group(1), 16) if "BRA" in t and (m := _SASS_BRANCH.search(t)) else None
                       for _, t in code]
            k.step_loops = step_loops(k.name, "sm_90", code, targets, "SHFL", lambda text: True)
            # Subroutines (CALL.REL targets: ptxas's slow paths, e.g. of a division) follow the
            # kernel's code; a local access there saves a register around the subroutine's own
            # use of it, which ptxas does not count as a spill.
            calls = [int(m.group(1), 16) for _, t in code if "CALL" in t and (m := _SASS_CALL.search(t))]
            subroutines = min(calls, default=None)
            for address, text in code:
                if text.startswith(("STL", "LDL")):
                    if subroutines is not None and address >= subroutines:
                        k.call_save_ops += 1
                    else:
                        k.spill_ops += 1
    return kernels


def warp_step_chunk(arch: str, dtype: str, rows_in_registers: bool) -> int:
    """Steps per loop of a warp team's LU, as warp_step_chunk in src/gpu/kernels.hpp sets it."""
    if arch == "gfx942":
        return 32
    if dtype.startswith("c"):
        return 8
    return 4 if rows_in_registers or dtype == "f32" else 2


def step_loops(name: str, arch: str, code: list[tuple[int, str]], targets: list, shuffle: str,
               issued) -> list[tuple[int, int]]:
    """The loops of a warp team's LU steps (warp_factor: one per chunk of warp_step_chunk
    steps, the first chunk's first), for the kernel `name` (none but for a warp team's): each
    one's instructions that issued() counts and its shuffles. Of the loops (a branch back to an
    earlier address) that hold shuffles: one chunk, the shortest of those with the most
    shuffles; several, those inside no other (the grid-stride loop holds them all), in address
    order. Run n times per matrix in all, they are most of a warp team's instructions."""
    warp = re.search(r"_warp(\d+)(_in_shared)?$", name)
    if not warp:
        return []
    dtype, width = re.search(r"_(f32|f64|c64|c128)_", name).group(1), int(warp.group(1))
    chunks = max(1, width // warp_step_chunk(arch, dtype, warp_rows_in_registers(name, dtype, width)))
    index = {address: i for i, (address, _) in enumerate(code)}
    loops = []  # (first address, last address, issued, shuffles, length)
    for end, target in enumerate(targets):
        if target is None or target >= code[end][0] or target not in index:
            continue
        body = code[index[target]:end + 1]
        shuffles = sum(shuffle in text for _, text in body)
        if shuffles:
            loops.append((target, code[end][0], sum(issued(t) for _, t in body), shuffles, len(body)))
    if not loops:
        return []
    if chunks == 1:
        _, _, instructions, shuffles, _ = max(loops, key=lambda lp: (lp[3], -lp[4], lp[2]))
        return [(instructions, shuffles)]
    inner = sorted(lp for lp in loops if not any(o is not lp and lp[0] <= o[0] and o[1] <= lp[1] for o in loops))
    if len(inner) != chunks:
        sys.exit(f"gpu_report: {name} ({arch}): {len(inner)} innermost loops with shuffles, "
                 f"expected one per chunk of steps ({chunks})")
    return [(instructions, shuffles) for _, _, instructions, shuffles, _ in inner]


_SASS_REG = re.compile(r"(?<![\w.])R(\d+)")
_SASS_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?);")
_SASS_BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")
_SASS_CALL = re.compile(r"\bCALL\.REL\S*\s+0x([0-9a-f]+)")
_SASS_GUARD = re.compile(r"^@!?U?P\w+\s+")


def unpredicated(text: str) -> str:
    """A SASS instruction without its guard predicate (@P0, @!UP1, ...)."""
    return _SASS_GUARD.sub("", text, 1) if text.startswith("@") else text


def sass_access_bytes(opcode: str) -> int:
    """Bytes per thread of an LDG/STG: .64 or .128 in its name, else 4."""
    return next((int(w) // 8 for w in re.findall(r"\.(64|128)\b", opcode)), 4)


def sass_loads(k: Kernel, code: list[str]) -> None:
    """The loads in flight where the matrices come in: runs of global loads, each until the
    first instruction that uses (or overwrites) a register one of them fills; a team's is
    its first run. A per-thread kernel (name ending in its n) has two versions of its
    matrix's loads (under a branch or opposite predicates): element loads for arrays that
    are not 16-byte aligned and vector loads for those that are; its figure is the run with
    the most bytes in flight, then the widest (the aligned arrays': numpy's and XLA's)."""
    runs = []  # (loads, width) of each closed run
    pending: set[int] = set()
    count = width = 0
    for text in code:
        opcode, _, operands = text.partition(" ")
        regs = {int(r) for r in _SASS_REG.findall(operands)}
        if opcode.startswith("STG"):
            k.store_bytes = max(k.store_bytes, sass_access_bytes(opcode))
        if pending and regs & pending:
            runs.append((count, width))
            pending, count, width = set(), 0, 0
        if opcode.startswith("LDG"):
            size = sass_access_bytes(opcode)
            first = int(_SASS_REG.match(operands.strip()).group(1))
            pending.update(range(first, first + max(1, size // 4)))
            count += 1
            width = max(width, size)
            k.loads += 1
    if count:
        runs.append((count, width))
    if runs and re.search(r"_\d+$", k.name):
        runs = [max(runs, key=lambda run: (run[0] * run[1], run[1]))]
    if runs:
        k.in_flight, k.load_bytes = runs[0]


# ---- gfx942: the offload bundle's code object -------------------------------------------

def hip_kernels(bundle: str, arch: str, llvm_bin: str) -> dict[str, Kernel]:
    with tempfile.TemporaryDirectory() as tmp:
        co = os.path.join(tmp, f"{arch}.co")
        run([os.path.join(llvm_bin, "clang-offload-bundler"), "--unbundle", "--type=o",
             f"--targets=hipv4-amdgcn-amd-amdhsa--{arch}", f"--input={bundle}", f"--output={co}"])
        notes = run([os.path.join(llvm_bin, "llvm-readelf"), "--notes", co])
        isa = run([os.path.join(llvm_bin, "llvm-objdump"), "-d", f"--mcpu={arch}", co])
    kernels: dict[str, Kernel] = {}
    for entry in re.split(r"\n  - ", notes.split("amdhsa.kernels:", 1)[1]):
        fields = dict(re.findall(r"^\s*\.(\w+):\s+(\S+)$", entry, re.M))
        if "name" not in fields:
            continue
        # gfx90a/gfx942: .vgpr_count is the unified file's total (arch VGPRs aligned to 4, then AGPRs)
        k = Kernel(fields["name"], regs=int(fields["vgpr_count"]), sgprs=int(fields["sgpr_count"]),
                   agprs=int(fields.get("agpr_count", 0)), local_bytes=int(fields["private_segment_fixed_size"]),
                   spill_ops=int(fields.get("vgpr_spill_count", 0)) + int(fields.get("sgpr_spill_count", 0)),
                   static_shared=int(fields["group_segment_fixed_size"]))
        kernels[k.name] = k
    for name, body in re.findall(r"^[0-9a-f]+ <(\w+)>:\n(.*?)(?=^[0-9a-f]+ <|\Z)", isa, re.M | re.S):
        if name in kernels:
            isa_loads(kernels[name], body)
            code, targets = [], []
            for text, address, comment in _ISA_INSTRUCTION.findall(body):
                code.append((int(address, 16), text.strip()))
                t = _ISA_BRANCH_TARGET.search(comment) if _ISA_BRANCH.match(text) else None
                targets.append(int(t.group(1), 16) + code[0][0] if t else None)
            # Vector and LDS instructions only: a CU issues its scalar ones beside them.
            k = kernels[name]
            k.step_loops = step_loops(name, arch, code, targets, "ds_bpermute",
                                      lambda text: text.startswith(("v_", "ds_")))
    return kernels


_AMD_WIDTH = {"dword": 4, "dwordx2": 8, "dwordx3": 12, "dwordx4": 16}
# An instruction line of llvm-objdump: its text, then a comment of its address, encoding and
# a branch's target (<kernel+0x...>).
_ISA_INSTRUCTION = re.compile(r"^(.*?)//\s*([0-9A-F]{6,}):(.*)$", re.M)
_ISA_BRANCH = re.compile(r"\s*s_(cbranch_\w+|branch)\b")
_ISA_BRANCH_TARGET = re.compile(r"<\w+\+0x([0-9a-f]+)>")
_ISA_LOAD = re.compile(r"(global|buffer|flat)_load_")
_ISA_STORE = re.compile(r"(global|buffer|flat|scratch)_(store|atomic)")


def isa_loads(k: Kernel, body: str) -> None:
    queue: list[bool] = []  # outstanding vector-memory operations in issue order (True: a load)
    for line in body.splitlines():
        mnemonic = line.split("//")[0].split()
        if not mnemonic:
            continue
        op = mnemonic[0]
        if _ISA_LOAD.match(op):
            queue.append(True)
            k.loads += 1
            if not k.in_flight:
                k.load_bytes = max(k.load_bytes, _AMD_WIDTH.get(op.rsplit("_", 1)[1], 4))
        elif _ISA_STORE.match(op):
            queue.append(False)  # gfx9 counts stores in vmcnt too
        elif op == "s_waitcnt" and not k.in_flight:
            m = re.search(r"vmcnt\((\d+)\)", line)
            if m and any(queue[: max(len(queue) - int(m.group(1)), 0)]):  # the first wait that retires a load
                k.in_flight = sum(queue)
            if m:
                del queue[: max(len(queue) - int(m.group(1)), 0)]
    k.in_flight = k.in_flight or sum(queue)


# ---- occupancy --------------------------------------------------------------------------

def occupancy_sm90(k: Kernel, threads: int, shared: int) -> tuple[int, str]:
    """Resident warps per SM (of 64) and the binding limit, by the CUDA occupancy rules for
    compute capability 9.0: registers allocated per warp in units of 256 from one of the SM's 4
    partitions of 16 Ki (a warp's registers lie in one: at 180 registers per thread 2 warps fit a
    partition, so 8 an SM, not 65536 // 5888 = 11, as Nsight Compute showed on an H100); shared
    memory in units of 128 bytes, 228 KiB per SM, 1 KiB reserved per block; 32 blocks."""
    g = H100  # H200: the same SM
    warps = math.ceil(threads / g.warp)
    regs_per_warp = math.ceil(max(k.regs, 1) * g.warp / 256) * 256
    limits = {
        "warps": g.max_warps // warps,
        "blocks": g.max_blocks,
        "registers": 4 * (16384 // regs_per_warp) // warps,
        "shared memory": g.shared_bytes // (math.ceil((shared + k.static_shared) / 128) * 128 + 1024),
    }
    binding = min(limits, key=limits.get)
    return limits[binding] * warps, binding


def occupancy_gfx942(k: Kernel, threads: int, shared: int) -> tuple[int, str]:
    """Resident waves per CU (of 32): 4 SIMDs, each 8 waves, 512 VGPRs per lane (arch + acc,
    granule 8) and 800 SGPRs (granule 16); 64 KiB of LDS per CU in units of 512 bytes; 16
    workgroups of more than one wave per CU (barrier resources)."""
    g = MI300X
    waves = math.ceil(threads / g.warp)
    per_simd_vgpr = min(8, 512 // (math.ceil(max(k.regs, 1) / 8) * 8))
    per_simd_sgpr = min(8, 800 // (math.ceil(max(k.sgprs, 1) / 16) * 16))
    lds = math.ceil((shared + k.static_shared) / 512) * 512
    limits = {
        "waves": g.max_warps // waves,
        "workgroups": g.max_blocks if waves > 1 else g.max_warps,
        "VGPRs": (4 * per_simd_vgpr) // waves,
        "SGPRs": (4 * per_simd_sgpr) // waves,
        "LDS": g.shared_bytes // lds if lds else g.max_warps,
    }
    binding = min(limits, key=limits.get)
    return limits[binding] * waves, binding


# ---- the workload -----------------------------------------------------------------------

@dataclass
class Plan:
    op: str
    dtype: str
    n: int
    kernel: str
    threads: int
    team: int
    blocks: int
    shared: int
    workspace: int
    in_warp: int  # the LU in shared memory, each team in a warp slot (team_in_warp, src/gpu/plan.hpp)


def read_plans(exe: str, arch: str, settings: dict[str, str] | None = None) -> list[Plan]:
    """The plans tinyla_gpu_plans prints for the platform of `arch` (sm_90: CUDA, gfx942: HIP); with
    the launcher's environment settings where given (TINYLA_GPU_TEAMS, _STORES, _TEAM_INVERSE)."""
    platform = "cuda" if arch.startswith("sm_") else "hip"
    lines = run([exe, str(4096 * 64), "32", platform], dict(os.environ, **(settings or {}))).splitlines()[1:]
    return [Plan(p[0], p[1], int(p[2]), p[3], *map(int, p[4:])) for p in (line.split("\t") for line in lines)]


ELEMENT_BYTES = {"f32": 4, "f64": 8, "c64": 8, "c128": 16}


def traffic_and_flops(op: str, dtype: str, n: int) -> tuple[int, int, float]:
    """(bytes read, bytes written, flops) per matrix: each input read once, each output written
    once; LU 2/3 n^3 flops, an inverse 2 n^3, a solve with one right-hand side LU + 2 n^2;
    complex 4x."""
    e = ELEMENT_BYTES[dtype]
    real = e if dtype.startswith("f") else e // 2
    scalars = e + real  # sign (or phase) and logabsdet
    lu = sum(2 * m * m + m for m in range(n))
    read, write, flops = {
        "slogdet": (n * n * e, scalars, lu),
        "slogdet_inv": (n * n * e, scalars + n * n * e, 2 * n ** 3),
        "inv": (n * n * e, n * n * e, 2 * n ** 3),
        "solve": (n * n * e + n * e, n * e, lu + 2 * n * n),
        "det_cofactors": (n * n * e, e + n * n * e, 2 * n ** 3),
    }[op]
    return read, write, flops * (1 if dtype.startswith("f") else 4)


def _pivot_shuffles(dtype: str, width: int, redux: bool = False) -> tuple[int, int]:
    """(shuffles of a warp-team step's pivot search and pivot, 32-bit words per element):
    log2(width) butterfly rounds of a magnitude (real) and a key (an int), then the pivot;
    with redux (warp_redux, kernels.hpp: sm_90 teams of 32)
    the search takes integer reductions instead, and only the pivot is shuffled."""
    words = ELEMENT_BYTES[dtype] // 4
    real_words = words if dtype.startswith("f") else words // 2
    return (0 if redux else int(math.log2(width)) * (real_words + 1)) + words, words


def warp_rows_in_registers(kernel: str, dtype: str, width: int) -> bool:
    """As warp_rows_in_registers in src/gpu/plan.hpp: a warp team's determinant whose rows fit
    in 64 registers, which hands U's rows through shared memory instead of shuffles."""
    return "_determinant_" in kernel and width * ELEMENT_BYTES[dtype] <= 256


def warp_step_shuffles(dtype: str, width: int, first: int, u_in_shared: bool, redux: bool) -> int:
    """Shuffle instructions in the code of one warp-team step of the chunk that starts at step
    `first`: the pivot's, and (unless u_in_shared) U's row, an element for each of the
    width - 1 - first entries past `first` that its unrolled loop holds (warp_factor)."""
    pivot, words = _pivot_shuffles(dtype, width, redux)
    return pivot + (0 if u_in_shared else words * (width - 1 - first))


def warp_shuffle_bytes(dtype: str, n: int, width: int, chunk: int, u_in_shared: bool, redux: bool) -> int:
    """Bytes a warp team's LU (warp_factor, src/gpu/kernels.hpp) moves through the shuffle and
    shared-memory datapath per matrix. At each of its n steps: the pivot's butterfly,
    log2(width) rounds of the candidate's magnitude (real) and its key (an int), then the pivot
    to every row, shuffles that move a 32-bit word for each of the team's `width` threads
    (counted in the sm_90 SASS: SHFL.IDX, two per float64; gfx942 runs them as
    ds_bpermute_b32, through its LDS); then U's row k: entries k+1..n-1 shuffled, or with
    u_in_shared through shared memory in 16-byte pieces from the first entry of the step's
    chunk of `chunk` steps on, written by its owner and read by every thread (each thread's
    bytes counted, as for a shuffle). A redux's bytes are not counted."""
    pivot, words = _pivot_shuffles(dtype, width, redux)
    if not u_in_shared:
        return (n * pivot + words * n * (n - 1) // 2) * width * 4
    row_bytes = sum(width - (k - k % chunk) for k in range(n)) * words * 4
    return n * pivot * 4 * width + row_bytes * (width + 1)


@dataclass
class Prediction:
    resident: int = 0  # warps / waves per SM / CU the kernel's resources allow
    limit: str = ""
    filled: int = 0  # ... of which the batch fills
    seconds: float = 0.0
    bound: str = ""
    hbm_fraction: float = 0.0


def predict(g: Gpu, k: Kernel, plan: Plan, batch: int) -> Prediction:
    resident, limit = (occupancy_sm90 if g.arch == "sm_90" else occupancy_gfx942)(k, plan.threads, plan.shared)
    # A batch too small to fill every SM / CU: (4096, 64) matrices, one per thread, are 862
    # threads per MI300X CU.
    blocks = math.ceil(batch / (plan.threads // plan.team))
    filled = min(resident, math.ceil(blocks / g.units) * math.ceil(plan.threads / g.warp))
    read, write, flops = traffic_and_flops(plan.op, plan.dtype, plan.n)
    in_flight_bytes = filled * g.warp * max(k.in_flight, 1) * max(k.load_bytes, 4) * g.units
    little = min(g.hbm_bytes_per_s, in_flight_bytes / g.latency_s) if filled else 0.0
    times = {
        "HBM": batch * (read + write) / g.hbm_bytes_per_s,
        "FP64": batch * flops / g.fp64_flops_per_s,
        "loads in flight": batch * read / little if little else math.inf,
    }
    if plan.team == 1:
        # One matrix per thread: each access of a warp's instruction falls in its own thread's
        # matrix, so it touches up to a line per thread, and L1 serves lines, not bytes. The
        # matrices' reads, at the width of the first loads, and (inverse, solve) writes: a
        # solve's X an element each (strided), the rows of A^-T (slogdet_inv's) and of A^-1
        # (inv's) at the widest store's width.
        # A per-thread plan with shared memory stages its outputs there (an inverse's or an
        # adjugate's: stage_outputs, src/gpu/plan.hpp): each warp writes its 32 matrices' outputs
        # together, whole lines, after every thread has written its own into its slot and the
        # warp has read them back.
        e = ELEMENT_BYTES[plan.dtype]
        matrix_bytes = plan.n * plan.n * e
        staged = plan.shared > 0
        write_width = max(k.store_bytes, e) if plan.op in ("slogdet_inv", "inv") else e
        lines = min(g.warp, max(1, math.ceil(g.warp * matrix_bytes / LINE_BYTES)))
        read_lines = math.ceil(matrix_bytes / max(k.load_bytes, 4)) * lines
        write_lines = (math.ceil(g.warp * matrix_bytes / LINE_BYTES) if staged else
                       (plan.op != "slogdet") * math.ceil(matrix_bytes / write_width) * lines)
        times["L1 lines"] = (batch / g.warp * (read_lines + write_lines)) / (g.units * g.clock_hz * L1_LINES_PER_CLOCK)
        if staged:
            times["shared memory"] = batch * 2 * matrix_bytes / g.shared_bytes_per_s
    if plan.team > 1:
        # The team kernel's LU reads both operands of its dot products from shared memory, and
        # gathers the team's pivot candidates at each step (team_factor); a warp team's (its
        # rows in registers) shuffles its pivot and U's rows (a determinant: reads them from
        # shared memory, each thread, warp_shuffle_bytes), on the same datapath (32 lanes x
        # 4 bytes a clock). The inverse's and the solves' dot products
        # read one operand there (the factors; the other is their output, in global memory).
        e = ELEMENT_BYTES[plan.dtype]
        fmas = flops / 2 / (1 if plan.dtype.startswith("f") else 4)  # of the element type
        lu_fmas = fmas if plan.op == "slogdet" else fmas / 3
        warp = re.search(r"_warp(\d+)(_in_shared)?$", plan.kernel)
        if warp:
            width = int(warp.group(1))
            u_in_shared = warp_rows_in_registers(plan.kernel, plan.dtype, width)
            redux = g.arch == "sm_90" and width == 32  # as warp_factor
            lu_bytes = warp_shuffle_bytes(plan.dtype, plan.n, width, warp_step_chunk(g.arch, plan.dtype, u_in_shared),
                                          u_in_shared, redux)
            # Its steps are loops (not unrolled), one per chunk of W / (loops) steps, each step
            # about as many instructions as the entries past the chunk's first, whatever n is:
            # the chunks' loops run min(n, their last step + 1) - their first step times per
            # matrix, for warp / W teams at once. Where the compiler made several versions of
            # a step in its loop (more shuffles than one step has), one of them runs per step.
            chunk = width // max(1, len(k.step_loops))
            instructions = 0.0
            for c, (loop_instructions, loop_shuffles) in enumerate(k.step_loops):
                first = c * chunk
                versions = max(1.0, loop_shuffles / warp_step_shuffles(plan.dtype, width, first, u_in_shared, redux))
                instructions += loop_instructions / versions * max(0, min(plan.n, first + chunk) - first)
            warps = batch * width / g.warp
            times["issue"] = warps * instructions / (g.units * g.clock_hz * g.issue_per_clock)
        # A team in a slot of a warp (the LU in shared memory at n <= 32: team_in_warp)
        # issues its accesses as whole-warp instructions, its rows dealt to its threads in
        # rounds: ceil(n / team) team / n the bytes of its work. It gathers its pivot
        # candidates by a butterfly of shuffles (log2(team) rounds of a magnitude and a row);
        # teams across warps have every thread read every candidate from shared memory.
        lanes = math.ceil(plan.n / plan.team) * plan.team / plan.n if plan.in_warp else 1.0
        if not warp:
            real = e if plan.dtype.startswith("f") else e // 2
            candidates = plan.n * plan.team * (int(math.log2(plan.team)) if plan.in_warp else plan.team)
            lu_bytes = lanes * 2 * lu_fmas * e + candidates * (real + 4)
        # inv transposes A^-T through shared memory: n^2 elements written there and read back.
        transposed = 2 * plan.n ** 2 if plan.op == "inv" else 0
        shared_bytes = lu_bytes + lanes * (fmas - lu_fmas + transposed) * e
        times["shuffles" if warp else "shared memory"] = batch * shared_bytes / g.shared_bytes_per_s
        # The inverse (a row per thread, stored as a column of A^-T) and the solves (a column
        # per thread) work in global memory, about n^2 accesses per row or column, counted at
        # L1 speed (optimistic): the element each, as a team's threads touch consecutive ones;
        # inv then reads A^-T back and writes A^-1 (2 n^2 more). (An inverse formed in shared
        # memory, a kernel _in_shared, takes the same count at the same rate: the model does not
        # tell them apart; a GPU run times them.)
        if plan.op != "slogdet":
            vectors = plan.n if plan.op != "solve" else 1
            times["solve in L1"] = lanes * batch * (vectors * plan.n ** 2 + transposed) * e / g.shared_bytes_per_s
    bound = max(times, key=times.get)
    seconds = times[bound]
    return Prediction(resident, limit, filled, seconds, bound, batch * (read + write) / seconds / g.hbm_bytes_per_s)


# ---- output -----------------------------------------------------------------------------

def kernel_table(cuda: dict[str, Kernel], hip: dict[str, Kernel], names: list[str]) -> list[str]:
    rows = ["| kernel | sm_90 regs | sm_90 local B (STL/LDL; in subroutines) | sm_90 loads in flight x B "
            "| gfx942 VGPR (AGPR) / SGPR "
            "| gfx942 scratch B (spills) | gfx942 loads in flight x B |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        c, h = cuda.get(name), hip.get(name)
        saved = f"; {c.call_save_ops}" if c and c.call_save_ops else ""
        cu = (f"{c.regs} | {c.local_bytes} ({c.spill_ops}{saved}) | {c.in_flight} x {c.load_bytes}" if c else "- | - | -")
        hi = (f"{h.regs} ({h.agprs}) / {h.sgprs} | {h.local_bytes} ({h.spill_ops}) | {h.in_flight} x {h.load_bytes}"
              if h else "- | - | -")
        rows.append(f"| {name} | {cu} | {hi} |")
    return rows


def local_memory_line(cuda: dict[str, Kernel], hip: dict[str, Kernel], names: list[str]) -> str:
    """The kernels with local memory (sm_90) or scratch (gfx942): the design's "no spills". On
    sm_90 a stack frame that only the subroutines use (ptxas's slow paths, e.g. a division's,
    saving a register they need) is counted apart."""
    def count(image: dict[str, Kernel]) -> str:
        spilled = [image[n].local_bytes for n in names
                   if n in image and image[n].local_bytes and (image[n].spill_ops or not image[n].call_save_ops)]
        return f"{len(spilled)} of {sum(n in image for n in names)} kernels, {sum(spilled)} bytes in all"
    saves = [cuda[n] for n in names if n in cuda and cuda[n].call_save_ops and not cuda[n].spill_ops]
    saved = (f" (besides: {len(saves)} kernels keep {', '.join(sorted({str(k.local_bytes) for k in saves}))} bytes "
             "only for registers the subroutines they call save and restore, no spill)" if saves else "")
    return f"Local memory: sm_90 {count(cuda)}{saved}; gfx942 scratch {count(hip)}."


def workload_table(rows: list[dict]) -> list[str]:
    out = ["| op | N | kernel | block: threads, shared B | H100 warps/SM (limit) | H100 ms | H100 HBM % | bound "
           "| MI300X waves/CU (limit) | MI300X ms | MI300X HBM % | bound |",
           "|---|---:|---|---|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        teams = f" ({r['threads'] // r['team']} teams)" if r["team"] > 1 else ""
        cells = [r["op"], str(r["n"]), r["kernel"].replace("tinyla_", ""), f"{r['threads']}{teams}, {r['shared']}"]
        for g, of in ((H100, 64), (MI300X, 32)):
            p = r.get(g.name.split()[0])  # None where that GPU's image was not built
            if not p:
                cells += ["-"] * 4
                continue
            fill = f", batch fills {p['filled']}" if p["filled"] < p["resident"] else ""
            cells += [f"{p['resident']}/{of} ({p['limit']}{fill})", f"{p['ms']:.3f}", f"{100 * p['hbm_fraction']:.0f}",
                      p["bound"]]
        out.append("| " + " | ".join(cells) + " |")
    return out


def predict_laplacian(g: Gpu, k: Kernel, plan: Plan, walkers: int, dense: bool) -> Prediction:
    """log_det_laplacian's kernel (src/gpu/kernels.hpp) on folx's Slater ansatz as the README's
    Table 2 runs it: `walkers` matrices, 3n tangents each, dense (every row of every tangent
    non-zero) or one non-zero row per tangent (one-electron orbitals: the kernel skips the rest).
    A block per matrix; per tangent, a group of plan.team threads reads D_c once, and for each
    row it keeps issues n multiply-adds a thread, each with a load of G's entry from shared
    memory (one address for the whole warp: a broadcast); then writes M_c there and reads it back
    for its traces. The longest of: bytes / HBM, flops / FP64 peak, shared-memory wavefronts (one
    a clock), instructions / issue rate (the multiply-adds and their loads, two per entry)."""
    resident, limit = (occupancy_sm90 if g.arch == "sm_90" else occupancy_gfx942)(k, plan.threads, plan.shared)
    n, e = plan.n, ELEMENT_BYTES[plan.dtype]
    tangents, rows = 3 * n, n if dense else 1
    complex_factor = 1 if plan.dtype.startswith("f") else 4
    read, write = (2 + tangents) * n * n * e, (tangents + 1) * e
    groups_per_warp = g.warp // plan.team  # groups (at most 32 threads) issue together in a warp / wave
    entries = tangents * rows * n  # multiply-adds a thread, in all its tangents
    warp_instructions = walkers * entries * 2 / groups_per_warp
    wavefronts = walkers * (entries + tangents * 3 * n) / groups_per_warp  # G's loads; M_c written, read twice
    filled = min(resident, math.ceil(walkers / g.units) * math.ceil(plan.threads / g.warp))  # a block per walker
    times = {
        "HBM": walkers * (read + write) / g.hbm_bytes_per_s,
        "FP64": walkers * tangents * 2 * rows * n * n * complex_factor / g.fp64_flops_per_s,
        "shared memory": wavefronts / (g.units * g.clock_hz),
        "issue": warp_instructions / (g.units * g.clock_hz * g.issue_per_clock),
    }
    bound = max(times, key=times.get)
    return Prediction(resident, limit, filled, times[bound], bound, walkers * (read + write) / times[bound] / g.hbm_bytes_per_s)


def laplacian_table(images: dict[str, dict[str, Kernel]], plans: list[Plan], dtype: str, walkers: int) -> list[str]:
    out = [f"log_det_laplacian (folx's forward Laplacian of one determinant; the README's Table 2: {walkers} walkers, "
           f"3n tangents, {dtype}), each tangent's rows all non-zero (dense) or one (a Slater matrix):",
           "| N | kernel | block: threads, shared B | H100 warps/SM (limit) | H100 us dense / one row | bound "
           "| MI300X waves/CU (limit) | MI300X us dense / one row | bound |",
           "|---:|---|---|---:|---:|---|---:|---:|---|"]
    for p in plans:
        if p.op != "log_det_laplacian" or p.dtype != dtype or p.n not in (4, 8, 16, 32):
            continue
        cells = [str(p.n), p.kernel.replace("tinyla_", ""), f"{p.threads} (groups of {p.team}), {p.shared}"]
        for g, of in ((H100, 64), (MI300X, 32)):
            image = images.get(g.name)
            if image is None or p.kernel not in image:
                cells += ["-"] * 3
                continue
            dense, sparse = (predict_laplacian(g, image[p.kernel], p, walkers, d) for d in (True, False))
            fill = f", batch fills {dense.filled}" if dense.filled < dense.resident else ""
            cells += [f"{dense.resident}/{of} ({dense.limit}{fill})", f"{dense.seconds * 1e6:.1f} / {sparse.seconds * 1e6:.1f}",
                      f"{dense.bound} / {sparse.bound}"]
        out.append("| " + " | ".join(cells) + " |")
    return out


# The QMC workload's rows (bench/qmc_workload.py --json) and the op each one runs.
WORKLOAD_OPS = {"forward": "slogdet", "grad": "slogdet_inv", "inv": "inv"}


def measured_table(measured: dict, g: Gpu, image: dict[str, Kernel], plans: list[Plan]) -> list[str]:
    source = measured.get("source", "bench/qmc_workload.py through tinyla.jax, jax's dispatch included")
    out = [f"Measured on {measured.get('device', '?')} ({source}; float64) beside the prediction for {g.name}:",
           "| workload | op | N | x shape | measured ms | predicted ms | measured / predicted | bound |",
           "|---|---|---:|---|---:|---:|---:|---|"]
    by_key = {(p.op, p.n): p for p in plans if p.dtype == "f64"}
    for r in measured["rows"]:
        op = WORKLOAD_OPS.get(r["workload"])
        plan = by_key.get((op, r["n"]))
        if plan is None or plan.kernel not in image:
            continue
        pr = predict(g, image[plan.kernel], plan, r["walkers"] * 64)
        out.append(f"| {r['workload']} | {op} | {r['n']} | ({r['walkers']}, 64, {r['n']}, {r['n']}) "
                   f"| {r['tinyla'] * 1e3:.3f} | {pr.seconds * 1e3:.3f} | {r['tinyla'] / pr.seconds:.1f}x | {pr.bound} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="CMake build folder with the GPU backends")
    ap.add_argument("--tools", default="", help="folder with cuobjdump (default: PATH)")
    ap.add_argument("--llvm-bin", default="/usr/lib/llvm-22/bin")
    ap.add_argument("--dtype", default="f64", help="the workload table's dtype")
    ap.add_argument("--sizes", default="1,2,3,4,5,6,7,8,12,16,24,32")
    ap.add_argument("--ops", default="slogdet,slogdet_inv,inv,solve")
    ap.add_argument("--batch", type=int, default=4096 * 64)
    ap.add_argument("--markdown", action="store_true", help="only the workload table, as the README has it")
    ap.add_argument("--json", help="write the predictions here")
    ap.add_argument("--measured", action="append", default=[],
                    help="tinyla_gpu_kernel_times' or bench/qmc_workload.py's JSON of a GPU run: printed beside the "
                         "prediction (may be given more than once)")
    ap.add_argument("--measured-on", choices=["H100", "H200", "MI300X"], default="H100",
                    help="the GPU of --measured (its bandwidth for the prediction)")
    args = ap.parse_args()

    cuobjdump = os.path.join(args.tools, "cuobjdump") if args.tools else "cuobjdump"
    fatbin = os.path.join(args.build, "tinyla_cuda_kernels.fatbin")
    bundle = os.path.join(args.build, "tinyla_hip_kernels.hipfb")
    images = {}
    if os.path.exists(fatbin):
        images[H100.name] = cuda_kernels(fatbin, cuobjdump)
    if os.path.exists(bundle):
        images[MI300X.name] = hip_kernels(bundle, MI300X.arch, args.llvm_bin)
    if not images:
        sys.exit(f"gpu_report: neither {fatbin} nor {bundle} (configure with -DTINYLA_CUDA=ON and/or -DTINYLA_HIP=ON)")
    plans_exe = os.path.join(args.build, "tinyla_gpu_plans")
    plans = {g.arch: read_plans(plans_exe, g.arch) for g in (H100, MI300X)}

    def kernel_order(name):  # family, dtype, then n (the warp teams by width, the team kernel last)
        family, dtype, n, in_shared = re.fullmatch(r"tinyla_(\w+?)_(f32|f64|c64|c128)_(\w+?)(_in_shared)?",
                                                   name).groups()
        rank = int(n) if n.isdigit() else 1000 + int(n[4:]) if n.startswith("warp") else 1 << 30
        return family, list(ELEMENT_BYTES).index(dtype), rank, bool(in_shared)

    # Every kernel a plan launches must be in each image, its resources and its first loads read.
    launched = sorted({p.kernel for arch_plans in plans.values() for p in arch_plans}, key=kernel_order)
    # The kernels that only an opt-in setting launches (TINYLA_GPU_TEAM_INVERSE=shared), listed
    # apart: their resources too, for the GPU run that times them.
    opt_in_plans = read_plans(plans_exe, H100.arch, {"TINYLA_GPU_TEAM_INVERSE": "shared"})
    opt_in = sorted({p.kernel for p in opt_in_plans} - set(launched), key=kernel_order)
    missing = [f"{name} ({gpu})" for name in launched + opt_in for gpu, image in images.items()
               if name not in image or image[name].regs == 0 or image[name].loads == 0]
    if missing:
        sys.exit("gpu_report: no resource usage or no global load read for " + ", ".join(missing))

    sizes, ops = {int(s) for s in args.sizes.split(",")}, args.ops.split(",")
    rows = []
    hip_plans = {(q.op, q.dtype, q.n): q for q in plans[MI300X.arch]}
    for p in sorted((p for p in plans[H100.arch] if p.dtype == args.dtype and p.n in sizes and p.op in ops),
                    key=lambda p: (ops.index(p.op), p.n)):
        q = hip_plans[p.op, p.dtype, p.n]  # the same kernel and block; shared memory may differ (staged stores)
        shared = str(p.shared) if q.shared == p.shared else f"{p.shared} (MI300X {q.shared})"
        row = {"op": p.op, "n": p.n, "kernel": p.kernel, "threads": p.threads, "team": p.team, "shared": shared}
        for g, plan in ((H100, p), (MI300X, q)):
            if g.name in images:
                pr = predict(g, images[g.name][plan.kernel], plan, args.batch)
                row[g.name.split()[0]] = {"resident": pr.resident, "limit": pr.limit, "filled": pr.filled,
                                          "ms": 1e3 * pr.seconds,
                                          "bound": pr.bound, "hbm_fraction": pr.hbm_fraction}
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch": args.batch, "dtype": args.dtype, "rows": rows}, f, indent=1)

    if not args.markdown:
        for g in (H100, MI300X):
            if g.name not in images:
                print(f"!! no {g.arch} image in {args.build}: its columns are empty")
        cuda, hip = images.get(H100.name, {}), images.get(MI300X.name, {})
        print(f"Kernels the launch plans use ({len(launched)}; sm_90 from the CUDA fatbin, gfx942 from the HIP "
              f"offload bundle; loads in flight x bytes: where the matrices come in):")
        print("\n".join(kernel_table(cuda, hip, launched)))
        print(local_memory_line(cuda, hip, launched))
        print(f"\nKernels only an opt-in setting launches ({len(opt_in)}; TINYLA_GPU_TEAM_INVERSE=shared, "
              "not timed yet):")
        print("\n".join(kernel_table(cuda, hip, opt_in)))
        print(local_memory_line(cuda, hip, opt_in))
        print(f"\nThe ({args.batch // 64}, 64, N, N) {args.dtype} workload: occupancy from the plan and the "
              f"registers; predicted time = max(bytes / HBM, flops / FP64 peak, bytes read / Little's-law "
              f"bandwidth of the loads in flight (latency {H100.latency_s * 1e9:.0f} ns on H100, "
              f"{MI300X.latency_s * 1e9:.0f} ns on MI300X, assumed); per-thread kernels: also the cache lines "
              f"their warps' accesses touch / {L1_LINES_PER_CLOCK} a clock; team kernels: also shared-memory "
              f"operands and a warp team's shuffles / shared-memory bandwidth, a warp team's step loop (its "
              f"instructions x n) / issue rate, and their inverse's and solves' global accesses / L1 bandwidth):")
    print("\n".join(workload_table(rows)))
    if not args.markdown:
        print()
        print("\n".join(laplacian_table(images, plans[H100.arch], args.dtype, 256)))
    if args.measured:
        g = {"H100": H100, "H200": H200, "MI300X": MI300X}[args.measured_on]
        image = images.get(H100.name if g.arch == "sm_90" else MI300X.name)
        if image is None:
            sys.exit(f"gpu_report: --measured-on {args.measured_on} needs the {g.arch} image")
        for path in args.measured:
            measured = json.load(open(path))
            # The launcher's settings it was measured with (tinyla_gpu_kernel_times): its kernels' prediction.
            settings = {f"TINYLA_GPU_{key.upper()}": measured[key] for key in ("teams", "stores", "team_inverse")
                        if key in measured}
            print()
            print("\n".join(measured_table(measured, g, image, read_plans(plans_exe, g.arch, settings))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
