// A call-counting stand-in for the GPU driver libraries tinyla's runtime binds
// (libcuda.so.1's driver API and libamdhip64.so's HIP; one library exports
// both), for tests on machines without a GPU. Two devices, one context each;
// handles are fresh heap objects; "device memory" is host memory, so copies
// and memsets do what they say, and kernels do nothing.
//
// What it checks, as a driver would: a binary module (CUDA fatbin or clang
// offload bundle) must contain the name looked up in it (else "not found"; a
// fatbin's compressed entries are read through libzstd, below); a
// launch needs a function of the current context, a stream of it, a grid and a
// block of at most 1024 threads, and at most 48 KiB of dynamic shared memory
// unless the function was opted in to more.
//
// What it reports: tinyla_stand_in_report() (for a test in the same process)
// and, at unload, the same line into the file TINYLA_STAND_IN_REPORT names.
// A module image starting with "bad" fails to load (invalid image);
// TINYLA_FAKE_NO_DEVICE=1 makes initialization fail (no device).
#include <dlfcn.h>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace {

// Error codes: the CUDA driver's, which HIP's equal for these.
enum : int {
  ok = 0,
  invalid_value = 1,
  no_device = 100,
  invalid_device = 101,
  invalid_image = 200,
  invalid_handle = 400,
  not_found = 500
};

struct counts {
  std::atomic<long> init{0}, hip_init{0}, stream_create{0}, stream_destroy{0}, stream_sync{0}, module_load{0},
      module_unload{0}, get_function{0}, launch{0}, event_create{0}, ctx_retain{0}, ctx_set{0}, alloc_async{0},
      free_async{0}, ctx_get{0}, stream_ctx{0};  // ctx_get / stream_ctx: which context is current / a stream's
} n;

constexpr int devices = 2;
char contexts[devices];                // each device's (primary) context
thread_local void* current = nullptr;  // CUDA: no context until one is made current
int device_of(void* context) { return int(static_cast<char*>(context) - contexts); }

struct stream_object {
  void* context;
};
struct module_object {
  void* context;
  std::string_view image;  // binary images only (empty for text: PTX)
  std::string inflated;    // a fatbin: its entries' bytes, the compressed ones inflated
  std::mutex mutex;
  std::map<std::string, int, std::less<>> functions;  // name -> dynamic shared memory opt-in
};
struct function_object {
  module_object* module;
  std::string name;
};

std::string report_line() {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "init=%ld hip_init=%ld stream_create=%ld stream_destroy=%ld stream_sync=%ld module_load=%ld module_unload=%ld "
      "get_function=%ld launch=%ld event_create=%ld ctx_retain=%ld ctx_set=%ld alloc_async=%ld "
      "free_async=%ld ctx_get=%ld stream_ctx=%ld",
      n.init.load(), n.hip_init.load(), n.stream_create.load(), n.stream_destroy.load(), n.stream_sync.load(),
      n.module_load.load(), n.module_unload.load(), n.get_function.load(), n.launch.load(), n.event_create.load(),
      n.ctx_retain.load(), n.ctx_set.load(), n.alloc_async.load(), n.free_async.load(), n.ctx_get.load(),
      n.stream_ctx.load());
  return text;
}

__attribute__((destructor)) void report() {
  const char* path = std::getenv("TINYLA_STAND_IN_REPORT");
  if (!path) return;
  if (FILE* f = std::fopen(path, "w")) {
    std::fprintf(f, "%s\n", report_line().c_str());
    std::fclose(f);
  }
}

