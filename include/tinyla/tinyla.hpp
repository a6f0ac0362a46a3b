// tinyla C++ API: typed, span-based wrappers over the C API (tinyla.h).
//
//   std::vector<double> a(batch * n * n), sign(batch), logabsdet(batch);
//   tinyla::slogdet<double>(a, n, sign, logabsdet);       // outputs sized by the caller
//   auto r = tinyla::slogdet<double>(a, n);                // or returned: r.sign, r.logabsdet
//
// Element types: float, double, std::complex<float>, std::complex<double>.
// The batch size is taken from the spans: a.size() must be batch * n * n (and
// b.size() = batch * n * nrhs for solve), outputs must have matching sizes.
// Errors throw tinyla::error (a std::invalid_argument for bad arguments, with
// the op, the sizes and the status in the message); per-matrix numerical
// results (singular matrices, NaN) are values, as documented in tinyla.h.
#ifndef TINYLA_TINYLA_HPP
#define TINYLA_TINYLA_HPP

#include <complex>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "tinyla/tinyla.h"

namespace tinyla {

template <class T>
concept element = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::complex<float>> ||
                  std::is_same_v<T, std::complex<double>>;

template <class T> struct real_of {
  using type = T;
};
template <class R> struct real_of<std::complex<R>> {
  using type = R;
};
template <class T> using real_t = typename real_of<T>::type;

class error : public std::invalid_argument {
 public:
  error(tinyla_status status, const std::string& what) : std::invalid_argument(what), status_(status) {}
  tinyla_status status() const noexcept { return status_; }

 private:
  tinyla_status status_;
};

namespace detail {

inline void check(tinyla_status s, const char* op, std::int64_t batch, std::int64_t n) {
  if (s != TINYLA_OK)
    throw error(s, std::string("tinyla::") + op + "(batch=" + std::to_string(batch) + ", n=" + std::to_string(n) +
                       "): " + tinyla_status_string(s));
}

inline void require(bool ok, const char* op, const std::string& what) {
  if (!ok) throw error(TINYLA_INVALID_ARGUMENT, std::string("tinyla::") + op + ": " + what);
}

// batch = a.size() / (n * n), checked to divide exactly.
template <class T> std::int64_t batch_of(std::span<const T> a, std::int64_t n, const char* op) {
  require(n >= 0, op, "n = " + std::to_string(n) + " is negative");
  if (n == 0) return -1;  // batch then comes from the outputs
  const std::int64_t nn = n * n;
  require(std::int64_t(a.size()) % nn == 0, op,
          "a has " + std::to_string(a.size()) + " elements, not a multiple of n*n = " + std::to_string(nn));
  return std::int64_t(a.size()) / nn;
}

inline void same_batch(std::int64_t& batch, std::size_t size, const char* op, const char* name) {
  if (batch < 0) batch = std::int64_t(size);
  require(std::int64_t(size) == batch, op,
          std::string(name) + " has " + std::to_string(size) + " elements, expected batch = " + std::to_string(batch));
}

template <class T> auto ptr(T* p) {
  if constexpr (std::is_same_v<std::remove_const_t<T>, std::complex<float>> ||
                std::is_same_v<std::remove_const_t<T>, std::complex<double>>)
    return static_cast<std::conditional_t<std::is_const_v<T>, const void*, void*>>(p);
  else return p;
}

// Calls fn_f32 / fn_f64 / fn_c64 / fn_c128 by T (also used by tinyla/gpu.hpp).
#define TINYLA_DISPATCH_BY_ELEMENT(fn, ...)                                                                            \
  if constexpr (std::is_same_v<T, float>) return fn##_f32(__VA_ARGS__);                                                \
  else if constexpr (std::is_same_v<T, double>) return fn##_f64(__VA_ARGS__);                                          \
  else if constexpr (std::is_same_v<T, std::complex<float>>) return fn##_c64(__VA_ARGS__);                             \
  else return fn##_c128(__VA_ARGS__);

template <class T> tinyla_status c_slogdet(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_slogdet, b, n, ptr(a), ptr(s), l)
}
template <class T> tinyla_status c_det(std::int64_t b, std::int64_t n, const T* a, T* d) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_det, b, n, ptr(a), ptr(d))
}
template <class T> tinyla_status c_inv(std::int64_t b, std::int64_t n, const T* a, T* x, std::int32_t* info) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_inv, b, n, ptr(a), ptr(x), info)
}
template <class T> tinyla_status c_solve(std::int64_t b, std::int64_t n, std::int64_t m, const T* a, const T* r, T* x,
                                         std::int32_t* info) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_solve, b, n, m, ptr(a), ptr(r), ptr(x), info)
}
template <class T> tinyla_status c_slogdet_inv(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l, T* x) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_slogdet_inv, b, n, ptr(a), ptr(s), l, ptr(x))
}
template <class T>
tinyla_status c_inv_transposed(std::int64_t b, std::int64_t n, const T* a, T* x, std::int32_t* info) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_inv_transposed, b, n, ptr(a), ptr(x), info)
}
template <class T>
tinyla_status c_slogdet_inv_transposed(std::int64_t b, std::int64_t n, const T* a, T* s, real_t<T>* l, T* x) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_slogdet_inv_transposed, b, n, ptr(a), ptr(s), l, ptr(x))
}

