// Lane primitives for the scalar lane (one matrix per lane: the CPU reference
// path and, later, one GPU thread per matrix) and the complex element type
// built on top of any real lane type.
//
// A "lane type" L is a real type (float, double, or tinyla::simd<T, W> from
// src/cpu/simd.hpp) that supports + - * / and these free functions:
//   fmadd(a, b, c)   a*b + c with one rounding
//   absval(a), sqrt_lane(a)
//   a < b, a == b ... -> mask_of<L>;  select(mask, a, b);  any_of(mask)
//   frexp2(x, e)     x = m * 2^e, |m| in [0.5, 1) (exact; x unchanged if 0/inf/nan)
//   ldexp2(x, e)     x * 2^e with one rounding (e is an integral value held in L)
//   assign_lane(w, dst, v)  lane w of dst = lane w of v, the others untouched
// and lane_traits<L>: real_type, mask_type, width, value(x, w) (lane w of x) and
// only_lane(w) (the mask of lane w alone).
// Every algorithm in src/kernels is written once against these.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "types.hpp"

// Every translation unit that instantiates kernels with its own target flags
// (one per ISA) sets its own namespace, so the linker can never merge an
// AVX-512 instantiation into code that runs on a machine without AVX-512.
#ifndef TINYLA_KERNEL_NS
#define TINYLA_KERNEL_NS kern
#endif

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define TINYLA_HD __host__ __device__ inline __attribute__((always_inline))
#else
#define TINYLA_HD inline __attribute__((always_inline))
#endif
// CPU-only code (src/cpu: the SIMD lane types, packing): inlined as the kernels are.
#define TINYLA_INLINE inline __attribute__((always_inline))

// Loop unrolling. GPU compilers unroll a loop fully only when asked, and a
// compile-time-size matrix stays in registers only when every loop over it is
// unrolled (else it lives in local memory): TINYLA_UNROLL marks those loops
// (full unroll where the trip count is a constant, no effect otherwise).
// On the CPU, GCC peels them by itself (CMake raises its limits) and
// TINYLA_UNROLL_INNER keeps the innermost update loops unrolled by 8 for the
// run-time sizes.
#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define TINYLA_UNROLL _Pragma("unroll")
#define TINYLA_UNROLL_INNER _Pragma("unroll")
#else
#define TINYLA_UNROLL
#define TINYLA_UNROLL_INNER _Pragma("GCC unroll 8")
#endif