template <class T> T read(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The bytes of a binary image whose length its header gives; empty otherwise.
std::string_view binary_image(const char* p) {
  if (read<std::uint32_t>(p) == 0xBA55ED50u)  // CUDA fatbin: magic, version, header size (u16), payload size (u64)
    return {p, std::size_t(read<std::uint16_t>(p + 6) + read<std::uint64_t>(p + 8))};
  if (std::memcmp(p, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) {  // entries: offset, size, id length, id
    std::uint64_t end = 0;
    const char* e = p + 32;
    for (std::uint64_t i = 0, count = read<std::uint64_t>(p + 24); i < count; ++i) {
      end = std::max(end, read<std::uint64_t>(e) + read<std::uint64_t>(e + 8));
      e += 24 + read<std::uint64_t>(e + 16);
    }
    return {p, std::size_t(end)};
  }
  return {};
}

int init() {
  ++n.init;
  return std::getenv("TINYLA_FAKE_NO_DEVICE") ? no_device : ok;
}
int stream_create(void** s) {
  return current ? (++n.stream_create, *s = new stream_object{current}, ok) : invalid_value;
}
int stream_destroy(void* s) { return ++n.stream_destroy, delete static_cast<stream_object*>(s), ok; }
int stream_sync(void*) { return ++n.stream_sync, ok; }
int event_create(void** e) { return ++n.event_create, *e = new char[16], ok; }
int event_destroy(void* e) { return delete[] static_cast<char*>(e), ok; }

// A fatbin's entries, where nvcc compressed any (it does, by default, those past about
// 10 MB: the sm_90 kernels' code, and the PTX), as text to look names up in: each entry's
// payload, inflated where its flags say zstd (its frames' magic 28 b5 2f fd; the layout
// of an entry's header is NVIDIA's, undocumented, as cuobjdump reads it). False if an
// entry is compressed otherwise, corrupt or past the image, or libzstd (Debian's libzstd1,
// which apt needs) is absent.
bool inflate_fatbin(std::string_view fatbin, std::string& text) {
  using decompress_fn = std::size_t (*)(void*, std::size_t, const void*, std::size_t);
  using is_error_fn = unsigned (*)(std::size_t);
  static void* zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  static auto decompress = zstd ? reinterpret_cast<decompress_fn>(dlsym(zstd, "ZSTD_decompress")) : nullptr;
  static auto is_error = zstd ? reinterpret_cast<is_error_fn>(dlsym(zstd, "ZSTD_isError")) : nullptr;
  constexpr std::uint64_t compressed_flag = 0x2000, zstd_flag = 0x8000;
  const char* p = fatbin.data();
  for (std::size_t at = read<std::uint16_t>(p + 6); at + 64 <= fatbin.size();) {
    // u16 kind, u16, u32 header size, u64 payload size, u32 compressed size at 16, ..., u64
    // flags at 40, u64 inflated size at 56 (the header's first 64 bytes)
    const auto header = read<std::uint32_t>(p + at + 4);
    const auto size = read<std::uint64_t>(p + at + 8), flags = read<std::uint64_t>(p + at + 40);
    if (header < 64 || header > fatbin.size() - at || size > fatbin.size() - at - header) return false;
    const char* payload = p + at + header;
    if (flags & zstd_flag) {
      const auto inflated = read<std::uint64_t>(p + at + 56);
      if (!decompress || !is_error || read<std::uint32_t>(p + at + 16) > size) return false;
      const std::size_t before = text.size();
      text.resize(before + inflated);
      const std::size_t got = decompress(text.data() + before, inflated, payload, read<std::uint32_t>(p + at + 16));
      if (is_error(got) || got != inflated) return false;
    } else if (flags & compressed_flag) {
      return false;
    } else {
      text.append(payload, size);
    }
    at += header + size;
  }
  return true;
}

int module_load(void** m, const void* image) {
  const char* p = static_cast<const char*>(image);
  if (std::memcmp(p, "bad", 3) == 0) return invalid_image;
  if (!current) return invalid_value;
  auto* module = new module_object;
  module->context = current;
  module->image = binary_image(p);
  if (read<std::uint32_t>(p) == 0xBA55ED50u) {
    if (!inflate_fatbin(module->image, module->inflated)) {
      std::fprintf(
          stderr,
          "stand-in driver: a fatbin entry it cannot read (compressed but not by zstd, corrupt, or no libzstd.so.1)\n");
      delete module;
      return invalid_image;
    }
    module->image = module->inflated;
  }
  ++n.module_load;
  *m = module;
  return ok;
}
int module_unload(void* m) { return ++n.module_unload, delete static_cast<module_object*>(m), ok; }

// One stable handle per (module, name), owned by the module.
int get_function(void** f, void* m, const char* name) {
  auto* module = static_cast<module_object*>(m);
  if (!module) return invalid_handle;
  if (!name || !*name) return not_found;
  const std::string symbol = std::string(1, '\0') + name + '\0';
  if (!module->image.empty() && module->image.find(symbol) == std::string_view::npos) return not_found;
  ++n.get_function;
  static std::mutex mutex;
  static std::map<std::pair<void*, std::string>, function_object> functions;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = functions.try_emplace({m, name}, function_object{module, name});
  *f = &it->second;
  return ok;
}

int set_dynamic_shared(void* f, int bytes) {
  auto* fn = static_cast<function_object*>(f);
  if (!fn) return invalid_handle;
  std::lock_guard<std::mutex> lock(fn->module->mutex);
  fn->module->functions[fn->name] = bytes;
  return ok;
}

int launch(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared,
           void* stream) {
  auto* fn = static_cast<function_object*>(f);
  if (!fn || fn->module->context != current) return invalid_handle;
  if (stream && static_cast<stream_object*>(stream)->context != current) return invalid_handle;  // another context's
  if (!gx || !gy || !gz || !bx || !by || !bz || std::uint64_t(bx) * by * bz > 1024) return invalid_value;
  if (shared > 48 * 1024) {
    std::lock_guard<std::mutex> lock(fn->module->mutex);
    if (int(shared) > fn->module->functions[fn->name]) return invalid_value;
  }
  ++n.launch;
  return ok;
}

void* host(unsigned long long p) { return reinterpret_cast<void*>(std::uintptr_t(p)); }
unsigned long long dev(void* p) { return static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)); }

