// The GPU kernels' bodies, written against a small block interface so that
// the same code runs as a CUDA/HIP kernel (device_block in kernels.cu) and on
// the host, each GPU thread a fiber that sync switches away from (the tests'
// host_block, tests/cpp/gpu_emulation.cpp). The per-matrix math is src/kernels,
// instantiated for the scalar lane: one GPU thread holds one matrix.
//
// A Block provides:
//   int thread(), threads()          this thread's index in the block, block size
//   int64_t block(), blocks()        this block's index in the grid, grid size
//   void sync()                      block-wide barrier (__syncthreads)
//   void sync_warp()                 barrier of the thread's warp (__syncwarp); every
//                                    thread of the block calls it, in the same order
//   T shuffle(T v, int src, int w)   v of thread src of this thread's aligned group of w
//                                    threads (T: int, float, double; w a power of 2 up
//                                    to 32, within a warp); every thread of the block
//                                    calls it, in the same order (the host's is a barrier),
//                                    and the block is whole warps of 32
//   unsigned reduce_max(unsigned v), reduce_min(unsigned v)
//                                    the largest (smallest) v of this thread's warp of
//                                    32, called as shuffle is; where warp_redux (CUDA's
//                                    redux.sync, sm_80 and later)
//   void* shared()                   the block's dynamic shared memory
//
// Which kernel runs with what block and grid: plan.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "gpu/plan.hpp"
#include "job.hpp"
#include "kernels/log_det_laplacian.hpp"
#include "kernels/lu.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

using std::int64_t;

// ---- per-matrix outputs ---------------------------------------------------------------

template <class E> TINYLA_HD void store_outputs(const job& jb, int64_t b, const det_accum<E>& acc, lane_of<E> info) {
  if (jb.sign) static_cast<E*>(jb.sign)[b] = acc.reported_sign();
  if (jb.logabsdet) static_cast<lane_of<E>*>(jb.logabsdet)[b] = acc.logabsdet();
  if (jb.det) static_cast<E*>(jb.det)[b] = acc.determinant();
  if (jb.info) jb.info[b] = std::int32_t(info);
}

// x, read member by member: a complex copied whole is a memcpy, which clang
// (gfx942) kept in scratch when it was a temporary between two global
// locations that may alias (a swap's) or an array of them (copy_strided's).
template <class E> TINYLA_HD E read_element(const E& x) { return x; }
template <class R> TINYLA_HD cplx<R> read_element(const cplx<R>& x) { return {x.re, x.im}; }

// dst[i] = src[i] for i = first, first + stride, ... < count, Loads loads
// issued before their stores (in flight at once: one at a time left the team
// kernels bound by memory latency).
template <int Loads, class E>
TINYLA_HD void copy_strided(const E* src, E* dst, int64_t count, int64_t first, int64_t stride) {
  int64_t i = first;
  for (; i + (Loads - 1) * stride < count; i += Loads * stride) {
    E r[Loads];
    TINYLA_UNROLL
    for (int u = 0; u < Loads; ++u) r[u] = read_element(src[i + u * stride]);
    TINYLA_UNROLL
    for (int u = 0; u < Loads; ++u) dst[i + u * stride] = r[u];
  }
  for (; i < count; i += stride) dst[i] = src[i];
}

// An n x n matrix (rows n apart) into rows ld apart (team_ld), by a team's threads:
// first = the thread's rank, stride = the team's size. A team at least n wide copies
// a row at a time, each thread one element of it (consecutive threads, consecutive
// elements), Loads rows' loads in flight; a narrower one (n > 128), each row as
// copy_strided.
template <int Loads, class E>
TINYLA_HD void copy_into_rows(const E* src, E* dst, int n, int ld, int first, int stride) {
  if (stride < n) {
    for (int r = 0; r < n; ++r) copy_strided<Loads>(src + int64_t(r) * n, dst + int64_t(r) * ld, n, first, stride);
    return;
  }
  if (first >= n) return;
  int r = 0;
  for (; r + Loads <= n; r += Loads) {
    E v[Loads];
    TINYLA_UNROLL
    for (int u = 0; u < Loads; ++u) v[u] = read_element(src[(r + u) * n + first]);
    TINYLA_UNROLL
    for (int u = 0; u < Loads; ++u) dst[(r + u) * ld + first] = v[u];
  }
  for (; r < n; ++r) dst[r * ld + first] = src[r * n + first];
}

// A GPU loop kept rolled, where unrolling it would only take registers from the rest of
// the kernel (TINYLA_UNROLL's counterpart).
#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__HIP__)
#define TINYLA_ROLLED _Pragma("unroll 1")
#else
#define TINYLA_ROLLED
#endif

// ---- per-thread kernel ----------------------------------------------------------------

// 16 bytes of real parts R: as CUDA's vector types, which it loads and stores whole
// (LDG.E.128, STG.E.128); an array elsewhere.
template <class R> struct piece16 {
  struct alignas(16) type {
    R part[16 / sizeof(R)];
  };
};
#if defined(__CUDA_ARCH__)
template <> struct piece16<double> {
  using type = double2;
  static __device__ double2 of(const double* r) { return make_double2(r[0], r[1]); }
};
template <> struct piece16<float> {
  using type = float4;
  static __device__ float4 of(const float* r) { return make_float4(r[0], r[1], r[2], r[3]); }
};
#endif

// Whether the per-thread kernels move an aligned matrix in named 16-byte pieces
// (piece16, store_piece): on CUDA, and in the host emulation, so that the CPU-run
// tests check which element goes where; not on gfx942, whose compiler makes 16-byte
// loads of its own (global_load_dwordx4) and whose stores are left as they were.
#if defined(__HIP_DEVICE_COMPILE__)
inline constexpr bool in_pieces = false;
#else
inline constexpr bool in_pieces = true;
#endif

// dst[0..16 / sizeof(R)) = parts, dst 16-byte aligned: one 16-byte store on CUDA, to
// global memory by __stwb (st.global.wb, the default policy: assigned through a double2
// pointer, nvcc 13 stored the piece as two 8-byte halves), to shared memory (Shared) by
// assignment (STS.128).
template <bool Shared = false, class R> TINYLA_HD void store_piece(R* dst, const R* parts) {
#if defined(__CUDA_ARCH__)
  using piece = typename piece16<R>::type;
  if constexpr (Shared) *reinterpret_cast<piece*>(dst) = piece16<R>::of(parts);
  else __stwb(reinterpret_cast<piece*>(dst), piece16<R>::of(parts));
#else
  __builtin_memcpy(dst, parts, 16);
#endif
}

