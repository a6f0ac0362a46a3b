// The per-matrix algorithms of tinyla, written once against the lane
// interface of lanes.hpp. Each function works on one "lane group": a single
// matrix when the lane is scalar (CPU reference path, one GPU thread), or W
// matrices held interleaved when the lane is simd<T, W>.
//
// Storage: a is row-major n x n, b row-major n x m, both arrays of elements E
// (E = L for real types, cplx<L> for complex types).
//
// Conventions (see README "Numerical conventions"):
// - partial pivoting with LAPACK's choice: first row of largest |x| (real) or
//   |re|+|im| (complex); rows swapped as in getrf; elimination in Crout's order;
// - |det| is carried as mant * 2^expo, so logabsdet and det never overflow or
//   underflow in intermediate products;
// - n = 1 and n = 2 use closed forms (n = 2: Kahan's fma-compensated ad - bc,
//   from entries split into mantissa * 2^exponent where any is out of range);
// - info = 1-based index of the first exactly-zero pivot (0 if none);
// - the inverse is formed in place as LAPACK's getri forms it (invert), and
//   the adjugate from the same steps, also where A is singular (adjugate).
#pragma once

#include "kernels/lane_math.hpp"
#include "kernels/lanes.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

// Matrix shape: compile-time when N (M) >= 0, run-time when -1.
template <int N, int M> struct shape {
  static constexpr int fixed_n = N, fixed_m = M;
  int n_ = N, m_ = M;
  TINYLA_HD constexpr int n() const {
    if constexpr (N >= 0) return N;
    else return n_;
  }
  TINYLA_HD constexpr int m() const {
    if constexpr (M >= 0) return M;
    else return m_;
  }
};

// x * 2^e, part by part (a complex part over- or underflows only where it does itself).
template <class E> TINYLA_HD E scale_pow2(E x, lane_of<E> e) {
  if constexpr (element_traits<E>::is_complex) return {ldexp2(x.re, e), ldexp2(x.im, e)};
  else return ldexp2(x, e);
}

// 2^k, k >= 0, as a constant.
template <class T> constexpr T exact_pow2(int k) {
  T b = 1;
  for (int i = 0; i < k; ++i) b *= 2;
  return b;
}
// det_accum's bound for unnormalized products (below).
template <class T> inline constexpr T unnormalized_bound = exact_pow2<T>(std::numeric_limits<T>::max_exponent - 24);

// |det| = mant * 2^expo, det = sign * |det| (real) or sign * mant * 2^expo (complex).
// sign is +-1 (real) or a complex number (normalized: a unit phase); mant == 0
// means singular (a zero pivot, whatever comes after it), nan means a NaN pivot
// before any zero pivot. Readers (logabsdet, determinant) need it normalized:
// 0.5 <= mant <= 1, |sign| = 1, which a fresh accumulator, one multiply() on
// it, and normalize() all leave.
// multiply<true>() (an elimination's pivots, normalize() after the last) skips
// the per-pivot normalization while every product stays within
// 2^+-(max_exponent - 24) (unnormalized_bound):
// - real, SIMD lanes: mant is kept unnormalized while every lane's product mant |pivot|
//   stays in range: a normal number, rounded as mant times frexp's fraction of |pivot| would
//   be (the two differ by a power of two), so the normalized result is the same, bit for bit,
//   with no frexp per pivot (about 20 vector instructions on AVX2);
// - complex, every lane width: sign takes the pivot itself, sign * pivot, where that
//   product's larger part is in range (per lane), and normalize() moves |sign| into mant.
//   One complex product per pivot in place of a modulus and a phase (4 divisions and 2
//   square roots): complex128 slogdet at n = 3, 4 1.4-1.5x on an Intel Xeon. The phase's
//   rounding differs from numpy's pivot-by-pivot sign * (p / |p|), within the same error
//   bound (a complex product with an fma per part errs by at most 2u normwise: Jeannerod,
//   Kornerup, Louvet and Muller, Math. Comp. 86 (2017)). A lane's bits do not depend on its
//   neighbours: the range is checked per lane. multiply<false> on complex is that step and
//   normalize(), so every lane width and the GPU give the same bits. In a GPU thread the
//   branch costs the shared-memory team kernels some local memory on sm_90 (complex128
//   determinant 48 bytes), the per-thread kernels none.
// Other products (a zero, inf or NaN pivot, one near the range's ends) take frexp's path of
// |pivot| and the phase p / |p|, and normalize() after it.
template <class E> struct det_accum {
  using L = lane_of<E>;
  using T = lane_real<L>;
  E sign = make_element<E>(1.0);
  L mant = L(1);
  L expo = L(0);

  TINYLA_HD void flip(mask_of<L> m) { sign = select(m, -sign, sign); }
  template <bool Unnormalized = false> TINYLA_HD void multiply(E pivot) {
    if constexpr (element_traits<E>::is_complex) {
      multiply_complex(pivot);
      if constexpr (!Unnormalized) normalize();
    } else {
      // SIMD lanes only. In a GPU thread the branch cost registers and local memory (sm_90,
      // ptxas: the float64 determinant at n = 7 130 -> 141 registers) and lengthened the warp
      // teams' steps; there frexp is a few integer operations.
      constexpr bool lazy = Unnormalized && lane_traits<L>::width > 1;
      const L mag = absval(pivot);
      sign = select(pivot < L(0), -sign, sign);
      if constexpr (lazy) {
        const L product = mant * mag;
        if (!any_of(!in_unnormalized_range(product))) {
          mant = product;
          return;
        }
      }
      L e;
      const L f = frexp2(mag, e);
      // The first zero pivot decides, as LAPACK's info > 0 does for numpy:
      // later pivots may be inf or NaN (0 * inf in the elimination).
      mant = select(mant == L(0), mant, mant * f);
      expo = expo + e;
      if constexpr (lazy) normalize();  // else mant could drift below the range, step by step
    }
  }
  TINYLA_HD void normalize() { normalize(sign, mant, expo); }
  // sign as reported: 0 when singular, nan when nan.
  TINYLA_HD E reported_sign() const {
    const E s = select(mant == L(0), make_element<E>(0.0), sign);
    return select(is_nan(mant), nan_element<E>(), s);
  }
  TINYLA_HD L logabsdet() const { return log_scaled(mant, expo); }
  // The phase times mant, then scaled: a complex determinant whose modulus overflows while
  // its parts do not (up to sqrt(2) x the largest number) keeps finite parts.
  TINYLA_HD E determinant() const { return scale_pow2(scale_by(reported_sign(), mant), expo); }

 private:
  static TINYLA_HD mask_of<L> in_unnormalized_range(L x) {
    return (x >= L(T(1) / unnormalized_bound<T>)) & (x <= L(unnormalized_bound<T>));
  }
  // sign * pivot where its larger part is in range: a normal number whose parts' products
  // neither overflow nor lose what matters (each is at most sqrt(2) x it). Elsewhere |pivot|
  // and its phase, as numpy takes them.
  TINYLA_HD void multiply_complex(E pivot) {
    const E product = sign * pivot;
    const auto in_range = in_unnormalized_range(max_component(product));  // false for NaN
    if (!any_of(!in_range)) {
      sign = product;
      return;
    }
    const L lifted = scale_into_range(pivot);  // else |pivot| could round to a subnormal or overflow
    // A NaN part makes the determinant NaN even beside an infinite part (which
    // modulus, as C99's cabs, counts as an infinity): elimination cannot tell
    // a NaN entry carried next to an inf from inf - inf, and numpy says NaN.
    const auto nan_re = is_nan(pivot.re), nan_im = is_nan(pivot.im);  // named: no || for bool lanes
    const L mag = select(nan_re | nan_im, L(std::numeric_limits<T>::quiet_NaN()), modulus(pivot));
    L e;
    const L f = frexp2(mag, e);
    // The first zero pivot decides (as for real types); a zero pivot leaves sign as it is.
    E s = select(mag == L(0), sign, sign * unit_phase(pivot));
    L m = select(mant == L(0), mant, mant * f), x = expo + e - lifted;
    normalize(s, m, x);  // per lane: its next product is in range again, whatever its neighbours do
    sign = select(in_range, product, s);
    mant = select(in_range, mant, m);
    expo = select(in_range, expo, x);
  }
  static TINYLA_HD void normalize(E& sign, L& mant, L& expo) {
    if constexpr (element_traits<E>::is_complex) {
      // |sign| into mant. sign is never 0 or infinite (see multiply_complex); NaN only after a
      // NaN pivot, which left mant NaN (or 0, where a zero pivot came first).
      const L m = modulus(sign);
      const auto number = m == m;
      // Divided, not times 1/m: a real or imaginary phase comes out exactly +-1 or +-i.
      sign = select(number, E{sign.re / m, sign.im / m}, sign);
      mant = select(number, mant * m, mant);
    }
    L e;
    mant = frexp2(mant, e);
    expo = expo + e;
  }
};

