// One validated call of the C API, shared by the CPU and GPU backends: which
// op, the sizes, and the (host or device) pointers. validate() is the C API's
// argument check, the same for every backend.
#pragma once

#include <climits>
#include <cstdint>

#include "tinyla/tinyla.h"
#include "types.hpp"

namespace tinyla {

// log_det_laplacian: derivatives of log det A from A^-T (kernels/log_det_laplacian.hpp); the
// CPU alone runs it, no factorization. adjugate: x = adj(A) (adjugate in kernels/lu.hpp) and
// det.
enum class op : int { slogdet, det, inv, solve, slogdet_inv, log_det_laplacian, adjugate };

// What a factorizing kernel computes: the op's outputs are whichever job pointers are set.
enum class family { determinant, inverse, solve, adjugate };  // slogdet/det, inv/slogdet_inv, solve, adjugate

constexpr family family_of(op kind) {  // of a factorizing op
  switch (kind) {
    case op::solve: return family::solve;
    case op::inv:
    case op::slogdet_inv: return family::inverse;
    case op::adjugate: return family::adjugate;
    default: return family::determinant;
  }
}

// Pointers are to the whole batch; a backend may process any sub-range
// [begin, end) of matrices. Unused outputs are null. Built with designated
// initializers, naming only what the op uses.
struct job {
  op kind = op::slogdet;
  std::int64_t batch = 0, n = 0, nrhs = 0;
  const void* a = nullptr;       // (batch, n, n)
  const void* b = nullptr;       // (batch, n, nrhs) for solve
  void* x = nullptr;             // inverse (batch, n, n) or solution (batch, n, nrhs)
  void* sign = nullptr;          // (batch) real sign or complex phase
  void* logabsdet = nullptr;     // (batch) real
  void* det = nullptr;           // (batch) element type
  std::int32_t* info = nullptr;  // (batch), nullable
  bool transpose_x = false;      // inv / slogdet_inv / adjugate: write x[b][j][i] = (A_b^-1)[i][j] (adj(A_b))
  // log_det_laplacian: a = A^-T, b = the Laplacian of A (batch, n, n), tangents = dA/dx_c
  // (batch, tangent_count, n, n); outputs grad (batch, tangent_count) and laplacian (batch).
  std::int64_t tangent_count = 0;
  const void* tangents = nullptr;
  void* grad = nullptr;
  void* laplacian = nullptr;
  // CPU lane groups: the next group's cache lines are asked for before each group where each
  // of a group's operands takes at most this many bytes (set per CPU by the dispatcher:
  // prefetch_group_bytes).
  std::int64_t prefetch_group_bytes = INT64_MAX;
};

// count = batch * rows * cols elements, false if it (or its size in bytes)
// does not fit in int64 / size_t.
inline bool element_count(std::int64_t batch, std::int64_t rows, std::int64_t cols, dtype t, std::int64_t& count) {
  std::int64_t bytes;
  return !__builtin_mul_overflow(batch, rows, &count) && !__builtin_mul_overflow(count, cols, &count) &&
         !__builtin_mul_overflow(count, std::int64_t(element_bytes(t)), &bytes) &&
         std::uint64_t(bytes) <= std::uint64_t(SIZE_MAX);
}

// TINYLA_OK or TINYLA_INVALID_ARGUMENT (nothing may be written then).
inline tinyla_status validate(dtype t, const job& jb) {
  // n is also a LAPACK integer on the CPU's large-n path.
  if (jb.batch < 0 || jb.n < 0 || jb.n > INT_MAX || jb.nrhs < 0 || jb.nrhs > INT_MAX) return TINYLA_INVALID_ARGUMENT;
  std::int64_t a_count, b_count = 0;
  if (!element_count(jb.batch, jb.n, jb.n, t, a_count)) return TINYLA_INVALID_ARGUMENT;
  if (jb.kind == op::solve && !element_count(jb.batch, jb.n, jb.nrhs, t, b_count)) return TINYLA_INVALID_ARGUMENT;
  std::int64_t tangent_rows, tangent_count = 0, grad_count = 0;
  if (jb.kind == op::log_det_laplacian &&
      (jb.tangent_count < 0 || __builtin_mul_overflow(jb.tangent_count, jb.n, &tangent_rows) ||
       !element_count(jb.batch, tangent_rows, jb.n, t, tangent_count) ||
       !element_count(jb.batch, jb.tangent_count, 1, t, grad_count)))
    return TINYLA_INVALID_ARGUMENT;
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
    case op::adjugate:  // det is optional
      if (a_count > 0 && !jb.x) return TINYLA_INVALID_ARGUMENT;
      break;
    case op::slogdet_inv:
      if ((per_matrix && (!jb.sign || !jb.logabsdet)) || (a_count > 0 && !jb.x)) return TINYLA_INVALID_ARGUMENT;
      break;
    case op::log_det_laplacian:
      if ((a_count > 0 && !jb.b) || (tangent_count > 0 && !jb.tangents) || (grad_count > 0 && !jb.grad) ||
          (per_matrix && !jb.laplacian))
        return TINYLA_INVALID_ARGUMENT;
      break;
  }
  return TINYLA_OK;
}

}  // namespace tinyla
