// Elementary functions written in lane operations only, so that the scalar
// lane (GPU thread, CPU reference) and every SIMD lane give identical bits.
#pragma once

#include "kernels/lanes.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

template <class T> struct log_constants;
// ln 2 = hi + lo, hi with few significant bits so that e * hi is exact for
// every exponent sum a determinant can reach.
template <> struct log_constants<double> {
  static constexpr double ln2_hi = 0x1.62e42p-1;           // 21 bits
  static constexpr double ln2_lo = 0x1.fdf473de6af28p-22;  // ln2 - hi
  static constexpr double sqrt_half = 0x1.6a09e667f3bcdp-1;
};
template <> struct log_constants<float> {
  static constexpr float ln2_hi = 0x1.62p-1f;  // 8 bits
  static constexpr float ln2_lo = 0x1.c85fep-10f;
  static constexpr float sqrt_half = 0x1.6a09e6p-1f;
};

// Number of terms of log(m) = 2 s sum_k s^(2k)/(2k+1), s = (m-1)/(m+1), for
// m in [sqrt(1/2), sqrt(2)) (|s| <= 0.1716, s^2 <= 0.02944): the first
// dropped term must be below a quarter ulp.
template <class T> constexpr int log_series_terms() {
  const double z = 0.029437251522859434, tol = std::numeric_limits<T>::epsilon() / 8;
  double zk = 1;
  int k = 0;
  while (zk / (2 * k + 1) >= tol) zk *= z, ++k;
  return k;
}

// Polynomial c[0] + c[1] x + ... by Estrin's scheme: log2(P) dependent
// steps instead of P (the log below sits on every matrix's critical path).
template <int P, class L> TINYLA_HD L estrin(const L (&c)[P], L x) {
  if constexpr (P == 1) {
    return c[0];
  } else {
    L pairs[(P + 1) / 2];
    for (int j = 0; 2 * j < P; ++j) pairs[j] = 2 * j + 1 < P ? fmadd(c[2 * j + 1], x, c[2 * j]) : c[2 * j];
    return estrin(pairs, x * x);
  }
}

// log(m * 2^e) in lane arithmetic, for a normalized m: 0.5 <= m <= 1 (what
// frexp2 and det_accum::normalize produce), or m = 0 (-> -inf), inf (-> inf),
// nan (-> nan). e is integral.
template <class L> TINYLA_HD L log_scaled(L m, L e) {
  using T = lane_real<L>;
  using C = log_constants<T>;
  auto low = m < L(C::sqrt_half);
  L f = select(low, m + m, m);  // f in [sqrt(1/2), sqrt(2))
  e = select(low, e - L(1), e);
  L x = f - L(1);  // exact (Sterbenz)
  L s = x / (x + L(2));
  L z = s * s;
  constexpr int K = log_series_terms<T>();
  L coef[K - 1];  // log f = 2s + 2s z (1/3 + z/5 + z^2/7 + ...)
  for (int k = 1; k < K; ++k) coef[k - 1] = L(T(1) / T(2 * k + 1));
  L two_s = s + s;
  L log_f = fmadd(two_s * z, estrin(coef, z), two_s);
  L r = fmadd(e, L(C::ln2_hi), fmadd(e, L(C::ln2_lo), log_f));
  constexpr T inf = std::numeric_limits<T>::infinity();
  r = select(m == L(0), L(-inf), r);
  r = select(m == L(inf), L(inf), r);
  return select(is_nan(m), m, r);
}

}  // namespace tinyla::TINYLA_KERNEL_NS
