// C API: validates arguments (nothing is written on TINYLA_INVALID_ARGUMENT),
// then hands the job to the CPU dispatcher.
#include <climits>
#include <cstdint>

#include "cpu/dispatch.hpp"
#include "tinyla/tinyla.h"

namespace {

using tinyla::cpu::dtype;
using tinyla::cpu::job;
using tinyla::cpu::op;

constexpr int element_bytes(dtype t) {
  switch (t) {
    case dtype::f32: return 4;
    case dtype::f64: return 8;
    case dtype::c64: return 8;
    case dtype::c128: return 16;
  }
  return 0;
}

// count = batch * rows * cols elements, false if it (or its size in bytes)
// does not fit in int64 / size_t.
bool element_count(std::int64_t batch, std::int64_t rows, std::int64_t cols, dtype t, std::int64_t& count) {
  std::int64_t bytes;
  return !__builtin_mul_overflow(batch, rows, &count) && !__builtin_mul_overflow(count, cols, &count) &&
         !__builtin_mul_overflow(count, std::int64_t(element_bytes(t)), &bytes) &&
         std::uint64_t(bytes) <= std::uint64_t(SIZE_MAX);
}

tinyla_status validate(dtype t, const job& jb) {
  // n is also a LAPACK integer on the large-n path.
  if (jb.batch < 0 || jb.n < 0 || jb.n > INT_MAX || jb.nrhs < 0 || jb.nrhs > INT_MAX)
    return TINYLA_INVALID_ARGUMENT;
  std::int64_t a_count, b_count = 0;
  if (!element_count(jb.batch, jb.n, jb.n, t, a_count)) return TINYLA_INVALID_ARGUMENT;
  if (jb.kind == op::solve && !element_count(jb.batch, jb.n, jb.nrhs, t, b_count)) return TINYLA_INVALID_ARGUMENT;
  if (a_count > 0 && !jb.a) return TINYLA_INVALID_ARGUMENT;
  const bool per_matrix = jb.batch > 0;
  switch (jb.kind) {
    case op::slogdet:
      if (per_matrix && (!jb.sign || !jb.logabsdet)) return TINYLA_INVALID_ARGUMENT;
      break;
    case op::det:
      if (per_matrix && !jb.det) return TINYLA_INVALID_ARGUMENT;
      break;
    case op::inv:
      if (a_count > 0 && !jb.x) return TINYLA_INVALID_ARGUMENT;
      break;
    case op::solve:
      if (b_count > 0 && (!jb.b || !jb.x)) return TINYLA_INVALID_ARGUMENT;
      break;
    case op::slogdet_inv:
      if ((per_matrix && (!jb.sign || !jb.logabsdet)) || (a_count > 0 && !jb.x)) return TINYLA_INVALID_ARGUMENT;
      break;
  }
  return TINYLA_OK;
}

tinyla_status submit(dtype t, const job& jb) {
  if (tinyla_status s = validate(t, jb); s != TINYLA_OK) return s;
  return tinyla::cpu::execute(t, jb) ? TINYLA_OK : TINYLA_OUT_OF_MEMORY;
}

}  // namespace

extern "C" {

const char* tinyla_status_string(tinyla_status s) {
  switch (s) {
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

#define TINYLA_DEFINE(sfx, DT, T, R)                                                                      \
  tinyla_status tinyla_slogdet_##sfx(int64_t batch, int64_t n, const T* a, T* sign, R* logabsdet) {      \
    return submit(DT, {op::slogdet, batch, n, 0, a, nullptr, nullptr, sign, logabsdet, nullptr, nullptr}); \
  }                                                                                                       \
  tinyla_status tinyla_det_##sfx(int64_t batch, int64_t n, const T* a, T* det) {                         \
    return submit(DT, {op::det, batch, n, 0, a, nullptr, nullptr, nullptr, nullptr, det, nullptr});      \
  }                                                                                                       \
  tinyla_status tinyla_inv_##sfx(int64_t batch, int64_t n, const T* a, T* inv, int32_t* info) {          \
    return submit(DT, {op::inv, batch, n, 0, a, nullptr, inv, nullptr, nullptr, nullptr, info});         \
  }                                                                                                       \
  tinyla_status tinyla_solve_##sfx(int64_t batch, int64_t n, int64_t nrhs, const T* a, const T* b, T* x, \
                                   int32_t* info) {                                                       \
    return submit(DT, {op::solve, batch, n, nrhs, a, b, x, nullptr, nullptr, nullptr, info});            \
  }                                                                                                       \
  tinyla_status tinyla_slogdet_inv_##sfx(int64_t batch, int64_t n, const T* a, T* sign, R* logabsdet,    \
                                         T* inv) {                                                        \
    return submit(DT, {op::slogdet_inv, batch, n, 0, a, nullptr, inv, sign, logabsdet, nullptr, nullptr}); \
  }                                                                                                       \
  tinyla_status tinyla_inv_transposed_##sfx(int64_t batch, int64_t n, const T* a, T* inv_t, int32_t* info) { \
    return submit(DT, {op::inv, batch, n, 0, a, nullptr, inv_t, nullptr, nullptr, nullptr, info, true});  \
  }                                                                                                       \
  tinyla_status tinyla_slogdet_inv_transposed_##sfx(int64_t batch, int64_t n, const T* a, T* sign,        \
                                                    R* logabsdet, T* inv_t) {                             \
    return submit(DT, {op::slogdet_inv, batch, n, 0, a, nullptr, inv_t, sign, logabsdet, nullptr, nullptr, \
                       true});                                                                            \
  }

TINYLA_DEFINE(f32, dtype::f32, float, float)
TINYLA_DEFINE(f64, dtype::f64, double, double)
TINYLA_DEFINE(c64, dtype::c64, void, float)
TINYLA_DEFINE(c128, dtype::c128, void, double)

}  // extern "C"