// Stands in for det_accum where no output needs the determinant (inv, solve):
// the same calls, no work.
template <class E> struct no_det {
  TINYLA_HD void flip(mask_of<lane_of<E>>) {}
  template <bool Unnormalized = false> TINYLA_HD void multiply(E) {}
  TINYLA_HD void normalize() {}
};

// Multiplies by 1/p the way getf2 does: with the reciprocal. getf2 divides instead
// where |p| is so small that 1/p would overflow; here those lanes multiply by the
// reciprocal of p * 2^(digits+1) (exact, and normal) and scale the product back (exact
// unless the quotient overflows, as it would divided): the reciprocal path's two
// roundings, and no division per entry. On a GPU a division's rare path is a subroutine
// call, and what is live across it stays in registers: the per-thread float64 inverse
// took 80 registers where it now takes 76 at n = 4, 144 for 126 at n = 6 (sm_90: 12 ->
// 16 warps per SM).
// The same products in every lane, in two schedules. A lane that is one matrix (a GPU
// thread) takes that reciprocal for r, branch-free: with a branch, ptxas took the
// float64 inverse at n = 6 to 130 registers (12 warps per SM). SIMD lanes keep 1/p in r
// and take the other where a lane needs it: the select before the reciprocal sat on
// every step's critical path (AVX2, n = 3..8: 3-14 % slower on a busy machine), and a
// branch around a second reciprocal made GCC's float64 inverse at n = 5 run 24 % more
// instructions.
template <class E> struct pivot_inverse {
  using L = lane_of<E>;
  using T = lane_real<L>;
  static constexpr T lift = subnormal_lift<T>;  // 2^(digits+1)
  static constexpr bool one_lane = lane_traits<L>::width == 1;
  E p, r;           // r: 1/p, but a GPU thread's 1/(p 2^(digits+1)) where p is tiny
  mask_of<L> tiny;  // a mask, not the factor: a predicate on the GPU, not 2 registers
  bool any_tiny;
  TINYLA_HD explicit pivot_inverse(E pivot) : p(pivot) {
    tiny = (max_component(p) < L(std::numeric_limits<T>::min())) & !is_zero(p);
    any_tiny = any_of(tiny);
    r = reciprocal_or_zero(one_lane ? select(tiny, p * L(lift), p) : p);
  }
  TINYLA_HD E apply(E x) const {
    E q = x * r;
    if constexpr (one_lane) {
      if (any_tiny) [[unlikely]]  // as likely, clang took gfx942's W = 32 determinant past 256 VGPRs
        q = q * L(lift);
    } else if (any_tiny) {
      q = select(tiny, x * reciprocal_or_zero(p * L(lift)) * L(lift), q);
    }
    return q;
  }
  // x[j * stride] = apply(x[j * stride]) for j < count. SIMD lanes test any_tiny once for all
  // the entries, not once per entry (a branch each; complex inverses at n = 3, 4 ran 1.2-1.6x
  // as fast without, docs/benchmarks.md); a GPU thread keeps apply's own test per entry.
  TINYLA_HD void apply_all(E* x, int count, int stride) const {
    if constexpr (one_lane) {
      TINYLA_UNROLL
      for (int j = 0; j < count; ++j) x[j * stride] = apply(x[j * stride]);
    } else if (!any_tiny) [[likely]] {
      TINYLA_UNROLL
      for (int j = 0; j < count; ++j) x[j * stride] = x[j * stride] * r;
    } else {
      const E r_lifted = reciprocal_or_zero(p * L(lift));
      TINYLA_UNROLL
      for (int j = 0; j < count; ++j)
        x[j * stride] = select(tiny, x[j * stride] * r_lifted * L(lift), x[j * stride] * r);
    }
  }
};

