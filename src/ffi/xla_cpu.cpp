// XLA FFI handlers for the CPU platform: thin adapters from XLA buffers onto the
// C API. Every leading dimension is batch; the last two are the matrix (row-major,
// XLA's default layout), so a (walkers, dets, n, n) array is one call.
// tinyla.jax checks shapes and dtypes at trace time; the checks here only turn a
// misuse of the raw targets into an error instead of a wrong read.
#include <sys/mman.h>

#include <complex>
#include <cstdint>
#include <string>

#include "tinyla/tinyla.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

struct square_batch {
  std::int64_t batch = 1, n = 0;
};

std::string shape_string(ffi::AnyBuffer::Dimensions d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

ffi::Error matrices_of(const ffi::AnyBuffer& a, const char* op, square_batch& s) {
  auto d = a.dimensions();
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    return ffi::Error::InvalidArgument(std::string("tinyla_") + op + ": expected shape (..., n, n), got " +
                                       shape_string(d));
  s.n = d[d.size() - 1];
  for (std::size_t i = 0; i + 2 < d.size(); ++i) s.batch *= d[i];
  return ffi::Error::Success();
}

ffi::Error checked(tinyla_status s, const char* op) {
  if (s == TINYLA_OK) return ffi::Error::Success();
  return ffi::Error::Internal(std::string("tinyla_") + op + ": " + tinyla_status_string(s));
}

// Calls f(T{}) with T the element type of `t`.
template <class F> ffi::Error by_element_type(ffi::DataType t, const char* op, F&& f) {
  switch (t) {
    case ffi::DataType::F32: return f(float{});
    case ffi::DataType::F64: return f(double{});
    case ffi::DataType::C64: return f(std::complex<float>{});
    case ffi::DataType::C128: return f(std::complex<double>{});
    default:
      return ffi::Error::InvalidArgument(std::string("tinyla_") + op +
                                         ": element type must be float32, float64, complex64 or complex128");
  }
}

// XLA's CPU buffers of 32 MiB and more are fresh mmaps (glibc's allocator), so
// writing a large result costs a page fault per 4 KiB -- as much as the kernel
// itself for n <= 8. Asking for transparent huge pages on the whole 2 MiB pages
// inside the buffer cuts that 512-fold where THP is in "madvise" mode; it is
// advice only and changes no data.
void prefer_huge_pages(ffi::AnyBuffer& b) {
  constexpr std::uintptr_t huge = 2u << 20;
  if (b.size_bytes() < 4 * huge) return;
  const auto begin = (reinterpret_cast<std::uintptr_t>(b.untyped_data()) + huge - 1) & ~(huge - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(b.untyped_data()) + b.size_bytes()) & ~(huge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

template <class T> T* data(ffi::AnyBuffer& b) { return static_cast<T*>(b.untyped_data()); }
template <class T> const T* data(const ffi::AnyBuffer& b) { return static_cast<const T*>(b.untyped_data()); }

// The shared frame of every handler: a must be (..., n, n); then
// call(T{}, matrices) runs the C API for a's element type and its status
// becomes the handler's error.
template <class F> ffi::Error on_matrices(const ffi::AnyBuffer& a, const char* op, F&& call) {
  square_batch m;
  if (auto e = matrices_of(a, op, m); e.failure()) return e;
  return by_element_type(a.element_type(), op, [&](auto t) { return checked(call(t, m), op); });
}

ffi::Error slogdet_impl(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> sign, ffi::Result<ffi::AnyBuffer> logabsdet) {
  return on_matrices(a, "slogdet", [&](auto t, square_batch m) {
    using T = decltype(t);
    return tinyla::detail::c_slogdet<T>(m.batch, m.n, data<T>(a), data<T>(*sign), data<tinyla::real_t<T>>(*logabsdet));
  });
}

ffi::Error det_impl(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> det) {
  return on_matrices(a, "det", [&](auto t, square_batch m) {
    using T = decltype(t);
    return tinyla::detail::c_det<T>(m.batch, m.n, data<T>(a), data<T>(*det));
  });
}

// Transposed: the inverse is written as (A^-1)^T, what d logabsdet / dA needs.
template <bool Transposed> ffi::Error inv_impl(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> inverse) {
  prefer_huge_pages(*inverse);
  return on_matrices(a, Transposed ? "inv_transposed" : "inv", [&](auto t, square_batch m) {
    using T = decltype(t);
    auto fn = Transposed ? tinyla::detail::c_inv_transposed<T> : tinyla::detail::c_inv<T>;
    return fn(m.batch, m.n, data<T>(a), data<T>(*inverse), nullptr);
  });
}

// b and x: (..., n, nrhs) with the same leading dimensions as a.
ffi::Error solve_impl(ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> x) {
  auto da = a.dimensions(), db = b.dimensions();
  bool same_lead = da.size() >= 2 && db.size() == da.size() && b.element_type() == a.element_type();
  for (std::size_t i = 0; same_lead && i + 1 < da.size(); ++i) same_lead = da[i] == db[i];
  if (!same_lead)
    return ffi::Error::InvalidArgument("tinyla_solve: b must have shape (..., n, nrhs) with a's leading "
                                       "dimensions and element type; got a " +
                                       shape_string(da) + ", b " + shape_string(db));
  prefer_huge_pages(*x);
  return on_matrices(a, "solve", [&](auto t, square_batch m) {
    using T = decltype(t);
    return tinyla::detail::c_solve<T>(m.batch, m.n, db[db.size() - 1], data<T>(a), data<T>(b), data<T>(*x), nullptr);
  });
}

// Transposed: as for inv_impl.
template <bool Transposed>
ffi::Error slogdet_inv_impl(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> sign, ffi::Result<ffi::AnyBuffer> logabsdet,
                            ffi::Result<ffi::AnyBuffer> inverse) {
  prefer_huge_pages(*inverse);
  return on_matrices(a, Transposed ? "slogdet_inv_transposed" : "slogdet_inv", [&](auto t, square_batch m) {
    using T = decltype(t);
    auto fn = Transposed ? tinyla::detail::c_slogdet_inv_transposed<T> : tinyla::detail::c_slogdet_inv<T>;
    return fn(m.batch, m.n, data<T>(a), data<T>(*sign), data<tinyla::real_t<T>>(*logabsdet), data<T>(*inverse));
  });
}

}  // namespace

// The library is built with hidden visibility; the handler symbols are its interface.
#pragma GCC visibility push(default)

// Bindings: every operand and result is an AnyBuffer; by_element_type picks the kernels.
#define TINYLA_BIND_1_TO(results) ffi::Ffi::Bind().Arg<ffi::AnyBuffer>() results
#define TINYLA_RET .Ret<ffi::AnyBuffer>()
XLA_FFI_DEFINE_HANDLER_SYMBOL(tinyla_xla_slogdet, slogdet_impl, TINYLA_BIND_1_TO(TINYLA_RET TINYLA_RET));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tinyla_xla_det, det_impl, TINYLA_BIND_1_TO(TINYLA_RET));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tinyla_xla_inv, inv_impl<false>, TINYLA_BIND_1_TO(TINYLA_RET));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tinyla_xla_inv_transposed, inv_impl<true>, TINYLA_BIND_1_TO(TINYLA_RET));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tinyla_xla_solve, solve_impl,
                              ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Arg<ffi::AnyBuffer>() TINYLA_RET);
XLA_FFI_DEFINE_HANDLER_SYMBOL(tinyla_xla_slogdet_inv, slogdet_inv_impl<false>,
                              TINYLA_BIND_1_TO(TINYLA_RET TINYLA_RET TINYLA_RET));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tinyla_xla_slogdet_inv_transposed, slogdet_inv_impl<true>,
                              TINYLA_BIND_1_TO(TINYLA_RET TINYLA_RET TINYLA_RET));
#pragma GCC visibility pop