// Copies a matrix of nn elements from global memory into the caller's array, every
// load issued before the first store (so that all are in flight at once); Align:
// the bytes both pointers are aligned to, which lets the compilers use vector loads.
template <int Align, int nn, class E> TINYLA_HD void copy_matrix(const E* src, E* dst) {
  src = static_cast<const E*>(__builtin_assume_aligned(src, Align));
  dst = static_cast<E*>(__builtin_assume_aligned(dst, Align));
  // Named 16-byte loads: nvcc keeps element loads (LDG.E.64 for float64) whatever the
  // alignment, and a warp's loads, a matrix per thread, each touch 32 cache lines:
  // that bound these kernels on L1 (H200: 89 % busy at float64 n = 8, DRAM 36 %).
  if constexpr (in_pieces && Align >= 16 && nn > 0 && nn * sizeof(E) % 16 == 0) {
    using V = typename piece16<lane_real<lane_of<E>>>::type;
    constexpr int pieces = int(nn * sizeof(E) / 16);
    V v[pieces];
    TINYLA_UNROLL
    for (int i = 0; i < pieces; ++i) v[i] = reinterpret_cast<const V*>(src)[i];
    TINYLA_UNROLL
    for (int i = 0; i < pieces; ++i) __builtin_memcpy(reinterpret_cast<char*>(dst) + 16 * i, &v[i], 16);
  } else if constexpr (in_pieces && Align == 8 && std::is_same_v<E, double> && nn % 2 == 1 && nn > 1) {
    // An odd count of float64s: every other matrix of a batch starts 8 bytes past a
    // 16-byte line. Its (nn - 1) / 2 aligned pieces, from element 0 or 1, and the
    // element left over, the last or the first; then each element taken from where the
    // phase put it, by selects: a warp's threads alternate phases, and a branch would
    // issue both sides. (complex64, the other 8-byte element: nvcc 13 split the same
    // code into 4-byte loads.)
    using V = typename piece16<lane_real<lane_of<E>>>::type;
    constexpr int pieces = (nn - 1) / 2;
    const bool shifted = reinterpret_cast<std::uintptr_t>(src) % 16 != 0;
    const V* from = reinterpret_cast<const V*>(src + (shifted ? 1 : 0));
    V v[pieces];
    TINYLA_UNROLL
    for (int i = 0; i < pieces; ++i) v[i] = from[i];
    const E alone = src[shifted ? 0 : nn - 1];
    E t[nn - 1];
    TINYLA_UNROLL
    for (int i = 0; i < pieces; ++i) __builtin_memcpy(reinterpret_cast<char*>(t) + 16 * i, &v[i], 16);
    dst[0] = shifted ? alone : t[0];
    TINYLA_UNROLL
    for (int i = 1; i < nn - 1; ++i) dst[i] = shifted ? t[i - 1] : t[i];
    dst[nn - 1] = shifted ? t[nn - 2] : alone;
  } else {
    E r[nn > 0 ? nn : 1];
    TINYLA_UNROLL
    for (int i = 0; i < nn; ++i) r[i] = src[i];
    TINYLA_UNROLL
    for (int i = 0; i < nn; ++i) dst[i] = r[i];
  }
}

// The alignment an array of elements E is guaranteed (complex: its parts'), and
// that of every matrix of a batch whose first one is 16-byte aligned.
template <class E> constexpr int element_alignment = int(sizeof(lane_real<lane_of<E>>));
template <class E, int N> constexpr int matrix_alignment() {
  constexpr int bytes = N * N * int(sizeof(E));
  return bytes % 16 == 0 ? 16 : (bytes % 8 == 0 ? 8 : element_alignment<E>);
}

// Where getri's last step (see invert in lu.hpp) puts each column of Y:
// pos[c] = the column of A^-1 that column c of Y becomes. Constant indices
// only, so that pos stays in registers.
template <int N, class L> TINYLA_HD void column_positions(const L* pivots, int* pos) {
  TINYLA_UNROLL
  for (int c = 0; c < N; ++c) pos[c] = c;
  TINYLA_UNROLL
  for (int k = N - 2; k >= 0; --k) {  // the swap of columns k and pivots[k], the last first
    const int p = int(pivots[k]);
    TINYLA_UNROLL
    for (int c = 0; c < N; ++c) pos[c] = pos[c] == k ? p : (pos[c] == p ? k : pos[c]);
  }
}

// dst[q] = value(q) for the 16 / sizeof(E) elements of a 16-byte piece, dst 16-byte
// aligned: one store (store_piece).
template <class E, class Value> TINYLA_HD void store_elements_as_piece(E* dst, Value value) {
  using R = lane_real<lane_of<E>>;
  R parts[16 / sizeof(R)];
  TINYLA_UNROLL
  for (int q = 0; q < int(16 / sizeof(E)); ++q) {
    const E v = value(q);
    __builtin_memcpy(parts + q * (sizeof(E) / sizeof(R)), &v, sizeof(E));
  }
  store_piece(reinterpret_cast<R*>(dst), parts);
}

// Whether store_row_in_pieces can write the rows of N x N elements E (not on gfx942:
// in_pieces), and where: rows_in_pieces(out), 16-byte aligned ones, or any for float64
// at odd N (each row on a 16-byte line or 8 bytes past one).
template <int N, class E> constexpr bool rows_may_be_in_pieces =
    in_pieces && N > 2 && (N * sizeof(E) % 16 == 0 || (N % 2 == 1 && std::is_same_v<E, double>));
template <int N, class E> TINYLA_HD bool rows_in_pieces(const E* out) {
  if constexpr (N * sizeof(E) % 16 == 0) return reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  else return true;
}

// row[c] = value(c) for c < N, in 16-byte stores (rows_may_be_in_pieces). Odd N of float64s:
// (N - 1) / 2 pieces from element 0 or 1 by the row's phase and the element left over,
// the parts picked by selects (as copy_matrix's loads): a warp's threads alternate
// phases, and a branch would issue both sides.
template <int N, class E, class Value> TINYLA_HD void store_row_in_pieces(E* row, Value value) {
  if constexpr (N * sizeof(E) % 16 == 0) {
    constexpr int per_piece = int(16 / sizeof(E));
    TINYLA_UNROLL
    for (int p = 0; p < N / per_piece; ++p)
      store_elements_as_piece(row + p * per_piece, [&](int q) { return value(p * per_piece + q); });
  } else {
    static_assert(N % 2 == 1 && std::is_same_v<E, double>);
    const bool shifted = reinterpret_cast<std::uintptr_t>(row) % 16 != 0;
    row[shifted ? 0 : N - 1] = shifted ? value(0) : value(N - 1);
    TINYLA_UNROLL
    for (int p = 0; p < (N - 1) / 2; ++p) {
      const E lo = shifted ? value(2 * p + 1) : value(2 * p);
      const E hi = shifted ? value(2 * p + 2) : value(2 * p + 1);
      store_elements_as_piece(row + (shifted ? 1 : 0) + 2 * p, [&](int q) { return q == 0 ? lo : hi; });
    }
  }
}

// Solves A x = col for one right-hand side in registers (compile-time N), given
// eliminate()'s factors and pivots: what eliminate() does to a column of B, in
// its order (solve_column's), the row swaps by comparisons so that col is
// indexed by constants only; then back_substitute().
template <int N, class E> TINYLA_HD void solve_in_registers(const E* lu, const int* pivots, E* col) {
  TINYLA_UNROLL
  for (int k = 0; k < N; ++k) {
    TINYLA_UNROLL
    for (int i = k + 1; i < N; ++i) swap_where(pivots[k] == i, col + k, col + i, 1);
    if (k > 0) col[k] = col[k] - dot_product(k, lu + k * N, 1, col, 1);
  }
  back_substitute(shape<N, 1>{N, 1}, lu, col);
}