template <class T> tinyla_status c_log_det_laplacian(std::int64_t b, std::int64_t n, std::int64_t k, const T* inv_t,
                                                     const T* lap_a, const T* da, T* grad, T* laplacian) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_log_det_laplacian, b, n, k, ptr(inv_t), ptr(lap_a), ptr(da), ptr(grad),
                             ptr(laplacian))
}

template <class T> tinyla_status c_det_adjugate(std::int64_t b, std::int64_t n, const T* a, T* d, T* adj) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_det_adjugate, b, n, ptr(a), ptr(d), ptr(adj))
}
template <class T> tinyla_status c_det_cofactors(std::int64_t b, std::int64_t n, const T* a, T* d, T* cof) {
  TINYLA_DISPATCH_BY_ELEMENT(tinyla_det_cofactors, b, n, ptr(a), ptr(d), ptr(cof))
}

}  // namespace detail

// ---- outputs provided by the caller ------------------------------------------------

template <element T>
void slogdet(std::span<const T> a, std::int64_t n, std::span<T> sign, std::span<real_t<T>> logabsdet) {
  std::int64_t batch = detail::batch_of(a, n, "slogdet");
  detail::same_batch(batch, sign.size(), "slogdet", "sign");
  detail::same_batch(batch, logabsdet.size(), "slogdet", "logabsdet");
  detail::check(detail::c_slogdet(batch, n, a.data(), sign.data(), logabsdet.data()), "slogdet", batch, n);
}

template <element T> void det(std::span<const T> a, std::int64_t n, std::span<T> out) {
  std::int64_t batch = detail::batch_of(a, n, "det");
  detail::same_batch(batch, out.size(), "det", "det");
  detail::check(detail::c_det(batch, n, a.data(), out.data()), "det", batch, n);
}

// info (optional: empty span) gets LAPACK getrf's per-matrix info.
template <element T> void inv(std::span<const T> a, std::int64_t n, std::span<T> x, std::span<std::int32_t> info = {}) {
  detail::require(x.size() == a.size(), "inv", "inverse must have as many elements as a");
  const std::int64_t batch = n == 0 ? std::int64_t(info.size()) : detail::batch_of(a, n, "inv");
  if (!info.empty()) detail::require(std::int64_t(info.size()) == batch, "inv", "info must have batch elements");
  detail::check(detail::c_inv(batch, n, a.data(), x.data(), info.empty() ? nullptr : info.data()), "inv", batch, n);
}

template <element T> void solve(std::span<const T> a, std::int64_t n, std::span<const T> b, std::int64_t nrhs,
                                std::span<T> x, std::span<std::int32_t> info = {}) {
  detail::require(nrhs >= 0, "solve", "nrhs = " + std::to_string(nrhs) + " is negative");
  std::int64_t batch = detail::batch_of(a, n, "solve");
  if (batch < 0) batch = std::int64_t(info.size());
  detail::require(
      std::int64_t(b.size()) == batch * n * nrhs, "solve",
      "b has " + std::to_string(b.size()) + " elements, expected batch*n*nrhs = " + std::to_string(batch * n * nrhs));
  detail::require(x.size() == b.size(), "solve", "x must have as many elements as b");
  if (!info.empty()) detail::require(std::int64_t(info.size()) == batch, "solve", "info must have batch elements");
  detail::check(detail::c_solve(batch, n, nrhs, a.data(), b.data(), x.data(), info.empty() ? nullptr : info.data()),
                "solve", batch, n);
}

template <element T> void slogdet_inv(std::span<const T> a, std::int64_t n, std::span<T> sign,
                                      std::span<real_t<T>> logabsdet, std::span<T> x) {
  std::int64_t batch = detail::batch_of(a, n, "slogdet_inv");
  detail::same_batch(batch, sign.size(), "slogdet_inv", "sign");
  detail::same_batch(batch, logabsdet.size(), "slogdet_inv", "logabsdet");
  detail::require(x.size() == a.size(), "slogdet_inv", "inverse must have as many elements as a");
  detail::check(detail::c_slogdet_inv(batch, n, a.data(), sign.data(), logabsdet.data(), x.data()), "slogdet_inv",
                batch, n);
}