// Swaps x[j * stride] and y[j * stride], j < len, in the lanes where t holds.
template <class E, class M> TINYLA_HD void swap_where(M t, E* x, E* y, int len, int stride = 1) {
  TINYLA_UNROLL_INNER
  for (int j = 0; j < len; ++j) {
    E u = x[j * stride], v = y[j * stride];
    x[j * stride] = select(t, v, u);
    y[j * stride] = select(t, u, v);
  }
}

// Swaps rows k and p_w (len elements each, p_w = lane w of piv) in each lane w.
// A lane with p_w = k swaps row k with itself. For run-time n: no branch on the
// pivots, which are as good as random (a branch per candidate row mispredicted
// often enough to cost a third of the n = 16 determinant on 4096 matrices).
// Column by column, row k and every lane's pivot row are loaded before any is
// stored, so no load waits for a store of the same swap (lane after lane, each
// lane loading after the previous lane's store, took 1.05-1.15x this time at
// n = 9..16 on a Zen 4, AVX2 and AVX-512).
template <class E, class L> TINYLA_HD void swap_rows_per_lane(L piv, int k, E* x, int len) {
  using traits = lane_traits<L>;
  constexpr int W = traits::width;
  E* const row_k = x + k * len;
  // Each lane writes only its own lane of its pivot row (assign_lane: a store of the element),
  // and the pivot rows are addressed from row k's entry by offsets: as W pointers of their own
  // GCC kept them on the stack and stepped them there every column. Against whole rows by
  // selects, each pivot row loaded, merged and stored whole: AVX-512 (then a masked store, a
  // Zen 5, 1 thread, 256 KiB, n = 9..32) float64 slogdet and solve 1.09-1.14x as fast, its
  // inverses 1.03-1.05x, complex128 1.03-1.13x, complex64 1.03-1.6x, float32 0.93-1.04x; AVX2
  // (a Zen 4) 0.99-1.26x, most in slogdet and solve.
  long long offset[W];  // row p_w - row k, in elements
  TINYLA_UNROLL
  for (int w = 0; w < W; ++w) offset[w] = (long long)(int(traits::value(piv, w)) - k) * len;
  TINYLA_UNROLL_INNER
  for (int j = 0; j < len; ++j) {
    E* const at = row_k + j;
    const E old = *at;
    E fresh = old;
    TINYLA_UNROLL
    for (int w = 0; w < W; ++w) fresh = select(traits::only_lane(w), at[offset[w]], fresh);
    TINYLA_UNROLL
    for (int w = 0; w < W; ++w) assign_lane(w, at[offset[w]], old);
    *at = fresh;
  }
}

template <class E> TINYLA_HD lane_of<E> first_zero_pivot(lane_of<E> info, E pivot, int k) {
  using L = lane_of<E>;
  return select(is_zero(pivot) & (info == L(0)), L(k + 1), info);
}

// out(e) -= sum_{p<k} x(e, p) * y(e, p) for the entries e = e0 .. e0+G-1, each
// sum formed first (products and additions rounded separately, p ascending)
// and subtracted once: Crout's order. G sums at a time keep G independent
// additions in flight.
template <int G, class E, class Out, class X, class Y>
TINYLA_HD void subtract_dot_products_group(int k, int e0, Out out, X x, Y y) {
  E sum[G];
  TINYLA_UNROLL
  for (int r = 0; r < G; ++r) sum[r] = x(e0 + r, 0) * y(e0 + r, 0);
  TINYLA_UNROLL_INNER
  for (int p = 1; p < k; ++p) {
    TINYLA_UNROLL
    for (int r = 0; r < G; ++r) sum[r] = sum[r] + x(e0 + r, p) * y(e0 + r, p);
  }
  TINYLA_UNROLL
  for (int r = 0; r < G; ++r) out(e0 + r) = out(e0 + r) - sum[r];
}

// The same for the entries e = 0 .. count-1 of a row or column: groups of R,
// then one at a time (every entry's sum is rounded the same way either way).
template <int R, class E, class Out, class X, class Y>
TINYLA_HD void subtract_dot_products(int k, int count, Out out, X x, Y y) {
  if (k == 0) return;
  int e0 = 0;
  TINYLA_UNROLL
  for (; e0 + R <= count; e0 += R) subtract_dot_products_group<R, E>(k, e0, out, x, y);
  TINYLA_UNROLL
  for (; e0 < count; ++e0) subtract_dot_products_group<1, E>(k, e0, out, x, y);
}

// sum_{p<k} x[p * xs] * y[p * ys] (k > 0), formed as subtract_dot_products
// forms each sum: the first product, then the others added, p ascending.
template <class E> TINYLA_HD E dot_product(int k, const E* x, long long xs, const E* y, long long ys) {
  E sum = x[0] * y[0];
  TINYLA_UNROLL_INNER
  for (int p = 1; p < k; ++p) sum = sum + x[p * xs] * y[p * ys];
  return sum;
}

