// Defines the C API's entry points for one element type: each builds a job
// and hands it to SUBMIT(dtype, job EXTRA_ARGS). Shared by the CPU API
// (tinyla.h) and the GPU API (tinyla_gpu.h, EXTRA = the stream).
#pragma once

#include "job.hpp"

#define TINYLA_DEFINE_OPS(prefix, sfx, DT, T, R, SUBMIT, EXTRA_PARAMS, EXTRA_ARGS)                        \
  tinyla_status prefix##slogdet_##sfx(int64_t batch, int64_t n, const T* a, T* sign,                      \
                                      R* logabsdet TINYLA_UNPAREN EXTRA_PARAMS) {                         \
    return SUBMIT(DT, {op::slogdet, batch, n, 0, a, nullptr, nullptr, sign, logabsdet, nullptr, nullptr}  \
                  TINYLA_UNPAREN EXTRA_ARGS);                                                             \
  }                                                                                                       \
  tinyla_status prefix##det_##sfx(int64_t batch, int64_t n, const T* a, T* det TINYLA_UNPAREN EXTRA_PARAMS) { \
    return SUBMIT(DT, {op::det, batch, n, 0, a, nullptr, nullptr, nullptr, nullptr, det, nullptr}         \
                  TINYLA_UNPAREN EXTRA_ARGS);                                                             \
  }                                                                                                       \
  tinyla_status prefix##inv_##sfx(int64_t batch, int64_t n, const T* a, T* inv,                           \
                                  int32_t* info TINYLA_UNPAREN EXTRA_PARAMS) {                            \
    return SUBMIT(DT, {op::inv, batch, n, 0, a, nullptr, inv, nullptr, nullptr, nullptr, info}            \
                  TINYLA_UNPAREN EXTRA_ARGS);                                                             \
  }                                                                                                       \
  tinyla_status prefix##solve_##sfx(int64_t batch, int64_t n, int64_t nrhs, const T* a, const T* b, T* x, \
                                    int32_t* info TINYLA_UNPAREN EXTRA_PARAMS) {                          \
    return SUBMIT(DT, {op::solve, batch, n, nrhs, a, b, x, nullptr, nullptr, nullptr, info}               \
                  TINYLA_UNPAREN EXTRA_ARGS);                                                             \
  }                                                                                                       \
  tinyla_status prefix##slogdet_inv_##sfx(int64_t batch, int64_t n, const T* a, T* sign, R* logabsdet,    \
                                          T* inv TINYLA_UNPAREN EXTRA_PARAMS) {                           \
    return SUBMIT(DT, {op::slogdet_inv, batch, n, 0, a, nullptr, inv, sign, logabsdet, nullptr, nullptr}  \
                  TINYLA_UNPAREN EXTRA_ARGS);                                                             \
  }                                                                                                       \
  tinyla_status prefix##inv_transposed_##sfx(int64_t batch, int64_t n, const T* a, T* inv_t,              \
                                             int32_t* info TINYLA_UNPAREN EXTRA_PARAMS) {                 \
    return SUBMIT(DT, {op::inv, batch, n, 0, a, nullptr, inv_t, nullptr, nullptr, nullptr, info, true}    \
                  TINYLA_UNPAREN EXTRA_ARGS);                                                             \
  }                                                                                                       \
  tinyla_status prefix##slogdet_inv_transposed_##sfx(int64_t batch, int64_t n, const T* a, T* sign,       \
                                                     R* logabsdet, T* inv_t TINYLA_UNPAREN EXTRA_PARAMS) { \
    return SUBMIT(DT, {op::slogdet_inv, batch, n, 0, a, nullptr, inv_t, sign, logabsdet, nullptr, nullptr, \
                       true} TINYLA_UNPAREN EXTRA_ARGS);                                                  \
  }
