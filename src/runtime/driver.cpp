// Loads the CUDA driver API or HIP with dlopen and fills the vendor-neutral
// table of driver.hpp. The entry points are declared here with plain C types
// (the ABI of the documented functions), so the runtime builds without either
// vendor's headers.
#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace tinyla::runtime {
namespace {

template <class F> bool bind(void* lib, F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}
// Expansions of a vendor's symbol table (TINYLA_CUDA_SYMBOLS, TINYLA_HIP_SYMBOLS):
// a function-pointer member per entry point, and `bind(...) && ...` terms of
// load() (a missing required symbol fails it; an optional one is left null).
#define TINYLA_DECLARE_SYMBOL(ret, name, params) ret(*name) params = nullptr;
#define TINYLA_BIND_REQUIRED(ret, name, params) bind(lib, fn.name, #name) &&
#define TINYLA_BIND_OPTIONAL(ret, name, params) (bind(lib, fn.name, #name), true) &&

// ---- CUDA driver API ---------------------------------------------------------------------

namespace cu {
using ptr = void*;
using devptr = unsigned long long;

// Each entry point once: (return type, name, parameters). OPTIONAL ones may be
// missing (a null pointer then); a driver without a REQUIRED one is not used.
#define TINYLA_CUDA_SYMBOLS(REQUIRED, OPTIONAL)                                                                        \
  REQUIRED(int, cuInit, (unsigned))                                                                                    \
  REQUIRED(int, cuDeviceGet, (int*, int))                                                                              \
  REQUIRED(int, cuDevicePrimaryCtxRetain, (ptr*, int))                                                                 \
  REQUIRED(int, cuCtxSetCurrent, (ptr))                                                                                \
  REQUIRED(int, cuCtxGetCurrent, (ptr*))                                                                               \
  REQUIRED(int, cuStreamGetCtx, (ptr, ptr*))                                                                           \
  REQUIRED(int, cuStreamCreate, (ptr*, unsigned))                                                                      \
  REQUIRED(int, cuStreamDestroy_v2, (ptr))                                                                             \
  REQUIRED(int, cuStreamSynchronize, (ptr))                                                                            \
  REQUIRED(int, cuStreamWaitEvent, (ptr, ptr, unsigned))                                                               \
  REQUIRED(int, cuEventCreate, (ptr*, unsigned))                                                                       \
  REQUIRED(int, cuEventDestroy_v2, (ptr))                                                                              \
  REQUIRED(int, cuEventRecord, (ptr, ptr))                                                                             \
  REQUIRED(int, cuEventSynchronize, (ptr))                                                                             \
  REQUIRED(int, cuModuleLoadData, (ptr*, const void*))                                                                 \
  REQUIRED(int, cuModuleLoadDataEx, (ptr*, const void*, unsigned, int*, void**))                                       \
  REQUIRED(int, cuModuleGetFunction, (ptr*, ptr, const char*))                                                         \
  REQUIRED(int, cuFuncSetAttribute, (ptr, int, int))                                                                   \
  REQUIRED(int, cuLaunchKernel,                                                                                        \
           (ptr, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, ptr, void**, void**))           \
  REQUIRED(int, cuMemAlloc_v2, (devptr*, std::size_t))                                                                 \
  REQUIRED(int, cuMemAllocManaged, (devptr*, std::size_t, unsigned))                                                   \
  REQUIRED(int, cuMemFree_v2, (devptr))                                                                                \
  OPTIONAL(int, cuMemAllocAsync, (devptr*, std::size_t, ptr)) /* CUDA >= 11.2 */                                       \
  OPTIONAL(int, cuMemFreeAsync, (devptr, ptr))                                                                         \
  REQUIRED(int, cuMemcpyAsync, (devptr, devptr, std::size_t, ptr))                                                     \
  REQUIRED(int, cuMemsetD32Async, (devptr, unsigned, std::size_t, ptr))                                                \
  REQUIRED(int, cuMemsetD16Async, (devptr, unsigned short, std::size_t, ptr))                                          \
  REQUIRED(int, cuMemHostRegister_v2, (void*, std::size_t, unsigned))                                                  \
  REQUIRED(int, cuMemHostUnregister, (void*))                                                                          \
  REQUIRED(int, cuGetErrorString, (int, const char**))

struct api {
  TINYLA_CUDA_SYMBOLS(TINYLA_DECLARE_SYMBOL, TINYLA_DECLARE_SYMBOL)
} fn;
bool load(void* lib) { return TINYLA_CUDA_SYMBOLS(TINYLA_BIND_REQUIRED, TINYLA_BIND_OPTIONAL) true; }

// The constants of cuda.h used here.
constexpr int error_invalid_device = 101;         // CUDA_ERROR_INVALID_DEVICE
constexpr unsigned stream_non_blocking = 1;       // CU_STREAM_NON_BLOCKING
constexpr unsigned event_disable_timing = 2;      // CU_EVENT_DISABLE_TIMING
constexpr int jit_optimization_level = 7;         // CU_JIT_OPTIMIZATION_LEVEL
constexpr int max_dynamic_shared_size_bytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr unsigned mem_attach_global = 1;         // CU_MEM_ATTACH_GLOBAL

devptr dp(const void* p) { return devptr(reinterpret_cast<std::uintptr_t>(p)); }

// The primary context of each device, retained once (never released: it lives
// as long as the process, as the CUDA runtime's does; the table too, since
// global destructors may still make calls).
std::mutex contexts_mutex;
std::vector<ptr>& contexts = *new std::vector<ptr>;

driver table() {
  driver d{};
  d.platform = "cuda";
  d.init = [] { return fn.cuInit(0); };
  d.use_device = [](int device) {
    ptr ctx = nullptr;
    {
      std::lock_guard<std::mutex> lock(contexts_mutex);
      if (device < 0) return error_invalid_device;
      if (contexts.size() <= std::size_t(device)) contexts.resize(std::size_t(device) + 1, nullptr);
      if (!contexts[std::size_t(device)]) {
        int dev = 0;
        if (int e = fn.cuDeviceGet(&dev, device)) return e;
        if (int e = fn.cuDevicePrimaryCtxRetain(&contexts[std::size_t(device)], dev)) return e;
      }
      ctx = contexts[std::size_t(device)];
    }
    return fn.cuCtxSetCurrent(ctx);
  };
  d.current_context = [](handle* c) { return fn.cuCtxGetCurrent(c); };
  d.set_context = [](handle c) { return fn.cuCtxSetCurrent(c); };
  d.stream_context = [](handle s, handle* c) { return fn.cuStreamGetCtx(s, c); };
  d.stream_create = [](handle* s) { return fn.cuStreamCreate(s, stream_non_blocking); };
  d.stream_destroy = [](handle s) { return fn.cuStreamDestroy_v2(s); };
  d.stream_synchronize = [](handle s) { return fn.cuStreamSynchronize(s); };
  d.stream_wait_event = [](handle s, handle e) { return fn.cuStreamWaitEvent(s, e, 0); };
  d.event_create = [](handle* e) { return fn.cuEventCreate(e, event_disable_timing); };
  d.event_destroy = [](handle e) { return fn.cuEventDestroy_v2(e); };
  d.event_record = [](handle e, handle s) { return fn.cuEventRecord(e, s); };
  d.event_synchronize = [](handle e) { return fn.cuEventSynchronize(e); };
  d.module_load = [](handle* m, const void* image) { return fn.cuModuleLoadData(m, image); };
  d.module_load_jit = [](handle* m, const void* image, int opt_level) {
    int option = jit_optimization_level;
    void* value = reinterpret_cast<void*>(std::intptr_t(opt_level));
    return fn.cuModuleLoadDataEx(m, image, 1, &option, &value);
  };
  d.module_get_function = [](handle* f, handle m, const char* name) { return fn.cuModuleGetFunction(f, m, name); };
  d.allow_dynamic_shared = [](handle f, int bytes) {
    return fn.cuFuncSetAttribute(f, max_dynamic_shared_size_bytes, bytes);
  };
  d.launch = [](handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                handle s, void** params,
                void** extra) { return fn.cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra); };
  d.mem_alloc = [](void** p, std::size_t bytes, bool host_shared) {
    devptr q = 0;
    const int e = host_shared ? fn.cuMemAllocManaged(&q, bytes, mem_attach_global) : fn.cuMemAlloc_v2(&q, bytes);
    *p = reinterpret_cast<void*>(std::uintptr_t(q));
    return e;
  };
  d.mem_free = [](void* p) { return fn.cuMemFree_v2(dp(p)); };
  if (fn.cuMemAllocAsync && fn.cuMemFreeAsync) {
    d.mem_alloc_async = [](void** p, std::size_t bytes, handle s) {
      devptr q = 0;
      const int e = fn.cuMemAllocAsync(&q, bytes, s);
      *p = reinterpret_cast<void*>(std::uintptr_t(q));
      return e;
    };
    d.mem_free_async = [](void* p, handle s) { return fn.cuMemFreeAsync(dp(p), s); };
  }
  d.memcpy_async = [](void* dst, const void* src, std::size_t n, handle s) {
    return fn.cuMemcpyAsync(dp(dst), dp(src), n, s);
  };
  d.memset32_async = [](void* dst, std::uint32_t v, std::size_t n, handle s) {
    return fn.cuMemsetD32Async(dp(dst), v, n, s);
  };
  d.memset16_async = [](void* dst, std::uint16_t v, std::size_t n, handle s) {
    return fn.cuMemsetD16Async(dp(dst), v, n, s);
  };
  d.host_register = [](void* p, std::size_t n) { return fn.cuMemHostRegister_v2(p, n, 0); };
  d.host_unregister = [](void* p) { return fn.cuMemHostUnregister(p); };
  d.error_string = [](int code) {
    const char* s = nullptr;
    return fn.cuGetErrorString(code, &s) == 0 && s ? s : "unknown CUDA error";
  };
  return d;
}
}  // namespace cu