// Gaussian elimination with partial pivoting on [A | B] in Crout's
// (left-looking) order: at step k, column k below the diagonal and then row k
// right of it receive all earlier steps at once, as sums of products
// subtracted once (subtract_dot_products). This is LAPACK's getf2 order for
// small n as OpenBLAS runs it, and with it integer matrices that are exactly
// singular end in an exactly zero pivot as often as numpy.linalg finds them
// (more often from n = 6), where the right-looking fused update often left a
// rounding residue (bench/exact_singularity.py counts both).
// A becomes L (strictly below the diagonal, unit diagonal implied) and U; B
// becomes L^-1 P B. Multiplies det(A) into acc; returns info. pivots (if not
// null) receives the row swapped with row k at step k.
// The other forms of this elimination: team_factor and warp_factor in
// src/gpu/kernels.hpp, the same operations in the same order spread over a
// team of GPU threads (one column update per thread per step; one row per
// thread, each entry keeping its sum). Change them together: the GpuKernels
// tests compare their bits with this one's.
template <class S, class E, class Acc>
TINYLA_HD lane_of<E> eliminate(S s, E* a, E* b, Acc& acc, lane_of<E>* pivots = nullptr) {
  using L = lane_of<E>;
  constexpr int R = element_traits<E>::is_complex ? 2 : 4;
  const int n = s.n(), m = s.m();
  L info = L(0);
  TINYLA_UNROLL
  for (int k = 0; k < n; ++k) {
    // Column k, rows k..n-1.
    subtract_dot_products<R, E>(
        k, n - k, [&](int e) -> E& { return a[(k + e) * n + k]; }, [&](int e, int p) { return a[(k + e) * n + p]; },
        [&](int, int p) { return a[p * n + k]; });
    L best = pivot_magnitude(a[k * n + k]);
    L piv = L(k);
    TINYLA_UNROLL
    for (int i = k + 1; i < n; ++i) {
      L v = pivot_magnitude(a[i * n + k]);
      auto t = v > best;  // strict: the first maximum wins, as in i?amax
      best = select(t, v, best);
      piv = select(t, L(i), piv);
    }
    if (S::fixed_n >= 0) {  // in registers: a select per candidate row
      TINYLA_UNROLL
      for (int i = k + 1; i < n; ++i) {
        auto t = piv == L(i);
        swap_where(t, a + k * n, a + i * n, n);
        swap_where(t, b + k * m, b + i * m, m);
      }
    } else {  // in memory: each lane's own two rows
      swap_rows_per_lane(piv, k, a, n);
      swap_rows_per_lane(piv, k, b, m);
    }
    // Row k, columns k+1..n-1 of A and all of B.
    subtract_dot_products<R, E>(
        k, n - k - 1, [&](int e) -> E& { return a[k * n + k + 1 + e]; }, [&](int, int p) { return a[k * n + p]; },
        [&](int e, int p) { return a[p * n + k + 1 + e]; });
    subtract_dot_products<R, E>(
        k, m, [&](int e) -> E& { return b[k * m + e]; }, [&](int, int p) { return a[k * n + p]; },
        [&](int e, int p) { return b[p * m + e]; });
    if (pivots) pivots[k] = piv;
    acc.flip(piv != L(k));
    const pivot_inverse<E> pinv(a[k * n + k]);
    acc.template multiply<true>(pinv.p);
    info = first_zero_pivot(info, pinv.p, k);
    pinv.apply_all(a + (k + 1) * n + k, n - k - 1, n);
    if ((k & 15) == 15) acc.normalize();  // frexp's path (one lane): mant >= 2^-16 here, never underflows
  }
  acc.normalize();
  return info;
}

// Solves U X = B in place (U: upper triangle of a).
template <class S, class E> TINYLA_HD void back_substitute(S s, const E* a, E* b) {
  const int n = s.n(), m = s.m();
  TINYLA_UNROLL
  for (int i = n - 1; i >= 0; --i) {
    TINYLA_UNROLL
    for (int c = i + 1; c < n; ++c) {
      const E u = a[i * n + c];
      TINYLA_UNROLL_INNER
      for (int j = 0; j < m; ++j) b[i * m + j] = sub_mul(b[i * m + j], u, b[c * m + j]);
    }
    pivot_inverse<E>(a[i * n + i]).apply_all(b + i * m, m, 1);
  }
}

// ---- n = 2 closed forms ----------------------------------------------------

// x*y - u*v to a few ulps even under cancellation (Kahan).
template <class L> TINYLA_HD L diff_of_products(L x, L y, L u, L v) {
  L w = u * v;
  L err = fmadd(-u, v, w);
  return fmadd(x, y, -w) + err;
}
// Complex x*y - u*v with the real products paired as they cancel when the
// rows (x, u) and (v, y) are proportional: then each pair is exactly 0.
template <class L> TINYLA_HD cplx<L> diff_of_products(cplx<L> x, cplx<L> y, cplx<L> u, cplx<L> v) {
  L re = diff_of_products(x.re, y.re, u.re, v.re) - diff_of_products(x.im, y.im, u.im, v.im);
  L im = diff_of_products(x.re, y.im, u.im, v.re) + diff_of_products(x.im, y.re, u.re, v.im);
  return {re, im};
}

// x = m * 2^e with m's largest component in [0.5, 1) (exact), or m = x, e = 0
// for 0, inf and nan.
template <class E> struct split_exponent {
  using L = lane_of<E>;
  E m;
  L e;
  TINYLA_HD explicit split_exponent(E x) {
    frexp2(max_component(x), e);
    m = scale_pow2(x, -e);
  }
};

// x*y - u*v = p * 2^s, from factors given as mantissa * 2^exponent: the
// smaller product is brought to the larger's exponent (where that underflows
// it is below the larger's rounding error) and the difference is Kahan's. A
// zero product does not set the scale. With all exponents 0 this is
// diff_of_products(x, y, u, v), bit for bit.
template <class E> struct scaled_difference {
  using L = lane_of<E>;
  E p;
  L s;
  TINYLA_HD scaled_difference(E x, L ex, E y, L ey, E u, L eu, E v, L ev) {
    const L none = L(-(1 << 19));  // far below any product's exponent; ldexp2 clamps at 2^20
    const L s1 = select(is_zero(x) | is_zero(y), none, ex + ey);
    const L s2 = select(is_zero(u) | is_zero(v), none, eu + ev);
    s = select(s1 < s2, s2, s1);
    p = diff_of_products(x, scale_pow2(y, s1 - s), u, scale_pow2(v, s2 - s));
  }
};

// LAPACK's info for a 2x2: 1 if the first column is zero, else 2 if det == 0.
template <class E> TINYLA_HD lane_of<E> info_2x2(E det, E a00, E a10) {
  using L = lane_of<E>;
  return select(is_zero(a00) & is_zero(a10), L(1), select(is_zero(det), L(2), L(0)));
}
// info_2x2 != 0, from the masks: compared as info, the lanes' info came back bit by bit
// (GCC, AVX-512: some 60 scalar instructions a lane group, a fifth of the n = 2 inverse).
template <class E> TINYLA_HD mask_of<lane_of<E>> singular_2x2(E det, E a00, E a10) {
  return is_zero(det) | (is_zero(a00) & is_zero(a10));
}

