// SIMD lane type for the CPU backend: W matrices of a batch, one per lane.
// Built on GCC/Clang vector extensions, so the same code compiles for
// AVX-512, AVX2, SSE2 and NEON; the ISA is chosen by the translation unit's
// target flags (see src/cpu/backend_isa.cpp). The per-lane loops over
// builtins below are what GCC turns into single vector instructions.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/lanes.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tinyla::TINYLA_KERNEL_NS {

template <class T> struct simd_int;
template <> struct simd_int<double> {
  using type = std::int64_t;
};
template <> struct simd_int<float> {
  using type = std::int32_t;
};

// The integer vector of W lanes as wide as T's.
template <class T, int W> struct simd_ivec {
  using I = typename simd_int<T>::type;
  typedef I type __attribute__((vector_size(sizeof(I) * W)));
};

// A lane mask as a vector comparison's result: all bits set or clear per lane.
template <class T, int W> struct simd_mask {
  using native = typename simd_ivec<T, W>::type;
  native v;
  friend TINYLA_INLINE simd_mask operator&(simd_mask a, simd_mask b) { return {a.v & b.v}; }
  friend TINYLA_INLINE simd_mask operator|(simd_mask a, simd_mask b) { return {a.v | b.v}; }
  friend TINYLA_INLINE simd_mask operator!(simd_mask a) { return {~a.v}; }
};

#if defined(__AVX512F__)
// AVX-512 compares into mask registers, a bit per lane; held as a vector (above), GCC 12
// rebuilt vectors from them and tested those back into mask registers (vpblendmq, vpcmpneqq)
// to branch or select. Held as bits, a select is one vblendmpd on the comparison's mask and
// any_of a kortest. On a Zen 4 (1 thread, AVX-512 forced): complex64's kernels at n <= 8
// 1.05-1.46x faster, complex128's up to 1.18x, float32's and complex64's at n = 12, 16 up to
// 1.4x; real kernels at n <= 8 within +-5 %, but the paired determinant at n = 3, 3-7 % slower
// (docs/benchmarks.md). With the intrinsics for & | ! (_kand_mask8 ...) two real n = 2 cells
// lost 15-25 %: GCC allocates these better.
template <class T, int W>
  requires(sizeof(T) * W == 64)
struct simd_mask<T, W> {
  using bits = std::conditional_t<W == 8, __mmask8, __mmask16>;
  bits k;
  friend TINYLA_INLINE simd_mask operator&(simd_mask a, simd_mask b) { return {bits(a.k & b.k)}; }
  friend TINYLA_INLINE simd_mask operator|(simd_mask a, simd_mask b) { return {bits(a.k | b.k)}; }
  friend TINYLA_INLINE simd_mask operator!(simd_mask a) { return {bits(~a.k)}; }
};
#endif
template <class M> inline constexpr bool is_bit_mask = requires(M m) { m.k; };

// The comparisons of simd, with IEEE semantics: false where either side is NaN, but for ne.
enum class compare_op { lt, gt, le, ge, eq, ne };
template <compare_op P, class T, int W, class V> TINYLA_INLINE simd_mask<T, W> compare(V a, V b) {
  using M = simd_mask<T, W>;
  if constexpr (is_bit_mask<M>) {
#if defined(__AVX512F__)
    constexpr int imm = P == compare_op::lt   ? _CMP_LT_OQ
                        : P == compare_op::gt ? _CMP_GT_OQ
                        : P == compare_op::le ? _CMP_LE_OQ
                        : P == compare_op::ge ? _CMP_GE_OQ
                        : P == compare_op::eq ? _CMP_EQ_OQ
                                              : _CMP_NEQ_UQ;
    if constexpr (sizeof(T) == 8) return {_mm512_cmp_pd_mask((__m512d)a, (__m512d)b, imm)};
    else return {_mm512_cmp_ps_mask((__m512)a, (__m512)b, imm)};
#endif
  } else {
    if constexpr (P == compare_op::lt) return {a < b};
    else if constexpr (P == compare_op::gt) return {a > b};
    else if constexpr (P == compare_op::le) return {a <= b};
    else if constexpr (P == compare_op::ge) return {a >= b};
    else if constexpr (P == compare_op::eq) return {a == b};
    else return {a != b};
  }
}

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

  friend TINYLA_INLINE simd operator+(simd a, simd b) { return {a.v + b.v}; }
  friend TINYLA_INLINE simd operator-(simd a, simd b) { return {a.v - b.v}; }
  friend TINYLA_INLINE simd operator*(simd a, simd b) { return {a.v * b.v}; }
  friend TINYLA_INLINE simd operator/(simd a, simd b) { return {a.v / b.v}; }
  friend TINYLA_INLINE simd operator-(simd a) { return {-a.v}; }
  simd& operator+=(simd b) {
    v += b.v;
    return *this;
  }
  simd& operator*=(simd b) {
    v *= b.v;
    return *this;
  }
  friend TINYLA_INLINE mask operator<(simd a, simd b) { return compare<compare_op::lt, T, W>(a.v, b.v); }
  friend TINYLA_INLINE mask operator>(simd a, simd b) { return compare<compare_op::gt, T, W>(a.v, b.v); }
  friend TINYLA_INLINE mask operator<=(simd a, simd b) { return compare<compare_op::le, T, W>(a.v, b.v); }
  friend TINYLA_INLINE mask operator>=(simd a, simd b) { return compare<compare_op::ge, T, W>(a.v, b.v); }
  friend TINYLA_INLINE mask operator==(simd a, simd b) { return compare<compare_op::eq, T, W>(a.v, b.v); }
  friend TINYLA_INLINE mask operator!=(simd a, simd b) { return compare<compare_op::ne, T, W>(a.v, b.v); }
};

