// The kernels of kernels.hpp as the entry points of a device image: compiled
// device-only, by nvcc --fatbin for NVIDIA and by clang -x hip
// --offload-device-only for AMD (cmake/gpu.cmake), into the image that
// backend.cpp builds into the library and loads through the launch runtime.
// The entry points are extern "C", named as kernels.hpp says, so the host finds
// them by name: no vendor runtime registers them.
#include "gpu/vendor.hpp"  // first: the runtime headers define __host__ / __device__ for HIP

#include "gpu/kernels.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

// The block interface of kernels.hpp on the device.
struct device_block {
  __device__ int thread() const { return int(threadIdx.x); }
  __device__ int threads() const { return int(blockDim.x); }
  __device__ int64_t block() const { return blockIdx.x; }
  __device__ int64_t blocks() const { return gridDim.x; }
  __device__ void sync() { gpuSyncThreads(); }
  __device__ void sync_warp() { gpuSyncWarp(); }
  template <class T> __device__ T shuffle(T v, int src, int width) { return gpuShuffle(v, src, width); }
#if !defined(TINYLA_GPU_HIP)
  __device__ unsigned reduce_max(unsigned v) { return __reduce_max_sync(~0u, v); }  // redux.sync, sm_80+
  __device__ unsigned reduce_min(unsigned v) { return __reduce_min_sync(~0u, v); }
#endif
  __device__ void* shared() const {
    extern __shared__ __attribute__((aligned(16))) unsigned char tinyla_shared[];
    return tinyla_shared;
  }
};

}  // namespace tinyla::TINYLA_KERNEL_NS

using namespace tinyla::TINYLA_KERNEL_NS;
using tinyla::job;

// The launch bounds: on NVIDIA with the blocks per SM that hold a per-thread kernel to
// per_thread_register_cap and a team kernel (V: its variant) to team_register_cap (HIP's
// second argument means something else, and gfx942 meets its occupancy targets without it).
#if defined(TINYLA_GPU_HIP)
#define TINYLA_PER_THREAD_BOUNDS(F, E, N) __launch_bounds__(max_per_thread_block)
#define TINYLA_TEAM_BOUNDS(F, E, V) __launch_bounds__(max_team_block)
#elif defined(TINYLA_SCAN_MIN_BLOCKS)  // bench/register_scan.py: the same for every kernel
#define TINYLA_PER_THREAD_BOUNDS(F, E, N) __launch_bounds__(max_per_thread_block, TINYLA_SCAN_MIN_BLOCKS)
#define TINYLA_TEAM_BOUNDS(F, E, V) __launch_bounds__(max_team_block, TINYLA_SCAN_MIN_BLOCKS)
#else
#define TINYLA_PER_THREAD_BOUNDS(F, E, N)                                                                              \
  __launch_bounds__(max_per_thread_block, per_thread_min_blocks<E>(family::F, N))
#define TINYLA_TEAM_BOUNDS(F, E, V) __launch_bounds__(max_team_block, team_min_blocks<E>(family::F, warp_width_of(V)))
#endif
// One per-thread kernel; the (family, type, n) that plan_launch never picks
// (past the register budget) are empty. stage_outputs: the plan's (launch_plan).
#define TINYLA_PER_THREAD_KERNEL(N, F, E, DT)                                                                          \
  extern "C" __global__ void TINYLA_PER_THREAD_BOUNDS(F, E, N) tinyla_##F##_##DT##_##N(job jb, int stage_outputs) {    \
    if constexpr (per_thread_fits<E>(family::F, N)) {                                                                  \
      device_block blk;                                                                                                \
      per_thread_kernel<family::F, N, E>(blk, jb, stage_outputs != 0);                                                 \
    }                                                                                                                  \
  }
// The team kernels: V = team_variant (the LU in shared memory) or warp_variant(W).
#define TINYLA_TEAM_KERNEL(NAME, V, F, E, DT)                                                                          \
  extern "C" __global__ void TINYLA_TEAM_BOUNDS(F, E, V)                                                               \
      tinyla_##F##_##DT##_##NAME(job jb, int team_size, E* workspace) {                                                \
    device_block blk;                                                                                                  \
    team_kernel<family::F, warp_width_of(V), E>(blk, jb, team_size, workspace);                                        \
  }