const char* error_string(int code) {
  switch (code) {
    case no_device: return "no CUDA-capable device is detected (stand-in)";
    case invalid_image: return "device kernel image is invalid (stand-in)";
    case invalid_handle: return "invalid resource handle (stand-in)";
    case not_found: return "named symbol not found (stand-in)";
    case invalid_value: return "invalid argument (stand-in)";
    default: return "error (stand-in)";
  }
}

}  // namespace

#define API extern "C" __attribute__((visibility("default"))) int
using ptr = void*;
using devptr = unsigned long long;

// The counts now, in a buffer the next call overwrites. (Not a thread_local
// std::string: with one in this dlopen()ed library, LeakSanitizer's tracer
// crashed at the exit of every process that loaded it.)
extern "C" __attribute__((visibility("default"))) const char* tinyla_stand_in_report() {
  static char text[512];
  std::snprintf(text, sizeof text, "%s", report_line().c_str());
  return text;
}

// ---- the CUDA driver API -------------------------------------------------------------------
API cuInit(unsigned) { return init(); }
API cuDeviceGetCount(int* c) { return *c = devices, ok; }
API cuDeviceGet(int* d, int i) { return i >= 0 && i < devices ? (*d = i, ok) : invalid_device; }
API cuDevicePrimaryCtxRetain(ptr* c, int d) { return ++n.ctx_retain, *c = &contexts[d], ok; }
API cuCtxSetCurrent(ptr c) { return ++n.ctx_set, current = c, ok; }
API cuCtxGetCurrent(ptr* c) { return ++n.ctx_get, *c = current, ok; }
API cuStreamGetCtx(ptr s, ptr* c) {
  return s ? (++n.stream_ctx, *c = static_cast<stream_object*>(s)->context, ok) : invalid_handle;
}
API cuStreamCreate(ptr* s, unsigned) { return stream_create(s); }
API cuStreamDestroy_v2(ptr s) { return stream_destroy(s); }
API cuStreamSynchronize(ptr s) { return stream_sync(s); }
API cuStreamWaitEvent(ptr, ptr, unsigned) { return ok; }
API cuEventCreate(ptr* e, unsigned) { return event_create(e); }
API cuEventDestroy_v2(ptr e) { return event_destroy(e); }
API cuEventRecord(ptr, ptr) { return ok; }
API cuEventSynchronize(ptr) { return ok; }
API cuModuleLoadData(ptr* m, const void* image) { return module_load(m, image); }
API cuModuleLoadDataEx(ptr* m, const void* image, unsigned, int*, void**) { return module_load(m, image); }
API cuModuleUnload(ptr m) { return module_unload(m); }
API cuModuleGetFunction(ptr* f, ptr m, const char* name) { return get_function(f, m, name); }
API cuFuncSetAttribute(ptr f, int attribute, int value) {
  return attribute == 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */ ? set_dynamic_shared(f, value) : ok;
}
API cuLaunchKernel(ptr f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem,
                   ptr s, void**, void**) {
  return launch(f, gx, gy, gz, bx, by, bz, smem, s);
}
API cuMemAlloc_v2(devptr* p, std::size_t b) { return *p = dev(std::malloc(b)), ok; }
API cuMemAllocManaged(devptr* p, std::size_t b, unsigned) { return *p = dev(std::malloc(b)), ok; }
API cuMemFree_v2(devptr p) { return std::free(host(p)), ok; }
API cuMemAllocAsync(devptr* p, std::size_t b, ptr) { return ++n.alloc_async, *p = dev(std::malloc(b)), ok; }
API cuMemFreeAsync(devptr p, ptr) { return ++n.free_async, std::free(host(p)), ok; }
API cuMemcpyAsync(devptr d, devptr s, std::size_t b, ptr) { return std::memmove(host(d), host(s), b), ok; }
API cuMemsetD32Async(devptr d, unsigned v, std::size_t c, ptr) {
  for (std::size_t i = 0; i < c; ++i) static_cast<unsigned*>(host(d))[i] = v;
  return ok;
}
API cuMemsetD16Async(devptr d, unsigned short v, std::size_t c, ptr) {
  for (std::size_t i = 0; i < c; ++i) static_cast<unsigned short*>(host(d))[i] = v;
  return ok;
}
API cuMemHostRegister_v2(void*, std::size_t, unsigned) { return ok; }
API cuMemHostUnregister(void*) { return ok; }
API cuGetErrorString(int code, const char** s) { return *s = error_string(code), ok; }