// One matrix, compile-time n = N, in the caller's registers a (overwritten by
// its factors); for family::inverse the inverse (family::adjugate: the
// adjugate), transposed when the job says so, is written to out, each column
// of Y to its place (column_positions), element by element where out is the
// thread's slot in shared memory (per_thread_kernel's staged outputs); solve
// writes X to the job's x (for n <= 2 in place: x holds B).
template <family F, int N, bool OutInSlot = false, class E>
TINYLA_HD void thread_matrix(const job& jb, int64_t b, E* a, E* out) {
  using L = lane_of<E>;
  [[maybe_unused]] constexpr int nn = N * N;  // unused at N = 0
  constexpr shape<N, N> sq{};
  det_accum<E> acc;
  L info = L(0);
  if constexpr (F == family::determinant) {
    acc = determinant(sq, a);
  } else if constexpr (F == family::inverse || F == family::adjugate) {
    L pivots[N > 0 ? N : 1];
    E column[N > 0 ? N : 1];
    if constexpr (F == family::adjugate) {
      L zero_pivot[N > 0 ? N : 1];
      adjugate(sq, a, acc, pivots, column, zero_pivot, jb.transpose_x);  // n <= 2 transposes itself
    } else {
      info = invert(sq, a, acc, pivots, column, jb.transpose_x);  // n <= 2 transposes itself
    }
    int pos[N > 0 ? N : 1];
    column_positions<N>(pivots, pos);
    const bool tr = jb.transpose_x && N > 2;
    // Whole rows in 16-byte pieces where the output allows (store_row_in_pieces): A^-T's
    // row pos[j] is column j of Y; A^-1's row i is row i of Y once getri's column swaps
    // are done, here by selects on the pivots (constant indices: a stays in registers).
    // Per element, A^-1's stores went to pivoted columns: on an H100, float64 n = 8's
    // inverse took 0.33 ms where the gradient's A^-T in pieces took 0.18. Not for the
    // adjugate (its kernel serves jax.grad of det, as cofactors = A^-T's rows): the swaps
    // took it 4-24 more registers (sm_90, float64 n = 3: 72 to 76, 28 to 24 warps per SM).
    bool stored = false;
    if constexpr (rows_may_be_in_pieces<N, E>) {
      if (!OutInSlot && rows_in_pieces<N, E>(out) && (tr || F == family::inverse)) {
        if (tr) {
          TINYLA_UNROLL
          for (int j = 0; j < N; ++j) store_row_in_pieces<N>(out + pos[j] * N, [&](int c) { return a[c * N + j]; });
        } else {
          TINYLA_UNROLL
          for (int k = N - 2; k >= 0; --k) {
            const int p = int(pivots[k]);
            TINYLA_UNROLL
            for (int c = k + 1; c < N; ++c) swap_where(p == c, a + k, a + c, N, N);  // columns k and c
          }
          TINYLA_UNROLL
          for (int i = 0; i < N; ++i) store_row_in_pieces<N>(out + i * N, [&](int c) { return a[i * N + c]; });
        }
        stored = true;
      }
    }
    if (!stored) {
      // One loop, the transpose in the address: with a loop per branch clang merged
      // them into one that indexed a at run time (gfx942: complex128 a in scratch).
      TINYLA_UNROLL
      for (int i = 0; i < N; ++i) {
        TINYLA_UNROLL
        for (int j = 0; j < N; ++j) out[tr ? pos[j] * N + i : i * N + pos[j]] = a[i * N + j];
      }
    }
  } else if constexpr (N <= 2) {
    info = solve(shape<N, -1>{N, int(jb.nrhs)}, a, static_cast<E*>(jb.x) + b * N * jb.nrhs, acc);
  } else {
    // The factors, then each right-hand side read from B into registers, solved
    // there and written to X (in place too: a column is read before it is
    // written). Eliminating B in global memory along with A took gfx942
    // 208-592 bytes of scratch from n = 6 or 7: clang left the elimination's
    // steps rolled around the run-time loop over the right-hand sides.
    L pivots[N];
    info = eliminate(shape<N, 0>{N, 0}, a, static_cast<E*>(nullptr), acc, pivots);
    // The row swaps as selects on the column's values, the pivots as integers
    // (complex128's lane type takes two registers): reading the rows in the
    // pivoted order instead (an address per row) took more registers on both
    // compilers, but for float64 n = 8 on gfx942 (229 VGPRs against 262).
    int piv[N];
    TINYLA_UNROLL
    for (int k = 0; k < N; ++k) piv[k] = int(pivots[k]);
    const int64_t m = jb.nrhs;
    const E* rhs = static_cast<const E*>(jb.b) + b * N * m;
    E* x = static_cast<E*>(jb.x) + b * N * m;
    const bool singular = info != L(0);
    for (int64_t j = 0; j < m; ++j) {
      E col[N];
      TINYLA_UNROLL
      for (int i = 0; i < N; ++i) col[i] = rhs[i * m + j];
      solve_in_registers<N>(a, piv, col);
      TINYLA_UNROLL
      for (int i = 0; i < N; ++i) x[i * m + j] = singular ? nan_element<E>() : col[i];
    }
  }
  store_outputs(jb, b, acc, info);
}

// A warp's matrices [first, first + count) from their slots in shared memory (the
// thread's lane, nn + 1 elements apart: one element of padding, so that the lanes'
// writes into them fall in different banks) to out, the outputs of matrix `first`
// on: consecutive lanes, consecutive 16-byte pieces where out is 16-byte aligned (a
// warp's stores then cover whole lines: each 16-byte piece of a matrix per thread
// touched a line of its own), else elements.
template <int N, class E> TINYLA_HD void copy_out_of_slots(const E* slots, E* out, int count, int lane) {
  constexpr int nn = N * N, per_piece = int(16 / sizeof(E));  // elements are 4 to 16 bytes
  const int elements = count * nn;
  const auto slot_element = [&](int e) { return read_element(slots[e / nn * (nn + 1) + e % nn]); };
  int loose = 0;  // the first element left after the pieces
  if (reinterpret_cast<std::uintptr_t>(out) % 16 == 0) {
    const int pieces = elements / per_piece;
    TINYLA_ROLLED
    for (int p = lane; p < pieces; p += 32)
      store_elements_as_piece(out + p * per_piece, [&](int q) { return slot_element(p * per_piece + q); });
    loose = pieces * per_piece;
  }
  TINYLA_ROLLED
  for (int e = loose + lane; e < elements; e += 32) out[e] = slot_element(e);
}

// per_thread_kernel's work on matrix b: its loads (aligned: a and x are 16-byte
// aligned), its math, its outputs (an inverse's to out; InSlot: out is the thread's slot
// in shared memory).
template <family F, int N, bool InSlot, class E>
TINYLA_HD void per_thread_matrix(const job& jb, int64_t b, E* out, bool aligned) {
  constexpr int64_t nn = int64_t(N) * N;
  constexpr int align = matrix_alignment<E, N>();
  const E* a = static_cast<const E*>(jb.a);
  alignas(16) E m[nn > 0 ? nn : 1];  // aligned: copy_matrix may use vector moves
  if (aligned) copy_matrix<align, int(nn)>(a + b * nn, m);
  else copy_matrix<element_alignment<E>, int(nn)>(a + b * nn, m);
#if defined(__HIP_DEVICE_COMPILE__)
  // All of the matrix's loads before any use: clang's scheduler otherwise starts
  // on it after part of them (gfx942, float64 n = 7: 11 of its 25; n = 8: 14 of 32).
  __builtin_amdgcn_sched_barrier(0);
#endif
  if constexpr (F == family::solve && N <= 2) {  // solved in place (larger n: read from B)
    const int64_t nb = N * jb.nrhs;
    const E* rhs = static_cast<const E*>(jb.b) + b * nb;
    E* x = static_cast<E*>(jb.x);
    if (rhs != x + b * nb)
      for (int64_t i = 0; i < nb; ++i) x[b * nb + i] = rhs[i];
  }
  thread_matrix<F, N, InSlot>(jb, b, m, out);
}

