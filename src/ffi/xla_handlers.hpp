// The XLA FFI handlers, once for every platform: thin adapters from XLA
// buffers onto tinyla's C API. Every leading dimension is batch; the last two
// are the matrix (row-major, XLA's default layout), so a (walkers, dets, n, n)
// array is one call. tinyla.jax checks shapes and dtypes at trace time; the
// checks here only turn a misuse of the raw targets into an error instead of a
// wrong read.
//
// A platform supplies Calls: the C API's ops as c_<op><T>(...) members (the
// GPU's bound to XLA's stream), prepare_output(buffer), and why() (a detail
// for an error message). TINYLA_XLA_HANDLERS then defines the symbols
// <prefix><op> that tinyla.jax registers.
#pragma once

#include <complex>
#include <cstdint>
#include <string>

#include "tinyla/tinyla.hpp"
#include "xla/ffi/api/ffi.h"

namespace tinyla::xla_handlers {

namespace ffi = xla::ffi;

struct square_batch {
  std::int64_t batch = 1, n = 0;
};

inline std::string shape_string(ffi::AnyBuffer::Dimensions d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

inline ffi::Error matrices_of(const ffi::AnyBuffer& a, const char* op, square_batch& s) {
  auto d = a.dimensions();
  if (d.size() < 2 || d[d.size() - 1] != d[d.size() - 2])
    return ffi::Error::InvalidArgument(std::string("tinyla_") + op + ": expected shape (..., n, n), got " +
                                       shape_string(d));
  s.n = d[d.size() - 1];
  for (std::size_t i = 0; i + 2 < d.size(); ++i) s.batch *= d[i];
  return ffi::Error::Success();
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

template <class T> T* data(ffi::AnyBuffer& b) { return static_cast<T*>(b.untyped_data()); }
template <class T> const T* data(const ffi::AnyBuffer& b) { return static_cast<const T*>(b.untyped_data()); }

// The shared frame of every handler: a must be (..., n, n); then
// call(T{}, matrices) runs the op for a's element type and its status
// becomes the handler's error.
template <class Calls, class F>
ffi::Error on_matrices(const Calls& calls, const ffi::AnyBuffer& a, const char* op, F&& call) {
  square_batch m;
  if (auto e = matrices_of(a, op, m); e.failure()) return e;
  return by_element_type(a.element_type(), op, [&](auto t) {
    const tinyla_status s = call(t, m);
    if (s == TINYLA_OK) return ffi::Error::Success();
    const std::string why = calls.why();
    return ffi::Error::Internal(std::string("tinyla_") + op + ": " + tinyla_status_string(s) +
                                (why.empty() ? "" : " (" + why + ")"));
  });
}

// Ctx: what the platform's binding passes first (the GPU stream); Calls is
// built from it.
template <class Calls, class... Ctx>
ffi::Error slogdet_impl(Ctx... ctx, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> sign,
                        ffi::Result<ffi::AnyBuffer> logabsdet) {
  const Calls c{ctx...};
  return on_matrices(c, a, "slogdet", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template slogdet<T>(m.batch, m.n, data<T>(a), data<T>(*sign), data<real_t<T>>(*logabsdet));
  });
}

template <class Calls, class... Ctx>
ffi::Error det_impl(Ctx... ctx, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> det) {
  const Calls c{ctx...};
  return on_matrices(c, a, "det", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template det<T>(m.batch, m.n, data<T>(a), data<T>(*det));
  });
}

// Transposed: the inverse is written as (A^-1)^T, what d logabsdet / dA needs.
template <class Calls, bool Transposed, class... Ctx>
ffi::Error inv_impl(Ctx... ctx, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> inverse) {
  const Calls c{ctx...};
  c.prepare_output(*inverse);
  return on_matrices(c, a, Transposed ? "inv_transposed" : "inv", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template inv<T>(m.batch, m.n, data<T>(a), data<T>(*inverse), Transposed);
  });
}

