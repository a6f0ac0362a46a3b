// Independent references for the tests: a long-double LU with partial
// pivoting written here from the textbook (not from src/kernels), LAPACK
// called per matrix, typed wrappers over the C API, and matrix generators.
#pragma once

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "tinyla/tinyla.h"
#include "types.hpp"

namespace ref {

template <class T> struct real_of {
  using type = T;
};
template <class R> struct real_of<std::complex<R>> {
  using type = R;
};
template <class T> using real_t = typename real_of<T>::type;
template <class T> constexpr bool is_complex = !std::is_same_v<T, real_t<T>>;

template <class T> using wide_t = std::conditional_t<is_complex<T>, std::complex<long double>, long double>;

template <class T> real_t<T> eps() { return std::numeric_limits<real_t<T>>::epsilon(); }

// The largest n the size sweeps reach: TINYLA_TEST_MAX_N, which the sanitizer run in CI sets
// lower (its O(n^4..5) long-double references are most of its time past that).
inline int test_max_n() {
  const char* env = std::getenv("TINYLA_TEST_MAX_N");
  return env ? std::atoi(env) : 40;
}
template <class T> std::string type_name() { return tinyla::type_info<T>::name; }

template <class T> bool isnan_any(T x) {
  if constexpr (is_complex<T>) return std::isnan(x.real()) || std::isnan(x.imag());
  else return std::isnan(x);
}

// LAPACK's pivot magnitude.
template <class T> auto mag1(T x) {
  if constexpr (is_complex<T>) return std::abs(x.real()) + std::abs(x.imag());
  else return std::abs(x);
}

// ---- long-double reference -----------------------------------------------------

template <class T> struct wide_result {
  wide_t<T> sign;              // +-1 / unit phase / 0
  long double logabs;          // -inf if singular
  std::vector<wide_t<T>> inv;  // empty if singular
};

// Gaussian elimination with partial pivoting on [A | I] in long double.
template <class T> wide_result<T> wide_lu(const T* a, int n, bool want_inverse) {
  using W = wide_t<T>;
  std::vector<W> m(size_t(n) * n), x;
  for (int i = 0; i < n * n; ++i) m[i] = W(a[i]);
  if (want_inverse) {
    x.assign(size_t(n) * n, W(0));
    for (int i = 0; i < n; ++i) x[size_t(i) * n + i] = W(1);
  }
  W sign = W(1);
  long double logabs = 0;
  for (int k = 0; k < n; ++k) {
    int p = k;
    for (int i = k + 1; i < n; ++i)
      if (mag1(m[size_t(i) * n + k]) > mag1(m[size_t(p) * n + k])) p = i;
    if (m[size_t(p) * n + k] == W(0)) return {W(0), -std::numeric_limits<long double>::infinity(), {}};
    if (p != k) {
      sign = -sign;
      for (int j = 0; j < n; ++j) std::swap(m[size_t(k) * n + j], m[size_t(p) * n + j]);
      if (want_inverse)
        for (int j = 0; j < n; ++j) std::swap(x[size_t(k) * n + j], x[size_t(p) * n + j]);
    }
    const W piv = m[size_t(k) * n + k];
    const long double a_piv = std::abs(piv);
    sign *= piv / a_piv;
    logabs += std::log(a_piv);
    for (int i = k + 1; i < n; ++i) {
      const W l = m[size_t(i) * n + k] / piv;
      for (int j = k + 1; j < n; ++j) m[size_t(i) * n + j] -= l * m[size_t(k) * n + j];
      if (want_inverse)
        for (int j = 0; j < n; ++j) x[size_t(i) * n + j] -= l * x[size_t(k) * n + j];
    }
  }
  if (want_inverse)
    for (int i = n - 1; i >= 0; --i)
      for (int j = 0; j < n; ++j) {
        W s = x[size_t(i) * n + j];
        for (int c = i + 1; c < n; ++c) s -= m[size_t(i) * n + c] * x[size_t(c) * n + j];
        x[size_t(i) * n + j] = s / m[size_t(i) * n + i];
      }
  return {sign, logabs, std::move(x)};
}

// Relative Frobenius error of x[off, off + count) against ref.
template <class T>
long double rel_err_F(const std::vector<T>& x, const std::vector<wide_t<T>>& ref, size_t off, size_t count) {
  long double num = 0, den = 0;
  for (size_t i = 0; i < count; ++i) {
    num += std::norm(wide_t<T>(x[off + i]) - ref[i]);
    den += std::norm(ref[i]);
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// ---- LAPACK per matrix (row pivoting of A itself: transposed into column-major) ----

extern "C" {
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void cgetrf_(const int*, const int*, std::complex<float>*, const int*, int*, int*);
void zgetrf_(const int*, const int*, std::complex<double>*, const int*, int*, int*);
void sgetri_(const int*, float*, const int*, const int*, float*, const int*, int*);
void dgetri_(const int*, double*, const int*, const int*, double*, const int*, int*);
void cgetri_(const int*, std::complex<float>*, const int*, const int*, std::complex<float>*, const int*, int*);
void zgetri_(const int*, std::complex<double>*, const int*, const int*, std::complex<double>*, const int*, int*);
}
inline void getrf(int n, float* a, int* p, int* info) { sgetrf_(&n, &n, a, &n, p, info); }
inline void getrf(int n, double* a, int* p, int* info) { dgetrf_(&n, &n, a, &n, p, info); }
inline void getrf(int n, std::complex<float>* a, int* p, int* info) { cgetrf_(&n, &n, a, &n, p, info); }
inline void getrf(int n, std::complex<double>* a, int* p, int* info) { zgetrf_(&n, &n, a, &n, p, info); }
template <class T> void getri(int n, T* a, const int* p, int* info) {
  std::vector<T> work(size_t(64) * n + 1);
  const int lw = int(work.size());
  if constexpr (std::is_same_v<T, float>) sgetri_(&n, a, &n, p, work.data(), &lw, info);
  else if constexpr (std::is_same_v<T, double>) dgetri_(&n, a, &n, p, work.data(), &lw, info);
  else if constexpr (std::is_same_v<T, std::complex<float>>) cgetri_(&n, a, &n, p, work.data(), &lw, info);
  else zgetri_(&n, a, &n, p, work.data(), &lw, info);
}

template <class T> struct lapack_result {
  T sign;
  real_t<T> logabs;  // numpy's way: sum of log|u_ii|
  int info;
  std::vector<T> inv;  // row-major; empty if singular
};

template <class T> lapack_result<T> lapack_lu(const T* a, int n, bool want_inverse) {
  std::vector<T> cm(size_t(n) * n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) cm[size_t(j) * n + i] = a[size_t(i) * n + j];
  std::vector<int> piv(std::max(n, 1));
  int info = 0;
  if (n > 0) getrf(n, cm.data(), piv.data(), &info);
  T sign = T(1);
  real_t<T> logabs = 0;
  for (int i = 0; i < n; ++i) {
    const T u = cm[size_t(i) * n + i];
    if (piv[i] != i + 1) sign = -sign;
    const real_t<T> au = std::abs(u);
    if (au != 0) sign *= u / au;
    logabs += std::log(au);
  }
  if (info > 0) sign = T(0);
  std::vector<T> inv;
  if (want_inverse && info == 0 && n > 0) {
    int info2 = 0;
    getri(n, cm.data(), piv.data(), &info2);
    inv.resize(size_t(n) * n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) inv[size_t(i) * n + j] = cm[size_t(j) * n + i];
  }
  return {sign, logabs, info, std::move(inv)};
}

// ---- typed wrappers over the C API -----------------------------------------------

#define REF_BIND(T, R, sfx)                                                                                            \
  inline tinyla_status slogdet(int64_t b, int64_t n, const T* a, T* s, R* l) {                                         \
    return tinyla_slogdet_##sfx(b, n, a, s, l);                                                                        \
  }                                                                                                                    \
  inline tinyla_status det(int64_t b, int64_t n, const T* a, T* d) { return tinyla_det_##sfx(b, n, a, d); }            \
  inline tinyla_status inv(int64_t b, int64_t n, const T* a, T* x, int32_t* info) {                                    \
    return tinyla_inv_##sfx(b, n, a, x, info);                                                                         \
  }                                                                                                                    \
  inline tinyla_status solve(int64_t b, int64_t n, int64_t m, const T* a, const T* r, T* x, int32_t* info) {           \
    return tinyla_solve_##sfx(b, n, m, a, r, x, info);                                                                 \
  }                                                                                                                    \
  inline tinyla_status slogdet_inv(int64_t b, int64_t n, const T* a, T* s, R* l, T* x) {                               \
    return tinyla_slogdet_inv_##sfx(b, n, a, s, l, x);                                                                 \
  }                                                                                                                    \
  inline tinyla_status inv_transposed(int64_t b, int64_t n, const T* a, T* x, int32_t* info) {                         \
    return tinyla_inv_transposed_##sfx(b, n, a, x, info);                                                              \
  }                                                                                                                    \
  inline tinyla_status slogdet_inv_transposed(int64_t b, int64_t n, const T* a, T* s, R* l, T* x) {                    \
    return tinyla_slogdet_inv_transposed_##sfx(b, n, a, s, l, x);                                                      \
  }                                                                                                                    \
  inline tinyla_status log_det_laplacian(int64_t b, int64_t n, int64_t k, const T* g, const T* h, const T* d, T* grad, \
                                         T* lap) {                                                                     \
    return tinyla_log_det_laplacian_##sfx(b, n, k, g, h, d, grad, lap);                                                \
  }                                                                                                                    \
  inline tinyla_status det_adjugate(int64_t b, int64_t n, const T* a, T* d, T* adj) {                                  \
    return tinyla_det_adjugate_##sfx(b, n, a, d, adj);                                                                 \
  }
REF_BIND(float, float, f32)
REF_BIND(double, double, f64)
REF_BIND(std::complex<float>, float, c64)
REF_BIND(std::complex<double>, double, c128)
#undef REF_BIND

// ---- generators -----------------------------------------------------------------------

enum class kind { random, hilbert, nearly_singular, scaled_huge, scaled_tiny, row_scaled, diag_dominant };
inline const char* kind_name(kind k) {
  switch (k) {
    case kind::random: return "random";
    case kind::hilbert: return "hilbert";
    case kind::nearly_singular: return "nearly_singular";
    case kind::scaled_huge: return "scaled_huge";
    case kind::scaled_tiny: return "scaled_tiny";
    case kind::row_scaled: return "row_scaled";
    case kind::diag_dominant: return "diag_dominant";
  }
  return "";
}

// Scale for the scaled cases: entries of magnitude 1e+-300 (double) or
// 1e+-35 (float), where det itself is far out of range at n = 32.
template <class T> real_t<T> big_scale() {
  return std::is_same_v<real_t<T>, double> ? real_t<T>(1e300) : real_t<T>(1e35);
}

template <class T> T random_entry(std::mt19937_64& g) {
  std::uniform_real_distribution<real_t<T>> u(-1, 1);
  if constexpr (is_complex<T>) return T(u(g), u(g));
  else return u(g);
}

template <class T> std::vector<T> make_batch(kind k, int64_t batch, int n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<T> a(size_t(batch) * n * n);
  for (auto& v : a) v = random_entry<T>(g);
  for (int64_t b = 0; b < batch; ++b) {
    T* m = a.data() + b * n * n;
    switch (k) {
      case kind::random: break;
      case kind::hilbert:  // cond grows like e^(3.5 n); perturbed so pivots vary
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j)
            m[i * n + j] = T(real_t<T>(1) / real_t<T>(i + j + 1)) * T(1 + 1e-3 * std::real(m[i * n + j]));
        break;
      case kind::nearly_singular:  // last row = sum of the others + 1e-6 (float) / 1e-10 noise
        if (n >= 2)
          for (int j = 0; j < n; ++j) {
            T s = 0;
            for (int i = 0; i < n - 1; ++i) s += m[i * n + j];
            m[(n - 1) * n + j] =
                s + (std::is_same_v<real_t<T>, double> ? real_t<T>(1e-10) : real_t<T>(1e-4)) * m[(n - 1) * n + j];
          }
        break;
      case kind::scaled_huge:
        for (int i = 0; i < n * n; ++i) m[i] *= big_scale<T>();
        break;
      case kind::scaled_tiny:
        for (int i = 0; i < n * n; ++i) m[i] /= big_scale<T>();
        break;
      case kind::row_scaled: {  // each row by 2^k for random k in [-60, 60]
        std::uniform_int_distribution<int> e(-60, 60);
        for (int i = 0; i < n; ++i) {
          const real_t<T> s = std::ldexp(real_t<T>(1), e(g));
          for (int j = 0; j < n; ++j) m[i * n + j] *= s;
        }
        break;
      }
      case kind::diag_dominant:
        for (int i = 0; i < n; ++i) m[i * n + i] += T(real_t<T>(n));
        break;
    }
  }
  return a;
}

}  // namespace ref