// ---- HIP ---------------------------------------------------------------------------------

namespace hip {
using ptr = void*;

#define TINYLA_HIP_SYMBOLS(REQUIRED, OPTIONAL)                                                                         \
  REQUIRED(int, hipInit, (unsigned))                                                                                   \
  REQUIRED(int, hipSetDevice, (int))                                                                                   \
  REQUIRED(int, hipGetDevice, (int*))                                                                                  \
  OPTIONAL(int, hipStreamGetDevice, (ptr, int*)) /* not in HIP 5.2: then the current device */                         \
  REQUIRED(int, hipStreamCreateWithFlags, (ptr*, unsigned))                                                            \
  REQUIRED(int, hipStreamDestroy, (ptr))                                                                               \
  REQUIRED(int, hipStreamSynchronize, (ptr))                                                                           \
  REQUIRED(int, hipStreamWaitEvent, (ptr, ptr, unsigned))                                                              \
  REQUIRED(int, hipEventCreateWithFlags, (ptr*, unsigned))                                                             \
  REQUIRED(int, hipEventDestroy, (ptr))                                                                                \
  REQUIRED(int, hipEventRecord, (ptr, ptr))                                                                            \
  REQUIRED(int, hipEventSynchronize, (ptr))                                                                            \
  REQUIRED(int, hipModuleLoadData, (ptr*, const void*))                                                                \
  REQUIRED(int, hipModuleGetFunction, (ptr*, ptr, const char*))                                                        \
  REQUIRED(int, hipModuleLaunchKernel,                                                                                 \
           (ptr, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, ptr, void**, void**))           \
  REQUIRED(int, hipMalloc, (void**, std::size_t))                                                                      \
  REQUIRED(int, hipMallocManaged, (void**, std::size_t, unsigned))                                                     \
  REQUIRED(int, hipFree, (void*))                                                                                      \
  OPTIONAL(int, hipMallocAsync, (void**, std::size_t, ptr)) /* HIP >= 5.2 */                                           \
  OPTIONAL(int, hipFreeAsync, (void*, ptr))                                                                            \
  REQUIRED(int, hipMemcpyAsync, (void*, const void*, std::size_t, int, ptr))                                           \
  REQUIRED(int, hipMemsetD32Async, (void*, int, std::size_t, ptr))                                                     \
  REQUIRED(int, hipMemsetD16Async, (void*, unsigned short, std::size_t, ptr))                                          \
  REQUIRED(int, hipHostRegister, (void*, std::size_t, unsigned))                                                       \
  REQUIRED(int, hipHostUnregister, (void*))                                                                            \
  REQUIRED(const char*, hipGetErrorString, (int))

struct api {
  TINYLA_HIP_SYMBOLS(TINYLA_DECLARE_SYMBOL, TINYLA_DECLARE_SYMBOL)
} fn;
bool load(void* lib) { return TINYLA_HIP_SYMBOLS(TINYLA_BIND_REQUIRED, TINYLA_BIND_OPTIONAL) true; }

// The constants of hip_runtime_api.h used here.
constexpr unsigned stream_non_blocking = 1;   // hipStreamNonBlocking
constexpr unsigned event_disable_timing = 2;  // hipEventDisableTiming
constexpr unsigned mem_attach_global = 1;     // hipMemAttachGlobal
constexpr int memcpy_default = 4;             // hipMemcpyDefault

driver table() {
  driver d{};
  d.platform = "rocm";
  d.init = [] { return fn.hipInit(0); };
  d.use_device = [](int device) { return fn.hipSetDevice(device); };
  // HIP has no contexts to speak of: the "context" is the current device + 1.
  d.current_context = [](handle* c) {
    int device = 0;
    const int e = fn.hipGetDevice(&device);
    *c = e ? nullptr : reinterpret_cast<handle>(std::intptr_t(device) + 1);
    return e;
  };
  d.set_context = [](handle c) { return fn.hipSetDevice(int(reinterpret_cast<std::intptr_t>(c)) - 1); };
  d.stream_context = [](handle s, handle* c) {
    int device = 0;
    const int e = fn.hipStreamGetDevice ? fn.hipStreamGetDevice(s, &device) : fn.hipGetDevice(&device);
    *c = e ? nullptr : reinterpret_cast<handle>(std::intptr_t(device) + 1);
    return e;
  };
  d.stream_create = [](handle* s) { return fn.hipStreamCreateWithFlags(s, stream_non_blocking); };
  d.stream_destroy = [](handle s) { return fn.hipStreamDestroy(s); };
  d.stream_synchronize = [](handle s) { return fn.hipStreamSynchronize(s); };
  d.stream_wait_event = [](handle s, handle e) { return fn.hipStreamWaitEvent(s, e, 0); };
  d.event_create = [](handle* e) { return fn.hipEventCreateWithFlags(e, event_disable_timing); };
  d.event_destroy = [](handle e) { return fn.hipEventDestroy(e); };
  d.event_record = [](handle e, handle s) { return fn.hipEventRecord(e, s); };
  d.event_synchronize = [](handle e) { return fn.hipEventSynchronize(e); };
  d.module_load = [](handle* m, const void* image) { return fn.hipModuleLoadData(m, image); };
  d.module_load_jit = [](handle* m, const void* image, int) { return fn.hipModuleLoadData(m, image); };
  d.module_get_function = [](handle* f, handle m, const char* name) { return fn.hipModuleGetFunction(f, m, name); };
  d.allow_dynamic_shared = [](handle, int) { return 0; };  // AMD: all of the LDS without opting in
  d.launch = [](handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                handle s, void** params,
                void** extra) { return fn.hipModuleLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, extra); };
  d.mem_alloc = [](void** p, std::size_t bytes, bool host_shared) {
    return host_shared ? fn.hipMallocManaged(p, bytes, mem_attach_global) : fn.hipMalloc(p, bytes);
  };
  d.mem_free = [](void* p) { return fn.hipFree(p); };
  if (fn.hipMallocAsync && fn.hipFreeAsync) {
    d.mem_alloc_async = [](void** p, std::size_t bytes, handle s) { return fn.hipMallocAsync(p, bytes, s); };
    d.mem_free_async = [](void* p, handle s) { return fn.hipFreeAsync(p, s); };
  }
  d.memcpy_async = [](void* dst, const void* src, std::size_t n, handle s) {
    return fn.hipMemcpyAsync(dst, src, n, memcpy_default, s);
  };
  d.memset32_async = [](void* dst, std::uint32_t v, std::size_t n, handle s) {
    return fn.hipMemsetD32Async(dst, int(v), n, s);
  };
  d.memset16_async = [](void* dst, std::uint16_t v, std::size_t n, handle s) {
    return fn.hipMemsetD16Async(dst, v, n, s);
  };
  d.host_register = [](void* p, std::size_t n) { return fn.hipHostRegister(p, n, 0); };
  d.host_unregister = [](void* p) { return fn.hipHostUnregister(p); };
  d.error_string = [](int code) {
    const char* s = fn.hipGetErrorString(code);
    return s ? s : "unknown HIP error";
  };
  return d;
}
}  // namespace hip

