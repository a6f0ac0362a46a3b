// The CPU backend for one ISA: packs W consecutive matrices of the batch into
// W lanes (an in-register transpose), runs the src/kernels algorithm on the
// lane group, and unpacks the results. CMake compiles this file twice per ISA
// and dtype (by size, below), with that ISA's target flags and:
//   TINYLA_KERNEL_NS     namespace of this instantiation (see lanes.hpp)
//   TINYLA_DTYPE         the dtype (f32, f64, c64, c128): defines range_<isa>_<dtype>
//   TINYLA_TABLE         (one of the ISA's objects) name of the backend_table to define
//   TINYLA_VECTOR_BYTES  vector register width; 0 = scalar lanes (W = 1)
//   TINYLA_SMALL_MAX_N   n <= this (log_det_laplacian: n <= 7): this object's, beside
//                        range_<isa>_<dtype> (the entry point); larger n, compile-time
//                        and run-time: another object's,
//                        which CMake unrolls by other limits, and which defines
//   TINYLA_LARGE_SIZES   (set there) large_range_<isa>_<dtype> in its place
#include <algorithm>
#include <bit>
#include <complex>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "cpu/backend.hpp"
#include "cpu/simd.hpp"
#include "kernels/log_det_laplacian.hpp"
#include "kernels/lu.hpp"

#if !defined(TINYLA_VECTOR_BYTES) || !defined(TINYLA_DTYPE) || !defined(TINYLA_SMALL_MAX_N)
#error "TINYLA_VECTOR_BYTES, TINYLA_DTYPE and TINYLA_SMALL_MAX_N must be set by the build"
#endif

namespace tinyla::cpu {
void TINYLA_LARGE_RANGE(TINYLA_KERNEL_NS, TINYLA_DTYPE)(const job& jb, std::int64_t begin, std::int64_t end);
}

namespace tinyla::TINYLA_KERNEL_NS {
namespace {

using cpu::job;
using cpu::op;
using std::int64_t;

// Sizes with a compile-time instantiation (fully unrolled); larger n up to
// max_fast_n share one run-time-n instantiation (same code, same bits).
#ifndef TINYLA_MAX_FIXED_N
#define TINYLA_MAX_FIXED_N 8
#endif
constexpr int max_fixed_n = TINYLA_MAX_FIXED_N;
constexpr int small_max_n = TINYLA_SMALL_MAX_N < max_fixed_n ? TINYLA_SMALL_MAX_N : max_fixed_n;
// log_det_laplacian's unrolled sizes stop at 7: unrolled at n = 8 it took 1.4-2.2x the time
// (a Zen 5, AVX-512 and AVX2, every dtype), so that size stays with the other object.
constexpr int small_max_laplacian_n = small_max_n < 7 ? small_max_n : 7;

template <class R> constexpr int lanes_of() {
  return TINYLA_VECTOR_BYTES == 0 ? 1 : TINYLA_VECTOR_BYTES / int(sizeof(R));
}
// P = 2 pairs two registers per lane group (simd_pair) for more instructions in flight.
template <class R, int W, int P> struct lane_type {
  using type = std::conditional_t<P == 2, simd_pair<R, W>, simd<R, W>>;
};
template <class R, int P> struct lane_type<R, 1, P> {
  using type = R;
};

template <class L> TINYLA_INLINE lane_real<L> lane_get(L x, int w) { return lane_traits<L>::value(x, w); }

// ---- packing: rows of W consecutive matrices <-> lanes ------------------------

template <int W, int d, bool hi, class V, std::size_t... I>
TINYLA_INLINE V butterfly(V a, V b, std::index_sequence<I...>) {
  // Exchanges bit d of the vector index with bit d of the lane index.
  return __builtin_shufflevector(a, b, (hi ? ((I & d) == 0 ? I + d : W + I) : ((I & d) == 0 ? I : W + I - d))...);
}
template <int W, int K, class V, std::size_t... I> TINYLA_INLINE V lane_order(V a, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, a, int((I % (W / K)) * K + I / (W / K))...);
}
template <int W, int K, bool Inverse, class V, std::size_t... I>
TINYLA_INLINE V lane_order_inverse(V a, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, a, int((I % K) * (W / K) + I / K)...);
}

// Transposes a W x K block of reals (K a power of two dividing W) held as K
// vectors of the flat row-major block, into K vectors of W lanes (vector c =
// element c of every row), or back (Inverse). Flat index w*K + c sits at
// vector w / (W/K), lane (w % (W/K))*K + c: log2(K) butterflies move c into
// the vector index, one permute puts w in lane order. K = W is the square
// transpose.
template <int W, int K, bool Inverse, class V> TINYLA_INLINE void transpose_block(V* r) {
  constexpr auto lanes = std::make_index_sequence<W>{};
  if constexpr (Inverse)
    for (int c = 0; c < K; ++c) r[c] = lane_order_inverse<W, K, true>(r[c], lanes);
  [&]<int... D>(std::integer_sequence<int, D...>) {
    [[maybe_unused]] auto stage = [&]<int d>() {
      for (int i = 0; i < K; ++i) {
        if (i & d) continue;
        V a = r[i], b = r[i + d];
        r[i] = butterfly<W, d, false>(a, b, lanes);
        r[i + d] = butterfly<W, d, true>(a, b, lanes);
      }
    };
    (stage.template operator()<(1 << D)>(), ...);
  }(std::make_integer_sequence<int, std::bit_width(unsigned(K)) - 1>{});
  if constexpr (!Inverse)
    for (int c = 0; c < K; ++c) r[c] = lane_order<W, K>(r[c], lanes);
}

// Calls f(std::integral_constant<int, K>) with K = k, for k a power of two <= W.
template <int W, class F> TINYLA_INLINE bool with_pow2(int64_t k, F&& f) {
  return [&]<int... D>(std::integer_sequence<int, D...>) {
    return ((k == (1 << D) ? (f(std::integral_constant<int, (1 << D)>{}), true) : false) || ...);
  }(std::make_integer_sequence<int, std::bit_width(unsigned(W))>{});
}

