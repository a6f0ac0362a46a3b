// A call-counting stand-in for libcuda.so.1 (the CUDA driver API entry points
// tinyla's runtime binds), for tests on machines without a GPU. Handles are
// fresh heap objects; "device memory" is host memory, so copies and memsets do
// what they say. At unload it writes one line of counts to the file named by
// TINYLA_FAKE_DRIVER_REPORT (if set). A module image whose first bytes are
// "bad" fails to load (CUDA_ERROR_INVALID_IMAGE), as does TINYLA_FAKE_NO_DEVICE
// make cuInit fail (CUDA_ERROR_NO_DEVICE).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {
struct counts {
  std::atomic<long> init{0}, stream_create{0}, stream_destroy{0}, stream_sync{0}, module_load{0}, module_unload{0},
      get_function{0}, launch{0}, event_create{0}, ctx_retain{0}, ctx_set{0};
} n;

void* fresh() { return new char[16]; }

__attribute__((destructor)) void report() {
  const char* path = std::getenv("TINYLA_FAKE_DRIVER_REPORT");
  if (!path) return;
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f,
                 "init=%ld stream_create=%ld stream_destroy=%ld stream_sync=%ld module_load=%ld module_unload=%ld "
                 "get_function=%ld launch=%ld event_create=%ld ctx_retain=%ld ctx_set=%ld\n",
                 n.init.load(), n.stream_create.load(), n.stream_destroy.load(), n.stream_sync.load(),
                 n.module_load.load(), n.module_unload.load(), n.get_function.load(), n.launch.load(),
                 n.event_create.load(), n.ctx_retain.load(), n.ctx_set.load());
    std::fclose(f);
  }
}

int load(void** m, const void* image) {
  if (std::memcmp(image, "bad", 3) == 0) return 200;  // CUDA_ERROR_INVALID_IMAGE
  ++n.module_load;
  *m = fresh();
  return 0;
}
}  // namespace

#define API extern "C" __attribute__((visibility("default"))) int
using ptr = void*;
using devptr = unsigned long long;

API cuInit(unsigned) {
  ++n.init;
  return std::getenv("TINYLA_FAKE_NO_DEVICE") ? 100 /* CUDA_ERROR_NO_DEVICE */ : 0;
}
API cuDeviceGetCount(int* c) { return *c = 1, 0; }
API cuDeviceGet(int* d, int i) { return i == 0 ? (*d = 0, 0) : 101; }
API cuDevicePrimaryCtxRetain(ptr* c, int) {
  static char context;  // the one device's primary context
  return ++n.ctx_retain, *c = &context, 0;
}
API cuCtxSetCurrent(ptr) { return ++n.ctx_set, 0; }
API cuStreamCreate(ptr* s, unsigned) { return ++n.stream_create, *s = fresh(), 0; }
API cuStreamDestroy_v2(ptr s) { return ++n.stream_destroy, delete[] static_cast<char*>(s), 0; }
API cuStreamSynchronize(ptr) { return ++n.stream_sync, 0; }
API cuStreamWaitEvent(ptr, ptr, unsigned) { return 0; }
API cuEventCreate(ptr* e, unsigned) { return ++n.event_create, *e = fresh(), 0; }
API cuEventDestroy_v2(ptr e) { return delete[] static_cast<char*>(e), 0; }
API cuEventRecord(ptr, ptr) { return 0; }
API cuEventSynchronize(ptr) { return 0; }
API cuModuleLoadData(ptr* m, const void* image) { return load(m, image); }
API cuModuleLoadDataEx(ptr* m, const void* image, unsigned, int*, void**) { return load(m, image); }
API cuModuleUnload(ptr m) { return ++n.module_unload, delete[] static_cast<char*>(m), 0; }
// Functions belong to their module (never freed by the caller): one stable
// handle per (module, name).
API cuModuleGetFunction(ptr* f, ptr m, const char* name) {
  if (!name || !*name) return 500;  // CUDA_ERROR_NOT_FOUND
  static std::mutex mutex;
  static std::map<std::pair<ptr, std::string>, char> functions;
  std::lock_guard<std::mutex> lock(mutex);
  ++n.get_function;
  *f = &functions[{m, name}];
  return 0;
}
API cuFuncSetAttribute(ptr, int, int) { return 0; }
API cuLaunchKernel(ptr f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, ptr, void**, void**) {
  return f ? (++n.launch, 0) : 400;  // CUDA_ERROR_INVALID_HANDLE
}
API cuMemAlloc_v2(devptr* p, std::size_t b) { return *p = devptr(std::uintptr_t(std::malloc(b))), 0; }
API cuMemAllocManaged(devptr* p, std::size_t b, unsigned) { return *p = devptr(std::uintptr_t(std::malloc(b))), 0; }
API cuMemFree_v2(devptr p) { return std::free(reinterpret_cast<void*>(std::uintptr_t(p))), 0; }
API cuMemcpyAsync(devptr d, devptr s, std::size_t b, ptr) {
  return std::memmove(reinterpret_cast<void*>(std::uintptr_t(d)), reinterpret_cast<void*>(std::uintptr_t(s)), b), 0;
}
API cuMemsetD32Async(devptr d, unsigned v, std::size_t c, ptr) {
  for (std::size_t i = 0; i < c; ++i) reinterpret_cast<unsigned*>(std::uintptr_t(d))[i] = v;
  return 0;
}
API cuMemsetD16Async(devptr d, unsigned short v, std::size_t c, ptr) {
  for (std::size_t i = 0; i < c; ++i) reinterpret_cast<unsigned short*>(std::uintptr_t(d))[i] = v;
  return 0;
}
API cuMemHostRegister_v2(void*, std::size_t, unsigned) { return 0; }
API cuMemHostUnregister(void*) { return 0; }
API cuGetErrorString(int code, const char** s) {
  switch (code) {
    case 100: *s = "no CUDA-capable device is detected (stand-in)"; return 0;
    case 200: *s = "device kernel image is invalid (stand-in)"; return 0;
    case 500: *s = "named symbol not found (stand-in)"; return 0;
    default: *s = "error (stand-in)"; return 0;
  }
}
