// The GPU backend: the kernels of kernels.hpp as CUDA/HIP kernels, launched on
// the caller's stream, and the C API of tinyla_gpu.h. One source for both
// vendors (vendor.hpp); CMake compiles it with nvcc for CUDA and with clang
// (-x hip) for HIP.
#include <complex>
#include <string>

#include "gpu/vendor.hpp"  // first: the runtime headers define __host__ / __device__ for HIP

#include "capi_ops.hpp"
#include "gpu/kernels.hpp"
#include "tinyla/tinyla_gpu.h"

namespace tinyla::TINYLA_KERNEL_NS {
namespace {

// The block interface of kernels.hpp on the device.
struct device_block {
  __device__ int thread() const { return int(threadIdx.x); }
  __device__ int threads() const { return int(blockDim.x); }
  __device__ int64_t block() const { return blockIdx.x; }
  __device__ int64_t blocks() const { return gridDim.x; }
  __device__ void sync() { gpuSyncThreads(); }
  __device__ void* shared() const {
    extern __shared__ __attribute__((aligned(16))) unsigned char tinyla_shared[];
    return tinyla_shared;
  }
};

template <family F, int N, class E> __global__ void __launch_bounds__(max_per_thread_block) per_thread_global(job jb) {
  device_block blk;
  per_thread_kernel<F, N, E>(blk, jb);
}

template <family F, class E>
__global__ void __launch_bounds__(max_team_block) team_global(job jb, int team_size, E* workspace) {
  device_block blk;
  team_kernel<F, E>(blk, jb, team_size, workspace);
}

thread_local std::string last_error;

tinyla_status runtime_error(gpuError_t e, tinyla_status s, const char* what) {
  last_error = std::string(what) + ": " + gpuGetErrorString(e);
  return s;
}

template <class E> tinyla_status launch(const job& jb, gpuStream_t stream) {
  const launch_plan plan = plan_launch<E>(jb);
  if (plan.blocks == 0) return TINYLA_OK;
  if (plan.block_threads > (plan.per_thread ? max_per_thread_block : max_team_block)) {
    last_error = "internal: the launch plan exceeds the kernel's launch bounds";  // tests keep this from happening
    return TINYLA_BACKEND_ERROR;
  }
  if (plan.shared_bytes > plan_options{}.shared_budget) {
    last_error = "n = " + std::to_string(jb.n) + " needs more shared memory than the GPU path plans for";
    return TINYLA_UNSUPPORTED;
  }
  E* workspace = nullptr;
  if (plan.workspace_bytes > 0)
    if (gpuError_t e = gpuMallocAsync(reinterpret_cast<void**>(&workspace), size_t(plan.workspace_bytes), stream);
        e != gpuSuccess)
      return runtime_error(e, TINYLA_OUT_OF_MEMORY, "workspace allocation");
  const dim3 grid(unsigned(plan.blocks)), block(unsigned(plan.block_threads));
  const size_t shared = size_t(plan.shared_bytes);
  dispatch_kernel<E>(jb, plan, [&]<family F, int N>() {
    if constexpr (N >= 0) per_thread_global<F, N, E><<<grid, block, shared, stream>>>(jb);
    else team_global<F, E><<<grid, block, shared, stream>>>(jb, plan.team_size, workspace);
  });
  const gpuError_t e = gpuGetLastError();
  if (workspace) (void)gpuFreeAsync(workspace, stream);  // stream-ordered: after the kernel
  return e == gpuSuccess ? TINYLA_OK : runtime_error(e, TINYLA_BACKEND_ERROR, "kernel launch");
}

tinyla_status submit(dtype t, const job& jb, void* stream) {
  if (tinyla_status s = validate(t, jb); s != TINYLA_OK) return s;
  auto s = static_cast<gpuStream_t>(stream);
  switch (t) {
    case dtype::f32: return launch<float>(jb, s);
    case dtype::f64: return launch<double>(jb, s);
    case dtype::c64: return launch<cplx<float>>(jb, s);
    case dtype::c128: return launch<cplx<double>>(jb, s);
  }
  return TINYLA_INVALID_ARGUMENT;
}

}  // namespace
}  // namespace tinyla::TINYLA_KERNEL_NS

extern "C" {

using tinyla::dtype;
using tinyla::op;
using tinyla::TINYLA_KERNEL_NS::submit;

TINYLA_DEFINE_OPS(tinyla_gpu_, f32, dtype::f32, float, float, submit, (, void* stream), (, stream))
TINYLA_DEFINE_OPS(tinyla_gpu_, f64, dtype::f64, double, double, submit, (, void* stream), (, stream))
TINYLA_DEFINE_OPS(tinyla_gpu_, c64, dtype::c64, void, float, submit, (, void* stream), (, stream))
TINYLA_DEFINE_OPS(tinyla_gpu_, c128, dtype::c128, void, double, submit, (, void* stream), (, stream))

const char* tinyla_gpu_last_error(void) { return tinyla::TINYLA_KERNEL_NS::last_error.c_str(); }
const char* tinyla_gpu_platform(void) { return TINYLA_GPU_PLATFORM; }

}  // extern "C"