struct loaded {
  driver table;
  bool ok = false;
  std::string why;
};

loaded load(platform want) {
  loaded r;
  if (want == platform::any)
    if (const char* env = std::getenv("TINYLA_GPU_PLATFORM"); env && *env) {
      const std::string p = env;
      want = p == "cuda" ? platform::cuda : p == "rocm" ? platform::rocm : want;
      if (want == platform::any) {
        r.why = "TINYLA_GPU_PLATFORM=" + p + " is neither cuda nor rocm";
        return r;
      }
    }
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("TINYLA_GPU_DRIVER"); path && *path) {
    candidates.push_back(path);
  } else {
    if (want != platform::rocm) candidates.push_back("libcuda.so.1");
    if (want != platform::cuda)
      candidates.insert(candidates.end(), {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"});
  }
  // The entry points live in one table per API, bound from the first library
  // that has them (one per process in practice; TINYLA_GPU_DRIVER names one).
  static std::mutex binding;
  std::lock_guard<std::mutex> lock(binding);
  for (const auto& name : candidates) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      r.why += name + ": " + (e ? e : "not loadable") + "; ";
      continue;
    }
    static bool cu_bound = false, hip_bound = false;
    if (want != platform::rocm && (cu_bound || (cu_bound = cu::load(lib)))) {
      r.table = cu::table();
    } else if (want != platform::cuda && (hip_bound || (hip_bound = hip::load(lib)))) {
      r.table = hip::table();
    } else {
      const char* missing = want == platform::cuda   ? "not the CUDA driver API"
                            : want == platform::rocm ? "not HIP"
                                                     : "neither the CUDA driver API nor HIP";
      r.why += name + ": loaded, but it has " + missing + "; ";
      dlclose(lib);
      continue;
    }
    r.table.library = name;
    if (int e = r.table.init()) {
      r.why += name + ": initialization failed (" + r.table.error_string(e) + "); ";
      continue;  // the library stays loaded: its entry points may be bound in a table
    }
    r.ok = true;
    return r;
  }
  if (!r.why.empty()) r.why.resize(r.why.size() - 2);
  return r;
}

}  // namespace

const driver* load_driver(platform p, std::string* why) {
  // Once per platform, thread-safe; never destroyed: global destructors (an
  // MLIR program's module unload) run after function-local statics are gone.
  static std::once_flag once[3];
  static const loaded* l[3];
  const int i = int(p);
  std::call_once(once[i], [&] { l[i] = new loaded(load(p)); });
  if (why) *why = l[i]->why;
  return l[i]->ok ? &l[i]->table : nullptr;
}

}  // namespace tinyla::runtime
