#!/usr/bin/env bash
# The program of the LLVM Discourse thread "Repeated calls to a ROCm kernel are very slow"
# (launch_1000.mlir: 1000 synchronous launches of an empty kernel), lowered with Debian's
# mlir-opt-22 / mlir-translate-22 for NVIDIA (PTX) and for AMD (a code object for this
# machine's GPU, else gfx90a), and linked against libtinyla_mgpu (CMake targets
# mlir_launch_1000 and mlir_launch_1000_rocm). Then:
#  - with a GPU: runs the matching program for real, with tinyla's pools (default) and
#    without (TINYLA_MGPU_POOL=0: a stream and a kernel lookup per launch, as MLIR's own
#    wrappers do), and prints the time per launch of each;
#  - without one: runs both against the call-counting stand-in driver and prints what
#    reached the driver.
#   bash examples/mlir/run.sh [build folder]
# A build folder given (scripts/gpu-check's) is used as it is configured: the program for
# this machine is built there; without one, build-mlir is configured for both.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-}
if [[ -z $build ]]; then
  bash scripts/deps
  build="build-mlir"
  chip=gfx90a
  if [[ -e /dev/kfd ]] && command -v rocminfo >/dev/null; then
    chip=$(rocminfo | grep -m1 -o 'gfx[0-9a-f]*' || echo gfx90a)
  fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTINYLA_BUILD_BENCH=OFF -DTINYLA_BUILD_TESTS=ON \
    -DTINYLA_MLIR_ROCM_CHIP="$chip" >/dev/null
fi
build=$(cd "$build" && pwd)
bin=$build/examples/mlir

# Best of 5 runs, microseconds of the whole process (start-up and module load included:
# the same in both modes, so the difference / 1000 is the per-launch cost).
best_us() {
  local exe=$1 best=
  shift
  for _ in 1 2 3 4 5; do
    local t0 t1
    t0=$(date +%s%N); env "$@" "$exe"; t1=$(date +%s%N)
    local us=$(((t1 - t0) / 1000))
    [[ -z $best || $us -lt $best ]] && best=$us
  done
  echo "$best"
}

timed() {  # <program> <platform>
  local pooled unpooled
  pooled=$(best_us "$1" TINYLA_GPU_PLATFORM="$2" TINYLA_MGPU_POOL=1)
  unpooled=$(best_us "$1" TINYLA_GPU_PLATFORM="$2" TINYLA_MGPU_POOL=0)
  echo "$2: 1000 launches, whole program: pooled ${pooled} us, unpooled ${unpooled} us"
  echo "$2: per launch: pooled $((pooled / 1000)) us, unpooled $((unpooled / 1000)) us;" \
       "the pool saves $(((unpooled - pooled) / 1000)) us per launch"
}

build_targets() { cmake --build "$build" -j "$(nproc)" --target "$@" >/dev/null; }
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  build_targets mlir_launch_1000
  timed "$bin/mlir_launch_1000" cuda
elif [[ -e /dev/kfd ]]; then
  build_targets mlir_launch_1000_rocm
  timed "$bin/mlir_launch_1000_rocm" rocm
else
  build_targets mlir_launch_1000 mlir_launch_1000_rocm tinyla_stand_in_driver
  report=$(mktemp)
  for platform in cuda rocm; do
    exe=$bin/mlir_launch_1000
    [[ $platform == rocm ]] && exe=$bin/mlir_launch_1000_rocm
    for pool in 1 0; do
      TINYLA_GPU_DRIVER=$build/tests/runtime/libtinyla_stand_in_driver.so TINYLA_STAND_IN_REPORT=$report \
        TINYLA_GPU_PLATFORM=$platform TINYLA_MGPU_POOL=$pool "$exe"
      echo "no GPU here; stand-in driver, $platform, TINYLA_MGPU_POOL=$pool: $(cat "$report")"
    done
  done
  rm -f "$report"
fi