// Each thread loads its own whole matrix from global memory, every load issued
// before the first is used (vector loads where the arrays are 16-byte aligned),
// and writes an inverse straight to its place: no shared memory, no barrier. Staging
// the block's matrices through shared memory, so that each load instruction
// coalesces, capped the threads an AMD CU holds by its 64 KiB of LDS (float64
// n = 4: 6 of 32 waves) and, with its loads unrolled to have several in flight,
// took more registers than these loads on both vendors (sm_90, float64 n = 4:
// 80 against 66); a warp's consecutive loads here cover whole cache lines.
// With stage_outputs (CUDA; plan_launch gives the block a slot per thread), an
// inverse or adjugate goes to the thread's slot in shared memory instead, and each
// warp then writes its 32 matrices' outputs out together (copy_out_of_slots). The
// loop runs as long for every thread of the block (those past the batch's end skip
// the matrix), as the warps' barriers need.
template <family F, int N, class E, class Block>
TINYLA_HD void per_thread_kernel(Block& blk, const job& jb, bool stage_outputs = false) {
  constexpr int64_t nn = int64_t(N) * N;
  const int mpb = blk.threads();
  const E* a = static_cast<const E*>(jb.a);
  E* x = static_cast<E*>(jb.x);
  const bool aligned = (reinterpret_cast<std::uintptr_t>(a) | reinterpret_cast<std::uintptr_t>(x)) % 16 == 0;
  // The kernels that cannot stage keep the loop they had (a loop that runs alike in every
  // thread moved their registers by -16 to +16 on sm_90).
  constexpr bool may_stage = in_pieces && (F == family::inverse || F == family::adjugate) && N > 2;
  if (!may_stage || !stage_outputs) {
    // The stride from mpb zero-extended: sign-extended, ptxas kept its high word live too
    // (sm_90: the float64 determinant at n = 4 spilled both words under its 64-register cap;
    // 1-16 fewer registers in most per-thread kernels).
    const int64_t stride = blk.blocks() * unsigned(mpb);
    for (int64_t b = blk.block() * mpb + blk.thread(); b < jb.batch; b += stride)
      per_thread_matrix<F, N, false>(jb, b, F == family::determinant || F == family::solve ? nullptr : x + b * nn,
                                     aligned);
    return;
  }
  if constexpr (may_stage) {
    const int lane = blk.thread() % 32;
    E* slots = static_cast<E*>(blk.shared()) + (blk.thread() - lane) * (nn + 1);
    for (int64_t first = blk.block() * mpb; first < jb.batch; first += blk.blocks() * mpb) {
      const int64_t b = first + blk.thread();
      if (b < jb.batch) per_thread_matrix<F, N, true>(jb, b, slots + lane * (nn + 1), aligned);
      blk.sync_warp();  // every slot of the warp written
      const int64_t warp_first = first + (blk.thread() - lane);
      const int64_t left = jb.batch - warp_first;
      const int count = left <= 0 ? 0 : left < 32 ? int(left) : 32;
      if (count > 0) copy_out_of_slots<N>(slots, x + warp_first * nn, count, lane);
      blk.sync_warp();  // every slot read before the next matrices' outputs
    }
  }
}

// ---- team kernel ---------------------------------------------------------------------------

// A team: `size` consecutive threads of the block working on one matrix.
struct team_id {
  int rank, size;
};

// The barrier of a team: its warp's where the team lies in one (team_in_warp), else
// the block's. Either way every thread of the block reaches it alike.
template <class Block> TINYLA_HD void sync_team(Block& blk, bool in_warp) {
  if (in_warp) blk.sync_warp();
  else blk.sync();
}

// LU with partial pivoting of the n x n matrix a (row-major, rows ld apart), in
// place: U in the upper triangle, the multipliers L below it, the pivot row of step
// k in piv[k]. The same operations in the same order as eliminate() in
// src/kernels/lu.hpp (Crout's order), so the results are bit-identical to the
// CPU's. Calls sync_team 4n times whatever the data (every team of the block must);
// in_warp: the team lies in one warp (team_in_warp), and shuffles, not
// best_val / best_row, gather the pivot candidates.
template <class E, class Block> TINYLA_HD lane_of<E> team_factor(Block& blk, team_id tm, bool in_warp, int n, int ld,
                                                                 E* a, int* piv, lane_of<E>* best_val, int* best_row,
                                                                 det_accum<E>& acc) {
  using L = lane_of<E>;
  L info = L(0);
  for (int k = 0; k < n; ++k) {
    // Column k, rows k..n-1, receives the earlier steps.
    if (k > 0)
      for (int i = k + tm.rank; i < n; i += tm.size)
        a[i * ld + k] = a[i * ld + k] - dot_product(k, a + i * ld, 1, a + k, ld);
    sync_team(blk, in_warp);
    // Pivot: LAPACK's first row of largest magnitude. Each thread scans its
    // rows below k (NaN never wins a strict >), then the team's candidates are
    // combined: the largest, the first row on a tie (a total order, so every
    // order of combining gives the same row); a NaN or unbeaten diagonal stays.
    const L diag = pivot_magnitude(a[k * ld + k]);  // read before the barrier: rank 0 may swap it after
    L best = L(-1);
    int p = n;
    for (int i = k + 1 + tm.rank; i < n; i += tm.size) {
      const L v = pivot_magnitude(a[i * ld + k]);
      if (v > best) best = v, p = i;
    }
    const auto combine = [&](L other, int other_row) {
      if (other > best || (other == best && other_row < p)) best = other, p = other_row;
    };
    if (in_warp) {
      // A butterfly: every thread of the team ends with the team's pivot.
      for (int lanes = tm.size / 2; lanes > 0; lanes /= 2) {
        const L other = blk.shuffle(best, tm.rank ^ lanes, tm.size);
        combine(other, blk.shuffle(p, tm.rank ^ lanes, tm.size));
      }
    } else {
      best_val[tm.rank] = best, best_row[tm.rank] = p;
      blk.sync();
      best = L(-1), p = n;
      for (int r = 0; r < tm.size; ++r) combine(best_val[r], best_row[r]);
    }
    if (!(best > diag)) p = k;
    if (tm.rank == 0) piv[k] = p;
    // Rows move once every thread has read diag: after this barrier in a warp, after the
    // block's above across warps.
    if (in_warp) blk.sync_warp();
    if (p != k)  // whole rows: L's part moves with them
      for (int j = tm.rank; j < n; j += tm.size) {
        const E u = read_element(a[k * ld + j]);
        a[k * ld + j] = a[p * ld + j], a[p * ld + j] = u;
      }
    sync_team(blk, in_warp);
    const pivot_inverse<E> pinv(a[k * ld + k]);
    acc.flip(p != k);
    acc.template multiply<true>(pinv.p);
    info = first_zero_pivot(info, pinv.p, k);
    // Row k right of the diagonal receives the earlier steps; column k below
    // it becomes L's (disjoint entries).
    if (k > 0)
      for (int j = k + 1 + tm.rank; j < n; j += tm.size)
        a[k * ld + j] = a[k * ld + j] - dot_product(k, a + k * ld, 1, a + j, ld);
    for (int i = k + 1 + tm.rank; i < n; i += tm.size) a[i * ld + k] = pinv.apply(a[i * ld + k]);
    sync_team(blk, in_warp);
    if ((k & 15) == 15) acc.normalize();
  }
  acc.normalize();
  return info;
}

// v of thread src of the caller's warp team of width W (a complex: both parts).
template <int W, class Block, class R> TINYLA_HD R shuffle_element(Block& blk, R v, int src) {
  return blk.shuffle(v, src, W);
}
template <int W, class Block, class R> TINYLA_HD cplx<R> shuffle_element(Block& blk, cplx<R> v, int src) {
  return {blk.shuffle(v.re, src, W), blk.shuffle(v.im, src, W)};
}

// Elements of E in a 16-byte piece (16 / sizeof(E), at least 1).
template <class E> inline constexpr int elements_per_piece = sizeof(E) < 16 ? int(16 / sizeof(E)) : 1;

// One 16-byte piece (elements_per_piece<E> elements) from 16-byte aligned shared
// memory into registers (back: store_piece<true>): one access (LDS.128; element by
// element, nvcc split the accesses where each element had its own test).
template <class E> TINYLA_HD void load_piece(const E* src, E* dst) {
  static_assert(sizeof(E) <= 16);
#if defined(__CUDA_ARCH__)
  using R = lane_real<lane_of<E>>;
  const auto v = *reinterpret_cast<const typename piece16<R>::type*>(src);
  R* d = reinterpret_cast<R*>(dst);
  if constexpr (sizeof(R) == 8) d[0] = v.x, d[1] = v.y;
  else d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
#else
  __builtin_memcpy(dst, src, 16);
#endif
}

// Entry j (a constant where the loops are unrolled) of a warp team thread's
// row of A: in registers, or in memory.
template <bool InRegisters, int S, class E>
TINYLA_HD E row_entry(const E (&in_registers)[S], const E* in_memory, int j) {
  if constexpr (InRegisters) return in_registers[j];
  else return in_memory[j];
}

