#!/usr/bin/env bash
# The ROCm launch report's program (launch_1000.mlir: 1000 synchronous launches of an
# empty kernel), lowered with Debian's mlir-opt-22 / mlir-translate-22 and linked against
# libtinyla_mgpu (the CMake target mlir_launch_1000 does the lowering). Then:
#  - with an NVIDIA GPU: runs it for real, with tinyla's pools (default) and without
#    (TINYLA_MGPU_POOL=0: a stream and a kernel lookup per launch, as MLIR's own wrappers),
#    and prints the time per launch of each;
#  - without one: runs it against the call-counting stand-in driver and prints what
#    reached the driver.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/deps
cmake -S . -B build-mlir -DCMAKE_BUILD_TYPE=Release -DTINYLA_BUILD_BENCH=OFF -DTINYLA_BUILD_TESTS=ON >/dev/null
cmake --build build-mlir -j "$(nproc)" --target mlir_launch_1000 tinyla_fake_driver >/dev/null
exe=build-mlir/examples/mlir/mlir_launch_1000

# Best of 5 runs, microseconds of the whole process (start-up and module load included:
# the same in both modes, so the difference / 1000 is the per-launch cost).
best_us() {
  local best=
  for _ in 1 2 3 4 5; do
    local t0 t1
    t0=$(date +%s%N); env "$@" "$exe"; t1=$(date +%s%N)
    local us=$(((t1 - t0) / 1000))
    [[ -z $best || $us -lt $best ]] && best=$us
  done
  echo "$best"
}

if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  pooled=$(best_us TINYLA_MGPU_POOL=1)
  unpooled=$(best_us TINYLA_MGPU_POOL=0)
  echo "1000 launches, whole program: pooled ${pooled} us, unpooled ${unpooled} us"
  echo "per launch: pooled $((pooled / 1000)) us, unpooled $((unpooled / 1000)) us;" \
       "the pool saves $(((unpooled - pooled) / 1000)) us per launch"
else
  report=$(mktemp)
  for pool in 1 0; do
    TINYLA_GPU_DRIVER=$PWD/build-mlir/tests/runtime/libtinyla_fake_driver.so TINYLA_FAKE_DRIVER_REPORT=$report \
      TINYLA_MGPU_POOL=$pool "$exe"
    echo "no GPU here; stand-in driver, TINYLA_MGPU_POOL=$pool: $(cat "$report")"
  done
  rm -f "$report"
fi