namespace tinyla::TINYLA_KERNEL_NS {

// ---- scalar lanes ---------------------------------------------------------

template <class T>
concept scalar_real = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <scalar_real T> TINYLA_HD T fmadd(T a, T b, T c) { return std::fma(a, b, c); }
template <scalar_real T> TINYLA_HD T absval(T a) { return std::fabs(a); }
template <scalar_real T> TINYLA_HD T sqrt_lane(T a) { return std::sqrt(a); }
template <scalar_real T> TINYLA_HD T select(bool m, T a, T b) { return m ? a : b; }
TINYLA_HD bool any_of(bool m) { return m; }
template <scalar_real T> TINYLA_HD void assign_lane(int, T& dst, T v) { dst = v; }
template <scalar_real T> TINYLA_HD T frexp2(T x, T& e) {
  int ei = 0;
  T m = std::frexp(x, &ei);
  e = T(ei);
  return m;
}
template <scalar_real T> TINYLA_HD T ldexp2(T x, T e) {
  // e may exceed int range only for absurd inputs; clamp keeps the result
  // (0 or inf) right.
  constexpr T lim = T(1 << 20);
  e = e > lim ? lim : (e < -lim ? -lim : e);
  return std::ldexp(x, int(e));
}

// ---- lane traits -----------------------------------------------------------

template <class L> struct lane_traits;  // see the top of this file
template <scalar_real T> struct lane_traits<T> {
  using real_type = T;
  using mask_type = bool;
  static constexpr int width = 1;
  static TINYLA_HD T value(T x, int) { return x; }
  static TINYLA_HD bool only_lane(int) { return true; }
};
template <class L> using mask_of = typename lane_traits<L>::mask_type;
template <class L> using lane_real = typename lane_traits<L>::real_type;  // float or double

template <class L> TINYLA_HD mask_of<L> is_nan(L x) { return x != x; }

// ---- complex elements over any real lane ----------------------------------

// Layout-compatible with std::complex / C99 complex (re, im interleaved) when L
// is scalar, and with W interleaved complex matrices ("re lanes, im lanes")
// when L is a SIMD lane.
template <class L> struct cplx {
  L re, im;
};

template <class L> TINYLA_HD cplx<L> operator+(cplx<L> a, cplx<L> b) { return {a.re + b.re, a.im + b.im}; }
template <class L> TINYLA_HD cplx<L> operator-(cplx<L> a, cplx<L> b) { return {a.re - b.re, a.im - b.im}; }
template <class L> TINYLA_HD cplx<L> operator-(cplx<L> a) { return {-a.re, -a.im}; }
template <class L> TINYLA_HD cplx<L> operator*(cplx<L> a, cplx<L> b) {
  return {fmadd(a.re, b.re, -(a.im * b.im)), fmadd(a.re, b.im, a.im * b.re)};
}
template <class L> TINYLA_HD cplx<L> operator*(cplx<L> a, L s) { return {a.re * s, a.im * s}; }
template <class L> TINYLA_HD cplx<L> select(mask_of<L> m, cplx<L> a, cplx<L> b) {
  return {select(m, a.re, b.re), select(m, a.im, b.im)};
}
template <class L> TINYLA_HD void assign_lane(int w, cplx<L>& dst, cplx<L> v) {
  assign_lane(w, dst.re, v.re), assign_lane(w, dst.im, v.im);
}

// ---- element traits: E is a real lane L or cplx<L> ------------------------

template <class E> struct element_traits {
  using lane = E;
  static constexpr bool is_complex = false;
};
template <class L> struct element_traits<cplx<L>> {
  using lane = L;
  static constexpr bool is_complex = true;
};
template <class E> using lane_of = typename element_traits<E>::lane;

// The scalar-lane element of a storage type (types.hpp): T, or cplx<R> for std::complex<R>
// (the same layout), what the LAPACK path and the GPU kernels compute on.
template <class T> using kernel_element = std::conditional_t<type_info<T>::reals == 2, cplx<storage_real_t<T>>, T>;

template <class E> TINYLA_HD E make_element(double re) {
  if constexpr (element_traits<E>::is_complex) {
    using L = lane_of<E>;
    return E{L(re), L(0)};
  } else {
    return E(re);
  }
}

template <class E> TINYLA_HD E nan_element() {
  using L = lane_of<E>;
  const L nan = L(std::numeric_limits<lane_real<L>>::quiet_NaN());
  if constexpr (element_traits<E>::is_complex) return E{nan, nan};
  else return nan;
}

// a - l*u with fused multiply-adds (the elimination update).
template <class L> TINYLA_HD L sub_mul(L a, L l, L u) { return fmadd(-l, u, a); }
template <class L> TINYLA_HD cplx<L> sub_mul(cplx<L> a, cplx<L> l, cplx<L> u) {
  L re = fmadd(-l.re, u.re, fmadd(l.im, u.im, a.re));
  L im = fmadd(-l.re, u.im, fmadd(-l.im, u.re, a.im));
  return {re, im};
}

// a + x*y with fused multiply-adds.
template <class L> TINYLA_HD L mul_add(L x, L y, L a) { return fmadd(x, y, a); }
template <class L> TINYLA_HD cplx<L> mul_add(cplx<L> x, cplx<L> y, cplx<L> a) {
  L re = fmadd(x.re, y.re, fmadd(-x.im, y.im, a.re));
  L im = fmadd(x.re, y.im, fmadd(x.im, y.re, a.im));
  return {re, im};
}

// LAPACK's pivot magnitude: |x| for real, |re| + |im| for complex (izamax's dcabs1).
template <class L> TINYLA_HD L pivot_magnitude(L x) { return absval(x); }
template <class L> TINYLA_HD L pivot_magnitude(cplx<L> x) { return absval(x.re) + absval(x.im); }

// Largest component magnitude (used to scale without overflow).
template <class L> TINYLA_HD L max_component(L x) { return absval(x); }
template <class L> TINYLA_HD L max_component(cplx<L> x) {
  L a = absval(x.re), b = absval(x.im);
  return select(a < b, b, a);
}

template <class L> TINYLA_HD mask_of<L> is_zero(L x) { return x == L(0); }
template <class L> TINYLA_HD mask_of<L> is_zero(cplx<L> x) { return (x.re == L(0)) & (x.im == L(0)); }

template <class L> TINYLA_HD L scale_by(L x, L s) { return x * s; }
template <class L> TINYLA_HD cplx<L> scale_by(cplx<L> x, L s) { return x * s; }

// Modulus without overflow or underflow: m * sqrt(1 + (small/m)^2).
template <class L> TINYLA_HD L modulus(L x) { return absval(x); }
template <class L> TINYLA_HD L modulus(cplx<L> x) {
  L a = absval(x.re), b = absval(x.im);
  L big = select(a < b, b, a), small = select(a < b, a, b);
  L safe = select(big == L(0), L(1), big);
  L r = small / safe;
  L m = big * sqrt_lane(fmadd(r, r, L(1)));
  // An infinite part (C99: even beside a NaN) makes |x| inf.
  const L inf = L(std::numeric_limits<lane_real<L>>::infinity());
  return select((a == inf) | (b == inf), inf, m);
}

// x / y for every lane, scaled so that neither |y|^2 overflows nor underflows.
template <class L> TINYLA_HD L divide(L x, L y) { return x / y; }
template <class L> TINYLA_HD cplx<L> divide(cplx<L> x, cplx<L> y) {
  L s = max_component(y);
  L yr = y.re / s, yi = y.im / s;
  L d = fmadd(yr, yr, yi * yi) * s;  // |y|^2 / s
  cplx<L> num = x * cplx<L>{yr, -yi};
  return {num.re / d, num.im / d};
}

template <class L> TINYLA_HD mask_of<L> is_infinite(L x) {
  return absval(x) == L(std::numeric_limits<lane_real<L>>::infinity());
}
// C99 Annex G: a complex number with an infinite part is an infinity, even if
// the other part is NaN (max_component would drop a NaN re beside an infinite im).
template <class L> TINYLA_HD mask_of<L> is_infinite(cplx<L> x) {
  // Both parts always evaluated (masks are per lane): named, so no || is suggested for bool.
  const auto re_infinite = is_infinite(x.re), im_infinite = is_infinite(x.im);
  return re_infinite | im_infinite;
}

// Neither infinite nor NaN (every part, for complex).
template <class L> TINYLA_HD mask_of<L> is_finite(L x) {
  return absval(x) < L(std::numeric_limits<lane_real<L>>::infinity());
}
template <class L> TINYLA_HD mask_of<L> is_finite(cplx<L> x) { return is_finite(x.re) & is_finite(x.im); }

// 1/y; 0 where y == 0 (a zero pivot leaves its column untouched) and where y
// is infinite (as 1/inf = 0 for reals; C99 Annex G for complex). The select
// comes after the division: this sits on every elimination step's critical path.
template <class L> TINYLA_HD L reciprocal_or_zero(L y) { return select(y == L(0), L(0), L(1) / y); }
template <class L> TINYLA_HD cplx<L> reciprocal_or_zero(cplx<L> y) {
  const cplx<L> one{L(1), L(0)}, zero{L(0), L(0)};
  const auto z = is_zero(y) | is_infinite(y);
  return select(z, zero, divide(one, select(z, one, y)));
}

// 2^subnormal_lift_exponent: what takes any nonzero subnormal of T to a normal
// number, exactly (a subnormal is at least 2^(min_exponent - digits)).
template <class T> inline constexpr int subnormal_lift_exponent = std::numeric_limits<T>::digits + 1;
template <class T> inline constexpr T subnormal_lift = T(1ull << std::numeric_limits<T>::digits) * T(2);

// Scales y by a power of two so that |y| is a normal number, neither subnormal nor
// past the largest number (which |y| can be: up to sqrt(2) x): by subnormal_lift
// where its larger component is subnormal (exact: that component is then normal,
// and 1/max|y| and |y| keep full precision), by 1/2 where that component is at
// least half the largest number (a subnormal other part may lose its last bit,
// nothing beside the large one). Returns the exponent used for the caller to undo.
template <class L> TINYLA_HD L scale_into_range(cplx<L>& y) {
  using T = lane_real<L>;
  const L m = max_component(y);
  const auto sub = m < L(std::numeric_limits<T>::min()), huge = m >= L(std::numeric_limits<T>::max() / 2);
  y = y * select(sub, L(subnormal_lift<T>), select(huge, L(T(0.5)), L(1)));  // times 1: the same bits
  return select(sub, L(T(subnormal_lift_exponent<T>)), select(huge, L(-1), L(0)));
}

// y / |y| for y != 0 scaled into range (scale_into_range: 1/max|y| then keeps
// full precision), also for infinite y (the direction of its infinite
// components, as C99's carg).
template <class L> TINYLA_HD cplx<L> unit_phase(cplx<L> y) {
  const L m = max_component(y);
  const auto inf = is_infinite(y);
  auto dir = [&](L c) { return select(is_infinite(c), select(c < L(0), L(-1), L(1)), L(0)); };
  const L inv_m = L(1) / select(m == L(0), L(1), m);
  cplx<L> q = select(inf, cplx<L>{dir(y.re), dir(y.im)}, y * inv_m);  // max component now 1
  return q * (L(1) / modulus(q));
}

}  // namespace tinyla::TINYLA_KERNEL_NS
