// The least any implementation of MLIR's synchronous launch sequence can cost:
// the five mgpu*-shaped calls across a shared library's boundary, each doing
// nothing but what the work needs (the launch and the synchronize, forwarded to
// the driver; the function and the stream made once), with no binding, cache
// or check. A contender for tinyla_launch_overhead: libtinyla_mgpu's host time
// is measured against this floor as well as against the bare driver calls.
#include <dlfcn.h>

#include <cstdint>

namespace {

using ptr = void*;
int (*launch)(ptr, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, ptr, void**, void**);
int (*synchronize)(ptr);
ptr the_function = nullptr, the_stream = nullptr;

}  // namespace

#define FLOOR extern "C" __attribute__((visibility("default")))

// Binds the driver's two calls and the function and stream made once by the caller.
FLOOR bool floor_setup(void* driver, ptr function, ptr stream) {
  launch = reinterpret_cast<decltype(launch)>(dlsym(driver, "cuLaunchKernel"));
  synchronize = reinterpret_cast<decltype(synchronize)>(dlsym(driver, "cuStreamSynchronize"));
  the_function = function, the_stream = stream;
  return launch && synchronize;
}

FLOOR ptr floor_get_function(ptr /*module*/, const char* /*name*/) { return the_function; }
FLOOR ptr floor_stream_create() { return the_stream; }
FLOOR void floor_launch(ptr f, std::intptr_t gx, std::intptr_t gy, std::intptr_t gz, std::intptr_t bx, std::intptr_t by,
                        std::intptr_t bz, std::int32_t shared, ptr s, void** params, void** extra, std::size_t) {
  launch(f, unsigned(gx), unsigned(gy), unsigned(gz), unsigned(bx), unsigned(by), unsigned(bz), unsigned(shared), s,
         params, extra);
}
FLOOR void floor_synchronize(ptr s) { synchronize(s); }
FLOOR void floor_stream_destroy(ptr) {}
