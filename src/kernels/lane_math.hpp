// Elementary functions written in lane operations only, so that the scalar
// lane (GPU thread, CPU reference) and every SIMD lane give identical bits.
#pragma once

#include "kernels/lanes.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

template <class T> struct log_constants;
// ln 2 = hi + lo, hi with few significant bits so that e * hi is exact for
// every exponent sum a determinant can reach.
template <> struct log_constants<double> {
  static constexpr double ln2_hi = 0x1.62e42p-1;          // 21 bits
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

// log(m * 2^e) for m > 0 (any finite range, e integral) in lane arithmetic.
// Returns -inf for m == 0, +inf for m == inf, nan for nan.
template <class L> TINYLA_HD L log_scaled(L m, L e) {
  using T = real_of<L>;
  using C = log_constants<T>;
  L e2;
  L f = frexp2(m, e2);  // f in [0.5, 1)
  auto low = f < L(C::sqrt_half);
  f = select(low, f + f, f);
  e = e + select(low, e2 - L(1), e2);
  L x = f - L(1);  // exact (Sterbenz)
  L s = x / (x + L(2));
  L z = s * s;
  constexpr int K = log_series_terms<T>();
  L poly = L(T(1) / T(2 * K - 1));
  for (int k = K - 2; k >= 1; --k) poly = fmadd(poly, z, L(T(1) / T(2 * k + 1)));
  L two_s = s + s;
  L log_f = fmadd(two_s * z, poly, two_s);
  L r = fmadd(e, L(C::ln2_hi), fmadd(e, L(C::ln2_lo), log_f));
  constexpr T inf = std::numeric_limits<T>::infinity();
  r = select(m == L(0), L(-inf), r);
  r = select(m == L(inf), L(inf), r);
  return select(is_nan(m), m, r);
}

}  // namespace tinyla::TINYLA_KERNEL_NS