// The last reals of each matrix after its whole vectors, its tail: from half a vector on,
// where masked moves are cheap (native_ops::has_masked_moves), a W x W transpose of masked
// loads or stores; else a real at a time, W moves each. A real at a time, AVX-512's float32
// lane group of 16 3 x 3 matrices (a tail of 9) took 144 moves, and AVX-512 was 1.4-1.7x
// slower than AVX2 there (whose tail is 1).
template <int W> constexpr bool long_tail(int64_t tail) { return 2 * tail >= W; }

// K reals of each of `count` matrices (matrix w at src + w * src_stride, by
// default K) into K lane vectors at dst, `stride` vectors apart (2 when a lane
// group is a register pair); lanes past count repeat matrix 0 (their results
// are dropped).
template <class R, int W>
TINYLA_INLINE void pack(const R* src, int64_t K, int count, void* dst, int stride = 1, int64_t src_stride = -1) {
  if (K == 0) return;  // n = 0 (src may be null)
  if (src_stride < 0) src_stride = K;
  if constexpr (W == 1) {
    std::memcpy(dst, src, size_t(K) * sizeof(R));
  } else {
    using V = typename simd<R, W>::native;
    auto* out = static_cast<char*>(dst);
    auto put = [&](int64_t c, const V& v) { std::memcpy(out + c * stride * int64_t(sizeof(V)), &v, sizeof(V)); };
    // A full group of small matrices is one contiguous block of K vectors.
    if (count == W && K < W && src_stride == K &&
        with_pow2<W>(
            K,
            [&](auto k) {
              V r[k()];
              std::memcpy(r, src, sizeof(r));
              transpose_block<W, k(), false>(r);
              for (int c = 0; c < k(); ++c) put(c, r[c]);
            }))
      return;
    const R* rows[W];
    for (int w = 0; w < W; ++w) rows[w] = src + (w < count ? w : 0) * src_stride;
    int64_t c = 0;
    for (; c + W <= K; c += W) {
      V r[W];
      for (int w = 0; w < W; ++w) std::memcpy(&r[w], rows[w] + c, sizeof(V));
      transpose_block<W, W, false>(r);
      for (int i = 0; i < W; ++i) put(c + i, r[i]);
    }
    if constexpr (native_ops::has_masked_moves<V>())
      if (long_tail<W>(K - c)) {
        V r[W];
        for (int w = 0; w < W; ++w) r[w] = native_ops::load_prefix<V>(rows[w] + c, int(K - c));
        transpose_block<W, W, false>(r);
        for (int i = 0; c + i < K; ++i) put(c + i, r[i]);
        return;
      }
    for (; c < K; ++c) {
      V v;
      for (int w = 0; w < W; ++w) v[w] = rows[w][c];
      put(c, v);
    }
  }
}

// The inverse of pack: K lane vectors to `count` matrices, lane w's K reals at dst + w * K, or
// at lane_dst[w] where given. The vectors come C at a time (an element's parts), `stride`
// elements apart.
template <class R, int W, int C = 1>
TINYLA_INLINE void unpack(const void* src, int64_t K, int count, R* dst, int stride = 1, R* const* lane_dst = nullptr) {
  if (count > W) __builtin_unreachable();
  if (K == 0) return;
  const auto place = [&](int64_t c) { return c / C * stride * C + c % C; };  // of vector c, in vectors
  if constexpr (W == 1) {
    R* const out = lane_dst ? lane_dst[0] : dst;
    if (stride == 1) std::memcpy(out, src, size_t(K) * sizeof(R));
    else
      for (int64_t c = 0; c < K; ++c) out[c] = static_cast<const R*>(src)[place(c)];
  } else {
    using V = typename simd<R, W>::native;
    const auto* in = static_cast<const char*>(src);
    auto get = [&](int64_t c) {
      V v;
      std::memcpy(&v, in + place(c) * int64_t(sizeof(V)), sizeof(V));
      return v;
    };
    auto out = [&](int w) { return lane_dst ? lane_dst[w] : dst + w * K; };
    if (count == W && K < W && !lane_dst &&
        with_pow2<W>(
            K,
            [&](auto k) {
              V r[k()];
              for (int c = 0; c < k(); ++c) r[c] = get(c);
              transpose_block<W, k(), true>(r);
              std::memcpy(dst, r, sizeof(r));
            }))
      return;
    int64_t c = 0;
    for (; c + W <= K; c += W) {
      V r[W];
      for (int i = 0; i < W; ++i) r[i] = get(c + i);
      transpose_block<W, W, true>(r);
      // A full group's W stores spelled out: as a loop to `count`, GCC merges them
      // where K == W into one memcpy of variable length (rep movsq: a quarter of
      // the n = 2 inverse).
      if (count == W)
        for (int w = 0; w < W; ++w) std::memcpy(out(w) + c, &r[w], sizeof(V));
      else
        for (int w = 0; w < count; ++w) std::memcpy(out(w) + c, &r[w], sizeof(V));
    }
    if constexpr (native_ops::has_masked_moves<V>())
      if (long_tail<W>(K - c)) {
        V r[W];
        for (int i = 0; i < W; ++i) r[i] = c + i < K ? get(c + i) : V{};
        transpose_block<W, W, true>(r);
        for (int w = 0; w < count; ++w) native_ops::store_prefix(out(w) + c, r[w], int(K - c));
        return;
      }
    for (; c < K; ++c) {
      const V v = get(c);
      for (int w = 0; w < count; ++w) out(w)[c] = v[w];
    }
  }
}

