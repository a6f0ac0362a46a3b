// The XLA FFI handlers, once for every platform: thin adapters from XLA
// buffers onto tinyla's C API. Every leading dimension is batch; the last two
// are the matrix (row-major, XLA's default layout), so a (walkers, dets, n, n)
// array is one call. tinyla.jax checks shapes and dtypes at trace time; the
// checks here (operands and results) turn a misuse of the raw targets into an
// error instead of a wrong read or write.
//
// A platform supplies Calls: the C API's ops as c_<op><T>(...) members (the
// GPU's bound to XLA's stream), prepare_output(buffer), and why() (a detail
// for an error message). TINYLA_XLA_HANDLERS then defines the symbols
// <prefix><op> that tinyla.jax registers.
#pragma once

#include <complex>
#include <cstdint>
#include <initializer_list>
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

inline const char* type_name(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F64: return "float64";
    case ffi::DataType::C64: return "complex64";
    case ffi::DataType::C128: return "complex128";
    default: return "another element type";
  }
}

inline ffi::DataType real_type(ffi::DataType t) {
  return t == ffi::DataType::C64 ? ffi::DataType::F32 : t == ffi::DataType::C128 ? ffi::DataType::F64 : t;
}

// What an output must be: `like`'s first `rank` dimensions (all of them, or the
// batch only) and the element type `type`.
struct output_spec {
  const ffi::AnyBuffer& buffer;
  const char* name;
  ffi::AnyBuffer::Dimensions like;
  std::size_t rank;
  ffi::DataType type;
};

// The targets are registered process-wide (jax.ffi.ffi_call reaches them with any result
// shapes), and a smaller buffer than the op writes would be written past its end, so every
// output is checked as XLA's own handlers do. An `a` of rank < 2 is reported by on_matrices.
inline ffi::Error check_outputs(const ffi::AnyBuffer& a, const char* op, std::initializer_list<output_spec> outputs) {
  if (a.dimensions().size() < 2) return ffi::Error::Success();
  for (const output_spec& o : outputs) {
    const auto d = o.buffer.dimensions();
    bool ok = o.buffer.element_type() == o.type && d.size() == o.rank && o.like.size() >= o.rank;
    for (std::size_t i = 0; ok && i < o.rank; ++i) ok = d[i] == o.like[i];
    if (!ok) {
      std::string want = "(";
      for (std::size_t i = 0; i < o.rank; ++i) want += (i ? ", " : "") + std::to_string(o.like[i]);
      want += o.rank == 1 ? ",)" : ")";
      return ffi::Error::InvalidArgument(std::string("tinyla_") + op + ": result " + o.name + " must be " +
                                         type_name(o.type) + " of shape " + want + ", got " +
                                         type_name(o.buffer.element_type()) + " of shape " + shape_string(d));
    }
  }
  return ffi::Error::Success();
}

// The outputs of the slogdet-family: sign (a's type) and logabsdet (its real type), per matrix.
inline output_spec sign_output(const ffi::AnyBuffer& a, const ffi::AnyBuffer& sign) {
  return {sign, "sign", a.dimensions(), a.dimensions().size() - 2, a.element_type()};
}
inline output_spec logabsdet_output(const ffi::AnyBuffer& a, const ffi::AnyBuffer& logabsdet) {
  return {logabsdet, "logabsdet", a.dimensions(), a.dimensions().size() - 2, real_type(a.element_type())};
}
inline output_spec matrices_output(const ffi::AnyBuffer& a, const ffi::AnyBuffer& x, const char* name) {
  return {x, name, a.dimensions(), a.dimensions().size(), a.element_type()};
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
template <class Calls, class... Ctx> ffi::Error slogdet_impl(Ctx... ctx, ffi::AnyBuffer a,
                                                             ffi::Result<ffi::AnyBuffer> sign,
                                                             ffi::Result<ffi::AnyBuffer> logabsdet) {
  const Calls c{ctx...};
  if (auto e = check_outputs(a, "slogdet", {sign_output(a, *sign), logabsdet_output(a, *logabsdet)}); e.failure())
    return e;
  return on_matrices(c, a, "slogdet", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template slogdet<T>(m.batch, m.n, data<T>(a), data<T>(*sign), data<real_t<T>>(*logabsdet));
  });
}