// b and x: (..., n, nrhs) with the same leading dimensions as a.
template <class Calls, class... Ctx>
ffi::Error solve_impl(Ctx... ctx, ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> x) {
  const Calls c{ctx...};
  auto da = a.dimensions(), db = b.dimensions();
  bool same_lead = da.size() >= 2 && db.size() == da.size() && b.element_type() == a.element_type();
  for (std::size_t i = 0; same_lead && i + 1 < da.size(); ++i) same_lead = da[i] == db[i];
  if (!same_lead)
    return ffi::Error::InvalidArgument("tinyla_solve: b must have shape (..., n, nrhs) with a's leading "
                                       "dimensions and element type; got a " +
                                       shape_string(da) + ", b " + shape_string(db));
  c.prepare_output(*x);
  return on_matrices(c, a, "solve", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template solve<T>(m.batch, m.n, db[db.size() - 1], data<T>(a), data<T>(b), data<T>(*x));
  });
}

// Transposed: as for inv_impl.
template <class Calls, bool Transposed, class... Ctx>
ffi::Error slogdet_inv_impl(Ctx... ctx, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> sign,
                            ffi::Result<ffi::AnyBuffer> logabsdet, ffi::Result<ffi::AnyBuffer> inverse) {
  const Calls c{ctx...};
  c.prepare_output(*inverse);
  return on_matrices(c, a, Transposed ? "slogdet_inv_transposed" : "slogdet_inv", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template slogdet_inv<T>(m.batch, m.n, data<T>(a), data<T>(*sign), data<real_t<T>>(*logabsdet),
                                     data<T>(*inverse), Transposed);
  });
}

}  // namespace tinyla::xla_handlers

// Defines the handler symbols prefix<op> for CALLS. BIND: the binding's start
// (ffi::Ffi::Bind(), plus the platform's context); CTX: the context's types,
// parenthesized; TRAITS: the handler traits, parenthesized (may be empty).
#define TINYLA_XLA_RET .Ret<::xla::ffi::AnyBuffer>()
// (Two steps: XLA's macro pastes its arguments with ##, which would keep
// TINYLA_UNPAREN from expanding.)
#define TINYLA_XLA_HANDLER(name, impl, binding, TRAITS) TINYLA_XLA_HANDLER_(name, impl, binding TINYLA_UNPAREN TRAITS)
#define TINYLA_XLA_HANDLER_(name, impl, ...) XLA_FFI_DEFINE_HANDLER_SYMBOL(name, (impl), __VA_ARGS__)
#define TINYLA_XLA_HANDLERS(prefix, CALLS, BIND, CTX, TRAITS)                                                    \
  TINYLA_XLA_HANDLER(prefix##slogdet, (tinyla::xla_handlers::slogdet_impl<CALLS TINYLA_UNPAREN CTX>),          \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET TINYLA_XLA_RET, TRAITS);                   \
  TINYLA_XLA_HANDLER(prefix##det, (tinyla::xla_handlers::det_impl<CALLS TINYLA_UNPAREN CTX>),                  \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);                                  \
  TINYLA_XLA_HANDLER(prefix##inv, (tinyla::xla_handlers::inv_impl<CALLS, false TINYLA_UNPAREN CTX>),           \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);                                  \
  TINYLA_XLA_HANDLER(prefix##inv_transposed, (tinyla::xla_handlers::inv_impl<CALLS, true TINYLA_UNPAREN CTX>), \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);                                  \
  TINYLA_XLA_HANDLER(prefix##solve, (tinyla::xla_handlers::solve_impl<CALLS TINYLA_UNPAREN CTX>),              \
                     BIND.Arg<::xla::ffi::AnyBuffer>().Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);     \
  TINYLA_XLA_HANDLER(prefix##slogdet_inv,                                                                        \
                     (tinyla::xla_handlers::slogdet_inv_impl<CALLS, false TINYLA_UNPAREN CTX>),                 \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET TINYLA_XLA_RET TINYLA_XLA_RET, TRAITS);    \
  TINYLA_XLA_HANDLER(prefix##slogdet_inv_transposed,                                                             \
                     (tinyla::xla_handlers::slogdet_inv_impl<CALLS, true TINYLA_UNPAREN CTX>),                  \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET TINYLA_XLA_RET TINYLA_XLA_RET, TRAITS)
