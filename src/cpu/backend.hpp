// Internal interface between the C API (validation, threading, dispatch) and
// the per-ISA CPU backends (packing lanes, running src/kernels).
#pragma once

#include <array>
#include <cstdint>

#include "job.hpp"

namespace tinyla::cpu {

using tinyla::dtype;
using tinyla::dtype_count;
using tinyla::job;
using tinyla::op;

using range_fn = void (*)(const job&, std::int64_t begin, std::int64_t end);

// Largest n served by the SIMD fast path; larger n go to LAPACK.
inline constexpr int max_fast_n = 32;

struct backend_table {
  const char* name;                       // "avx512", "avx2", "vec128" (SSE4.2 or NEON), "scalar"
  std::array<range_fn, dtype_count> run;  // indexed by dtype; n <= max_fast_n only
};

// Defined in backend_isa.cpp, once per ISA built into this library (the build
// defines TINYLA_HAVE_<ISA> for each; scalar is always there).
extern const backend_table table_scalar;
extern const backend_table table_vec128;
extern const backend_table table_avx2;
extern const backend_table table_avx512;

// The entries of an ISA's table, range_<isa>_<dtype>: backend_isa.cpp is
// compiled once per ISA and dtype, and each object defines one.
#define TINYLA_RANGE2(isa, t) range_##isa##_##t
#define TINYLA_RANGE(isa, t) TINYLA_RANGE2(isa, t)
#define TINYLA_DECLARE_RANGES(isa)                                                                                     \
  void TINYLA_RANGE(isa, f32)(const job&, std::int64_t begin, std::int64_t end);                                       \
  void TINYLA_RANGE(isa, f64)(const job&, std::int64_t begin, std::int64_t end);                                       \
  void TINYLA_RANGE(isa, c64)(const job&, std::int64_t begin, std::int64_t end);                                       \
  void TINYLA_RANGE(isa, c128)(const job&, std::int64_t begin, std::int64_t end);

// Where range_<isa>_<dtype> leaves n to the larger sizes' kernels, compiled as an object of
// their own (backend_isa.cpp, CMakeLists.txt): large_range_<isa>_<dtype>.
#define TINYLA_LARGE_RANGE2(isa, t) large_range_##isa##_##t
#define TINYLA_LARGE_RANGE(isa, t) TINYLA_LARGE_RANGE2(isa, t)

// Large-n path (LAPACK getrf/getri/getrs per matrix), lapack_fallback.cpp.
void run_lapack(dtype t, const job& jb, std::int64_t begin, std::int64_t end);

}  // namespace tinyla::cpu
