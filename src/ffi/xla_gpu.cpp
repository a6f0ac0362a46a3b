// XLA FFI handlers for the CUDA and ROCM platforms (tinyla_xla_<op>, in
// libtinyla_xla_cuda / libtinyla_xla_rocm): the shared frame of
// xla_handlers.hpp over the GPU C API (tinyla_gpu.h), on the stream XLA
// passes. They enqueue and return (no synchronization, no allocation outside
// the stream's order), so XLA may capture them in command buffers (CUDA graphs).
// Plain C++: the vendor is the GPU library this is linked with.
#include "ffi/xla_handlers.hpp"
#include "tinyla/gpu.hpp"

namespace {

namespace ffi = xla::ffi;
namespace detail = tinyla::gpu::detail;
using tinyla::real_t;

struct gpu_calls {
  void* stream;
  template <class T> tinyla_status slogdet(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l) const {
    return detail::c_slogdet<T>(b, n, a, s, l, stream);
  }
  template <class T> tinyla_status det(std::int64_t b, std::int64_t n, const T* a, T* d) const {
    return detail::c_det<T>(b, n, a, d, stream);
  }
  template <class T> tinyla_status inv(std::int64_t b, std::int64_t n, const T* a, T* x, bool transposed) const {
    return (transposed ? detail::c_inv_transposed<T> : detail::c_inv<T>)(b, n, a, x, nullptr, stream);
  }
  template <class T>
  tinyla_status solve(std::int64_t b, std::int64_t n, std::int64_t m, const T* a, const T* r, T* x) const {
    return detail::c_solve<T>(b, n, m, a, r, x, nullptr, stream);
  }
  template <class T> tinyla_status slogdet_inv(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l, T* x,
                                               bool transposed) const {
    return (transposed ? detail::c_slogdet_inv_transposed<T> : detail::c_slogdet_inv<T>)(b, n, a, s, l, x, stream);
  }
  template <class T> tinyla_status det_cofactors(std::int64_t b, std::int64_t n, const T* a, T* d, T* cof) const {
    return detail::c_det_cofactors<T>(b, n, a, d, cof, stream);
  }
  template <class T> tinyla_status log_det_laplacian(std::int64_t b, std::int64_t n, std::int64_t k, const T* inv_t,
                                                     const T* lap_a, const T* da, T* grad, T* laplacian) const {
    return detail::c_log_det_laplacian<T>(b, n, k, inv_t, lap_a, da, grad, laplacian, stream);
  }
  static const char* why() { return tinyla_gpu_last_error(); }
  static void prepare_output(ffi::AnyBuffer&) {}
};

}  // namespace

#pragma GCC visibility push(default)
TINYLA_XLA_HANDLERS(tinyla_xla_, gpu_calls, ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>(), (, void*),
                    (, {ffi::Traits::kCmdBufferCompatible}));
#pragma GCC visibility pop