// A lane group of P registers: register h holds matrices [h*W, (h+1)*W).
// Registers with no matrix left repeat matrix 0 of the group.
template <class R, int W, int P> TINYLA_INLINE void pack_group(const R* src, int64_t K, int count, void* dst) {
  using V = typename simd<R, W>::native;
  for (int h = 0; h < P; ++h) {
    const int c = std::min(count - h * W, W);
    pack<R, W>(c > 0 ? src + h * W * K : src, K, c > 0 ? c : 1, static_cast<char*>(dst) + h * sizeof(V), P);
  }
}
template <class R, int W, int P> TINYLA_INLINE void unpack_group(const void* src, int64_t K, int count, R* dst) {
  using V = typename simd<R, W>::native;
  for (int h = 0; h < P && count > h * W; ++h)
    unpack<R, W>(static_cast<const char*>(src) + h * sizeof(V), K, std::min(count - h * W, W), dst + h * W * K, P);
}

// ---- per-matrix outputs -------------------------------------------------------

template <class L> TINYLA_INLINE void store_real(void* out, int64_t b, int count, L v) {
  auto* o = static_cast<lane_real<L>*>(out) + b;
  if (count == lane_traits<L>::width) std::memcpy(o, &v, sizeof(v));
  else
    for (int w = 0; w < count; ++w) o[w] = lane_get(v, w);
}
template <class L> TINYLA_INLINE void store_element(void* out, int64_t b, int count, L v) {
  store_real(out, b, count, v);
}
template <class L> TINYLA_INLINE void store_element(void* out, int64_t b, int count, cplx<L> v) {
  auto* o = static_cast<lane_real<L>*>(out) + 2 * b;
  for (int w = 0; w < count; ++w) o[2 * w] = lane_get(v.re, w), o[2 * w + 1] = lane_get(v.im, w);
}
// Lane w of v as element `index` of out.
template <class L> TINYLA_INLINE void store_lane(void* out, int64_t index, int w, L v) {
  static_cast<lane_real<L>*>(out)[index] = lane_get(v, w);
}
template <class L> TINYLA_INLINE void store_lane(void* out, int64_t index, int w, cplx<L> v) {
  auto* o = static_cast<lane_real<L>*>(out) + 2 * index;
  o[0] = lane_get(v.re, w), o[1] = lane_get(v.im, w);
}
template <class L> TINYLA_INLINE void store_info(std::int32_t* out, int64_t b, int count, L v) {
  if (!out) return;
  for (int w = 0; w < count; ++w) out[b + w] = std::int32_t(lane_get(v, w));
}
template <class R, int W> TINYLA_INLINE void store_info(std::int32_t* out, int64_t b, int count, simd<R, W> v) {
  if (!out) return;
  if (count < W) {
    for (int w = 0; w < count; ++w) out[b + w] = std::int32_t(v.v[w]);
    return;
  }
  typedef std::int32_t I __attribute__((vector_size(sizeof(std::int32_t) * W)));
  const I info = __builtin_convertvector(v.v, I);  // one conversion, not W
  std::memcpy(out + b, &info, sizeof(info));
}

// ---- one dtype, one size class --------------------------------------------------

// Storage for an n x m lane-group matrix: on the stack for compile-time
// sizes, on the heap (once per range) otherwise.
template <class E, int Size> struct group_storage {
  E v[Size > 0 ? Size : 1];
  explicit group_storage(int64_t) {}
  E* data() { return v; }
};
template <class E> struct group_storage<E, -1> {
  std::unique_ptr<E[]> v;
  explicit group_storage(int64_t size) : v(new E[size_t(std::max<int64_t>(size, 1))]()) {}
  E* data() { return v.get(); }
};

// getri's last step on invert's Y (see invert in src/kernels/lu.hpp): columns
// k and pivots[k] swapped, k = n-2 down to 0, each lane its own. For compile-time
// n < 8 by selects over every candidate column, the lane group in registers
// (swap_columns_in_lanes on Y's n rows); otherwise at N = 8 and run-time n as the lane group
// is unpacked (unpack_inverse; for real A^-T at N = 8 unpack_inverse_transposed, by the
// selects on one row of column indices, at run-time n unpack_inverse_transposed_rows, and for
// A^-1 at N = 8 where a row fits a vector unpack_inverse_permuted, by a shuffle per row):
// there the selects on Y cost 10-20 % of the inverse.
template <class E, class L> TINYLA_INLINE void swap_columns_in_lanes(E* a, const L* pivots, int n, int rows) {
  for (int k = n - 2; k >= 0; --k)
    for (int c = k + 1; c < n; ++c) swap_where(pivots[k] == L(c), a + k, a + c, rows, n);
}
// Lane w's getri column order: col[j] = the column of Y that is column j of A^-1 (the swaps
// pivots[k], k = n-2 down to 0, applied to 0..n-1).
template <class L> TINYLA_INLINE void getri_columns(const L* pivots, int w, int n, int* col) {
  for (int j = 0; j < n; ++j) col[j] = j;
  for (int k = n - 2; k >= 0; --k) std::swap(col[k], col[int(lane_get(pivots[k], w))]);
}
// Lane w's row permutation of the elimination (the same swaps from k = 0 up): getri_columns's
// inverse, row[c] = the row of A^-T that column c of Y is, in one chain instead of two.
template <class L> TINYLA_INLINE void elimination_rows(const L* pivots, int w, int n, int* row) {
  for (int j = 0; j < n; ++j) row[j] = j;
  for (int k = 0; k + 1 < n; ++k) std::swap(row[k], row[int(lane_get(pivots[k], w))]);
}

// Unpacks the lane group's Y into `count` n x n matrices of C-real elements
// (lane w's the w-th) with getri's column swaps applied: column j of A^-1 is
// column col[j] of Y, col the swaps applied to 0..n-1 (each lane its own) -- or
// row j of A^-T with `transposed`. One pass, element by element: with the swaps
// and the transpose as passes of their own over the output, the output cost a
// third of the n = 16 inverse.
template <int C, class E, class L, class R>
void unpack_inverse(const E* a, const L* pivots, int n, int count, R* dst, bool transposed, int* col) {
  constexpr int W = lane_traits<L>::width;
  const R* y = reinterpret_cast<const R*>(a);  // element (r, j) part c of lane w: ((r * n + j) * C + c) * W + w
  for (int w = 0; w < count; ++w, dst += int64_t(n) * n * C) {
    getri_columns(pivots, w, n, col);
    R* out = dst;
    for (int i = 0; i < n; ++i)  // output row i: row i of Y, or column col[i] of Y (transposed)
      for (int j = 0; j < n; ++j, out += C) {
        const int64_t from = transposed ? int64_t(j) * n + col[i] : int64_t(i) * n + col[j];
        for (int c = 0; c < C; ++c) out[c] = y[(from * C + c) * W + w];
      }
  }
}

