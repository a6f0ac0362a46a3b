// libtinyla_mgpu: the runtime ABI that MLIR's gpu-to-llvm lowering calls
// (the mgpu* functions of mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp and
// RocmRuntimeWrappers.cpp), on tinyla's runtime: mgpuStreamCreate/Destroy take
// from and return to the stream pool, mgpuModuleLoad* hit the module cache,
// mgpuModuleGetFunction the function cache. One library for both vendors: the
// driver is picked at run time (runtime/driver.hpp: TINYLA_GPU_PLATFORM,
// TINYLA_GPU_DRIVER). Signatures as MLIR 22 emits them.
//
// The ABI returns no status. On a failure (no driver, no device, a bad module)
// the call prints the reason to stderr once per failure, returns null (loads,
// lookups, allocations) or does nothing, and later calls given that null do
// nothing either; the program goes on, and its results are not computed.
#include "mgpu/mgpu.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/runtime.hpp"

using tinyla::runtime::handle;
using tinyla::runtime::runtime;

namespace {

// The runtime, printing its failures (the ABI returns no status), or nullptr
// (no driver: said once on stderr).
runtime* rt() {
  static runtime* r = [] {
    std::string why;
    runtime* found = runtime::get(tinyla::runtime::platform::any, &why);
    if (found) found->print_errors(true);
    else std::fprintf(stderr, "tinyla runtime: no GPU driver could be loaded (%s)\n", why.c_str());
    return found;
  }();
  return r;
}

// ... with the default device current on this thread (what MLIR's wrappers do
// on every call), and this thread's state in it, for the calls that follow (one
// look-up per mgpu* call); r is nullptr on failure.
struct bound_runtime {
  runtime* r = nullptr;
  runtime::thread_state* t = nullptr;
};
bound_runtime bound() {
  runtime* r = rt();
  if (!r) return {};
  runtime::thread_state& t = runtime::this_thread();
  return r->bind_thread(t) ? bound_runtime{r, &t} : bound_runtime{};
}

}  // namespace

#define TINYLA_MGPU extern "C" __attribute__((visibility("default")))

TINYLA_MGPU handle mgpuModuleLoad(void* data, std::size_t size) {
  runtime* r = bound().r;
  return r ? r->load_module(data, size, false, 0) : nullptr;
}

TINYLA_MGPU handle mgpuModuleLoadJIT(void* data, int opt_level) {
  runtime* r = bound().r;
  return r ? r->load_module(data, 0, true, opt_level) : nullptr;
}

TINYLA_MGPU void mgpuModuleUnload(handle module) {
  if (runtime* r = rt(); r && module) r->unload_module(module);
}

TINYLA_MGPU handle mgpuModuleGetFunction(handle module, const char* name) {
  auto [r, t] = bound();
  return r && module ? r->function(*t, module, name) : nullptr;
}

// The 12th argument (the parameter count, MLIR >= 18) is never read, so MLIR <= 17's
// 11-argument calls work too.
TINYLA_MGPU void mgpuLaunchKernel(handle function, std::intptr_t grid_x, std::intptr_t grid_y, std::intptr_t grid_z,
                                  std::intptr_t block_x, std::intptr_t block_y, std::intptr_t block_z,
                                  std::int32_t shared_bytes, handle stream, void** params, void** extra,
                                  std::size_t /*param_count*/) {
  auto [r, t] = bound();
  if (!r) return;
  const unsigned grid[3] = {unsigned(grid_x), unsigned(grid_y), unsigned(grid_z)};
  const unsigned block[3] = {unsigned(block_x), unsigned(block_y), unsigned(block_z)};
  r->launch(*t, function, grid, block, unsigned(shared_bytes), stream, params, extra);
}

TINYLA_MGPU handle mgpuStreamCreate() {
  auto [r, t] = bound();
  return r ? r->acquire_stream(*t) : nullptr;
}

TINYLA_MGPU void mgpuStreamDestroy(handle stream) {
  if (runtime* r = rt(); r && stream) r->release_stream(stream);
}

TINYLA_MGPU void mgpuStreamSynchronize(handle stream) {
  if (runtime* r = rt(); r && stream) r->synchronize(stream);
}

TINYLA_MGPU void mgpuStreamWaitEvent(handle stream, handle event) {
  if (runtime* r = rt(); r && stream && event) {
    r->enqueued(stream);
    r->check(r->drv().stream_wait_event(stream, event), "mgpuStreamWaitEvent");
  }
}