// ---- HIP (a device is always current: device 0 until another is set) ----------------------------
void* hip_current() { return current ? current : (current = &contexts[0]); }
API hipInit(unsigned) { return ++n.hip_init, init(); }
API hipGetDeviceCount(int* c) { return *c = devices, ok; }
API hipSetDevice(int d) { return d >= 0 && d < devices ? (++n.ctx_set, current = &contexts[d], ok) : invalid_device; }
API hipGetDevice(int* d) { return ++n.ctx_get, *d = device_of(hip_current()), ok; }
API hipStreamGetDevice(ptr s, int* d) {
  return ++n.stream_ctx, *d = device_of(s ? static_cast<stream_object*>(s)->context : hip_current()), ok;
}
API hipStreamCreateWithFlags(ptr* s, unsigned) { return hip_current(), stream_create(s); }
API hipStreamDestroy(ptr s) { return stream_destroy(s); }
API hipStreamSynchronize(ptr s) { return stream_sync(s); }
API hipStreamWaitEvent(ptr, ptr, unsigned) { return ok; }
API hipEventCreateWithFlags(ptr* e, unsigned) { return event_create(e); }
API hipEventDestroy(ptr e) { return event_destroy(e); }
API hipEventRecord(ptr, ptr) { return ok; }
API hipEventSynchronize(ptr) { return ok; }
API hipModuleLoadData(ptr* m, const void* image) { return hip_current(), module_load(m, image); }
API hipModuleUnload(ptr m) { return module_unload(m); }
API hipModuleGetFunction(ptr* f, ptr m, const char* name) { return get_function(f, m, name); }
API hipModuleLaunchKernel(ptr f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                          unsigned smem, ptr s, void**, void**) {
  hip_current();
  return launch(f, gx, gy, gz, bx, by, bz, smem, s);
}
API hipMalloc(void** p, std::size_t b) { return *p = std::malloc(b), ok; }
API hipMallocManaged(void** p, std::size_t b, unsigned) { return *p = std::malloc(b), ok; }
API hipFree(void* p) { return std::free(p), ok; }
API hipMallocAsync(void** p, std::size_t b, ptr) { return ++n.alloc_async, *p = std::malloc(b), ok; }
API hipFreeAsync(void* p, ptr) { return ++n.free_async, std::free(p), ok; }
API hipMemcpyAsync(void* d, const void* s, std::size_t b, int, ptr) { return std::memmove(d, s, b), ok; }
API hipMemsetD32Async(void* d, int v, std::size_t c, ptr) {
  for (std::size_t i = 0; i < c; ++i) static_cast<int*>(d)[i] = v;
  return ok;
}
API hipMemsetD16Async(void* d, unsigned short v, std::size_t c, ptr) {
  for (std::size_t i = 0; i < c; ++i) static_cast<unsigned short*>(d)[i] = v;
  return ok;
}
API hipHostRegister(void*, std::size_t, unsigned) { return ok; }
API hipHostUnregister(void*) { return ok; }
extern "C" __attribute__((visibility("default"))) const char* hipGetErrorString(int code) { return error_string(code); }