// unpack_inverse's A^-T for real matrices of compile-time order N (N = 8: run_range): row i of
// A^-T is column col[i] of Y, so the columns of Y leave the lanes by whole-vector transposes
// (unpack), and each matrix's rows then go out in order, a row at a time. Element by element
// (unpack_inverse) that took 28 % of AVX-512's float64 slogdet_inv_transposed at n = 8 (perf,
// 256 matrices); writing the rows as the columns came out, a matrix's rows far apart in time,
// made the op 1.6x slower on 32 MiB. At run-time n (12..32) float64 measured no faster: the
// scratch of n * W * n reals beside the lane group slowed the elimination (docs/benchmarks.md).
// Not inlined: inlined into run_range, the float64 op above took 72-73 ns a matrix, not 60.
template <int N, class R, class L>
__attribute__((noinline)) void unpack_inverse_transposed(const L* y, const L* pivots, int count, R* dst) {
  constexpr int W = lane_traits<L>::width;
  // col in the lanes, getri's swaps on a row of column indices: lane by lane through memory
  // (unpack_inverse), the swaps' dependent loads and stores took as long as moving the matrices.
  L col[N];
  for (int j = 0; j < N; ++j) col[j] = L(R(j));
  swap_columns_in_lanes(col, pivots, N, 1);
  R columns[N][W * N];  // column j of Y, lane w's at columns[j] + w * N
  for (int j = 0; j < N; ++j) unpack<R, W>(y + j, N, count, columns[j], N);
  for (int w = 0; w < count; ++w)
    for (int i = 0; i < N; ++i)
      std::memcpy(dst + (int64_t(w) * N + i) * N, columns[int(lane_get(col[i], w))] + w * N, N * sizeof(R));
}

// unpack_inverse's A^-T for matrices of run-time order n: column c of Y is row row_w[c]
// of lane w's A^-T (row_w the inverse of col above), so each column leaves the lanes by
// unpack's whole-vector transposes straight to its row in each matrix; no scratch but the
// W x n row numbers (a scratch of Y's columns, as at N = 8, slowed the elimination beside it).
// Against unpack_inverse (a Zen 5, 1 thread, one library per process over fresh copies):
// float64 slogdet_inv_transposed at n = 16 / 32 1.08-1.11x / 1.14-1.16x as fast up to 8 MiB
// of input, float32 1.08-1.14x / 1.25x, complex128 1.06x / 1.21x, complex64 1.25x / 1.34x
// (256 KiB; complex at n = 8 0.98-1.01x). Not where a call outgrows the caches (streaming_bytes):
// each matrix's rows written out of order, W matrices at a time, made it 0.75-0.95x as fast at
// n = 10..20 with 32 MiB of input (n = 32: 1.11-1.14x), and unpack_inverse writes them in order.
template <int C, class E, class L, class R>
void unpack_inverse_transposed_rows(const E* y, const L* pivots, int n, int count, R* dst, int* rows) {
  constexpr int W = lane_traits<L>::width;
  for (int w = 0; w < count; ++w) elimination_rows(pivots, w, n, rows + w * n);
  R* lane_dst[W] = {};
  for (int c = 0; c < n; ++c) {
    for (int w = 0; w < count; ++w) lane_dst[w] = dst + (int64_t(w) * n + rows[w * n + c]) * n * C;
    unpack<R, W, C>(y + c, int64_t(C) * n, count, nullptr, n, lane_dst);
  }
}

// Permuted K reals of `from` to `to` (to[k] = from[index[k]]), in registers: one run-time
// shuffle of a vector of K reals (AVX-512's vpermpd / vpermps, AVX2's vpermps). Clang, which
// has no shuffle by a run-time index vector (and builds the sanitized tests), goes element by
// element.
template <class R, int K> TINYLA_INLINE void permute_row(const R* from, const int* index, R* to) {
  static_assert(K * sizeof(R) <= 64, "a row of one vector");
#if defined(__clang__)
  R v[K];
  for (int k = 0; k < K; ++k) v[k] = from[index[k]];
  std::memcpy(to, v, sizeof v);
#else
  using I = std::conditional_t<sizeof(R) == 8, std::int64_t, std::int32_t>;
  typedef R vec __attribute__((vector_size(K * sizeof(R))));
  typedef I mask __attribute__((vector_size(K * sizeof(R))));
  vec v;
  mask m;
  for (int k = 0; k < K; ++k) m[k] = index[k];
  std::memcpy(&v, from, sizeof v);
  v = __builtin_shuffle(v, m);
  std::memcpy(to, &v, sizeof v);
#endif
}

// unpack_inverse's A^-1 (not transposed) for compile-time N whose rows fit a vector (N * C <=
// V): Y's rows leave the lanes by unpack's whole-vector transposes into a scratch, then each
// matrix's rows go out in order, each in its getri column order (getri_columns) by one register
// shuffle (permute_row). It replaced getri's swaps as selects on Y in the lanes
// (swap_columns_in_lanes, as n < 8 does; a Zen 5 had measured them 1.2-1.36x as fast as the
// element-wise unpack): on an Intel Xeon guest, n = 8, 1 thread, against those selects, 2 / 32
// MiB of input: AVX-512 float64 1.5 / 2.1x, float32 1.2 / 1.3x, complex64 1.3 / 1.9x; AVX2
// float32 1.2 / 1.4x (docs/benchmarks.md, "The n = 8 inverse's column order"). Unpacked straight
// to dst (no scratch), the matrices' rows stored W at a time, complex64 took 1.4x the element-wise
// unpack's time from 32 MiB, as the selects did. Wider rows (complex128, AVX2's complex64) take the
// element-wise unpack, which beat the selects there on that Intel (1.0-2.0x). Not inlined, as
// unpack_inverse_transposed.
template <int N, int C, class R, int V, class L>
__attribute__((noinline)) void unpack_inverse_permuted(const void* y, const L* pivots, int count, R* dst) {
  constexpr int K = N * C;  // reals per row
  R rows[V * N * K];
  unpack<R, V>(y, int64_t(N) * K, count, rows);
  int col[N], index[K];
  for (int w = 0; w < count; ++w, dst += N * K) {
    getri_columns(pivots, w, N, col);
    for (int k = 0; k < K; ++k) index[k] = col[k / C] * C + k % C;
    for (int i = 0; i < N; ++i) permute_row<R, K>(rows + (w * N + i) * K, index, dst + i * K);
  }
}