// A 2x2 lane group with each entry split into mantissa * 2^exponent, so that
// det = ad - bc = p * 2^s is formed without overflow or underflow even when a
// row or a column spans more than the exponent range (1e-300 next to 1e300).
// Lanes whose entries are all in the safe range keep exponent 0: there the
// result is the unscaled closed form's, bit for bit, whatever the other lanes
// hold.
template <class E> struct split_2x2 {
  using L = lane_of<E>;
  E m[4];
  L e[4];
  E p;  // det = p * 2^s
  L s;
  TINYLA_HD explicit split_2x2(const E* a, mask_of<L> safe) {
    TINYLA_UNROLL
    for (int i = 0; i < 4; ++i) {
      const split_exponent<E> q(a[i]);
      m[i] = select(safe, a[i], q.m);
      e[i] = select(safe, L(0), q.e);
    }
    const scaled_difference<E> d(m[0], e[0], m[3], e[3], m[1], e[1], m[2], e[2]);
    p = d.p, s = d.s;
  }
  // Into a fresh accumulator (mant stays normalized).
  TINYLA_HD void accumulate(det_accum<E>& acc) const {
    acc.multiply(p);
    acc.expo = acc.expo + s;
  }
  TINYLA_HD void accumulate(no_det<E>&) const {}
  TINYLA_HD L info() const { return info_2x2(p, m[0], m[2]); }
};

template <class S> TINYLA_HD constexpr bool may_be_2x2() { return S::fixed_n < 0 || S::fixed_n == 2; }

// The safe range's bound (below).
template <class T> inline constexpr T unscaled_bound = exact_pow2<T>(std::numeric_limits<T>::max_exponent / 4 - 2);
// True in lanes where x is 0 or within 2^+-(max_exponent/4 - 2) (complex: its larger
// part). Where all four entries of a 2x2 are (and, for a solve, the right-hand side's),
// ad - bc needs no scaling, and split_2x2 gives those lanes the unscaled form's bits, so
// lanes do not depend on their neighbours. Real entries: no product or rounding error
// under- or overflows, and a nonzero exact det is a normal number. A complex entry's
// smaller part may be tiny, even subnormal, and det too where the larger parts cancel
// exactly: the inverse lifts such a det as pivot_inverse lifts a pivot (invert_2x2).
template <class E> TINYLA_HD mask_of<lane_of<E>> safe_for_unscaled(E x) {
  using L = lane_of<E>;
  using T = lane_real<L>;
  const L c = max_component(x);
  return (c == L(0)) | ((c >= L(T(1) / unscaled_bound<T>)) & (c <= L(unscaled_bound<T>)));
}
template <class E> TINYLA_HD mask_of<lane_of<E>> safe_for_unscaled_2x2(const E* m) {
  return safe_for_unscaled(m[0]) & safe_for_unscaled(m[1]) & safe_for_unscaled(m[2]) & safe_for_unscaled(m[3]);
}
// Whether some lane of a 2x2 lane group has an entry outside the safe range (needs split_2x2).
// First a test of the whole group in about a dozen operations, where the masks take six per
// entry: the sum of the entries' magnitudes (NaN or inf where one is) at most the bound, their
// least at least its reciprocal. Zero entries (safe) fail it; the masks decide then.
template <class E> TINYLA_HD bool any_unsafe_for_unscaled_2x2(const E* m) {
  using L = lane_of<E>;
  using T = lane_real<L>;
  L sum = max_component(m[0]), smallest = sum;  // entry by entry: few registers live
  TINYLA_UNROLL
  for (int i = 1; i < 4; ++i) {
    const L c = max_component(m[i]);
    sum = sum + c;
    smallest = select(c < smallest, c, smallest);
  }
  if (!any_of(!((sum <= L(unscaled_bound<T>)) & (smallest >= L(T(1) / unscaled_bound<T>))))) return false;
  return any_of(!safe_for_unscaled_2x2(m));
}

// ---- operations --------------------------------------------------------------

// det(A) of a lane group; a is overwritten.
template <class S, class E> TINYLA_HD det_accum<E> determinant(S s, E* a) {
  det_accum<E> acc;
  const int n = s.n();
  if (n == 1) {
    acc.multiply(a[0]);
  } else if (n == 2) {
    if constexpr (may_be_2x2<S>()) {
      if (any_unsafe_for_unscaled_2x2(a)) split_2x2<E>(a, safe_for_unscaled_2x2(a)).accumulate(acc);
      else acc.multiply(diff_of_products(a[0], a[3], a[1], a[2]));
    }
  } else if (n > 2) {
    eliminate(shape<S::fixed_n, 0>{n, 0}, a, static_cast<E*>(nullptr), acc);
  }
  return acc;
}

// Solves A X = B in place (B n x m); multiplies det(A) into acc. Returns
// info; lanes with info > 0 get X filled with nan.
template <class S, class E, class Acc> TINYLA_HD lane_of<E> solve(S s, E* a, E* b, Acc& acc) {
  using L = lane_of<E>;
  const int n = s.n(), m = s.m();
  L info = L(0);
  if (n == 1) {
    const pivot_inverse<E> pinv(a[0]);
    acc.multiply(pinv.p);
    info = first_zero_pivot(info, pinv.p, 0);
    for (int j = 0; j < m; ++j) b[j] = pinv.apply(b[j]);
  } else if (n == 2) {
    if constexpr (may_be_2x2<S>()) {
      // x = adj(A) b / det. Where a lane's entries or right-hand side leave the
      // safe range, the differences of products are formed from split entries.
      bool split = any_unsafe_for_unscaled_2x2(a);
      for (int j = 0; j < m && !split; ++j) split = any_of(!(safe_for_unscaled(b[j]) & safe_for_unscaled(b[m + j])));
      if (!split) {
        const E det = diff_of_products(a[0], a[3], a[1], a[2]);
        acc.multiply(det);
        info = info_2x2(det, a[0], a[2]);
        const pivot_inverse<E> pinv(det);
        for (int j = 0; j < m; ++j) {
          const E b0 = b[j], b1 = b[m + j];
          b[j] = pinv.apply(diff_of_products(a[3], b0, a[1], b1));
          b[m + j] = pinv.apply(diff_of_products(a[0], b1, a[2], b0));
        }
      } else {
        const auto safe = safe_for_unscaled_2x2(a);
        const split_2x2<E> q(a, safe);
        q.accumulate(acc);
        info = q.info();
        const pivot_inverse<E> pinv(q.p);
        for (int j = 0; j < m; ++j) {
          const auto keep = safe & safe_for_unscaled(b[j]) & safe_for_unscaled(b[m + j]);
          const split_exponent<E> s0(b[j]), s1(b[m + j]);
          const E b0 = select(keep, b[j], s0.m), b1 = select(keep, b[m + j], s1.m);
          const L e0 = select(keep, L(0), s0.e), e1 = select(keep, L(0), s1.e);
          const scaled_difference<E> x0(q.m[3], q.e[3], b0, e0, q.m[1], q.e[1], b1, e1);
          const scaled_difference<E> x1(q.m[0], q.e[0], b1, e1, q.m[2], q.e[2], b0, e0);
          b[j] = scale_pow2(pinv.apply(x0.p), x0.s - q.s);
          b[m + j] = scale_pow2(pinv.apply(x1.p), x1.s - q.s);
        }
      }
    }
  } else if (n > 2) {
    info = eliminate(s, a, b, acc);
    back_substitute(s, a, b);
  }
  const auto singular = info != L(0);
  const E nan = nan_element<E>();
  if (any_of(singular)) {
    TINYLA_UNROLL
    for (int j = 0; j < n * m; ++j) b[j] = select(singular, nan, b[j]);
  }
  return info;
}

