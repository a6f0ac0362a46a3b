// SIMD lane type for the CPU backend: W matrices of a batch, one per lane.
// Built on GCC/Clang vector extensions, so the same code compiles for
// AVX-512, AVX2, SSE2 and NEON; the ISA is chosen by the translation unit's
// target flags (see src/cpu/backend_isa.cpp). The per-lane loops over
// builtins below are what GCC turns into single vector instructions.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/lanes.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

template <class T> struct simd_int;
template <> struct simd_int<double> { using type = std::int64_t; };
template <> struct simd_int<float> { using type = std::int32_t; };

template <class T, int W> struct simd_mask {
  using I = typename simd_int<T>::type;
  typedef I native __attribute__((vector_size(sizeof(I) * W)));
  native v;
  friend simd_mask operator&(simd_mask a, simd_mask b) { return {a.v & b.v}; }
  friend simd_mask operator|(simd_mask a, simd_mask b) { return {a.v | b.v}; }
  friend simd_mask operator!(simd_mask a) { return {~a.v}; }
};

template <class T, int W> struct simd {
  typedef T native __attribute__((vector_size(sizeof(T) * W)));
  using mask = simd_mask<T, W>;
  native v;

  simd() = default;
  constexpr simd(native x) : v(x) {}
  template <class S>
    requires std::is_arithmetic_v<S>
  constexpr simd(S x) : v(native{} + T(x)) {}

  T operator[](int i) const { return v[i]; }
  static simd load(const T* p) {
    simd r;
    std::memcpy(&r.v, p, sizeof(native));
    return r;
  }
  void store(T* p) const { std::memcpy(p, &v, sizeof(native)); }

  friend simd operator+(simd a, simd b) { return {a.v + b.v}; }
  friend simd operator-(simd a, simd b) { return {a.v - b.v}; }
  friend simd operator*(simd a, simd b) { return {a.v * b.v}; }
  friend simd operator/(simd a, simd b) { return {a.v / b.v}; }
  friend simd operator-(simd a) { return {-a.v}; }
  simd& operator+=(simd b) { v += b.v; return *this; }
  simd& operator*=(simd b) { v *= b.v; return *this; }
  friend mask operator<(simd a, simd b) { return {a.v < b.v}; }
  friend mask operator>(simd a, simd b) { return {a.v > b.v}; }
  friend mask operator<=(simd a, simd b) { return {a.v <= b.v}; }
  friend mask operator==(simd a, simd b) { return {a.v == b.v}; }
  friend mask operator!=(simd a, simd b) { return {a.v != b.v}; }
};

template <class T, int W> inline simd<T, W> fmadd(simd<T, W> a, simd<T, W> b, simd<T, W> c) {
  simd<T, W> r;
  for (int i = 0; i < W; ++i) r.v[i] = __builtin_fma(a.v[i], b.v[i], c.v[i]);
  return r;
}
template <class T, int W> inline simd<T, W> sqrtl_(simd<T, W> a) {
  simd<T, W> r;
  for (int i = 0; i < W; ++i) r.v[i] = __builtin_sqrt(a.v[i]);
  return r;
}
template <class T, int W> inline simd<T, W> absval(simd<T, W> a) {
  using I = typename simd_int<T>::type;
  using IV = typename simd_mask<T, W>::native;
  constexpr I sign = I(1) << (sizeof(I) * 8 - 1);
  return {(typename simd<T, W>::native)((IV)a.v & ~sign)};
}
template <class T, int W> inline simd<T, W> select(simd_mask<T, W> m, simd<T, W> a, simd<T, W> b) {
  return {m.v ? a.v : b.v};
}
template <class T, int W> inline bool any_of(simd_mask<T, W> m) {
  typename simd_int<T>::type acc = 0;
  for (int i = 0; i < W; ++i) acc |= m.v[i];
  return acc != 0;
}

// IEEE layout constants of T.
template <class T> struct ieee;
template <> struct ieee<double> {
  static constexpr int mant_bits = 52, exp_mask = 0x7ff, bias = 1023;
};
template <> struct ieee<float> {
  static constexpr int mant_bits = 23, exp_mask = 0xff, bias = 127;
};

// Exact integer (held in T) from a small non-negative integer lane, without a
// slow int64->double conversion on AVX2: (2^mant_bits | k) - 2^mant_bits.
template <class T, int W> inline simd<T, W> int_to_real(typename simd_mask<T, W>::native k) {
  using I = typename simd_int<T>::type;
  using native = typename simd<T, W>::native;
  constexpr T magic = T(I(1) << ieee<T>::mant_bits);
  const I magic_bits = __builtin_bit_cast(I, magic);
  return {(native)(k | magic_bits) - magic};
}

template <class T, int W> inline simd<T, W> frexp2(simd<T, W> x, simd<T, W>& e) {
  using I = typename simd_int<T>::type;
  using IV = typename simd_mask<T, W>::native;
  using native = typename simd<T, W>::native;
  constexpr int mb = ieee<T>::mant_bits;
  constexpr I emask = ieee<T>::exp_mask;
  constexpr int sub_shift = mb + 2;  // brings any subnormal into the normal range
  const T sub_scale = T(I(1) << sub_shift / 2) * T(I(1) << (sub_shift - sub_shift / 2));
  IV field = ((IV)x.v >> mb) & emask;
  IV subnormal = (field == 0) & (x.v != 0);
  native xs = subnormal ? x.v * sub_scale : x.v;
  IV bits = (IV)xs;
  field = (bits >> mb) & emask;
  IV special = (x.v == 0) | (field == emask);
  IV mbits = (bits & ~(emask << mb)) | (I(ieee<T>::bias - 1) << mb);
  // e = field - (bias - 1) - (subnormal ? sub_shift : 0), computed as reals.
  simd<T, W> f = int_to_real<T, W>(field);
  simd<T, W> shift = select(simd_mask<T, W>{subnormal}, simd<T, W>(sub_shift), simd<T, W>(0));
  e = select(simd_mask<T, W>{special}, simd<T, W>(0), f - simd<T, W>(ieee<T>::bias - 1) - shift);
  return select(simd_mask<T, W>{special}, x, simd<T, W>{(native)mbits});
}

template <class T, int W> inline simd<T, W> ldexp2(simd<T, W> x, simd<T, W> e) {
  using I = typename simd_int<T>::type;
  using IV = typename simd_mask<T, W>::native;
  using native = typename simd<T, W>::native;
  constexpr int mb = ieee<T>::mant_bits;
  constexpr I lim = 2 * (ieee<T>::bias - 1);  // beyond this the result is 0 or inf anyway
  // round-to-integer trick: e is integral already, so this is exact.
  const T magic = T(I(3) << (mb - 1));
  IV ei = (IV)(e.v + magic) - __builtin_bit_cast(I, magic);
  ei = ei > lim ? IV{} + lim : ei;
  ei = ei < -lim ? IV{} - lim : ei;
  IV e1 = ei >> 1, e2 = ei - e1;
  native p1 = (native)((e1 + ieee<T>::bias) << mb), p2 = (native)((e2 + ieee<T>::bias) << mb);
  return {x.v * p1 * p2};
}

template <class T, int W> struct lane_traits<simd<T, W>> {
  using real_type = T;
  using mask_type = simd_mask<T, W>;
  static constexpr int width = W;
};
}  // namespace tinyla::TINYLA_KERNEL_NS