// Native operations: intrinsics where the ISA has them (GCC's vectorizer
// does not always turn the generic per-lane loops into one instruction),
// per-lane builtins otherwise. Overload resolution prefers the intrinsics.
namespace native_ops {
// Without FMA instructions (x86-64-v2's vec128) each lane's fma is a libm call
// that clobbers every vector register: kept out of line, one call per vector
// operation, it spares the caller the spills around each lane's call. Inlined,
// it doubled the translation unit's code and compile time, for no speed (the
// libm calls dominate: the same time per matrix either way, measured with
// glibc's software fma).
template <class V>
#if defined(__x86_64__) && !defined(__FMA__)
__attribute__((noinline))
#else
TINYLA_INLINE
#endif
V fma(V a, V b, V c) {
  V r;
  for (int i = 0; i < int(sizeof(V) / sizeof(a[0])); ++i) {
    if constexpr (sizeof(a[0]) == 4) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    else r[i] = __builtin_fma(a[i], b[i], c[i]);
  }
  return r;
}
template <class V> TINYLA_INLINE V sqrt(V a) {
  V r;
  for (int i = 0; i < int(sizeof(V) / sizeof(a[0])); ++i) {
    if constexpr (sizeof(a[0]) == 4) r[i] = __builtin_sqrtf(a[i]);
    else r[i] = __builtin_sqrt(a[i]);
  }
  return r;
}
template <class M> TINYLA_INLINE bool any(M m) {
  auto acc = m[0];
  for (int i = 1; i < int(sizeof(M) / sizeof(m[0])); ++i) acc |= m[i];
  return acc != 0;
}
#if defined(__FMA__)
TINYLA_INLINE __m128d fma(__m128d a, __m128d b, __m128d c) { return _mm_fmadd_pd(a, b, c); }
TINYLA_INLINE __m128 fma(__m128 a, __m128 b, __m128 c) { return _mm_fmadd_ps(a, b, c); }
TINYLA_INLINE __m256d fma(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
TINYLA_INLINE __m256 fma(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
#endif
#if defined(__AVX__)
TINYLA_INLINE __m256d sqrt(__m256d a) { return _mm256_sqrt_pd(a); }
TINYLA_INLINE __m256 sqrt(__m256 a) { return _mm256_sqrt_ps(a); }
TINYLA_INLINE bool any(simd_mask<double, 4>::native m) { return !_mm256_testz_si256((__m256i)m, (__m256i)m); }
TINYLA_INLINE bool any(simd_mask<float, 8>::native m) { return !_mm256_testz_si256((__m256i)m, (__m256i)m); }
#endif
#if defined(__AVX512F__)
TINYLA_INLINE __m512d fma(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
TINYLA_INLINE __m512 fma(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
#endif

// Whether V has masked loads and stores that cost what whole ones do: AVX-512's. (With
// AVX2's vmaskmov, a float32 solve at n = 5 took 1.27x the time on a Zen 4 when its
// right-hand sides' tails moved through them.)
template <class V> constexpr bool has_masked_moves() {
#if defined(__AVX512F__)
  return sizeof(V) == 64;
#else
  return false;
#endif
}
// The first k reals of a vector from p, the others 0 (load_prefix), or to p (store_prefix),
// touching no memory past p + k (0 < k < the vector's lanes); has_masked_moves<V>() only.
template <class V, class R> TINYLA_INLINE V load_prefix(const R* p, int k) {
  static_assert(has_masked_moves<V>());
#if defined(__AVX512F__)
  if constexpr (sizeof(R) == 4) return (V)_mm512_maskz_loadu_ps(__mmask16((1u << k) - 1), p);
  else return (V)_mm512_maskz_loadu_pd(__mmask8((1u << k) - 1), p);
#endif
}
template <class V, class R> TINYLA_INLINE void store_prefix(R* p, V v, int k) {
  static_assert(has_masked_moves<V>());
#if defined(__AVX512F__)
  if constexpr (sizeof(R) == 4) _mm512_mask_storeu_ps(p, __mmask16((1u << k) - 1), (__m512)v);
  else _mm512_mask_storeu_pd(p, __mmask8((1u << k) - 1), (__m512d)v);
#endif
}
}  // namespace native_ops

template <class T, int W> TINYLA_INLINE simd<T, W> fmadd(simd<T, W> a, simd<T, W> b, simd<T, W> c) {
  return {native_ops::fma(a.v, b.v, c.v)};
}
template <class T, int W> TINYLA_INLINE simd<T, W> sqrt_lane(simd<T, W> a) { return {native_ops::sqrt(a.v)}; }
template <class T, int W> TINYLA_INLINE simd<T, W> absval(simd<T, W> a) {
  using I = typename simd_int<T>::type;
  using IV = typename simd_ivec<T, W>::type;
  constexpr I sign = I(1) << (sizeof(I) * 8 - 1);
  return {(typename simd<T, W>::native)((IV)a.v & ~sign)};
}
template <class T, int W> TINYLA_INLINE simd<T, W> select(simd_mask<T, W> m, simd<T, W> a, simd<T, W> b) {
  if constexpr (is_bit_mask<simd_mask<T, W>>) {
#if defined(__AVX512F__)
    using native = typename simd<T, W>::native;
    if constexpr (sizeof(T) == 8) return {(native)_mm512_mask_blend_pd(m.k, (__m512d)b.v, (__m512d)a.v)};
    else return {(native)_mm512_mask_blend_ps(m.k, (__m512)b.v, (__m512)a.v)};
#endif
  } else {
    return {m.v ? a.v : b.v};
  }
}
// a < b ? a : b, lane by lane: b where either is NaN. One min instruction (x86's min has these
// semantics), where a compare and a select through AVX-512's mask registers are two.
template <class T, int W> TINYLA_INLINE simd<T, W> lesser(simd<T, W> a, simd<T, W> b) {
#if defined(__AVX512F__)
  using native = typename simd<T, W>::native;
  if constexpr (sizeof(native) == 64) {
    // The masked forms with every lane set: _mm512_min_pd's undefined pass-through operand made
    // GCC 12 warn (-Wmaybe-uninitialized); the instruction is the same.
    if constexpr (sizeof(T) == 8) return {(native)_mm512_mask_min_pd((__m512d)a.v, 0xff, (__m512d)a.v, (__m512d)b.v)};
    else return {(native)_mm512_mask_min_ps((__m512)a.v, 0xffff, (__m512)a.v, (__m512)b.v)};
  }
#endif
  return {a.v < b.v ? a.v : b.v};
}
// Lane w of dst = lane w of v, the other lanes untouched: one store of the element, on every
// ISA. Against AVX-512's masked store of the 256-bit half that holds lane w it made the
// run-time-n kernels 1.00-1.26x as fast on an Intel Xeon and 1.01-1.19x on a Zen 4 (n = 9..32,
// 1 thread, float32 the most; docs/benchmarks.md, "Row swaps by element stores on AVX-512").
template <class T, int W> TINYLA_INLINE void assign_lane(int w, simd<T, W>& dst, simd<T, W> v) { dst.v[w] = v.v[w]; }
template <class T, int W> TINYLA_INLINE bool any_of(simd_mask<T, W> m) {
  if constexpr (is_bit_mask<simd_mask<T, W>>) return m.k != 0;
  else return native_ops::any(m.v);
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
template <class T, int W> TINYLA_INLINE simd<T, W> int_to_real(typename simd_ivec<T, W>::type k) {
  using I = typename simd_int<T>::type;
  using native = typename simd<T, W>::native;
  constexpr T magic = T(I(1) << ieee<T>::mant_bits);
  const I magic_bits = __builtin_bit_cast(I, magic);
  return {(native)(k | magic_bits) - magic};
}

template <class T, int W> TINYLA_INLINE simd<T, W> frexp2(simd<T, W> x, simd<T, W>& e) {
  using I = typename simd_int<T>::type;
  using IV = typename simd_ivec<T, W>::type;
  using native = typename simd<T, W>::native;
  constexpr int mb = ieee<T>::mant_bits;
  constexpr I emask = ieee<T>::exp_mask;
  constexpr int sub_shift = mb + 2;  // brings any subnormal into the normal range
  const T sub_scale = T(I(1) << sub_shift / 2) * T(I(1) << (sub_shift - sub_shift / 2));
  // Logical shifts (the field is masked anyway): AVX2 has no 64-bit arithmetic shift.
  typedef std::make_unsigned_t<I> UV __attribute__((vector_size(sizeof(I) * W)));
  const auto field_of = [](IV v) { return (IV)((UV)v >> mb) & emask; };
  IV field = field_of((IV)x.v);
  IV subnormal = (field == 0) & (x.v != 0);
  native xs = subnormal ? x.v * sub_scale : x.v;
  IV bits = (IV)xs;
  field = field_of(bits);
  IV special = (x.v == 0) | (field == emask);
  IV mbits = (bits & ~(emask << mb)) | (I(ieee<T>::bias - 1) << mb);
  // e = field - (bias - 1) - (subnormal ? sub_shift : 0), computed as reals.
  simd<T, W> f = int_to_real<T, W>(field);
  native shift = subnormal ? native{} + T(sub_shift) : native{};
  e = {special ? native{} : f.v - T(ieee<T>::bias - 1) - shift};
  return {special ? x.v : (native)mbits};
}

// x * 2^e rounded once, as std::ldexp (musl's scalbn scheme): large |e| is
// applied in steps that keep x normal, so only the last multiply can round.
template <class T, int W> TINYLA_INLINE simd<T, W> ldexp2(simd<T, W> x, simd<T, W> e) {
  using I = typename simd_int<T>::type;
  using IV = typename simd_ivec<T, W>::type;
  using native = typename simd<T, W>::native;
  constexpr int mb = ieee<T>::mant_bits, bias = ieee<T>::bias;
  constexpr I max_e = bias, min_e = 1 - bias, down = bias - 1 - (mb + 1);  // 2^-down keeps x normal
  auto pow2 = [](IV k) { return (native)((k + bias) << mb); };
  const T magic = T(I(3) << (mb - 1));
  IV k = (IV)(e.v + magic) - __builtin_bit_cast(I, magic);  // e is integral: exact
  native y = x.v;
  for (int step = 0; step < 2; ++step) {
    IV hi = k > max_e, lo = k < min_e;
    y = hi ? y * pow2(IV{} + max_e) : y;
    k = hi ? k - max_e : k;
    y = lo ? y * pow2(IV{} - down) : y;
    k = lo ? k + down : k;
  }
  k = k > max_e ? IV{} + max_e : k;
  k = k < min_e ? IV{} + min_e : k;
  return {y * pow2(k)};
}

template <class T, int W> struct lane_traits<simd<T, W>> {
  using real_type = T;
  using mask_type = simd_mask<T, W>;
  static constexpr int width = W;
  static TINYLA_INLINE T value(simd<T, W> x, int w) { return x[w]; }
  static TINYLA_INLINE mask_type only_lane(int w) {
    if constexpr (is_bit_mask<mask_type>) {
      return {typename mask_type::bits(w >= 0 && w < W ? 1u << w : 0u)};
    } else {
      typename mask_type::native index;
      for (int i = 0; i < W; ++i) index[i] = i;
      return {index == typename simd_int<T>::type(w)};
    }
  }
};
// Two SIMD registers as one lane type: 2W matrices whose instruction streams
// are independent, so a latency-bound kernel (small n: pivot -> division ->
// update chains) keeps twice as much in flight. Every operation is applied
// to both halves; the bits of each lane are those of simd<T, W>.
template <class T, int W> struct simd_pair_mask {
  simd_mask<T, W> lo, hi;
  friend TINYLA_INLINE simd_pair_mask operator&(simd_pair_mask a, simd_pair_mask b) {
    return {a.lo & b.lo, a.hi & b.hi};
  }
  friend TINYLA_INLINE simd_pair_mask operator|(simd_pair_mask a, simd_pair_mask b) {
    return {a.lo | b.lo, a.hi | b.hi};
  }
  friend TINYLA_INLINE simd_pair_mask operator!(simd_pair_mask a) { return {!a.lo, !a.hi}; }
};

template <class T, int W> struct simd_pair {
  using half = simd<T, W>;
  using mask = simd_pair_mask<T, W>;
  half lo, hi;

  simd_pair() = default;
  constexpr simd_pair(half l, half h) : lo(l), hi(h) {}
  template <class S>
    requires std::is_arithmetic_v<S>
  constexpr simd_pair(S x) : lo(x), hi(x) {}

  // Through memory: lo[i] : hi[i - W] made GCC 12 warn that lo's element i >= W may be uninitialized.
  T operator[](int i) const {
    T v[2 * W];
    lo.store(v), hi.store(v + W);
    return v[i];
  }

  friend TINYLA_INLINE simd_pair operator+(simd_pair a, simd_pair b) { return {a.lo + b.lo, a.hi + b.hi}; }
  friend TINYLA_INLINE simd_pair operator-(simd_pair a, simd_pair b) { return {a.lo - b.lo, a.hi - b.hi}; }
  friend TINYLA_INLINE simd_pair operator*(simd_pair a, simd_pair b) { return {a.lo * b.lo, a.hi * b.hi}; }
  friend TINYLA_INLINE simd_pair operator/(simd_pair a, simd_pair b) { return {a.lo / b.lo, a.hi / b.hi}; }
  friend TINYLA_INLINE simd_pair operator-(simd_pair a) { return {-a.lo, -a.hi}; }
  friend TINYLA_INLINE mask operator<(simd_pair a, simd_pair b) { return {a.lo < b.lo, a.hi < b.hi}; }
  friend TINYLA_INLINE mask operator>(simd_pair a, simd_pair b) { return {a.lo > b.lo, a.hi > b.hi}; }
  friend TINYLA_INLINE mask operator<=(simd_pair a, simd_pair b) { return {a.lo <= b.lo, a.hi <= b.hi}; }
  friend TINYLA_INLINE mask operator>=(simd_pair a, simd_pair b) { return {a.lo >= b.lo, a.hi >= b.hi}; }
  friend TINYLA_INLINE mask operator==(simd_pair a, simd_pair b) { return {a.lo == b.lo, a.hi == b.hi}; }
  friend TINYLA_INLINE mask operator!=(simd_pair a, simd_pair b) { return {a.lo != b.lo, a.hi != b.hi}; }
};

template <class T, int W> TINYLA_INLINE simd_pair<T, W> fmadd(simd_pair<T, W> a, simd_pair<T, W> b, simd_pair<T, W> c) {
  return {fmadd(a.lo, b.lo, c.lo), fmadd(a.hi, b.hi, c.hi)};
}
template <class T, int W> TINYLA_INLINE simd_pair<T, W> sqrt_lane(simd_pair<T, W> a) {
  return {sqrt_lane(a.lo), sqrt_lane(a.hi)};
}
template <class T, int W> TINYLA_INLINE simd_pair<T, W> absval(simd_pair<T, W> a) {
  return {absval(a.lo), absval(a.hi)};
}
template <class T, int W>
TINYLA_INLINE simd_pair<T, W> select(simd_pair_mask<T, W> m, simd_pair<T, W> a, simd_pair<T, W> b) {
  return {select(m.lo, a.lo, b.lo), select(m.hi, a.hi, b.hi)};
}
template <class T, int W> TINYLA_INLINE bool any_of(simd_pair_mask<T, W> m) { return any_of(m.lo | m.hi); }
template <class T, int W> TINYLA_INLINE void assign_lane(int w, simd_pair<T, W>& dst, simd_pair<T, W> v) {
  if (w < W) assign_lane(w, dst.lo, v.lo);
  else assign_lane(w - W, dst.hi, v.hi);
}
template <class T, int W> TINYLA_INLINE simd_pair<T, W> frexp2(simd_pair<T, W> x, simd_pair<T, W>& e) {
  return {frexp2(x.lo, e.lo), frexp2(x.hi, e.hi)};
}
template <class T, int W> TINYLA_INLINE simd_pair<T, W> ldexp2(simd_pair<T, W> x, simd_pair<T, W> e) {
  return {ldexp2(x.lo, e.lo), ldexp2(x.hi, e.hi)};
}
template <class T, int W> struct lane_traits<simd_pair<T, W>> {
  using real_type = T;
  using mask_type = simd_pair_mask<T, W>;
  static constexpr int width = 2 * W;
  static TINYLA_INLINE T value(simd_pair<T, W> x, int w) { return x[w]; }
  static TINYLA_INLINE mask_type only_lane(int w) {
    return {lane_traits<simd<T, W>>::only_lane(w), lane_traits<simd<T, W>>::only_lane(w - W)};
  }
};

}  // namespace tinyla::TINYLA_KERNEL_NS