// Steps of a warp team's LU per loop (warp_factor). Each loop picks entry k out of its
// steps' entries by selects and runs over a row from its first step's entry on, so the
// fewer steps a loop, the fewer instructions a step (sm_90, float64 W = 32, step loops
// per matrix at n = 32: the inverse 14,656 SASS instructions in loops of 8 steps, 11,108
// in loops of 2; the determinant 10,216 in loops of 8, 9,164 in loops of 4, 8,478 in
// loops of 2), each loop a copy of the step's code. At least a 16-byte piece of U's row
// (warp_factor's pieces start at a loop's first entry: float32 4 steps), and 4 for the
// determinants, whose rows are in registers: in loops of 2 ptxas took the float64 W = 32
// one to 214 registers (8 warps per SM, 12 at 4 steps) or, held to 168, 24 bytes of local
// memory. Complex kernels keep 8: their steps are 2-3 times as long, and in loops of 2 the
// sm_90 code grew 590 K -> 702 K instructions, most of it theirs, which cost CI 2.5
// minutes of nvcc beside the Python build. On gfx942 one loop: clang specialized each
// chunk's loop for every k in it (the float64 W = 32 determinant: 12,672 instructions
// against 3,720).
#if defined(__HIP_DEVICE_COMPILE__)
template <class E, bool RowInRegisters> inline constexpr int warp_step_chunk = max_warp_width;
#else
template <class E, bool RowInRegisters> inline constexpr int warp_step_chunk =
    element_traits<E>::is_complex                  ? 8
    : RowInRegisters || elements_per_piece<E> == 4 ? 4
                                                   : 2;
#endif

// How a warp team finds its pivot: the largest candidate, ties to the smallest key. On
// CUDA (sm_80 and later) by the warp's integer reductions (redux.sync: two or three, the
// candidate's bits then its key), where a butterfly of shuffles takes log2(W) dependent
// rounds of three shuffles (float64), a comparison and three selects (sm_90, float64 W =
// 32: about 50 instructions a step; the inverse's step loops 1965 -> 1832 instructions in
// all, 120 -> 116 registers; the determinant's 9,164 -> 8,012 at 166 -> 167 registers,
// where in loops of 8 steps it took 168 -> 220, 12 -> 8 warps per SM). Only in teams of a
// whole warp (warp_factor): at W = 16 a reduction per team took the warp twice (with a
// team's own mask, ptxas took a divergent loop), which gained nothing and spilled in two
// kernels. gfx942 has no such instruction: the butterfly.
#if defined(__HIP_DEVICE_COMPILE__)
inline constexpr bool warp_redux = false;
#else
inline constexpr bool warp_redux = true;
#endif

// The key of the largest best of the caller's warp, ties to the smallest key; best >= 0
// (+inf included) for a candidate, -1 for none, and some thread's a candidate. A
// candidate's code is its bits plus 1 (the bits of floats >= 0 order as they do), none's
// 0; the largest code's high word, then its low word among those, then the smallest key
// among those that have both.
template <class Block, class R> TINYLA_HD int key_of_largest(Block& blk, R best, int key) {
  static_assert(sizeof(R) == 4 || sizeof(R) == 8);
  using U = std::conditional_t<sizeof(R) == 8, std::uint64_t, std::uint32_t>;
  U code = 0;
  if (best >= R(0)) {
    __builtin_memcpy(&code, &best, sizeof code);
    ++code;
  }
  bool largest;
  if constexpr (sizeof(R) == 8) {
    const unsigned high = unsigned(code >> 32), low = unsigned(code);
    const unsigned top = blk.reduce_max(high);
    const unsigned top_low = blk.reduce_max(high == top ? low : 0u);  // every thread calls it
    largest = high == top && low == top_low;
  } else {
    largest = code == blk.reduce_max(code);
  }
  return int(blk.reduce_min(largest ? unsigned(key) : ~0u));
}

// team_factor's LU by a warp team: W threads of one warp (n <= W), row `rank`
// of a in the registers of thread `rank`. Rows never move: each knows its place
// in the pivoted order. At step k the rows at place k or below finish their
// entry of column k, a butterfly of shuffles finds the pivot (every thread gets
// it: the combine is a total order), its row finishes U's row k and shuffles it
// to the rows below, which add its products to their sums. Each entry keeps its
// sum of products (p ascending, the first product alone) and subtracts it from
// its entry of a when final: Crout's order, as eliminate() in lu.hpp, so the
// results are bit-identical to the CPU's. No block barrier during the
// elimination: a is read as entries become final and, when StoreFactors,
// overwritten with the factors in the pivoted order at the end.
// RowInRegisters (a determinant): a is the matrix in global memory, each thread's
// row loaded into registers at the start (all W loads in flight) and never
// written; U's row k goes through u_rows instead of shuffles (2 W elements of
// shared memory, 16-byte aligned; steps use its halves in turn, so that one warp
// barrier a step keeps a row from being overwritten while read): its owner writes
// it and every thread reads it in 16-byte pieces, a quarter of a store and a load
// per float64 where a shuffle took two 4-byte moves, and every row updates every
// entry, with no test. (sm_90, float64 W = 32: 1482 -> 1277 instructions in the
// step loops. The inverse's, whose entries keep their tests, 1965 -> 1747, but
// gfx942's grew 554 -> 755 a step: it keeps its shuffles until a GPU decides.)
template <int W, bool StoreFactors, bool RowInRegisters, int StepChunk = 0, bool Redux = warp_redux, class E,
          class Block, class Matrix>