// X = A^-1 of a 2x2 lane group: adj(A) / det, entry j of the adjugate as
// (m_j / p) * 2^(e_j - s) with split_2x2's exponents; where every lane is in
// the safe range those are 0 and the unscaled form (same bits) is used.
// Returns info as solve does (NaN-filled if singular).
// transposed: writes (A^-1)^T (the off-diagonal pair swapped, in registers).
template <class E, class Acc> TINYLA_HD lane_of<E> invert_2x2(const E* a, E* x, Acc& acc, bool transposed) {
  using L = lane_of<E>;
  if (!any_unsafe_for_unscaled_2x2(a)) {
    // The common case, the unscaled form's bits with fewer operations: every entry is in the
    // safe range, and det == 0 is the singular case (a zero first column gives exactly 0).
    // Real entries make det 0 or a normal number (safe_for_unscaled): its reciprocal needs
    // none of pivot_inverse's lifting. Complex ones may make it subnormal; lifted, as the
    // split path below lifts it, a lane's bits do not depend on whether a neighbour sends
    // its group there. Entries written one by one: through an array passed to a helper,
    // complex128 kept them on the stack (AVX2 and AVX-512: 1.1x the inverse's time).
    const E det = diff_of_products(a[0], a[3], a[1], a[2]);
    acc.multiply(det);
    E y0, y1, y2, y3;
    if constexpr (element_traits<E>::is_complex) {
      const pivot_inverse<E> pinv(det);
      y0 = pinv.apply(a[3]), y1 = pinv.apply(-a[1]), y2 = pinv.apply(-a[2]), y3 = pinv.apply(a[0]);
    } else {
      const E r = reciprocal_or_zero(det);
      y0 = a[3] * r, y1 = -a[1] * r, y2 = -a[2] * r, y3 = a[0] * r;
    }
    x[0] = y0, x[3] = y3;
    x[1] = transposed ? y2 : y1, x[2] = transposed ? y1 : y2;
    const auto singular = is_zero(det);
    if (any_of(singular))
      for (int j = 0; j < 4; ++j) x[j] = select(singular, nan_element<E>(), x[j]);
    return info_2x2(det, a[0], a[2]);
  }
  const split_2x2<E> q(a, safe_for_unscaled_2x2(a));
  q.accumulate(acc);
  const E det = q.p;
  const E adj[4] = {q.m[3], -q.m[1], -q.m[2], q.m[0]};
  const L adj_exp[4] = {q.e[3] - q.s, q.e[1] - q.s, q.e[2] - q.s, q.e[0] - q.s};
  const pivot_inverse<E> pinv(det);
  E y[4];
  for (int j = 0; j < 4; ++j) y[j] = scale_pow2(pinv.apply(adj[j]), adj_exp[j]);
  x[0] = y[0], x[3] = y[3];
  x[1] = transposed ? y[2] : y[1], x[2] = transposed ? y[1] : y[2];
  const auto singular = singular_2x2(det, a[0], a[2]);
  if (any_of(singular))
    for (int j = 0; j < 4; ++j) x[j] = select(singular, nan_element<E>(), x[j]);
  return info_2x2(det, a[0], a[2]);
}

// ---- inverse in place (LAPACK getri's scheme) --------------------------------------

// sum[r] = sum_{p = lo + r}^{hi - 1} x(r, p) * y(r, p) for r < G, summed from
// p = hi - 1 down (the first product, then the others added): G sums of
// staggered lengths kept in flight together. Every sum has a term: G <= hi - lo.
template <int G, class E, class X, class Y> TINYLA_HD void staggered_sums(int lo, int hi, E* sum, X x, Y y) {
  TINYLA_UNROLL
  for (int r = 0; r < G; ++r) sum[r] = x(r, hi - 1) * y(r, hi - 1);
  TINYLA_UNROLL_INNER
  for (int p = hi - 2; p >= lo + G - 1; --p) {
    TINYLA_UNROLL
    for (int r = 0; r < G; ++r) sum[r] = sum[r] + x(r, p) * y(r, p);
  }
  TINYLA_UNROLL
  for (int p = (hi - 2 < lo + G - 2 ? hi - 2 : lo + G - 2); p >= lo; --p) {
    // A constant trip count with a test, not r <= p - lo: with that run-time bound GCC kept
    // sum in memory (float64 inverses at run-time n, AVX2 on a Zen 4: 1.04-1.21x as fast so).
    TINYLA_UNROLL
    for (int r = 0; r < G - 1; ++r)
      if (r <= p - lo) sum[r] = sum[r] + x(r, p) * y(r, p);
  }
}