// ... and the inverses formed in shared memory (launch_plan's inverse_in_shared), named by
// team_inverse_kernel_name.
#define TINYLA_TEAM_INVERSE_KERNEL(NAME, V, E, DT)                                                                     \
  extern "C" __global__ void TINYLA_TEAM_BOUNDS(inverse, E, V)                                                         \
      tinyla_inverse_##DT##_##NAME##_in_shared(job jb, int team_size, E* workspace) {                                  \
    device_block blk;                                                                                                  \
    team_kernel<family::inverse, warp_width_of(V), E, 0, warp_redux, true>(blk, jb, team_size, workspace);             \
  }

static_assert(max_per_thread_n == 8, "TINYLA_FOR_EACH_N lists n = 0..max_per_thread_n");
// Not formatted: clang-format does not settle on one layout for this list.
// clang-format off
#define TINYLA_FOR_EACH_N(M, ...) \
  M(0, __VA_ARGS__) M(1, __VA_ARGS__) M(2, __VA_ARGS__) M(3, __VA_ARGS__) M(4, __VA_ARGS__) \
  M(5, __VA_ARGS__) M(6, __VA_ARGS__) M(7, __VA_ARGS__) M(8, __VA_ARGS__)
// clang-format on
static_assert(warp_width_count == 2 && warp_widths[0] == 16 && warp_widths[1] == 32, "the warp kernels below");
#define TINYLA_FAMILY_KERNELS(F, E, DT)                                                                                \
  TINYLA_FOR_EACH_N(TINYLA_PER_THREAD_KERNEL, F, E, DT)                                                                \
  TINYLA_TEAM_KERNEL(team, team_variant, F, E, DT)                                                                     \
  TINYLA_TEAM_KERNEL(warp16, warp_variant(16), F, E, DT) TINYLA_TEAM_KERNEL(warp32, warp_variant(32), F, E, DT)
#define TINYLA_TYPE_KERNELS(E, DT)                                                                                     \
  TINYLA_FAMILY_KERNELS(determinant, E, DT)                                                                            \
  TINYLA_FAMILY_KERNELS(inverse, E, DT) TINYLA_FAMILY_KERNELS(solve, E, DT) TINYLA_FAMILY_KERNELS(adjugate, E, DT)
#define TINYLA_TEAM_INVERSE_KERNELS(E, DT)                                                                             \
  TINYLA_TEAM_INVERSE_KERNEL(team, team_variant, E, DT)                                                                \
  TINYLA_TEAM_INVERSE_KERNEL(warp16, warp_variant(16), E, DT)                                                          \
  TINYLA_TEAM_INVERSE_KERNEL(warp32, warp_variant(32), E, DT)

// log_det_laplacian's, by the width of a thread's column of M_c.
static_assert(laplacian_width_count == 3 && laplacian_widths[0] == 8 && laplacian_widths[1] == 16 &&
              laplacian_widths[2] == 32);
#define TINYLA_LAPLACIAN_KERNEL(WIDTH, E, DT)                                                                          \
  extern "C" __global__ void __launch_bounds__(laplacian_block) tinyla_log_det_laplacian_##DT##_##WIDTH(job jb) {      \
    device_block blk;                                                                                                  \
    log_det_laplacian_kernel<WIDTH, E>(blk, jb);                                                                       \
  }
#define TINYLA_LAPLACIAN_KERNELS(E, DT)                                                                                \
  TINYLA_LAPLACIAN_KERNEL(8, E, DT) TINYLA_LAPLACIAN_KERNEL(16, E, DT) TINYLA_LAPLACIAN_KERNEL(32, E, DT)

TINYLA_TYPE_KERNELS(float, f32)
TINYLA_TYPE_KERNELS(double, f64)
TINYLA_TYPE_KERNELS(cplx<float>, c64)
TINYLA_TYPE_KERNELS(cplx<double>, c128)
TINYLA_TEAM_INVERSE_KERNELS(float, f32)
TINYLA_TEAM_INVERSE_KERNELS(double, f64)
TINYLA_TEAM_INVERSE_KERNELS(cplx<float>, c64)
TINYLA_TEAM_INVERSE_KERNELS(cplx<double>, c128)
TINYLA_LAPLACIAN_KERNELS(float, f32)
TINYLA_LAPLACIAN_KERNELS(double, f64)
TINYLA_LAPLACIAN_KERNELS(cplx<float>, c64)
TINYLA_LAPLACIAN_KERNELS(cplx<double>, c128)