TINYLA_HD lane_of<E> warp_factor(Block& blk, int rank, int n, Matrix* a, int* piv, E* u_rows, det_accum<E>& acc) {
  using L = lane_of<E>;
  static_assert(!(StoreFactors && RowInRegisters));
  constexpr int place_bits = 8;  // a candidate's key: its place, then its rank
  static_assert(W <= (1 << place_bits));
  const bool mine = rank < n;  // the threads past n only take part in the shuffles
  const E* my_row = a + rank * n;
  E loaded[RowInRegisters ? W : 1];
  if constexpr (RowInRegisters) {
    // Indices clamped into the matrix, so that every load is unconditional.
    const E* row_or_last = a + (mine ? rank : n - 1) * n;
    TINYLA_UNROLL
    for (int j = 0; j < W; ++j) loaded[j] = row_or_last[j < n ? j : n - 1];
#if defined(__HIP_DEVICE_COMPILE__)
    __builtin_amdgcn_sched_barrier(0);  // all W loads in flight (as per_thread_kernel's)
#endif
  }
  // Entry j: its sum of products until final, then L's (j < place) or U's value.
  // The sums start at -0, to which adding x gives x (sign of zero included), as
  // the CPU's sums start with their first product.
  E row[W];
  TINYLA_UNROLL
  for (int j = 0; j < W; ++j) row[j] = -make_element<E>(0.0);
  int place = rank;
  L info = L(0);
  // The steps are loops, not unrolled (unrolled, their W^2 shuffles took the compilers
  // minutes per kernel); row[] and loaded[] are indexed by constants only, so that they
  // stay in registers: entry k is found and set by comparing j with k. One loop per
  // chunk of StepChunk steps, k from From on (a constant): a step touches only
  // the entries past k, so the chunk's loops start at From, not 0.
  constexpr int chunk_steps = StepChunk > 0 ? StepChunk : warp_step_chunk<E, RowInRegisters>;
  constexpr int steps = W < chunk_steps ? W : chunk_steps;
  static_assert(W % steps == 0);
  constexpr int per_piece = elements_per_piece<E>;
  static_assert(steps % per_piece == 0);
  // Inlined by force: clang (gfx942) kept row[] and loaded[] in scratch otherwise.
  const auto chunk = [&]<int From>() __attribute__((always_inline)) {
    for (int k = From; k < n && k < From + steps; ++k) {
      // Entry k of the row and its sum, picked in one pass (in two, ptxas took
      // 26 more registers for the float64 W = 32 determinant).
      E sum_k = row[From], a_k = RowInRegisters ? loaded[From] : make_element<E>(0.0);
      TINYLA_UNROLL
      for (int j = From + 1; j < From + steps; ++j)
        if (j == k) {
          sum_k = row[j];
          if constexpr (RowInRegisters) a_k = loaded[j];
        }
      if constexpr (!RowInRegisters) a_k = mine ? my_row[k] : make_element<E>(0.0);
      E col = mine ? a_k : make_element<E>(0.0);
      if (k > 0 && place >= k) col = col - sum_k;
      // The pivot: LAPACK's first row of largest magnitude at or below place k,
      // the diagonal kept on a tie or when it is NaN (as team_factor: other NaN
      // rows never win).
      const L mag = pivot_magnitude(col);
      L best = L(-1);
      int key = place << place_bits | rank;
      if (mine && place == k) best = mag == mag ? mag : L(std::numeric_limits<lane_real<L>>::infinity());
      // NaN rows stay out by an explicit test: for float, nvcc 13 compiled `mag > -1` (false
      // for NaN only) to no test at all, and a NaN candidate then split the team's pivot.
      else if (mine && place > k && mag == mag) best = mag;
      if constexpr (Redux && W == 32) {
        key = key_of_largest(blk, best, key);
      } else {
        TINYLA_UNROLL
        for (int lanes = W / 2; lanes > 0; lanes /= 2) {
          const L other = blk.shuffle(best, rank ^ lanes, W);
          const int other_key = blk.shuffle(key, rank ^ lanes, W);
          if (other > best || (other == best && other_key < key)) best = other, key = other_key;
        }
      }
      const int p = key >> place_bits, owner = key & ((1 << place_bits) - 1);
      if (StoreFactors && rank == 0) piv[k] = p;
      const pivot_inverse<E> pinv(shuffle_element<W>(blk, col, owner));
      acc.flip(p != k);
      acc.template multiply<true>(pinv.p);
      info = first_zero_pivot(info, pinv.p, k);
      const int was = place;
      if (was == p) place = k;
      if (was == k) place = p;
      // The rows below finish their entry of L's column k; the pivot row, U's row
      // k, which it hands to them to add its products to their sums.
      const E l = place == k ? col : pinv.apply(col);
      if constexpr (RowInRegisters) {
        // Every thread adds U's products to every entry of its row, as the rows at
        // places k and above and the entries up to k are not read again: no test per
        // entry (they were a third of the float64 W = 32 determinant's step, sm_90).
        // U's row k through u_rows from the chunk's first entry on, its entries a
        // minus the sum; at k = 0, a - (-0) is a but for the sign of a zero, which no
        // determinant output shows (a pivot's zero sign is not counted).
        E* const u_k = static_cast<E*>(__builtin_assume_aligned(u_rows + (k & 1) * W, 16));
        if (place == k) {
          TINYLA_UNROLL
          for (int piece = From; piece < W; piece += per_piece) {
            E u[per_piece];
            TINYLA_UNROLL
            for (int c = 0; c < per_piece; ++c) u[c] = loaded[piece + c] - row[piece + c];
            store_piece<true>(reinterpret_cast<lane_real<L>*>(u_k + piece), reinterpret_cast<const lane_real<L>*>(u));
          }
        }
        blk.sync_warp();
        TINYLA_UNROLL
        for (int piece = From; piece < W; piece += per_piece) {
          E u[per_piece];
          load_piece(u_k + piece, u);
          TINYLA_UNROLL
          for (int c = 0; c < per_piece; ++c)
            if (piece + c > From) row[piece + c] = row[piece + c] + l * u[c];  // at k = 0: -0 + l u, l u bit for bit
        }
      } else {
        TINYLA_UNROLL
        for (int j = From; j < W; ++j) {
          if (StoreFactors && j == k && place >= k) row[j] = l;
          // In memory, a row's entries are read by the pivot row only (all of them at
          // once would meet in one bank where n is even).
          if (j > k && j < n && place == k) {
            const E a_kj = row_entry<RowInRegisters>(loaded, my_row, j);
            row[j] = k > 0 ? a_kj - row[j] : a_kj;
          }
        }
        TINYLA_UNROLL
        for (int j = From + 1; j < W; ++j) {
          if (j <= k || j >= n) continue;
          const E u = shuffle_element<W>(blk, row[j], owner);  // the pivot row's: U's entry (k, j)
          if (place > k) row[j] = row[j] + l * u;
        }
      }
      if ((k & 15) == 15) acc.normalize();
    }
  };
  [&]<int... c>(std::integer_sequence<int, c...>) __attribute__((always_inline)) {
    (chunk.template operator()<c * steps>(), ...);
  }(std::make_integer_sequence<int, W / steps>{});
  acc.normalize();
  if constexpr (StoreFactors) {
    blk.sync();  // every row of a read
    if (mine) {
      TINYLA_UNROLL
      for (int j = 0; j < W; ++j)
        if (j < n) a[place * n + j] = row[j];
    }
    blk.sync();
  }
  return info;
}

// Solves A x = rhs for one column, given team_factor's LU (rows lu_ld apart) and
// pivots; element i of the column is col[i * ld]. Same order of operations as
// solve() in lu.hpp.
template <class E>
TINYLA_HD void solve_column(int n, const E* lu, int lu_ld, const int* piv, E* col, int64_t ld, bool singular) {
  for (int k = 0; k < n; ++k) {
    const int p = piv[k];
    if (p != k) {
      const E u = read_element(col[k * ld]);
      col[k * ld] = col[p * ld], col[p * ld] = u;
    }
    if (k > 0) col[k * ld] = col[k * ld] - dot_product(k, lu + k * lu_ld, 1, col, ld);
  }
  for (int i = n - 1; i >= 0; --i) {
    E s = col[i * ld];
    for (int c = i + 1; c < n; ++c) s = sub_mul(s, lu[i * lu_ld + c], col[c * ld]);
    col[i * ld] = pivot_inverse<E>(lu[i * lu_ld + i]).apply(s);
  }
  if (singular)
    for (int i = 0; i < n; ++i) col[i * ld] = nan_element<E>();
}

// Row i of Y = A^-1 P^T from team_factor's LU (rows lu_ld apart), into row[j * ld] (j < n): the
// entries invert_factored in lu.hpp computes, each with the same operations in
// the same order (rows are independent: a thread per row). UnitZeroPivots: with
// U's exactly zero pivots taken as 1 (adjugate's Y~).
template <bool UnitZeroPivots = false, class E>
TINYLA_HD void factored_inverse_row(int n, int i, const E* lu, int lu_ld, E* row, int64_t ld) {
  const auto at = [&](int, int p) -> E& { return row[p * ld]; };
  for (int j = 0; j < i; ++j) row[j * ld] = make_element<E>(0.0);
  for (int j = i; j < n; ++j) {  // U^-1
    E sum[1] = {make_element<E>(0.0)};
    if (j > i) staggered_sums<1>(i, j, sum, at, [&](int, int p) { return lu[p * lu_ld + j]; });
    const E u_jj = UnitZeroPivots ? unit_if_zero(lu[j * lu_ld + j]) : lu[j * lu_ld + j];
    row[j * ld] = inverse_of_u_entry(j == i, sum[0], pivot_inverse<E>(u_jj));
  }
  for (int j = n - 2; j >= 0; --j)  // times L^-1
    subtract_dot_products_group<1, E>(
        n - 1 - j, 0, [&](int) -> E& { return row[j * ld]; }, [&](int, int p) { return row[(j + 1 + p) * ld]; },
        [&](int, int p) { return lu[(j + 1 + p) * lu_ld + j]; });
}

// getri's last step on a row of Y: the row swaps undone on its columns, the last first.
template <class E> TINYLA_HD void undo_row_swaps(int n, const int* piv, E* row, int64_t ld) {
  for (int k = n - 2; k >= 0; --k)
    if (piv[k] != k) {
      const E u = read_element(row[k * ld]);
      row[k * ld] = row[piv[k] * ld], row[piv[k] * ld] = u;
    }
}