template <class Calls, class... Ctx>
ffi::Error det_impl(Ctx... ctx, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> det) {
  const Calls c{ctx...};
  if (auto e = check_outputs(a, "det", {{*det, "det", a.dimensions(), a.dimensions().size() - 2, a.element_type()}});
      e.failure())
    return e;
  return on_matrices(c, a, "det", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template det<T>(m.batch, m.n, data<T>(a), data<T>(*det));
  });
}

// Transposed: the inverse is written as (A^-1)^T, what d logabsdet / dA needs.
template <class Calls, bool Transposed, class... Ctx>
ffi::Error inv_impl(Ctx... ctx, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> inverse) {
  const Calls c{ctx...};
  const char* op = Transposed ? "inv_transposed" : "inv";
  if (auto e = check_outputs(a, op, {matrices_output(a, *inverse, "inverse")}); e.failure()) return e;
  c.prepare_output(*inverse);
  return on_matrices(c, a, op, [&](auto t, square_batch m) {
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
    return ffi::Error::InvalidArgument(
        "tinyla_solve: b must have shape (..., n, nrhs) with a's leading "
        "dimensions and element type; got a " +
        shape_string(da) + ", b " + shape_string(db));
  if (auto e = check_outputs(a, "solve", {matrices_output(b, *x, "x")}); e.failure()) return e;
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
  const char* op = Transposed ? "slogdet_inv_transposed" : "slogdet_inv";
  if (auto e = check_outputs(
          a, op, {sign_output(a, *sign), logabsdet_output(a, *logabsdet), matrices_output(a, *inverse, "inverse")});
      e.failure())
    return e;
  c.prepare_output(*inverse);
  return on_matrices(c, a, op, [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template slogdet_inv<T>(m.batch, m.n, data<T>(a), data<T>(*sign), data<real_t<T>>(*logabsdet),
                                     data<T>(*inverse), Transposed);
  });
}

// a -> det (...) and the cofactor matrix adj(A)^T (..., n, n): the C API's det_cofactors.
template <class Calls, class... Ctx> ffi::Error det_cofactors_impl(Ctx... ctx, ffi::AnyBuffer a,
                                                                   ffi::Result<ffi::AnyBuffer> det,
                                                                   ffi::Result<ffi::AnyBuffer> cofactors) {
  const Calls c{ctx...};
  if (auto e = check_outputs(a, "det_cofactors",
                             {{*det, "det", a.dimensions(), a.dimensions().size() - 2, a.element_type()},
                              matrices_output(a, *cofactors, "cofactors")});
      e.failure())
    return e;
  c.prepare_output(*cofactors);
  return on_matrices(c, a, "det_cofactors", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template det_cofactors<T>(m.batch, m.n, data<T>(a), data<T>(*det), data<T>(*cofactors));
  });
}

// inv_t = A^-T and lap_a (..., n, n), da (..., k, n, n) -> grad (..., k), laplacian (...): the
// C API's log_det_laplacian (on a GPU n <= 32: tinyla.jax lowers larger n to its jnp form).
template <class Calls, class... Ctx>
ffi::Error log_det_laplacian_impl(Ctx... ctx, ffi::AnyBuffer inv_t, ffi::AnyBuffer lap_a, ffi::AnyBuffer da,
                                  ffi::Result<ffi::AnyBuffer> grad, ffi::Result<ffi::AnyBuffer> laplacian) {
  const Calls c{ctx...};
  const auto di = inv_t.dimensions(), dl = lap_a.dimensions(), dd = da.dimensions();
  bool ok = di.size() >= 2 && dl.size() == di.size() && dd.size() == di.size() + 1 &&
            lap_a.element_type() == inv_t.element_type() && da.element_type() == inv_t.element_type();
  for (std::size_t i = 0; ok && i < di.size(); ++i) ok = dl[i] == di[i];
  for (std::size_t i = 0; ok && i + 2 < di.size(); ++i) ok = dd[i] == di[i];
  for (std::size_t i = di.size() - 2; ok && i < di.size(); ++i) ok = dd[i + 1] == di[i];
  if (!ok)
    return ffi::Error::InvalidArgument(
        "tinyla_log_det_laplacian: expected inv_t and lap_a of shape (..., n, n) and da (..., k, n, n) of one "
        "element type; got " +
        shape_string(di) + ", " + shape_string(dl) + ", " + shape_string(dd));
  if (auto e = check_outputs(inv_t, "log_det_laplacian",
                             {{*grad, "grad", dd, dd.size() - 2, inv_t.element_type()},
                              {*laplacian, "laplacian", di, di.size() - 2, inv_t.element_type()}});
      e.failure())
    return e;
  const std::int64_t k = dd.size() >= 3 ? dd[dd.size() - 3] : 0;
  return on_matrices(c, inv_t, "log_det_laplacian", [&](auto t, square_batch m) {
    using T = decltype(t);
    return c.template log_det_laplacian<T>(m.batch, m.n, k, data<T>(inv_t), data<T>(lap_a), data<T>(da), data<T>(*grad),
                                           data<T>(*laplacian));
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
#define TINYLA_XLA_HANDLERS(prefix, CALLS, BIND, CTX, TRAITS)                                                          \
  TINYLA_XLA_HANDLER(prefix##slogdet, (tinyla::xla_handlers::slogdet_impl<CALLS TINYLA_UNPAREN CTX>),                  \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET TINYLA_XLA_RET, TRAITS);                         \
  TINYLA_XLA_HANDLER(prefix##det, (tinyla::xla_handlers::det_impl<CALLS TINYLA_UNPAREN CTX>),                          \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);                                        \
  TINYLA_XLA_HANDLER(prefix##inv, (tinyla::xla_handlers::inv_impl<CALLS, false TINYLA_UNPAREN CTX>),                   \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);                                        \
  TINYLA_XLA_HANDLER(prefix##inv_transposed, (tinyla::xla_handlers::inv_impl<CALLS, true TINYLA_UNPAREN CTX>),         \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);                                        \
  TINYLA_XLA_HANDLER(prefix##solve, (tinyla::xla_handlers::solve_impl<CALLS TINYLA_UNPAREN CTX>),                      \
                     BIND.Arg<::xla::ffi::AnyBuffer>().Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET, TRAITS);           \
  TINYLA_XLA_HANDLER(prefix##slogdet_inv, (tinyla::xla_handlers::slogdet_inv_impl<CALLS, false TINYLA_UNPAREN CTX>),   \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET TINYLA_XLA_RET TINYLA_XLA_RET, TRAITS);          \
  TINYLA_XLA_HANDLER(prefix##slogdet_inv_transposed,                                                                   \
                     (tinyla::xla_handlers::slogdet_inv_impl<CALLS, true TINYLA_UNPAREN CTX>),                         \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET TINYLA_XLA_RET TINYLA_XLA_RET, TRAITS);          \
  TINYLA_XLA_HANDLER(prefix##det_cofactors, (tinyla::xla_handlers::det_cofactors_impl<CALLS TINYLA_UNPAREN CTX>),      \
                     BIND.Arg<::xla::ffi::AnyBuffer>() TINYLA_XLA_RET TINYLA_XLA_RET, TRAITS);                         \
  TINYLA_XLA_HANDLER(prefix##log_det_laplacian,                                                                        \
                     (tinyla::xla_handlers::log_det_laplacian_impl<CALLS TINYLA_UNPAREN CTX>),                         \
                     BIND.Arg<::xla::ffi::AnyBuffer>().Arg<::xla::ffi::AnyBuffer>().Arg<::xla::ffi::AnyBuffer>()       \
                         TINYLA_XLA_RET TINYLA_XLA_RET,                                                                \
                     TRAITS)