// The entries of the inverse, in the two forms that compute them: invert_factored
// (a lane group, in place, column by column) and the GPU team kernel (a thread
// per row). Row i of X = U^-1 solves X U = I from the left:
//   X[i][j] = (delta_ij - sum_{p=i}^{j-1} X[i][p] U[p][j]) / U[j][j]   (j >= i),
// `sum` that sum as staggered_sums forms it (none when i == j): the numerator, then
// u_jj's apply (invert_factored applies it to the column's numerators at once).
template <class E> TINYLA_HD E numerator_of_u_entry(bool diagonal, E sum) {
  return diagonal ? make_element<E>(1.0) : make_element<E>(0.0) - sum;
}
template <class E> TINYLA_HD E inverse_of_u_entry(bool diagonal, E sum, const pivot_inverse<E>& u_jj) {
  return u_jj.apply(numerator_of_u_entry(diagonal, sum));
}
// then row i of Y = A^-1 P^T = U^-1 L^-1 solves Y L = X from the right:
//   Y[i][j] = X[i][j] - sum_{p>j} Y[i][p] L[p][j]   (X[i][j] = 0 for j < i),
// the sum as subtract_dot_products forms it, p ascending.

// Y = A^-1 P^T in place from eliminate's factors (one n x n array and one
// column: a thread's inverse fits in its registers), in LAPACK getri's order:
// U^-1 column by column from the left, each column's rows top down (an entry's
// numerator overwrites the U entry that only the rows above it read; the column
// is divided by its pivot once all are formed); then Y L = U^-1 column by column
// from the right, L's column moved to `column` first.
template <class S, class E> TINYLA_HD void invert_factored(S s, E* a, E* column) {
  constexpr int R = element_traits<E>::is_complex ? 2 : 4;
  // A GPU thread divides each entry as it is formed: fewer values live (the column at once,
  // with apply_all's test hoisted, gave gfx942's float64 inverse at n = 7 two spills).
  constexpr bool per_entry = lane_traits<lane_of<E>>::width == 1;
  const auto entry = [](bool diagonal, E sum, const pivot_inverse<E>& u_jj) {
    return per_entry ? inverse_of_u_entry(diagonal, sum, u_jj) : numerator_of_u_entry(diagonal, sum);
  };
  const int n = s.n();
  TINYLA_UNROLL
  for (int j = 0; j < n; ++j) {
    const pivot_inverse<E> u_jj(a[j * n + j]);
    const auto x = [&](int i0) { return [=](int r, int p) { return a[(i0 + r) * n + p]; }; };
    const auto u = [&](int, int p) { return a[p * n + j]; };
    int i0 = 0;
    TINYLA_UNROLL
    for (; i0 + R <= j; i0 += R) {  // rows i0 .. i0+R-1 together: all sums, then the stores
      E sum[R];
      staggered_sums<R>(i0, j, sum, x(i0), u);
      TINYLA_UNROLL
      for (int r = 0; r < R; ++r) a[(i0 + r) * n + j] = entry(false, sum[r], u_jj);
    }
    TINYLA_UNROLL
    for (; i0 < j; ++i0) {
      E sum[1];
      staggered_sums<1>(i0, j, sum, x(i0), u);
      a[i0 * n + j] = entry(false, sum[0], u_jj);
    }
    a[j * n + j] = entry(true, make_element<E>(0.0), u_jj);
    if constexpr (!per_entry) u_jj.apply_all(a + j, j + 1, n);
  }
  TINYLA_UNROLL
  for (int j = n - 2; j >= 0; --j) {
    TINYLA_UNROLL
    for (int p = j + 1; p < n; ++p) column[p] = a[p * n + j], a[p * n + j] = make_element<E>(0.0);
    subtract_dot_products<R, E>(
        n - 1 - j, n, [&](int i) -> E& { return a[i * n + j]; }, [&](int i, int p) { return a[i * n + j + 1 + p]; },
        [&](int, int p) { return column[j + 1 + p]; });
  }
}

// A^-1 in place, but for getri's last step, which the caller takes where it
// is cheap: a becomes Y = A^-1 P^T, and A^-1 is Y with its columns k and
// pivots[k] swapped for k = n-2 down to 0 (the CPU backend: selects in the
// lanes for small n, moves in the stored matrices for larger; a GPU thread:
// each column stored to its place, column_positions). For n = 2 with
// transposed, a is the transpose (larger n ignore transposed: the caller
// transposes). pivots and column: n elements of scratch each. Returns info as
// solve does (the inverse NaN-filled where singular).
template <int N, class E, class Acc>
TINYLA_HD lane_of<E> invert(shape<N, N> s, E* a, Acc& acc, lane_of<E>* pivots, E* column, bool transposed = false) {
  using L = lane_of<E>;
  const int n = s.n();
  if (N == 2 || (N < 0 && n == 2)) {
    if constexpr (may_be_2x2<shape<N, N>>()) {
      E x[4];
      const L info = invert_2x2(a, x, acc, transposed);
      for (int j = 0; j < 4; ++j) a[j] = x[j];
      pivots[0] = L(0);
      return info;
    }
  }
  const L info = eliminate(shape<N, 0>{n, 0}, a, static_cast<E*>(nullptr), acc, pivots);
  invert_factored(s, a, column);
  const auto singular = info != L(0);
  if (any_of(singular)) {
    TINYLA_UNROLL
    for (int j = 0; j < n * n; ++j) a[j] = select(singular, nan_element<E>(), a[j]);
  }
  return info;
}

// ---- adjugate: det(A) A^-1, also where A is singular ---------------------------------

// u, or 1 where u is exactly zero: U~'s diagonal entry (adjugate, below).
template <class E> TINYLA_HD E unit_if_zero(E u) { return select(is_zero(u), make_element<E>(1.0), u); }

// det(P) det(U~) from U~'s diagonal entries diag(k) and whether step k swapped rows (moved(k)).
template <class E, class Diag, class Moved> TINYLA_HD det_accum<E> det_of_unit_pivots(int n, Diag diag, Moved moved) {
  det_accum<E> scale;
  TINYLA_UNROLL
  for (int k = 0; k < n; ++k) {
    scale.flip(moved(k));
    scale.template multiply<true>(diag(k));
    if ((k & 15) == 15) scale.normalize();
  }
  scale.normalize();
  return scale;
}