// Row i of A^-1 from team_factor's LU and pivots (NaN where singular).
template <class E>
TINYLA_HD void inverse_row(int n, int i, const E* lu, int lu_ld, const int* piv, E* row, int64_t ld, bool singular) {
  factored_inverse_row(n, i, lu, lu_ld, row, ld);
  undo_row_swaps(n, piv, row, ld);
  if (singular)
    for (int j = 0; j < n; ++j) row[j * ld] = nan_element<E>();
}

// The team's rows of adj(A), as adjugate in lu.hpp forms them (see there), from
// the LU and pivots in lu (its buffer is scratch afterwards), info and det(A) in
// acc: row i of Y~ (A^-1 P^T with U's zero pivots taken as 1) into row i of x
// stored as its column i (x[j * n + i], as inverse_row's rows are stored); where
// A is singular, the rank-one product chain * (Y~ e_z1)(e_zm^T Y~), read from the
// team's rows after a barrier, row z_m copied to lu first; then times det(P)
// det(U~) and the column swaps. x null: an inactive team, which takes part in
// the block's barriers (3).
template <class E, class Block> TINYLA_HD void team_adjugate(Block& blk, team_id tm, int n, int lu_ld, E* lu,
                                                             const int* piv, lane_of<E> info, const det_accum<E>& acc,
                                                             E* x) {
  using L = lane_of<E>;
  const bool singular = x && info != L(0);
  if (x)
    for (int i = tm.rank; i < n; i += tm.size) factored_inverse_row<true>(n, i, lu, lu_ld, x + i, n);
  blk.sync();  // Y~ written
  const auto y = [&](int r, int c) { return x[c * n + r]; };
  E chain = make_element<E>(1.0);
  const int first_zero = int(info) - 1;
  int last_zero = first_zero;
  if (singular) {
    TINYLA_UNROLL_INNER
    for (int k = first_zero + 1; k < n; ++k)
      if (is_zero(lu[k * lu_ld + k])) chain = chain * y(last_zero, k), last_zero = k;
  }
  const det_accum<E> scale =
      singular ? det_of_unit_pivots<E>(
                     n, [&](int k) { return unit_if_zero(lu[k * lu_ld + k]); }, [&](int k) { return piv[k] != k; })
               : acc;
  blk.sync();  // lu read
  if (singular)
    for (int j = tm.rank; j < n; j += tm.size) lu[j] = y(last_zero, j);
  blk.sync();  // row z_m in lu
  if (!x) return;
  const scale_by_accum<E> by_scale(scale);
  for (int i = tm.rank; i < n; i += tm.size) {
    E* row = x + i;
    const E column = singular ? chain * y(i, first_zero) : chain;  // read before the row is written
    for (int j = 0; j < n; ++j) {
      const E v = singular ? column * lu[j] : row[j * n];
      row[j * n] = by_scale.apply(v);
    }
    undo_row_swaps(n, piv, row, n);
  }
}

// x (n x n, row-major) := its transpose, through the team's buffer (where its
// LU was: shared memory, or the global workspace), both passes over x in
// consecutive elements. Entry (r, c) sits in the buffer at r * n + (r + c) mod
// n, so that the entries of a column, which the second pass reads together,
// fall in different banks. x null: an inactive team, which still takes part in
// the block's barriers.
template <class E, class Block> TINYLA_HD void transpose_through(Block& blk, team_id tm, int n, E* buffer, E* x) {
  const auto rotated = [n](int r, int c) { return r * n + (r + c < n ? r + c : r + c - n); };
  if (x)
    for (int r = 0; r < n; ++r)
      for (int c = tm.rank; c < n; c += tm.size) buffer[rotated(r, c)] = x[r * n + c];
  blk.sync();
  if (x)
    for (int r = 0; r < n; ++r)
      for (int c = tm.rank; c < n; c += tm.size) x[r * n + c] = buffer[rotated(c, r)];
  blk.sync();  // the next round overwrites the buffer
}

// workspace: null when the matrices fit in shared memory (plan_launch), else
// blocks() * teams matrices of global scratch. W > 0: the LU by warp_factor,
// team_size == W; a determinant whose rows fit in registers
// (warp_rows_in_registers) reads them from global memory: shared memory only for
// U's rows. InverseInShared (family::inverse; launch_plan's inverse_in_shared): each team's
// inverse formed in a buffer after its LU, then written out (a kernel of its own, so that the
// others keep their registers: as a run-time choice it took sm_90's warp-team inverses up to
// 16 more registers, and six of them into local memory).
template <family F, int W, class E, int StepChunk = 0, bool Redux = warp_redux, bool InverseInShared = false,
          class Block>
TINYLA_HD void team_kernel(Block& blk, const job& jb, int team_size, E* workspace) {
  using L = lane_of<E>;
  using R = lane_real<L>;
  constexpr bool rows_in_registers = W > 0 && warp_rows_in_registers<E>(F, W);
  const int n = int(jb.n);
  const int64_t nn = int64_t(n) * n;
  const int teams = blk.threads() / team_size, team = blk.thread() / team_size;
  const team_id tm{blk.thread() % team_size, team_size};
  const team_layout<R> layout(team_size, n);                                // must match plan_launch
  const int ld = int(team_ld(n, W));                                        // the LU's rows, ld apart
  const bool in_warp = team_in_warp(team_size, blk.threads(), !workspace);  // as plan_launch
  const int64_t lu_size = int64_t(n) * ld;
  const int64_t u_rows_bytes = rows_in_registers ? warp_u_rows_bytes<E>(W) : 0;  // as plan_launch
  constexpr bool y_in_shared = F == family::inverse && InverseInShared;
  const int64_t y_bytes = y_in_shared ? team_inverse_bytes<E>(n) : 0;
  const int64_t per_team =
      (rows_in_registers ? 0 : layout.up(layout.scratch + (workspace ? 0 : lu_size * int64_t(sizeof(E))))) +
      u_rows_bytes + y_bytes;
  char* mine = static_cast<char*>(blk.shared()) + team * per_team;
  E* u_rows = reinterpret_cast<E*>(mine + per_team - y_bytes - u_rows_bytes);
  E* y = reinterpret_cast<E*>(mine + per_team - y_bytes);  // y_in_shared: A^-T, rows y_ld apart
  const int y_ld = int(team_ld(n));
  int* piv = reinterpret_cast<int*>(mine);
  auto* best_val = reinterpret_cast<R*>(mine + layout.values);
  int* best_row = reinterpret_cast<int*>(mine + layout.rows);
  E* lu = workspace ? workspace + (blk.block() * teams + team) * lu_size : reinterpret_cast<E*>(mine + layout.scratch);
  const E* a = static_cast<const E*>(jb.a);
  E* x = static_cast<E*>(jb.x);
  const int64_t nx = F == family::solve ? n * jb.nrhs : nn;  // x elements per matrix
  for (int64_t base = blk.block() * teams; base < jb.batch; base += blk.blocks() * teams) {
    const int64_t b = base + team;
    const bool active = b < jb.batch;
    det_accum<E> acc;
    L info;
    if constexpr (rows_in_registers) {
      // Inactive teams (past the batch's end) factor the last matrix again: the
      // shuffles take every thread of the warp.
      info = warp_factor<W, false, true, StepChunk, Redux>(blk, tm.rank, n, a + (active ? b : jb.batch - 1) * nn, piv,
                                                           u_rows, acc);
      if (active && tm.rank == 0) store_outputs(jb, b, acc, info);
      continue;
    }
    // Inactive teams factor whatever their slot holds: the barriers inside
    // team_factor are block-wide.
    if (active) {
      if constexpr (W > 0) copy_strided<4>(a + b * nn, lu, nn, tm.rank, team_size);  // ld == n
      else copy_into_rows<4>(a + b * nn, lu, n, ld, tm.rank, team_size);
    }
    if constexpr (F == family::solve) {
      // The block's right-hand sides into x, its threads striding together (coalesced);
      // an in-place solve (b == x) has nothing to copy. One load in flight: with 4, the
      // warp teams took 128 and 164 registers instead of 80 and 128 (sm_90, float64).
      const int count = int(min_of<int64_t>(teams, jb.batch - base));
      if (jb.b != jb.x)
        copy_strided<1>(static_cast<const E*>(jb.b) + base * nx, x + base * nx, count * nx, blk.thread(),
                        blk.threads());
    }
    blk.sync();
    if constexpr (W > 0)
      info = warp_factor<W, F != family::determinant, false, StepChunk, Redux>(blk, tm.rank, n, lu, piv, u_rows,
                                                                               acc);  // ld == n
    else info = team_factor(blk, tm, in_warp, n, ld, lu, piv, best_val, best_row, acc);
    if constexpr (F == family::adjugate)
      team_adjugate(blk, tm, n, ld, lu, piv, info, acc, active ? x + b * nx : nullptr);
    if (active) {
      if constexpr (F == family::inverse) {
        // Row i of the inverse, stored as column i: A^-T, the team's threads
        // writing consecutive elements at every step (as rows, each of their
        // ~n^2 accesses would touch its own 32-byte sector); in the team's buffer, or
        // in the output.
        for (int i = tm.rank; i < n; i += team_size)
          inverse_row(n, i, lu, ld, piv, y_in_shared ? y + i : x + b * nx + i, y_in_shared ? y_ld : n, info != L(0));
      } else if constexpr (F == family::solve) {
        const int m = int(jb.nrhs);
        for (int j = tm.rank; j < m; j += team_size) solve_column(n, lu, ld, piv, x + b * nx + j, m, info != L(0));
      }
      if (tm.rank == 0) store_outputs(jb, b, acc, info);
    }
    blk.sync();  // the next round overwrites lu and piv
    if constexpr (y_in_shared) {
      // The team's buffer out, each row of the output in consecutive elements: A^-T as it
      // lies, A^-1 read across it. The next round writes the buffer only after the barrier
      // that follows its loads, which every thread reaches after this.
      if (active)
        for (int r = 0; r < n; ++r)
          for (int c = tm.rank; c < n; c += team_size)
            x[b * nx + r * n + c] = read_element(jb.transpose_x ? y[r * y_ld + c] : y[c * y_ld + r]);
    } else if constexpr (F == family::inverse || F == family::adjugate) {
      if (!jb.transpose_x) transpose_through(blk, tm, n, lu, active ? x + b * nx : nullptr);
    }
  }
}

