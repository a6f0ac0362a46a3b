// Defines the C API's entry points for one element type: each builds a job
// and hands it to SUBMIT(dtype, job EXTRA_ARGS). Shared by the CPU API
// (tinyla.h) and the GPU API (tinyla_gpu.h, EXTRA = the stream).
#pragma once

#include "job.hpp"

#define TINYLA_DEFINE_OPS(prefix, sfx, DT, T, R, SUBMIT, EXTRA_PARAMS, EXTRA_ARGS)                                     \
  tinyla_status prefix##slogdet_##sfx(int64_t batch, int64_t n, const T* a, T* sign,                                   \
                                      R* logabsdet TINYLA_UNPAREN EXTRA_PARAMS) {                                      \
    return SUBMIT(                                                                                                     \
        DT, {.kind = op::slogdet, .batch = batch, .n = n, .a = a, .sign = sign, .logabsdet = logabsdet} TINYLA_UNPAREN \
                EXTRA_ARGS);                                                                                           \
  }                                                                                                                    \
  tinyla_status prefix##det_##sfx(int64_t batch, int64_t n, const T* a, T* det TINYLA_UNPAREN EXTRA_PARAMS) {          \
    return SUBMIT(DT, {.kind = op::det, .batch = batch, .n = n, .a = a, .det = det} TINYLA_UNPAREN EXTRA_ARGS);        \
  }                                                                                                                    \
  tinyla_status prefix##inv_##sfx(int64_t batch, int64_t n, const T* a, T* inv,                                        \
                                  int32_t* info TINYLA_UNPAREN EXTRA_PARAMS) {                                         \
    return SUBMIT(                                                                                                     \
        DT, {.kind = op::inv, .batch = batch, .n = n, .a = a, .x = inv, .info = info} TINYLA_UNPAREN EXTRA_ARGS);      \
  }                                                                                                                    \
  tinyla_status prefix##solve_##sfx(int64_t batch, int64_t n, int64_t nrhs, const T* a, const T* b, T* x,              \
                                    int32_t* info TINYLA_UNPAREN EXTRA_PARAMS) {                                       \
    return SUBMIT(                                                                                                     \
        DT,                                                                                                            \
        {.kind = op::solve, .batch = batch, .n = n, .nrhs = nrhs, .a = a, .b = b, .x = x, .info = info} TINYLA_UNPAREN \
            EXTRA_ARGS);                                                                                               \
  }                                                                                                                    \
  tinyla_status prefix##slogdet_inv_##sfx(int64_t batch, int64_t n, const T* a, T* sign, R* logabsdet,                 \
                                          T* inv TINYLA_UNPAREN EXTRA_PARAMS) {                                        \
    return SUBMIT(DT, {.kind = op::slogdet_inv,                                                                        \
                       .batch = batch,                                                                                 \
                       .n = n,                                                                                         \
                       .a = a,                                                                                         \
                       .x = inv,                                                                                       \
                       .sign = sign,                                                                                   \
                       .logabsdet = logabsdet} TINYLA_UNPAREN EXTRA_ARGS);                                             \
  }                                                                                                                    \
  tinyla_status prefix##inv_transposed_##sfx(int64_t batch, int64_t n, const T* a, T* inv_t,                           \
                                             int32_t* info TINYLA_UNPAREN EXTRA_PARAMS) {                              \
    return SUBMIT(DT, {.kind = op::inv,                                                                                \
                       .batch = batch,                                                                                 \
                       .n = n,                                                                                         \
                       .a = a,                                                                                         \
                       .x = inv_t,                                                                                     \
                       .info = info,                                                                                   \
                       .transpose_x = true} TINYLA_UNPAREN EXTRA_ARGS);                                                \
  }                                                                                                                    \
  tinyla_status prefix##slogdet_inv_transposed_##sfx(int64_t batch, int64_t n, const T* a, T* sign, R* logabsdet,      \
                                                     T* inv_t TINYLA_UNPAREN EXTRA_PARAMS) {                           \
    return SUBMIT(DT, {.kind = op::slogdet_inv,                                                                        \
                       .batch = batch,                                                                                 \
                       .n = n,                                                                                         \
                       .a = a,                                                                                         \
                       .x = inv_t,                                                                                     \
                       .sign = sign,                                                                                   \
                       .logabsdet = logabsdet,                                                                         \
                       .transpose_x = true} TINYLA_UNPAREN EXTRA_ARGS);                                                \
  }                                                                                                                    \
  tinyla_status prefix##det_adjugate_##sfx(int64_t batch, int64_t n, const T* a, T* det,                               \
                                           T* adj TINYLA_UNPAREN EXTRA_PARAMS) {                                       \
    return SUBMIT(                                                                                                     \
        DT, {.kind = op::adjugate, .batch = batch, .n = n, .a = a, .x = adj, .det = det} TINYLA_UNPAREN EXTRA_ARGS);   \
  }                                                                                                                    \
  tinyla_status prefix##det_cofactors_##sfx(int64_t batch, int64_t n, const T* a, T* det,                              \
                                            T* cof TINYLA_UNPAREN EXTRA_PARAMS) {                                      \
    return SUBMIT(DT, {.kind = op::adjugate,                                                                           \
                       .batch = batch,                                                                                 \
                       .n = n,                                                                                         \
                       .a = a,                                                                                         \
                       .x = cof,                                                                                       \
                       .det = det,                                                                                     \
                       .transpose_x = true} TINYLA_UNPAREN EXTRA_ARGS);                                                \
  }

// log_det_laplacian's entry point (tinyla.h; tinyla_gpu.h with the stream).
#define TINYLA_DEFINE_LOG_DET_LAPLACIAN(prefix, sfx, DT, E, SUBMIT, EXTRA_PARAMS, EXTRA_ARGS)                          \
  tinyla_status prefix##log_det_laplacian_##sfx(int64_t batch, int64_t n, int64_t tangents, const E* inv_t,            \
                                                const E* lap_a, const E* da, E* grad,                                  \
                                                E* laplacian TINYLA_UNPAREN EXTRA_PARAMS) {                            \
    return SUBMIT(DT, {.kind = op::log_det_laplacian,                                                                  \
                       .batch = batch,                                                                                 \
                       .n = n,                                                                                         \
                       .a = inv_t,                                                                                     \
                       .b = lap_a,                                                                                     \
                       .tangent_count = tangents,                                                                      \
                       .tangents = da,                                                                                 \
                       .grad = grad,                                                                                   \
                       .laplacian = laplacian} TINYLA_UNPAREN EXTRA_ARGS);                                             \
  }
