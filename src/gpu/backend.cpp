// The GPU backend's host side and the C API of tinyla_gpu.h: plans a launch
// (kernels.hpp), finds the kernel in the device image built into this library
// (kernels.cu; loaded once per context through the launch runtime's module
// cache) and launches it on the caller's stream through the driver. One source
// for libtinyla_cuda and libtinyla_hip, compiled by the host compiler:
// TINYLA_GPU_PLATFORM_NAME ("cuda" or "rocm") picks the driver, which is
// loaded on the first launch, so no vendor library is linked.
#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "capi_ops.hpp"
#include "gpu/kernels.hpp"
#include "runtime/runtime.hpp"
#include "tinyla/tinyla_gpu.h"

// The device image (<library>_image.cpp, generated from image.cpp.in by cmake/gpu.cmake).
extern "C" const unsigned char tinyla_gpu_image[], tinyla_gpu_image_end[];

namespace tinyla::TINYLA_KERNEL_NS {
namespace {

using runtime::handle;

constexpr runtime::platform this_platform =
    std::string_view(TINYLA_GPU_PLATFORM_NAME) == "rocm" ? runtime::platform::rocm : runtime::platform::cuda;

tinyla_status fail(tinyla_status s, const std::string& why) {
  runtime::runtime::set_last_error(why);  // the runtime's channel: tinyla_gpu_last_error() reads it
  return s;
}

// The image's module in one context, and its kernels, looked up on first use.
// `functions` is not a second cache: it indexes the handles the runtime's
// function cache returned (kernel_index, lock-free), so that a launch costs an
// atomic load instead of the cache's mutex and string-keyed look-up.
struct context_kernels {
  handle context;
  handle module;
  std::atomic<handle> functions[kernel_count + laplacian_kernel_count + team_inverse_kernel_count] = {};
};

context_kernels* kernels_in(runtime::runtime& rt, handle context) {
  thread_local context_kernels* last = nullptr;  // the common case: the same context as last time
  if (last && last->context == context) return last;
  static std::mutex mutex;
  static auto& loaded = *new std::vector<context_kernels*>;  // modules stay loaded for the process's life
  std::lock_guard<std::mutex> lock(mutex);
  for (context_kernels* k : loaded)
    if (k->context == context) return last = k;
  const handle module =
      rt.load_module(tinyla_gpu_image, std::size_t(tinyla_gpu_image_end - tinyla_gpu_image), false, 0);
  if (!module) return nullptr;
  auto* k = new context_kernels{context, module};
  loaded.push_back(k);
  return last = k;
}

// The job's kernel: log_det_laplacian's (laplacian_kernel_name) after the factorizing ones,
// then the team inverses formed in shared memory (team_inverse_kernel_name).
handle kernel(runtime::runtime& rt, context_kernels& k, int index, const char* name) {
  std::atomic<handle>& slot = k.functions[index];
  if (handle fn = slot.load(std::memory_order_acquire)) return fn;
  const handle fn = rt.function(k.module, name);
  if (fn) slot.store(fn, std::memory_order_release);
  return fn;
}

template <class E> tinyla_status launch(dtype t, const job& jb, handle stream) {
  const launch_plan plan = plan_launch<E>(jb, launch_options(this_platform == runtime::platform::cuda));
  if (jb.kind == op::log_det_laplacian && jb.n > max_laplacian_n)
    return fail(TINYLA_UNSUPPORTED, "log_det_laplacian: the GPU kernel takes n <= " + std::to_string(max_laplacian_n) +
                                        ", not " + std::to_string(jb.n));
  if (plan.blocks == 0) return TINYLA_OK;
  if (plan.block_threads > (plan.per_thread ? max_per_thread_block : max_team_block))  // tests keep this from happening
    return fail(TINYLA_BACKEND_ERROR, "internal: the launch plan exceeds the kernel's launch bounds");
  if (plan.shared_bytes > plan_options{}.shared_budget)
    return fail(TINYLA_UNSUPPORTED,
                "n = " + std::to_string(jb.n) + " needs more shared memory than the GPU path plans for");

  std::string why;
  runtime::runtime* rt = runtime::runtime::get(this_platform, &why);
  if (!rt) return fail(TINYLA_BACKEND_ERROR, "no " TINYLA_GPU_PLATFORM_NAME " driver could be loaded (" + why + ")");
  const handle context = rt->use_stream_context(stream);
  if (!context) return TINYLA_BACKEND_ERROR;  // why: recorded by the runtime
  context_kernels* k = kernels_in(*rt, context);
  if (!k) return TINYLA_BACKEND_ERROR;  // why: recorded by the runtime
  handle fn = nullptr;
  if (jb.kind == op::log_det_laplacian)
    fn = kernel(*rt, *k, kernel_count + laplacian_kernel_index(t, jb.n), laplacian_kernel_name(t, jb.n).text);
  else if (plan.inverse_in_shared)
    fn = kernel(*rt, *k, kernel_count + laplacian_kernel_count + team_inverse_kernel_index(t, variant_of(plan, jb.n)),
                team_inverse_kernel_name(t, variant_of(plan, jb.n)).text);
  else
    dispatch_kernel<E>(
        jb, plan, [&]<family F, int N>() { fn = kernel(*rt, *k, kernel_index(t, F, N), kernel_name(t, F, N).text); });
  if (!fn) return TINYLA_BACKEND_ERROR;  // why: recorded by the runtime

  const runtime::driver& drv = rt->drv();
  void* workspace = nullptr;
  if (plan.workspace_bytes > 0) {
    if (!drv.mem_alloc_async)
      return fail(TINYLA_UNSUPPORTED, "n = " + std::to_string(jb.n) + " needs a workspace, and this " + drv.platform +
                                          " driver has no stream-ordered allocation");
    if (!rt->check(drv.mem_alloc_async(&workspace, std::size_t(plan.workspace_bytes), stream), "workspace allocation"))
      return TINYLA_OUT_OF_MEMORY;  // why: recorded by the runtime
  }
  job args = jb;
  // The team kernel's parameters; a per-thread kernel's second is whether it stages its outputs.
  int second = plan.per_thread ? int(plan.stage_outputs) : plan.team_size;
  void* params[] = {&args, &second, &workspace};
  const unsigned grid[3] = {unsigned(plan.blocks), 1, 1}, block[3] = {unsigned(plan.block_threads), 1, 1};
  const bool launched = rt->launch(fn, grid, block, unsigned(plan.shared_bytes), stream, params, nullptr);
  if (workspace) (void)drv.mem_free_async(workspace, stream);  // stream-ordered: after the kernel
  return launched ? TINYLA_OK : TINYLA_BACKEND_ERROR;          // why: recorded by the runtime
}

tinyla_status submit(dtype t, const job& jb, void* stream) {
  if (tinyla_status s = validate(t, jb); s != TINYLA_OK) return s;
  return with_dtype(t, [&](auto info) { return launch<kernel_element<typename decltype(info)::type>>(t, jb, stream); });
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
TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_gpu_, f32, dtype::f32, float, submit, (, void* stream), (, stream))
TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_gpu_, f64, dtype::f64, double, submit, (, void* stream), (, stream))
TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_gpu_, c64, dtype::c64, void, submit, (, void* stream), (, stream))
TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_gpu_, c128, dtype::c128, void, submit, (, void* stream), (, stream))

const char* tinyla_gpu_last_error(void) { return tinyla::runtime::runtime::last_error(); }
const char* tinyla_gpu_platform(void) { return TINYLA_GPU_PLATFORM_NAME; }

}  // extern "C"