// Asks for the cache lines of matrices [first, first + count) of data, per_matrix reals
// each: W matrices read a row at a time are W strided streams, which defeat the hardware
// prefetcher. Not for matrices of one cache line or less: it streams those itself, and a
// prefetch per group cost the n = 1 solve a quarter of its time.
template <class R>
TINYLA_INLINE void prefetch_matrices(const void* data, int64_t per_matrix, int64_t first, int64_t count) {
  if (per_matrix * int64_t(sizeof(R)) <= 64) return;
  const int64_t bytes = count * per_matrix * int64_t(sizeof(R));
  const char* p = reinterpret_cast<const char*>(static_cast<const R*>(data) + first * per_matrix);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
}

// Bytes a call reads and writes (its operands and the matrix it outputs), and the size beyond
// which the next two groups are prefetched, not one: from DRAM one group ahead came too late for
// the faster kernels. A Zen 5 guest (32 MiB of L3), float64, 1 thread, one library per process
// over fresh copies of each build, 64 MiB of input, against one group ahead: slogdet 1.06-1.12x
// at n = 3..8, the inverses 0.94-1.18x (n = 8: slogdet_inv_transposed 1.15x), n = 16 0.94-1.06x;
// with 4 MiB or less, in the caches, the second group's prefetches cost inverses 1-8 %.
constexpr double streaming_bytes = double(16 << 20);
template <class R, family F> double call_bytes(const job& jb, int64_t ka, int64_t kb) {
  const int64_t per_matrix = ka + (F == family::solve ? 2 * kb : F == family::determinant ? 0 : ka);
  return double(jb.batch) * double(per_matrix) * double(sizeof(R));
}

// ---- n = 2 inverses as the matrices lie in memory ------------------------------

// The entries of each 2 x 2 matrix of two vectors (row-major, four lanes a matrix) taken within
// the matrix: lane 4q + i of the result is lane 4q + I_i of x where I_i < 4, lane 4q + I_i - 4
// of y where I_i >= 4 (a blend where each I_i is i or i + 4).
template <int I0, int I1, int I2, int I3, class R, int V>
TINYLA_INLINE simd<R, V> within_matrices(simd<R, V> x, simd<R, V> y) {
  constexpr int roles[4] = {I0, I1, I2, I3};
  return {[&]<std::size_t... K>(std::index_sequence<K...>) {
    return __builtin_shufflevector(
        x.v, y.v, int(K & ~std::size_t(3)) + (roles[K & 3] < 4 ? roles[K & 3] : V + roles[K & 3] - 4)...);
  }(std::make_index_sequence<V>{})};
}
// Those of one vector permuted within each matrix.
template <int I0, int I1, int I2, int I3, class R, int V> TINYLA_INLINE simd<R, V> within_matrices(simd<R, V> x) {
  return within_matrices<I0, I1, I2, I3>(x, x);
}

// Whether run_range inverts real 2 x 2 lane groups with invert_2x2_as_stored first: where a
// vector holds two matrices or more. `inv_transposed`, 1 thread, 8 MiB, ns a matrix, a Zen 5
// guest, best of three processes each, lanes -> as stored: AVX-512 float64 1.54-1.67 ->
// 0.88-0.94, float32 0.75-0.78 -> 0.47-0.49; AVX2 float32 1.12-1.14 -> 0.69-0.70. AVX2's float64,
// one matrix a vector and so a division each, took 1.80 against 1.30 in the lanes.
template <int V> constexpr bool inverts_2x2_as_stored = V >= 8;

