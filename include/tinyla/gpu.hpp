// tinyla on the GPU, C++: the ops of tinyla.hpp on device pointers, enqueued on
// a stream (cudaStream_t / hipStream_t passed as void*; nullptr = the default
// stream). Nothing synchronizes: results (info included, in device memory) are
// ready when the stream is. Link libtinyla_cuda or libtinyla_hip
// (CMake: tinyla::tinyla_cuda / tinyla::tinyla_hip).
//
//   double *a, *sign, *logabsdet;            // device arrays: (batch, n, n), (batch), (batch)
//   tinyla::gpu::slogdet(batch, n, a, sign, logabsdet, stream);
//
// Layout, conventions and bits are those of the CPU backend (tinyla.h). Errors
// throw tinyla::error with the op, the sizes, the status and the runtime's
// message (tinyla_gpu.h lists when each status occurs).
#ifndef TINYLA_GPU_HPP
#define TINYLA_GPU_HPP

#include "tinyla/tinyla.hpp"
#include "tinyla/tinyla_gpu.h"

namespace tinyla::gpu {

namespace detail {

using tinyla::detail::ptr;

inline void check(tinyla_status s, const char* op, std::int64_t batch, std::int64_t n) {
  if (s == TINYLA_OK) return;
  const std::string why = tinyla_gpu_last_error();
  throw error(s, std::string("tinyla::gpu::") + op + "(batch=" + std::to_string(batch) + ", n=" + std::to_string(n) +
                     "): " + tinyla_status_string(s) + (why.empty() ? "" : " (" + why + ")"));
}

template <class T> tinyla_status c_slogdet(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_slogdet, b, n, ptr(a), ptr(s), l, st)
}
template <class T> tinyla_status c_det(std::int64_t b, std::int64_t n, const T* a, T* d, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_det, b, n, ptr(a), ptr(d), st)
}
template <class T> tinyla_status c_inv(std::int64_t b, std::int64_t n, const T* a, T* x, std::int32_t* info, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_inv, b, n, ptr(a), ptr(x), info, st)
}
template <class T>
tinyla_status c_inv_transposed(std::int64_t b, std::int64_t n, const T* a, T* x, std::int32_t* info, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_inv_transposed, b, n, ptr(a), ptr(x), info, st)
}
template <class T> tinyla_status c_solve(std::int64_t b, std::int64_t n, std::int64_t m, const T* a, const T* r, T* x,
                                         std::int32_t* info, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_solve, b, n, m, ptr(a), ptr(r), ptr(x), info, st)
}
template <class T>
tinyla_status c_slogdet_inv(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l, T* x, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_slogdet_inv, b, n, ptr(a), ptr(s), l, ptr(x), st)
}
template <class T>
tinyla_status c_slogdet_inv_transposed(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l, T* x, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_slogdet_inv_transposed, b, n, ptr(a), ptr(s), l, ptr(x), st)
}
template <class T> tinyla_status c_det_adjugate(std::int64_t b, std::int64_t n, const T* a, T* d, T* adj, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_det_adjugate, b, n, ptr(a), ptr(d), ptr(adj), st)
}
template <class T> tinyla_status c_det_cofactors(std::int64_t b, std::int64_t n, const T* a, T* d, T* cof, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_det_cofactors, b, n, ptr(a), ptr(d), ptr(cof), st)
}
template <class T> tinyla_status c_log_det_laplacian(std::int64_t b, std::int64_t n, std::int64_t k, const T* inv_t,
                                                     const T* lap_a, const T* da, T* grad, T* laplacian, void* st) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_gpu_log_det_laplacian, b, n, k, ptr(inv_t), ptr(lap_a), ptr(da), ptr(grad),
                             ptr(laplacian), st)
}

}  // namespace detail

template <element T>
void slogdet(std::int64_t batch, std::int64_t n, const T* a, T* sign, real_t<T>* logabsdet, void* stream = nullptr) {
  detail::check(detail::c_slogdet(batch, n, a, sign, logabsdet, stream), "slogdet", batch, n);
}
template <element T> void det(std::int64_t batch, std::int64_t n, const T* a, T* d, void* stream = nullptr) {
  detail::check(detail::c_det(batch, n, a, d, stream), "det", batch, n);
}
// info (nullable, device memory): LAPACK getrf's per-matrix info.
template <element T>
void inv(std::int64_t batch, std::int64_t n, const T* a, T* x, std::int32_t* info = nullptr, void* stream = nullptr) {
  detail::check(detail::c_inv(batch, n, a, x, info, stream), "inv", batch, n);
}
// x = (A^-1)^T, bit for bit the transpose of inv's result.
template <element T> void inv_transposed(std::int64_t batch, std::int64_t n, const T* a, T* x,
                                         std::int32_t* info = nullptr, void* stream = nullptr) {
  detail::check(detail::c_inv_transposed(batch, n, a, x, info, stream), "inv_transposed", batch, n);
}
// b, x: (batch, n, nrhs).
template <element T> void solve(std::int64_t batch, std::int64_t n, std::int64_t nrhs, const T* a, const T* b, T* x,
                                std::int32_t* info = nullptr, void* stream = nullptr) {
  detail::check(detail::c_solve(batch, n, nrhs, a, b, x, info, stream), "solve", batch, n);
}
template <element T> void slogdet_inv(std::int64_t batch, std::int64_t n, const T* a, T* sign, real_t<T>* logabsdet,
                                      T* x, void* stream = nullptr) {
  detail::check(detail::c_slogdet_inv(batch, n, a, sign, logabsdet, x, stream), "slogdet_inv", batch, n);
}
template <element T> void slogdet_inv_transposed(std::int64_t batch, std::int64_t n, const T* a, T* sign,
                                                 real_t<T>* logabsdet, T* x, void* stream = nullptr) {
  detail::check(detail::c_slogdet_inv_transposed(batch, n, a, sign, logabsdet, x, stream), "slogdet_inv_transposed",
                batch, n);
}
// adj = adj(A) (cofactors: adj(A)^T = d det / dA), det (nullable) = det A: tinyla.h's det_adjugate.
template <element T> void det_adjugate(std::int64_t batch, std::int64_t n, const T* a, T* det, T* adj,
                                       bool cofactors = false, void* stream = nullptr) {
  detail::check((cofactors ? detail::c_det_cofactors<T> : detail::c_det_adjugate<T>)(batch, n, a, det, adj, stream),
                cofactors ? "det_cofactors" : "det_adjugate", batch, n);
}
// tinyla.h's log_det_laplacian on device pointers, n <= 32: grad (batch, tangents) and laplacian
// (batch) from inv_t = A^-T, lap_a (batch, n, n) and da (batch, tangents, n, n).
template <element T> void log_det_laplacian(std::int64_t batch, std::int64_t n, std::int64_t tangents, const T* inv_t,
                                            const T* lap_a, const T* da, T* grad, T* laplacian,
                                            void* stream = nullptr) {
  detail::check(detail::c_log_det_laplacian(batch, n, tangents, inv_t, lap_a, da, grad, laplacian, stream),
                "log_det_laplacian", batch, n);
}

}  // namespace tinyla::gpu

#endif  // TINYLA_GPU_HPP