TINYLA_MGPU handle mgpuEventCreate() {
  runtime* r = bound().r;
  return r ? r->acquire_event() : nullptr;
}

TINYLA_MGPU void mgpuEventDestroy(handle event) {
  if (runtime* r = bound().r; r && event) r->release_event(event);
}

TINYLA_MGPU void mgpuEventSynchronize(handle event) {
  if (runtime* r = rt(); r && event) r->check(r->drv().event_synchronize(event), "mgpuEventSynchronize");
}

TINYLA_MGPU void mgpuEventRecord(handle event, handle stream) {
  if (runtime* r = rt(); r && event) r->check(r->drv().event_record(event, stream), "mgpuEventRecord");
}

TINYLA_MGPU void* mgpuMemAlloc(std::uint64_t bytes, handle /*stream*/, bool host_shared) {
  runtime* r = bound().r;
  if (!r || bytes == 0) return nullptr;
  void* p = nullptr;
  return r->check(r->drv().mem_alloc(&p, bytes, host_shared), "mgpuMemAlloc") ? p : nullptr;
}

TINYLA_MGPU void mgpuMemFree(void* ptr, handle /*stream*/) {
  if (runtime* r = rt(); r && ptr) r->check(r->drv().mem_free(ptr), "mgpuMemFree");
}

TINYLA_MGPU void mgpuMemcpy(void* dst, void* src, std::size_t bytes, handle stream) {
  if (runtime* r = bound().r; r && bytes) {
    r->enqueued(stream);
    r->check(r->drv().memcpy_async(dst, src, bytes, stream), "mgpuMemcpy");
  }
}

TINYLA_MGPU void mgpuMemset32(void* dst, std::uint32_t value, std::size_t count, handle stream) {
  if (runtime* r = bound().r; r && count) {
    r->enqueued(stream);
    r->check(r->drv().memset32_async(dst, value, count, stream), "mgpuMemset32");
  }
}

TINYLA_MGPU void mgpuMemset16(void* dst, std::uint16_t value, std::size_t count, handle stream) {
  if (runtime* r = bound().r; r && count) {
    r->enqueued(stream);
    r->check(r->drv().memset16_async(dst, value, count, stream), "mgpuMemset16");
  }
}

TINYLA_MGPU void mgpuMemHostRegister(void* ptr, std::uint64_t bytes) {
  if (runtime* r = bound().r; r && ptr && bytes) r->check(r->drv().host_register(ptr, bytes), "mgpuMemHostRegister");
}

TINYLA_MGPU void mgpuMemHostUnregister(void* ptr) {
  if (runtime* r = rt(); r && ptr) r->check(r->drv().host_unregister(ptr), "mgpuMemHostUnregister");
}

// A dense memref: registers [data + offset, + product(sizes) * element size).
TINYLA_MGPU void mgpuMemHostRegisterMemRef(std::int64_t rank, tinyla_mgpu_memref* d, std::int64_t element_bytes) {
  std::int64_t count = 1;
  for (std::int64_t i = 0; i < rank; ++i) count *= d->sizes_and_strides[i];
  mgpuMemHostRegister(d->aligned + d->offset * element_bytes, std::uint64_t(count * element_bytes));
}

TINYLA_MGPU void mgpuMemHostUnregisterMemRef(std::int64_t /*rank*/, tinyla_mgpu_memref* d, std::int64_t element_bytes) {
  mgpuMemHostUnregister(d->aligned + d->offset * element_bytes);
}

TINYLA_MGPU void mgpuSetDefaultDevice(std::int32_t device) {
  if (runtime* r = rt()) r->set_default_device(device);
}

// Not part of MLIR's ABI: what reached the driver and what the caches answered,
// as "streams_created=.. stream_reuses=.. modules_loaded=.. ..." (for tests and benchmarks).
TINYLA_MGPU const char* tinyla_mgpu_stats() {
  static thread_local char text[512];
  runtime* r = rt();
  if (!r) return "no driver";
  auto& s = r->stats();
  std::snprintf(text, sizeof text,
                "platform=%s streams_created=%lld stream_reuses=%lld modules_loaded=%lld module_cache_hits=%lld "
                "function_lookups=%lld function_cache_hits=%lld launches=%lld events_created=%lld errors=%lld",
                r->drv().platform.c_str(), (long long)s.streams_created, (long long)s.stream_reuses,
                (long long)s.modules_loaded, (long long)s.module_cache_hits, (long long)s.function_lookups,
                (long long)s.function_cache_hits, (long long)s.launches, (long long)s.events_created,
                (long long)s.errors);
  return text;
}