// The inverse (A^-T when Transposed) of a lane group of real 2 x 2 matrices, V of them in four
// vectors as they lie in memory. Returns false, having written nothing, unless every matrix is
// common: its entries and its det nonzero, finite and within the safe range (unscaled_bound),
// where invert_2x2 takes its unscaled case. This does that case's operations, each lane of a
// matrix holding the operand its role needs -- lane 0 of ad - bc is diff_of_products(a, d, b, c),
// entry j of the result (+-adj_j) * (1 / det) -- so it gives the same bits, with shuffles within
// each matrix in place of the transposes into lanes and back, which made AVX-512's n = 2
// inverse slower than AVX2's (docs/benchmarks.md).
template <class R, int V, bool Transposed> TINYLA_INLINE bool invert_2x2_as_stored(const R* a, R* x) {
  using L = simd<R, V>;
  static_assert(V % 4 == 0, "whole matrices in a vector");
  const L sign = []<std::size_t... K>(std::index_sequence<K...>) {  // + - - + in each matrix
    return L(typename L::native{(K % 4 == 0 || K % 4 == 3 ? R(1) : R(-1))...});
  }(std::make_index_sequence<V>{});
  // Common, every lane: the sum of its entries' magnitudes (NaN or inf where one is) at most the
  // safe range's bound, the least of them and of |det| at least its reciprocal. The least by
  // min instructions (lesser): as a compare and a select each, the test made AVX-512's float64
  // inverse 1.2x slower (0.92-0.94 against 0.77-0.79 ns a matrix, 1 thread, 8 MiB, a Zen 5).
  // One division for the four vectors: each matrix's det lies in its lanes 0 (ad - bc) and 3
  // (da - cb: the same bits, as fmadd rounds the exact product once), so blends gather the four
  // vectors' determinants into one vector, lanes 0, 3, 1, 2 of each matrix, and broadcasts
  // within each matrix spread the reciprocals back -- as many broadcasts as one det a vector
  // takes. A division a vector, of V/4 distinct values each, bound this loop on an Intel
  // Xeon, whose 512-bit float64 division issues once in 16 cycles (gathered there by
  // cross-lane permutes: 2.65 -> 1.63 ns a matrix, 1 thread, in L2). These blends on a Zen 4,
  // AVX-512: float64 1.04-1.08x, float32 1.02x; the same time where memory binds (8 MiB).
  // (Taking -1/det in lanes 1 and 2 by two-source permutes in place of the products by sign
  // made A^-T 7 % slower there.)
  L adj[4], det[4], sum, least;
  for (int k = 0; k < 4; ++k) {
    const L m = L::load(a + k * V);  // a b c d
    // A^-T = [d -c; -b a] / det, A^-1 = [d -b; -c a] / det: unsigned, d in lane 0 and a in
    // lane 3, where ad - bc (da - cb) takes it as the first product's second factor
    adj[k] = Transposed ? within_matrices<3, 2, 1, 0>(m) : within_matrices<3, 1, 2, 0>(m);
    det[k] = diff_of_products(m, adj[k], within_matrices<1, 0, 3, 2>(m), within_matrices<2, 3, 0, 1>(m));
    const L magnitude = absval(m);
    if (k == 0) sum = magnitude, least = magnitude;
    else sum = sum + magnitude, least = lesser(magnitude, least);
    adj[k] = adj[k] * sign;
  }
  const L dets = within_matrices<0, 4, 7, 3>(within_matrices<0, 1, 2, 7>(det[0], det[1]),
                                             within_matrices<0, 1, 2, 7>(det[2], det[3]));
  least = lesser(absval(dets), least);
  // 1 / det is invert_2x2's reciprocal_or_zero(det) wherever the result is kept (det != 0)
  const L reciprocals = L(1) / dets;
  adj[0] = adj[0] * within_matrices<0, 0, 0, 0>(reciprocals);
  adj[1] = adj[1] * within_matrices<3, 3, 3, 3>(reciprocals);
  adj[2] = adj[2] * within_matrices<1, 1, 1, 1>(reciprocals);
  adj[3] = adj[3] * within_matrices<2, 2, 2, 2>(reciprocals);
  if (any_of(!((sum <= L(unscaled_bound<R>)) & (least >= L(R(1) / unscaled_bound<R>))))) return false;
  for (int k = 0; k < 4; ++k) adj[k].store(x + k * V);
  return true;
}

// P = 2: register pairs, used for the determinant of the small sizes that
// are latency-bound (dependent pivot -> division -> update steps). n <= 2 is
// throughput-bound, and inverses/solves (twice the live data) would spill.
// At n = 6 AVX-512's real lanes run faster alone: its 32 registers nearly hold one
// lane group's 36 entries, two groups spill (a Zen 5, 1 thread, 256 KiB: slogdet
// float64 16.5 -> 14.2 ns a matrix, float32 10.0 -> 8.8), where AVX2's pairs stay
// faster (float64 23.2 against 25.4) and so do complex ones (AVX-512 complex64 38.9
// against 50.8).
template <class T> constexpr bool paired_size(int64_t n) {
  constexpr bool alone_at_6 = type_info<T>::reals == 1 && TINYLA_VECTOR_BYTES >= 64;
  return n >= 3 && n <= (alone_at_6 ? 5 : 6);
}