// Multiplication by a det_accum's value (the adjugate's scale): where it is a normal number,
// one multiply by it; elsewhere by its mantissa, then 2^exponent. Each lane's choice is its own.
template <class E> struct scale_by_accum {
  using L = lane_of<E>;
  using T = lane_real<L>;
  E factor, value;
  L expo;
  mask_of<L> in_range;
  bool any_out_of_range;
  TINYLA_HD explicit scale_by_accum(const det_accum<E>& s) : factor(scale_by(s.reported_sign(), s.mant)), expo(s.expo) {
    in_range = (s.expo < L(std::numeric_limits<T>::max_exponent)) & (s.expo > L(std::numeric_limits<T>::min_exponent));
    value = scale_pow2(factor, select(in_range, s.expo, L(0)));
    any_out_of_range = any_of(!in_range);
  }
  TINYLA_HD E apply(E x) const {
    E y = x * value;
    if (any_out_of_range) y = select(in_range, y, scale_pow2(x * factor, expo));
    return y;
  }
  // x[j] = apply(x[j]) for j < count; SIMD lanes test any_out_of_range once (as
  // pivot_inverse::apply_all), a GPU thread per entry (hoisted, the test took clang's gfx942
  // float64 adjugate at n = 5 from 110 to 143 VGPRs).
  TINYLA_HD void apply_all(E* x, int count) const {
    if (lane_traits<L>::width > 1 && !any_out_of_range) {
      TINYLA_UNROLL
      for (int j = 0; j < count; ++j) x[j] = x[j] * value;
      return;
    }
    TINYLA_UNROLL
    for (int j = 0; j < count; ++j) x[j] = apply(x[j]);
  }
};

// adj(A) in place (the derivative of det A: d det = tr(adj(A) dA)), and det(A) into acc;
// getri's last step is left to the caller, as invert leaves it: a becomes adj(A) P^T.
// From P A = L U: adj(A) = det(P) adj(U) L^-1 P. Where no pivot is zero that is
// det(A) Y, with invert's Y = U^-1 L^-1 = A^-1 P^T. Where pivots are exactly zero, at steps
// z_1 < ... < z_m: L's columns z_i are zero (each pivot was the largest entry left in its
// column), and U~, U with those pivots replaced by 1, is nonsingular. adj(U) has rank one
// (U x = 0 for x = U~^-1 e_z1, y^T U = 0 for y^T = e_zm^T U~^-1), and its entry (z_1, z_m),
// U + t e_zm e_z1^T's determinant per unit t, is det(U~) prod_i (U~^-1)[z_i][z_i+1] (the
// determinant lemma for U = U~ - sum_i e_zi e_zi^T). With Y~ = U~^-1 L^-1, which agrees with
// U~^-1 on those columns, adj(A) P^T = det(P) det(U~) prod_i Y~[z_i][z_i+1] (Y~ e_z1)(e_zm^T Y~):
// exact where A has rank n - 1, and 0 (from the product) where its rank is lower. Where
// det(P) det(U~) is out of range, it is applied as its mantissa times 2^exponent, so adj(A)
// is finite wherever its entries are, also where det overflows. zero_pivot: n elements of
// scratch. n <= 2: the adjugate's closed forms (transposed: a becomes adj(A)^T, as invert's
// do).
template <int N, class E> TINYLA_HD void adjugate(shape<N, N> s, E* a, det_accum<E>& acc, lane_of<E>* pivots, E* column,
                                                  lane_of<E>* zero_pivot, bool transposed = false) {
  using L = lane_of<E>;
  const int n = s.n();
  if (n <= 2) {
    if (n == 0) return;
    pivots[0] = L(0);  // no column swaps
    if (n == 1) {
      acc.multiply(a[0]);
      a[0] = make_element<E>(1.0);
      return;
    }
    if constexpr (may_be_2x2<shape<N, N>>()) {
      const E a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3];
      acc = determinant(shape<N, 0>{n, 0}, a);
      a[0] = a11, a[3] = a00;
      a[1] = -(transposed ? a10 : a01), a[2] = -(transposed ? a01 : a10);
    }
    return;
  }
  const L info = eliminate(shape<N, 0>{n, 0}, a, static_cast<E*>(nullptr), acc, pivots);
  const auto singular = info != L(0);
  const bool any_singular = any_of(singular);
  L last_zero = L(0);
  TINYLA_UNROLL
  for (int k = 0; k < n; ++k) {
    const auto zero = is_zero(a[k * n + k]);
    zero_pivot[k] = select(zero, L(1), L(0));
    last_zero = select(zero, L(k), last_zero);
    if (any_singular) a[k * n + k] = unit_if_zero(a[k * n + k]);
  }
  // det(P) det(U~): where no pivot is zero, det(A) (acc's operations)
  const det_accum<E> scale = any_singular
                                 ? det_of_unit_pivots<E>(
                                       n, [&](int k) { return a[k * n + k]; }, [&](int k) { return pivots[k] != L(k); })
                                 : acc;
  invert_factored(s, a, column);
  if (any_singular) {
    const L first_zero = info - L(1);
    // prod_i Y~[z_i][z_i+1], along the zero pivots after the first.
    E chain = make_element<E>(1.0);
    L previous = first_zero;
    TINYLA_UNROLL
    for (int k = 1; k < n; ++k) {
      const auto next = (zero_pivot[k] == L(1)) & (L(k) > previous);
      if (!any_of(next)) continue;
      E y = a[k];
      TINYLA_UNROLL
      for (int r = 1; r < k; ++r) y = select(previous == L(r), a[r * n + k], y);
      chain = select(next, chain * y, chain);
      previous = select(next, L(k), previous);
    }
    TINYLA_UNROLL
    for (int i = 0; i < n; ++i) {  // chain * (Y~ e_z1)
      E y = a[i * n];
      TINYLA_UNROLL
      for (int k = 1; k < n; ++k) y = select(first_zero == L(k), a[i * n + k], y);
      column[i] = chain * y;
    }
    TINYLA_UNROLL
    for (int j = 0; j < n; ++j) {  // times e_zm^T Y~: column j's row-z_m entry read before it is written
      E y = a[j];
      TINYLA_UNROLL
      for (int k = 1; k < n; ++k) y = select(last_zero == L(k), a[k * n + j], y);
      TINYLA_UNROLL
      for (int i = 0; i < n; ++i) a[i * n + j] = select(singular, column[i] * y, a[i * n + j]);
    }
  }
  scale_by_accum<E>(scale).apply_all(a, n * n);
}

}  // namespace tinyla::TINYLA_KERNEL_NS