// ---- log_det_laplacian -----------------------------------------------------------------------

// The bits of a group's mask `mine` OR-ed over its `width` threads (a butterfly of shuffles:
// every thread ends with the group's).
template <class Block> TINYLA_HD unsigned group_or(Block& blk, unsigned mine, int rank, int width) {
  for (int lanes = width / 2; lanes > 0; lanes /= 2) mine |= unsigned(blk.shuffle(int(mine), rank ^ lanes, width));
  return mine;
}

// kernels/log_det_laplacian.hpp's derivatives of log det A (grad_c = tr(A^-1 D_c) and
// laplacian = tr(A^-1 H) - sum_c tr((A^-1 D_c)^2), from G = A^-T), a block per matrix
// (plan_launch): G in shared memory; the tangents shared out among groups of
// laplacian_layout::width threads of one warp, thread k of a group forming column k of
// M_c = G^T D_c in registers (Width >= n elements: laplacian_width), each entry summed over
// D_c's rows as tangent_traces sums it (the rows in order, mul_add); a row that is zero in
// the group's columns and finite in G adds exact zeros and is skipped, as the CPU skips
// rows zero in all its lanes. tr M_c and tr M_c^2 then from M_c in shared memory as
// tangent_traces forms them (each row's off_diagonal_pairs by its thread, add_trace_terms
// along the rows by the group's first), and thread 0 subtracts the square traces from tr(G^T H)
// (sum_of_products, as the CPU) in tangent order: the CPU's bits. Every thread of the
// block takes part in every shuffle and barrier, whatever its group has to do.
template <int Width, class E, class Block> TINYLA_HD void log_det_laplacian_kernel(Block& blk, const job& jb) {
  const int n = int(jb.n);
  const int64_t nn = int64_t(n) * n, tangents = jb.tangent_count;
  const laplacian_layout layout(n, blk.threads() / warp_slot(n));  // as plan_launch
  const int width = layout.width, group = blk.thread() / width, rank = blk.thread() % width;
  const bool column = rank < n;  // a thread of a column of M_c
  E* g = static_cast<E*>(blk.shared());
  E* m = g + nn + group * layout.group_elements;  // M_c's entry (i, k) at m[i * (n + 1) + k]
  E* row_sums = m + nn + n;
  E* square_traces = g + nn + layout.groups * layout.group_elements;
  const E* inverse_t = static_cast<const E*>(jb.a);
  const E* lap_a = static_cast<const E*>(jb.b);
  const E* d_all = static_cast<const E*>(jb.tangents);
  E* grad = static_cast<E*>(jb.grad);
  const E zero = make_element<E>(0.0);
  for (int64_t b = blk.block(); b < jb.batch; b += blk.blocks()) {
    copy_strided<4>(inverse_t + b * nn, g, nn, blk.thread(), blk.threads());
    blk.sync();
    unsigned g_not_finite = 0;  // G's rows with a non-finite entry in this thread's column
    if (column)
      for (int j = 0; j < n; ++j) g_not_finite |= unsigned(!is_finite(g[j * n + rank])) << j;
    E laplacian = zero;
    if (blk.thread() == 0) laplacian = sum_of_products(shape<-1, -1>{n, n}, g, lap_a + b * nn);
    for (int64_t first = 0; first < tangents; first += layout.groups) {
      const int64_t c = first + group;
      const bool active = c < tangents;
      const E* d = d_all + (b * tangents + (active ? c : 0)) * nn;
      unsigned rows = 0;
      if (active && column) {
        rows = g_not_finite;
        for (int j = 0; j < n; ++j) rows |= unsigned(!is_zero(d[j * n + rank])) << j;
      }
      rows = group_or(blk, rows, rank, width);
      E sum[Width];
      TINYLA_UNROLL
      for (int i = 0; i < Width; ++i) sum[i] = zero;
      if (active && column) {
        for (int j = 0; j < n; ++j) {
          if (!((rows >> j) & 1u)) continue;
          const E djk = d[j * n + rank];
          TINYLA_UNROLL
          for (int i = 0; i < Width; ++i)
            if (i < n) sum[i] = mul_add(g[j * n + i], djk, sum[i]);
        }
        TINYLA_UNROLL
        for (int i = 0; i < Width; ++i)
          if (i < n) m[i * (n + 1) + rank] = sum[i];
      }
      blk.sync_warp();  // M_c whole
      if (active && column) row_sums[rank] = off_diagonal_pairs(m, n, n + 1, rank);
      blk.sync_warp();  // every row's sum
      if (active && rank == 0) {
        E trace = zero, square_trace = zero;
        for (int i = 0; i < n; ++i) add_trace_terms(m[i * (n + 1) + i], row_sums[i], trace, square_trace);
        grad[b * tangents + c] = trace;
        square_traces[group] = square_trace;
      }
      blk.sync();  // every group's square trace; M_c and the row sums read
      if (blk.thread() == 0)
        for (int q = 0; q < layout.groups && first + q < tangents; ++q) laplacian = laplacian - square_traces[q];
      blk.sync();  // the square traces read before the next round writes them
    }
    if (blk.thread() == 0) static_cast<E*>(jb.laplacian)[b] = laplacian;
    blk.sync();  // G read (also where there are no tangents) before the next matrix's
  }
}

}  // namespace tinyla::TINYLA_KERNEL_NS