// One family's code per function: beside the other families' code (one function
// switching on the op), GCC kept more of the lane group in memory (f64 inv at n = 3, 4
// took 1.2x the time, AVX2 on a Zen 3).
// WithDet: whether the op outputs the determinant (slogdet, det, slogdet_inv); inv and
// solve skip its bookkeeping (a frexp per pivot: a third of the n = 1 inverse).
// Transposed: an inverse written as A^-T, for compile-time 3 <= N < 8 (n <= 2 is transposed
// by invert; run-time n and N = 8 as they leave the lanes, whichever the job asks).
// Adjugate: family::adjugate, the inverse's code with adj(A) in place of A^-1 (transposed as
// the job asks).
template <class T, int N, int P, family F, bool WithDet, bool Transposed = false, bool Adjugate = false>
void run_range(const job& jb, int64_t begin, int64_t end) {
  using R = storage_real_t<T>;
  constexpr int C = type_info<T>::reals;
  constexpr int V = lanes_of<R>();  // lanes per register
  constexpr int W = P * V;          // matrices per lane group
  using L = typename lane_type<R, V, P>::type;
  using E = std::conditional_t<C == 2, cplx<L>, L>;
  constexpr int fixed_size = N >= 0 ? N * N : -1;
  static_assert(P == 1 || F == family::determinant, "register pairs: determinants only");
  using Acc = std::conditional_t<WithDet, det_accum<E>, no_det<E>>;

  const shape<N, N> sq{int(jb.n), int(jb.n)};
  const int n = sq.n();
  const int64_t ka = int64_t(n) * n * C, kb = int64_t(n) * jb.nrhs * C;
  group_storage<E, fixed_size> a(int64_t(n) * n);
  constexpr bool inverse = F == family::inverse;
  group_storage<L, inverse ? N : 0> pivots(inverse ? n : 0);  // invert's scratch
  group_storage<E, inverse ? N : 0> column(inverse ? n : 0);
  // unpack_inverse's column numbers; at run-time n unpack_inverse_transposed_rows's row numbers.
  group_storage<int, inverse ? N : 0> columns(inverse ? (N < 0 ? W * n : n) : 0);
  group_storage<L, Adjugate ? N : 0> zero_pivot(Adjugate ? n : 0);  // adjugate's
  // A solve's right-hand sides; on the heap for a solve only (every op's call allocated and
  // freed it: 25-35 ns a call, a range of 8 float64 2 x 2 inverses 57 ns instead of 20-30).
  group_storage<E, F == family::solve ? -1 : 0> rhs(F == family::solve ? int64_t(n) * jb.nrhs : 0);

  // The next group's operands are asked for before each group (where the CPU's prefetcher
  // wants help with groups of this size: jb.prefetch_group_bytes); the one after it too where
  // the call's arrays outgrow the caches (streaming_bytes).
  const bool streaming = call_bytes<R, F>(jb, ka, kb) > streaming_bytes;
  const int64_t widest_operand = F == family::solve ? std::max(ka, kb) : ka;  // per matrix, reals
  const bool prefetch = int64_t(W) * widest_operand * int64_t(sizeof(R)) <= jb.prefetch_group_bytes;
  const int64_t ahead = prefetch ? int64_t(W) * (streaming ? 2 : 1) : 0;
  for (int64_t b = begin; b < end; b += W) {
    const int count = int(std::min<int64_t>(W, end - b));
    for (int64_t next = b + W; next < end && next <= b + ahead; next += W) {
      const int64_t next_count = std::min<int64_t>(W, end - next);
      prefetch_matrices<R>(jb.a, ka, next, next_count);
      if constexpr (F == family::solve) prefetch_matrices<R>(jb.b, kb, next, next_count);
    }
    if constexpr (N == 2 && C == 1 && inverts_2x2_as_stored<V> && F == family::inverse && !WithDet && !Adjugate)
      if (const R* in = static_cast<const R*>(jb.a) + b * ka;
          count == W && (jb.transpose_x ? invert_2x2_as_stored<R, V, true>(in, static_cast<R*>(jb.x) + b * ka)
                                        : invert_2x2_as_stored<R, V, false>(in, static_cast<R*>(jb.x) + b * ka))) {
        if (jb.info) std::fill_n(jb.info + b, count, 0);
        continue;
      }
    pack_group<R, V, P>(static_cast<const R*>(jb.a) + b * ka, ka, count, a.data());
    Acc acc;
    if constexpr (F == family::determinant) {
      acc = determinant(sq, a.data());
    } else if constexpr (F == family::inverse) {
      if constexpr (Adjugate)
        adjugate(sq, a.data(), acc, pivots.data(), column.data(), zero_pivot.data(), jb.transpose_x);
      else store_info(jb.info, b, count, invert(sq, a.data(), acc, pivots.data(), column.data(), jb.transpose_x));
      if constexpr (N >= 0 && N < 8) {  // compile-time n: the lane group in registers
        swap_columns_in_lanes(a.data(), pivots.data(), n, n);
        // Register renaming; a run-time branch here cost plain inv 3 % (the adjugate takes one).
        if (Transposed || (Adjugate && jb.transpose_x && n > 2))
          for (int i = 0; i < n; ++i)
            for (int j = i + 1; j < n; ++j) std::swap(a.data()[i * n + j], a.data()[j * n + i]);
        unpack_group<R, V, P>(a.data(), ka, count, static_cast<R*>(jb.x) + b * ka);
      } else if (C == 1 && N >= 8 && jb.transpose_x) {
        if constexpr (C == 1 && N >= 8)
          unpack_inverse_transposed<N>(a.data(), pivots.data(), count, static_cast<R*>(jb.x) + b * ka);
      } else if (N < 0 && jb.transpose_x && !streaming) {
        if constexpr (N < 0)
          unpack_inverse_transposed_rows<C>(a.data(), pivots.data(), n, count, static_cast<R*>(jb.x) + b * ka,
                                            columns.data());
      } else if (N >= 8 && N * C <= V && !jb.transpose_x) {
        if constexpr (N >= 8 && N * C <= V)
          unpack_inverse_permuted<N, C, R, V>(a.data(), pivots.data(), count, static_cast<R*>(jb.x) + b * ka);
      } else {
        // n <= 2 came out of invert already transposed.
        unpack_inverse<C>(a.data(), pivots.data(), n, count, static_cast<R*>(jb.x) + b * ka, jb.transpose_x && n > 2,
                          columns.data());
      }
    } else {
      pack_group<R, V, P>(static_cast<const R*>(jb.b) + b * kb, kb, count, rhs.data());
      store_info(jb.info, b, count, solve(shape<N, -1>{n, int(jb.nrhs)}, a.data(), rhs.data(), acc));
      unpack_group<R, V, P>(rhs.data(), kb, count, static_cast<R*>(jb.x) + b * kb);
    }
    if constexpr (WithDet) {
      if (jb.sign) store_element(jb.sign, b, count, acc.reported_sign());
      if (jb.logabsdet) store_real(jb.logabsdet, b, count, acc.logabsdet());
      if (jb.det) store_element(jb.det, b, count, acc.determinant());
    }
  }
}

// log_det_laplacian (kernels/log_det_laplacian.hpp): per lane group, A^-T and the Laplacian of
// A packed once, the tangents one at a time (matrix b's tangent c at (b * tangent_count + c) * n * n).
template <class T, int N> void run_log_det_laplacian(const job& jb, int64_t begin, int64_t end) {
  using R = storage_real_t<T>;
  constexpr int C = type_info<T>::reals;
  constexpr int W = lanes_of<R>();
  using L = typename lane_type<R, W, 1>::type;
  using E = std::conditional_t<C == 2, cplx<L>, L>;
  constexpr int fixed_size = N >= 0 ? N * N : -1;

  const shape<N, N> sq{int(jb.n), int(jb.n)};
  const int n = sq.n();
  const int64_t ka = int64_t(n) * n * C, tangents = jb.tangent_count;
  group_storage<E, fixed_size> g(int64_t(n) * n), h(int64_t(n) * n), d(int64_t(n) * n), m(int64_t(n) * n);
  group_storage<bool, N> g_row_finite(n);
  group_storage<int, N> rows(n);
  for (int64_t b = begin; b < end; b += W) {
    const int count = int(std::min<int64_t>(W, end - b));
    pack<R, W>(static_cast<const R*>(jb.a) + b * ka, ka, count, g.data());
    pack<R, W>(static_cast<const R*>(jb.b) + b * ka, ka, count, h.data());
    finite_rows(sq, g.data(), g_row_finite.data());
    E laplacian = sum_of_products(sq, g.data(), h.data());
    for (int64_t c = 0; c < tangents; ++c) {
      pack<R, W>(static_cast<const R*>(jb.tangents) + (b * tangents + c) * ka, ka, count, d.data(), 1, tangents * ka);
      E trace, square_trace;
      tangent_traces(sq, g.data(), g_row_finite.data(), d.data(), rows.data(), m.data(), trace, square_trace);
      laplacian = laplacian - square_trace;
      for (int w = 0; w < count; ++w) store_lane(jb.grad, (b + w) * tangents + c, w, trace);
    }
    store_element(jb.laplacian, b, count, laplacian);
  }
}

