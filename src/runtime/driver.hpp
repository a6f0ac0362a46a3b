// The GPU driver, loaded on first use: libcuda.so.1 (CUDA driver API) or
// libamdhip64.so (HIP), by dlopen, so that nothing needs a GPU library until a
// GPU call is made. One vendor-neutral table of the calls the runtime makes;
// handles are opaque pointers. Calls return 0 on success, else the vendor's
// error code (message: error_string).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tinyla::runtime {

using handle = void*;  // CUstream / hipStream_t, CUmodule / hipModule_t, ...

struct driver {
  std::string platform;  // "cuda" or "rocm"
  std::string library;   // what was loaded
  int (*init)();
  int (*use_device)(int device);  // makes `device` current on the calling thread (primary context)
  // The calling thread's current context (CUDA; null if none) or device (HIP:
  // device + 1, never null), and making one current. Pools and modules belong
  // to one context.
  int (*current_context)(handle*);
  int (*set_context)(handle);
  int (*stream_context)(handle stream, handle*);  // the non-null stream's context
  int (*stream_create)(handle*);                  // non-blocking
  int (*stream_destroy)(handle);
  int (*stream_synchronize)(handle);
  int (*stream_wait_event)(handle stream, handle event);
  int (*event_create)(handle*);
  int (*event_destroy)(handle);
  int (*event_record)(handle event, handle stream);
  int (*event_synchronize)(handle);
  int (*module_load)(handle*, const void* image);
  int (*module_load_jit)(handle*, const void* image, int opt_level);
  int (*module_get_function)(handle*, handle module, const char* name);
  int (*allow_dynamic_shared)(handle function, int bytes);  // opt in to more than 48 KiB
  int (*launch)(handle function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y,
                unsigned block_z, unsigned shared_bytes, handle stream, void** params, void** extra);
  int (*mem_alloc)(void**, std::size_t bytes, bool host_shared);
  int (*mem_free)(void*);
  // Stream-ordered allocation (CUDA >= 11.2, HIP >= 5.2); null if the driver has none.
  int (*mem_alloc_async)(void**, std::size_t bytes, handle stream);
  int (*mem_free_async)(void*, handle stream);
  int (*memcpy_async)(void* dst, const void* src, std::size_t bytes, handle stream);
  int (*memset32_async)(void* dst, std::uint32_t value, std::size_t count, handle stream);
  int (*memset16_async)(void* dst, std::uint16_t value, std::size_t count, handle stream);
  int (*host_register)(void* ptr, std::size_t bytes);
  int (*host_unregister)(void* ptr);
  const char* (*error_string)(int code);
};

enum class platform { any, cuda, rocm };

// A driver of this process, loaded on the first call for each platform
// (thread-safe). Which library: TINYLA_GPU_DRIVER=<path of a library with the
// CUDA driver API or HIP>, else libcuda.so.1 (cuda), libamdhip64.so (rocm), or
// for `any` the first of them that loads (TINYLA_GPU_PLATFORM=cuda|rocm picks).
// nullptr when none loads; `why` says what was tried.
const driver* load_driver(platform p, std::string* why = nullptr);

}  // namespace tinyla::runtime