// tinyla.h's det_adjugate (det_cofactors with cofactors = true: adj(A)^T, d det / dA); det
// optional (empty span).
template <element T>
void det_adjugate(std::span<const T> a, std::int64_t n, std::span<T> det, std::span<T> adj, bool cofactors = false) {
  const char* op = cofactors ? "det_cofactors" : "det_adjugate";
  std::int64_t batch = detail::batch_of(a, n, op);
  if (!det.empty()) detail::same_batch(batch, det.size(), op, "det");
  if (batch < 0) batch = 0;  // n = 0 without det: nothing to write
  detail::require(adj.size() == a.size(), op, "adj must have as many elements as a");
  T* d = det.empty() ? nullptr : det.data();
  detail::check((cofactors ? detail::c_det_cofactors<T> : detail::c_det_adjugate<T>)(batch, n, a.data(), d, adj.data()),
                op, batch, n);
}

// tinyla.h's log_det_laplacian: inv_t = A^-T and lap_a (batch, n, n), da (batch, k, n, n) ->
// grad (batch, k), laplacian (batch).
template <element T> void log_det_laplacian(std::span<const T> inv_t, std::span<const T> lap_a, std::span<const T> da,
                                            std::int64_t n, std::int64_t k, std::span<T> grad, std::span<T> laplacian) {
  const char* op = "log_det_laplacian";
  detail::require(k >= 0, op, "k = " + std::to_string(k) + " is negative");
  std::int64_t batch = detail::batch_of(inv_t, n, op);
  detail::same_batch(batch, laplacian.size(), op, "laplacian");
  detail::require(lap_a.size() == inv_t.size(), op, "lap_a must have as many elements as inv_t");
  detail::require(std::int64_t(da.size()) == std::int64_t(inv_t.size()) * k, op,
                  "da has " + std::to_string(da.size()) +
                      " elements, expected batch*k*n*n = " + std::to_string(std::int64_t(inv_t.size()) * k));
  detail::require(std::int64_t(grad.size()) == batch * k, op, "grad must have batch*k elements");
  detail::check(
      detail::c_log_det_laplacian(batch, n, k, inv_t.data(), lap_a.data(), da.data(), grad.data(), laplacian.data()),
      op, batch, n);
}

// ---- results returned ------------------------------------------------------------------
// (n must be > 0 here: with n = 0 the batch size cannot be read off a.)

template <element T> struct slogdet_result {
  std::vector<T> sign;
  std::vector<real_t<T>> logabsdet;
};
template <element T> struct inv_result {
  std::vector<T> inverse;
  std::vector<std::int32_t> info;
};
template <element T> struct slogdet_inv_result {
  std::vector<T> sign;
  std::vector<real_t<T>> logabsdet;
  std::vector<T> inverse;
};

template <element T> slogdet_result<T> slogdet(std::span<const T> a, std::int64_t n) {
  detail::require(n > 0, "slogdet", "the returning overload needs n > 0");
  const auto batch = std::size_t(detail::batch_of(a, n, "slogdet"));
  slogdet_result<T> r{std::vector<T>(batch), std::vector<real_t<T>>(batch)};
  slogdet<T>(a, n, r.sign, r.logabsdet);
  return r;
}
template <element T> std::vector<T> det(std::span<const T> a, std::int64_t n) {
  detail::require(n > 0, "det", "the returning overload needs n > 0");
  std::vector<T> d(std::size_t(detail::batch_of(a, n, "det")));
  det<T>(a, n, d);
  return d;
}
template <element T> inv_result<T> inv(std::span<const T> a, std::int64_t n) {
  detail::require(n > 0, "inv", "the returning overload needs n > 0");
  inv_result<T> r{std::vector<T>(a.size()), std::vector<std::int32_t>(std::size_t(detail::batch_of(a, n, "inv")))};
  inv<T>(a, n, r.inverse, r.info);
  return r;
}
template <element T> slogdet_inv_result<T> slogdet_inv(std::span<const T> a, std::int64_t n) {
  detail::require(n > 0, "slogdet_inv", "the returning overload needs n > 0");
  const auto batch = std::size_t(detail::batch_of(a, n, "slogdet_inv"));
  slogdet_inv_result<T> r{std::vector<T>(batch), std::vector<real_t<T>>(batch), std::vector<T>(a.size())};
  slogdet_inv<T>(a, n, r.sign, r.logabsdet, r.inverse);
  return r;
}

}  // namespace tinyla

#endif  // TINYLA_TINYLA_HPP
