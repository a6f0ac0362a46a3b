// Host time per launch of MLIR's launch sequence through libtinyla_mgpu
// (mgpuModuleGetFunction, mgpuStreamCreate, mgpuLaunchKernel,
// mgpuStreamSynchronize, mgpuStreamDestroy) against two contenders on the
// stand-in driver, whose calls cost next to nothing, so that what remains is
// the runtime's own overhead: the bare driver path the work needs
// (cuLaunchKernel + cuStreamSynchronize), and the floor of the ABI: the same
// five calls into a library that does nothing but forward the two
// (mgpu_floor.cpp). Rounds of 1000 launches, the contenders interleaved, best of
// 30; prints the ratios (scripts/test runs it: a benchmark, not a test).
// With NVIDIA's driver instead of the stand-in, the same on a GPU: an empty kernel's
// launch and round trip (scripts/gpu-check; TINYLA_MGPU_POOL=0 for MLIR's own pattern).
//   TINYLA_GPU_DRIVER=<stand-in or libcuda.so.1> tinyla_launch_overhead
// TINYLA_MGPU_FLOOR names the floor library where the build folder's is not at hand.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "mgpu/mgpu.h"

namespace {

using ptr = void*;
struct driver {
  int (*init)(unsigned);
  int (*primary_context)(ptr*, int);
  int (*set_current)(ptr);
  int (*load)(ptr*, const void*);
  int (*get_function)(ptr*, ptr, const char*);
  int (*stream_create)(ptr*, unsigned);
  int (*launch)(ptr, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, ptr, void**, void**);
  int (*synchronize)(ptr);
};

template <class F> void bind(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) std::fprintf(stderr, "launch_overhead: the driver has no %s\n", name), std::exit(1);
}

template <class Body> double best_ns_per_launch(Body body, int launches) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i) body();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / launches;
}

struct floor_library {  // mgpu_floor.cpp
  bool (*setup)(void*, ptr, ptr);
  ptr (*get_function)(ptr, const char*);
  ptr (*stream_create)();
  void (*launch)(ptr, std::intptr_t, std::intptr_t, std::intptr_t, std::intptr_t, std::intptr_t, std::intptr_t,
                 std::int32_t, ptr, void**, void**, std::size_t);
  void (*synchronize)(ptr);
  void (*stream_destroy)(ptr);
};

// An empty kernel (the stand-in only counts calls; a real driver compiles and runs it).
const char ptx[] = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry kernel()\n{\n  ret;\n}\n";

}  // namespace

int main() {
  const char* path = std::getenv("TINYLA_GPU_DRIVER");
  void* lib = path ? dlopen(path, RTLD_NOW) : nullptr;
  if (!lib) return std::fprintf(stderr, "launch_overhead: set TINYLA_GPU_DRIVER to the stand-in or CUDA driver\n"), 1;
  driver d{};
  bind(lib, d.init, "cuInit"), bind(lib, d.primary_context, "cuDevicePrimaryCtxRetain");
  bind(lib, d.set_current, "cuCtxSetCurrent"), bind(lib, d.load, "cuModuleLoadData");
  bind(lib, d.get_function, "cuModuleGetFunction"), bind(lib, d.stream_create, "cuStreamCreate");
  bind(lib, d.launch, "cuLaunchKernel"), bind(lib, d.synchronize, "cuStreamSynchronize");

  // The bare path: a context, a module, a function and a stream, made once.
  ptr context = nullptr, module = nullptr, function = nullptr, stream = nullptr;
  if (d.init(0) || d.primary_context(&context, 0) || d.set_current(context) || d.load(&module, ptx) ||
      d.get_function(&function, module, "kernel") || d.stream_create(&stream, 0))
    return std::fprintf(stderr, "launch_overhead: the driver refused the set-up\n"), 1;
  const char* floor_path = std::getenv("TINYLA_MGPU_FLOOR");
  void* floor_lib = dlopen(floor_path ? floor_path : TINYLA_MGPU_FLOOR, RTLD_NOW);
  if (!floor_lib) return std::fprintf(stderr, "launch_overhead: %s\n", dlerror()), 1;
  floor_library fl{};
  bind(floor_lib, fl.setup, "floor_setup"), bind(floor_lib, fl.get_function, "floor_get_function");
  bind(floor_lib, fl.stream_create, "floor_stream_create"), bind(floor_lib, fl.launch, "floor_launch");
  bind(floor_lib, fl.synchronize, "floor_synchronize"), bind(floor_lib, fl.stream_destroy, "floor_stream_destroy");
  if (!fl.setup(lib, function, stream)) return std::fprintf(stderr, "launch_overhead: floor_setup failed\n"), 1;
  void* mlir_module = mgpuModuleLoad(const_cast<char*>(ptx), sizeof ptx);
  if (!mlir_module) return std::fprintf(stderr, "launch_overhead: mgpuModuleLoad failed\n"), 1;

  auto bare = [&] {
    d.launch(function, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr);
    d.synchronize(stream);
  };
  auto floor = [&] {  // the same five calls, doing only the work
    void* f = fl.get_function(mlir_module, "kernel");
    void* s = fl.stream_create();
    fl.launch(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr, 0);
    fl.synchronize(s);
    fl.stream_destroy(s);
  };
  auto mlir = [&] {  // what MLIR 22 emits per gpu.launch_func with a synchronous wait
    void* f = mgpuModuleGetFunction(mlir_module, "kernel");
    void* s = mgpuStreamCreate();
    mgpuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr, 0);
    mgpuStreamSynchronize(s);
    mgpuStreamDestroy(s);
  };
  constexpr int launches = 1000, rounds = 30;
  double best_bare = 1e300, best_floor = 1e300, best_mlir = 1e300;
  for (int r = 0; r < rounds; ++r) {
    best_bare = std::min(best_bare, best_ns_per_launch(bare, launches));
    best_floor = std::min(best_floor, best_ns_per_launch(floor, launches));
    best_mlir = std::min(best_mlir, best_ns_per_launch(mlir, launches));
  }
  std::printf("time per launch on %s (best of %d rounds of %d):\n", path, rounds, launches);
  std::printf("  bare driver (cuLaunchKernel + cuStreamSynchronize):        %7.1f ns\n", best_bare);
  std::printf("  the ABI's floor (5 mgpu*-shaped calls forwarding the two): %7.1f ns  (%.2fx the bare path)\n",
              best_floor, best_floor / best_bare);
  std::printf(
      "  MLIR's sequence through libtinyla_mgpu (5 mgpu* calls):    %7.1f ns  (%.2fx the bare path, %.2fx the floor)\n",
      best_mlir, best_mlir / best_bare, best_mlir / best_floor);
  std::printf("  %s\n", tinyla_mgpu_stats());
  return 0;
}
