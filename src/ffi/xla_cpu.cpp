// XLA FFI handlers for the CPU platform (tinyla_xla_<op>): the shared frame of
// xla_handlers.hpp over the C API, on the calling thread's share of tinyla's
// thread pool.
#include <sys/mman.h>

#include "ffi/xla_handlers.hpp"

namespace {

namespace ffi = xla::ffi;
namespace detail = tinyla::detail;
using tinyla::real_t;

struct cpu_calls {
  template <class T> tinyla_status slogdet(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l) const {
    return detail::c_slogdet<T>(b, n, a, s, l);
  }
  template <class T> tinyla_status det(std::int64_t b, std::int64_t n, const T* a, T* d) const {
    return detail::c_det<T>(b, n, a, d);
  }
  template <class T> tinyla_status inv(std::int64_t b, std::int64_t n, const T* a, T* x, bool transposed) const {
    return (transposed ? detail::c_inv_transposed<T> : detail::c_inv<T>)(b, n, a, x, nullptr);
  }
  template <class T>
  tinyla_status solve(std::int64_t b, std::int64_t n, std::int64_t m, const T* a, const T* r, T* x) const {
    return detail::c_solve<T>(b, n, m, a, r, x, nullptr);
  }
  template <class T> tinyla_status slogdet_inv(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l, T* x,
                                               bool transposed) const {
    return (transposed ? detail::c_slogdet_inv_transposed<T> : detail::c_slogdet_inv<T>)(b, n, a, s, l, x);
  }
  template <class T> tinyla_status log_det_laplacian(std::int64_t b, std::int64_t n, std::int64_t k, const T* inv_t,
                                                     const T* lap_a, const T* da, T* grad, T* laplacian) const {
    return detail::c_log_det_laplacian<T>(b, n, k, inv_t, lap_a, da, grad, laplacian);
  }
  template <class T> tinyla_status det_cofactors(std::int64_t b, std::int64_t n, const T* a, T* d, T* cof) const {
    return detail::c_det_cofactors<T>(b, n, a, d, cof);
  }
  static const char* why() { return ""; }

  // XLA's CPU buffers of 32 MiB and more are fresh mmaps (glibc's allocator),
  // so writing a large result costs a page fault per 4 KiB -- as much as the
  // kernel itself for n <= 8. Asking for transparent huge pages on the whole
  // 2 MiB pages inside the buffer cuts that 512-fold where THP is in "madvise"
  // mode; it is advice only and changes no data.
  static void prepare_output(ffi::AnyBuffer& b) {
    constexpr std::uintptr_t huge = 2u << 20;
    if (b.size_bytes() < 4 * huge) return;
    const auto begin = (reinterpret_cast<std::uintptr_t>(b.untyped_data()) + huge - 1) & ~(huge - 1);
    const auto end = (reinterpret_cast<std::uintptr_t>(b.untyped_data()) + b.size_bytes()) & ~(huge - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
  }
};

}  // namespace

// The library is built with hidden visibility; the handler symbols are its interface.
#pragma GCC visibility push(default)
TINYLA_XLA_HANDLERS(tinyla_xla_, cpu_calls, ffi::Ffi::Bind(), (), ());
#pragma GCC visibility pop
