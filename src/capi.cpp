// C API: validates arguments (nothing is written on TINYLA_INVALID_ARGUMENT),
// then hands the job to the CPU dispatcher.
#include <cstdint>
#include <cstring>
#include <new>

#include "capi_ops.hpp"
#include "cpu/dispatch.hpp"
#include "job.hpp"
#include "tinyla/tinyla.h"

namespace {

using tinyla::dtype;
using tinyla::job;
using tinyla::op;

tinyla_status submit(dtype t, const job& jb) {
  if (tinyla_status s = tinyla::validate(t, jb); s != TINYLA_OK) return s;
  try {
    return tinyla::cpu::execute(t, jb) ? TINYLA_OK : TINYLA_OUT_OF_MEMORY;
  } catch (const std::bad_alloc&) {  // nothing may escape through C
    return TINYLA_OUT_OF_MEMORY;
  }
}

}  // namespace

extern "C" {

const char* tinyla_status_string(tinyla_status s) {
  // A C caller may pass any int: read it as one (a C++ load of an enum outside
  // its values is undefined, and clang's UBSan reports it).
  static_assert(sizeof(tinyla_status) == sizeof(int));
  int code;
  std::memcpy(&code, &s, sizeof code);
  switch (code) {
    case TINYLA_OK: return "ok";
    case TINYLA_INVALID_ARGUMENT: return "invalid argument";
    case TINYLA_UNSUPPORTED: return "unsupported";
    case TINYLA_OUT_OF_MEMORY: return "out of memory";
    case TINYLA_BACKEND_ERROR: return "backend error";
  }
  return "unknown status";
}

void tinyla_set_num_threads(int n) { tinyla::cpu::set_num_threads(n); }
int tinyla_get_num_threads(void) { return tinyla::cpu::num_threads(); }
const char* tinyla_cpu_backend(void) { return tinyla::cpu::current_backend().name; }

TINYLA_DEFINE_OPS(tinyla_, f32, dtype::f32, float, float, submit, (), ())
TINYLA_DEFINE_OPS(tinyla_, f64, dtype::f64, double, double, submit, (), ())
TINYLA_DEFINE_OPS(tinyla_, c64, dtype::c64, void, float, submit, (), ())
TINYLA_DEFINE_OPS(tinyla_, c128, dtype::c128, void, double, submit, (), ())

TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_, f32, dtype::f32, float, submit, (), ())
TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_, f64, dtype::f64, double, submit, (), ())
TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_, c64, dtype::c64, void, submit, (), ())
TINYLA_DEFINE_LOG_DET_LAPLACIAN(tinyla_, c128, dtype::c128, void, submit, (), ())

}  // extern "C"