template <class T, int N> void run_factorization(const job& jb, int64_t begin, int64_t end) {
  constexpr int determinant_registers = lanes_of<storage_real_t<T>>() > 1 && paired_size<T>(N) ? 2 : 1;
  switch (family_of(jb.kind)) {
    case family::determinant: return run_range<T, N, determinant_registers, family::determinant, true>(jb, begin, end);
    case family::adjugate: return run_range<T, N, 1, family::inverse, true, false, true>(jb, begin, end);
    case family::inverse:
      if constexpr (N >= 3 && N < 8)
        if (jb.transpose_x) {
          if (jb.kind == op::slogdet_inv) return run_range<T, N, 1, family::inverse, true, true>(jb, begin, end);
          return run_range<T, N, 1, family::inverse, false, true>(jb, begin, end);
        }
      if (jb.kind == op::slogdet_inv) return run_range<T, N, 1, family::inverse, true>(jb, begin, end);
      return run_range<T, N, 1, family::inverse, false>(jb, begin, end);
    case family::solve: return run_range<T, N, 1, family::solve, false>(jb, begin, end);
  }
}

#ifdef TINYLA_LARGE_SIZES
constexpr bool large_object = true;
#else
constexpr bool large_object = false;
#endif

template <class T, int N> void run_fixed(const job& jb, int64_t begin, int64_t end) {
  if (jb.kind == op::log_det_laplacian) {
    if constexpr (!large_object && N > small_max_laplacian_n)
      return cpu::TINYLA_LARGE_RANGE(TINYLA_KERNEL_NS, TINYLA_DTYPE)(jb, begin, end);
    else return run_log_det_laplacian<T, N>(jb, begin, end);
  }
  // This object holds n = small_max_laplacian_n + 1 .. small_max_n for log_det_laplacian alone:
  // the other object's factorizations are never called here (the run-time-n code, the same
  // bits, in place of an unused second instantiation).
  if constexpr (large_object && N >= 0 && N <= small_max_n) return run_factorization<T, -1>(jb, begin, end);
  else return run_factorization<T, N>(jb, begin, end);
}

// n = First + i (n >= First) by its compile-time instantiation for i < sizeof...(Is), else by
// larger(): this object's sizes First .. First + sizeof...(Is) - 1.
template <class T, int First, class Larger, std::size_t... Is>
void run_sizes(const job& jb, int64_t begin, int64_t end, Larger larger, std::index_sequence<Is...>) {
  using fn = void (*)(const job&, int64_t, int64_t);
  if constexpr (sizeof...(Is) > 0) {
    static constexpr fn fixed[] = {&run_fixed<T, First + int(Is)>...};
    if (jb.n - First < int64_t(sizeof...(Is))) return fixed[jb.n - First](jb, begin, end);
  }
  larger(jb, begin, end);
}

#ifdef TINYLA_LARGE_SIZES
template <class T> void run_dtype(const job& jb, int64_t begin, int64_t end) {
  run_sizes<T, small_max_laplacian_n + 1>(jb, begin, end, &run_fixed<T, -1>,
                                          std::make_index_sequence<max_fixed_n - small_max_laplacian_n>{});
}
#else
template <class T> void run_dtype(const job& jb, int64_t begin, int64_t end) {
  run_sizes<T, 0>(jb, begin, end, &cpu::TINYLA_LARGE_RANGE(TINYLA_KERNEL_NS, TINYLA_DTYPE),
                  std::make_index_sequence<small_max_n + 1>{});
}
#endif

}  // namespace
}  // namespace tinyla::TINYLA_KERNEL_NS

namespace tinyla::cpu {
#ifdef TINYLA_LARGE_SIZES
void TINYLA_LARGE_RANGE(TINYLA_KERNEL_NS, TINYLA_DTYPE)(const job& jb, std::int64_t begin, std::int64_t end) {
  TINYLA_KERNEL_NS::run_dtype<dtype_info<dtype::TINYLA_DTYPE>::type>(jb, begin, end);
}
#else
TINYLA_DECLARE_RANGES(TINYLA_KERNEL_NS)

void TINYLA_RANGE(TINYLA_KERNEL_NS, TINYLA_DTYPE)(const job& jb, std::int64_t begin, std::int64_t end) {
  TINYLA_KERNEL_NS::run_dtype<dtype_info<dtype::TINYLA_DTYPE>::type>(jb, begin, end);
}

#ifdef TINYLA_TABLE
#define TINYLA_STR2(x) #x
#define TINYLA_STR(x) TINYLA_STR2(x)
static_assert(int(dtype::f32) == 0 && int(dtype::f64) == 1 && int(dtype::c64) == 2 && int(dtype::c128) == 3 &&
                  dtype_count == 4,
              "the table below lists one range per dtype, in dtype order");
extern const backend_table TINYLA_TABLE = {
    TINYLA_STR(TINYLA_KERNEL_NS),
    {TINYLA_RANGE(TINYLA_KERNEL_NS, f32), TINYLA_RANGE(TINYLA_KERNEL_NS, f64), TINYLA_RANGE(TINYLA_KERNEL_NS, c64),
     TINYLA_RANGE(TINYLA_KERNEL_NS, c128)},
};
#endif
#endif
}  // namespace tinyla::cpu
