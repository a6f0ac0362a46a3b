// The GPU kernels' bodies, written against a small block interface so that
// the same code runs as a CUDA/HIP kernel (device_block in kernels.cu) and on
// the host, each GPU thread a host thread and sync a std::barrier (the tests'
// host_block). The per-matrix math is src/kernels, instantiated for the scalar
// lane: one GPU thread holds one matrix.
//
// A Block provides:
//   int thread(), threads()          this thread's index in the block, block size
//   int64_t block(), blocks()        this block's index in the grid, grid size
//   void sync()                      block-wide barrier (__syncthreads)
//   void* shared()                   the block's dynamic shared memory
//
// Two kernel shapes (launch_plan picks one, sizes from a table):
// - per_thread: n <= max_per_thread_n, one matrix per thread, the matrix in
//   registers (compile-time n, fully unrolled). The block's matrices are staged
//   through shared memory so that global loads and stores coalesce.
// - team: larger n. A team of threads per matrix; the matrix sits in shared
//   memory (or in a global workspace when it does not fit), the threads
//   exchange the pivot through shared memory; every elimination step is a
//   column-parallel update, and the right-hand sides (identity columns for an
//   inverse) are then solved one column per thread, straight in the output.
// Both are grid-stride loops over the batch with 64-bit indices; no warp size
// is assumed anywhere (every barrier is block-wide).
#pragma once

#include <cstdint>
#include <utility>

#include "job.hpp"
#include "kernels/lu.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

using std::int64_t;

// What a kernel computes: the op's outputs are whichever job pointers are set.
enum class family { determinant, inverse, solve };  // slogdet/det, inv/slogdet_inv, solve

constexpr family family_of(op kind) {
  return kind == op::solve ? family::solve
                           : (kind == op::inv || kind == op::slogdet_inv ? family::inverse : family::determinant);
}

template <class T> TINYLA_HD T min_of(T a, T b) { return a < b ? a : b; }

// ---- launch configuration (the table to tune) --------------------------------------

inline constexpr int max_per_thread_n = 8;
// ... and only while the matrices a thread keeps live fit in this many 32-bit
// registers (A, plus X for an inverse; a solve's B stays in global memory):
// past that the compiler spills them to local memory (measured with ptxas -v
// on sm_90: complex128 n = 6 inverses spill, n = 5 use 254 registers).
inline constexpr int per_thread_register_budget = 200;
template <class E> constexpr bool per_thread_fits(family f, int64_t n) {
  const int64_t words = (f == family::inverse ? 2 : 1) * n * n * int64_t(sizeof(E)) / 4;
  return n <= max_per_thread_n && words <= per_thread_register_budget;
}
// Matrices (= threads) per block of the per-thread kernel, by n, for elements
// of up to 8 bytes; halved for 16-byte ones (the staging buffer and the
// registers double), and bounded by the shared-memory budget.
inline constexpr int per_thread_block[max_per_thread_n + 1] = {256, 256, 256, 128, 128, 128, 64, 64, 64};
// Team kernel: threads per block to aim for, and at most this many threads
// per team (larger n: each thread owns several rows and columns).
inline constexpr int team_threads_target = 128;
inline constexpr int max_team_size = 128;
// Largest blocks the plans make (the kernels' launch bounds: they let the
// compilers give each thread the registers that block size leaves, e.g. up to
// 255 on NVIDIA and 512 VGPRs on CDNA instead of 128 for 1024-thread blocks).
inline constexpr int max_per_thread_block = 256;
inline constexpr int max_team_block = team_threads_target > max_team_size ? team_threads_target : max_team_size;

struct plan_options {
  // Shared memory a kernel may use without opting in to more (48 KiB is the
  // default limit on NVIDIA; AMD's LDS is 64 KiB). Team kernels whose matrix
  // does not fit use a global workspace.
  int64_t shared_budget = 48 * 1024;
  int per_thread_up_to = max_per_thread_n;  // larger n (or past the register budget): the team kernel
  int per_thread_block = 0;                 // 0: from the table
  int team_size = 0;                        // 0: min(n, max_team_size)
};

struct launch_plan {
  bool per_thread = true;
  int block_threads = 1;   // threads per block
  int team_size = 1;       // team kernel: threads per matrix
  int64_t blocks = 0;      // grid size (0: nothing to launch)
  int64_t shared_bytes = 0;
  int64_t workspace_bytes = 0;  // team kernel whose matrix does not fit in shared memory: global scratch
};

// Matrix slot stride in elements: odd, so that thread t reading element k of
// its own slot hits a different bank than thread t+1.
constexpr int64_t staging_stride(int64_t n) { return (n * n) | 1; }

// Per-team shared memory of the team kernel: pivot rows, the argmax
// candidates (value, row) of each thread, then the matrix when it lives in
// shared memory. Sizes rounded to 16 bytes keep every part aligned.
template <class R> struct team_layout {
  static constexpr int64_t up(int64_t bytes) { return (bytes + 15) / 16 * 16; }
  int64_t values, rows, scratch;  // byte offsets; scratch = bytes before the matrix
  constexpr team_layout(int team_size, int64_t n)
      : values(up(n * 4)), rows(values + up(team_size * int64_t(sizeof(R)))), scratch(rows + up(team_size * 4)) {}
};

constexpr int64_t max_grid_blocks = int64_t(1) << 20;  // grid-stride beyond this
constexpr int64_t max_workspace_bytes = int64_t(256) << 20;  // bounds the global workspace (>= 1 block's)

template <class E> constexpr launch_plan plan_launch(const job& jb, plan_options o = {}) {
  using R = lane_real<lane_of<E>>;
  launch_plan p;
  if (jb.batch == 0) return p;
  const int64_t n = jb.n, eb = sizeof(E);
  if (n <= o.per_thread_up_to && per_thread_fits<E>(family_of(jb.kind), n)) {
    int mpb = o.per_thread_block > 0 ? o.per_thread_block : per_thread_block[n] * 8 / int(eb < 8 ? 8 : eb);
    while (mpb > 32 && mpb * staging_stride(n) * eb > o.shared_budget) mpb /= 2;
    p.block_threads = mpb;
    p.shared_bytes = mpb * staging_stride(n) * eb;
    p.blocks = min_of((jb.batch + mpb - 1) / mpb, max_grid_blocks);
    return p;
  }
  p.per_thread = false;
  p.team_size = o.team_size > 0 ? o.team_size : int(min_of<int64_t>(n, max_team_size));
  const team_layout<R> at(p.team_size, n);
  const int64_t matrix = n * n * eb;
  const bool in_shared = at.scratch + matrix <= o.shared_budget;
  const int64_t per_team = at.up(in_shared ? at.scratch + matrix : at.scratch);
  int64_t teams = min_of<int64_t>(team_threads_target / p.team_size, o.shared_budget / per_team);
  teams = teams < 1 ? 1 : teams;
  p.block_threads = int(teams) * p.team_size;
  p.shared_bytes = teams * per_team;
  const int64_t workspace_blocks = max_workspace_bytes / (teams * matrix);
  p.blocks = min_of((jb.batch + teams - 1) / teams,
                    in_shared ? max_grid_blocks : (workspace_blocks < 1 ? 1 : workspace_blocks));
  if (!in_shared) p.workspace_bytes = p.blocks * teams * matrix;
  return p;
}

// ---- kernel entry points ------------------------------------------------------------
// The device image (kernels.cu) exports one extern "C" kernel per family,
// element type and per-thread n (or the team kernel), named
//   tinyla_<family>_<dtype>_<n>     per-thread kernel, n = 0..max_per_thread_n
//   tinyla_<family>_<dtype>_team    team kernel
// which the host (backend.cpp) looks up by name in the module it loads.
inline constexpr const char* family_names[] = {"determinant", "inverse", "solve"};
inline constexpr int kernel_variants = max_per_thread_n + 2;  // n = 0..max_per_thread_n, then the team kernel
inline constexpr int kernel_count = dtype_count * 3 * kernel_variants;
constexpr int kernel_index(dtype t, family f, int n /* < 0: team */) {
  return (int(t) * 3 + int(f)) * kernel_variants + (n < 0 ? kernel_variants - 1 : n);
}

// Calls visit.template operator()<F, N>() for the job's kernel: its family,
// and the compile-time n of the per-thread kernel (N = -1: the team kernel).
// The GPU launcher and the host emulation in the tests both dispatch here.
template <class E, class Visit> void dispatch_kernel(const job& jb, const launch_plan& plan, Visit&& visit) {
  auto with_family = [&]<int N>() {
    auto kernel = [&]<family F>() {  // instantiates only the per-thread kernels plan_launch can pick
      if constexpr (N < 0 || per_thread_fits<E>(F, N)) visit.template operator()<F, N>();
    };
    switch (family_of(jb.kind)) {
      case family::determinant: return kernel.template operator()<family::determinant>();
      case family::inverse: return kernel.template operator()<family::inverse>();
      case family::solve: return kernel.template operator()<family::solve>();
    }
  };
  if (!plan.per_thread) return with_family.template operator()<-1>();
  [&]<int... Ns>(std::integer_sequence<int, Ns...>) {
    (void)((jb.n == Ns ? (with_family.template operator()<Ns>(), true) : false) || ...);
  }(std::make_integer_sequence<int, max_per_thread_n + 1>{});
}

// ---- per-matrix outputs ---------------------------------------------------------------

template <class E> TINYLA_HD void store_outputs(const job& jb, int64_t b, const det_accum<E>& acc, lane_of<E> info) {
  if (jb.sign) static_cast<E*>(jb.sign)[b] = acc.reported_sign();
  if (jb.logabsdet) static_cast<lane_of<E>*>(jb.logabsdet)[b] = acc.logabsdet();
  if (jb.det) static_cast<E*>(jb.det)[b] = acc.determinant();
  if (jb.info) jb.info[b] = std::int32_t(info);
}

// Copies count elements src -> dst, the block's threads striding together
// (coalesced). src == dst (in-place solve) is a no-op copy.
template <class E, class Block> TINYLA_HD void block_copy(Block& blk, const E* src, E* dst, int64_t count) {
  if (src == dst) return;
  for (int64_t i = blk.thread(); i < count; i += blk.threads()) dst[i] = src[i];
}

// ---- per-thread kernel ----------------------------------------------------------------

// One matrix, compile-time n = N: slot holds A (staged), and receives the
// inverse for family::inverse; solve works in place on x (which holds B).
template <family F, int N, class E> TINYLA_HD void thread_matrix(const job& jb, int64_t b, E* slot) {
  using L = lane_of<E>;
  constexpr int nn = N * N;
  constexpr shape<N, N> sq{};
  E a[nn > 0 ? nn : 1];
  TINYLA_UNROLL
  for (int i = 0; i < nn; ++i) a[i] = slot[i];
  det_accum<E> acc;
  L info = L(0);
  if constexpr (F == family::determinant) {
    acc = determinant(sq, a);
  } else if constexpr (F == family::inverse) {
    E x[nn > 0 ? nn : 1];
    info = invert(sq, a, x, acc, jb.transpose_x);  // n <= 2 transposes itself
    if (jb.transpose_x && N > 2) {
      TINYLA_UNROLL
      for (int i = 0; i < N; ++i)
        TINYLA_UNROLL
        for (int j = 0; j < N; ++j) slot[j * N + i] = x[i * N + j];
    } else {
      TINYLA_UNROLL
      for (int i = 0; i < nn; ++i) slot[i] = x[i];
    }
  } else {
    info = solve(shape<N, -1>{N, int(jb.nrhs)}, a, static_cast<E*>(jb.x) + b * N * jb.nrhs, acc);
  }
  store_outputs(jb, b, acc, info);
}

template <family F, int N, class E, class Block> TINYLA_HD void per_thread_kernel(Block& blk, const job& jb) {
  constexpr int64_t nn = int64_t(N) * N, stride = staging_stride(N);
  E* staging = static_cast<E*>(blk.shared());
  const int mpb = blk.threads(), t = blk.thread();
  const E* a = static_cast<const E*>(jb.a);
  E* x = static_cast<E*>(jb.x);
  for (int64_t base = blk.block() * mpb; base < jb.batch; base += blk.blocks() * mpb) {
    const int count = int(min_of<int64_t>(mpb, jb.batch - base));
    if constexpr (N > 0)
      for (int64_t i = t; i < count * nn; i += mpb) staging[i / nn * stride + i % nn] = a[base * nn + i];
    if constexpr (F == family::solve) {
      const int64_t nb = N * jb.nrhs;
      block_copy(blk, static_cast<const E*>(jb.b) + base * nb, x + base * nb, count * nb);
    }
    blk.sync();
    if (t < count) thread_matrix<F, N>(jb, base + t, staging + t * stride);
    if constexpr (F == family::inverse && N > 0) {
      blk.sync();
      for (int64_t i = t; i < count * nn; i += mpb) x[base * nn + i] = staging[i / nn * stride + i % nn];
    }
    blk.sync();  // the next round's loads overwrite the staging buffer
  }
}

// ---- team kernel ---------------------------------------------------------------------------

// A team: `size` consecutive threads of the block working on one matrix.
struct team_id {
  int rank, size;
};

// sum_{p<k} x[p * xs] * y[p * ys], rounded as subtract_dot_products in
// src/kernels/lu.hpp forms each sum (k > 0).
template <class E> TINYLA_HD E dot_product(int k, const E* x, int64_t xs, const E* y, int64_t ys) {
  E sum = x[0] * y[0];
  for (int p = 1; p < k; ++p) sum = sum + x[p * xs] * y[p * ys];
  return sum;
}

// LU with partial pivoting of the n x n matrix a (row-major), in place:
// U in the upper triangle, the multipliers L below it, the pivot row of step k
// in piv[k]. The same operations in the same order as eliminate() in
// src/kernels/lu.hpp (Crout's order), so the results are bit-identical to the
// CPU's. Calls blk.sync() 4n times whatever the data (every team of the block must).
template <class E, class Block>
TINYLA_HD lane_of<E> team_factor(Block& blk, team_id tm, int n, E* a, int* piv, lane_of<E>* best_val, int* best_row,
                                 det_accum<E>& acc) {
  using L = lane_of<E>;
  L info = L(0);
  for (int k = 0; k < n; ++k) {
    // Column k, rows k..n-1, receives the earlier steps.
    if (k > 0)
      for (int i = k + tm.rank; i < n; i += tm.size) a[i * n + k] = a[i * n + k] - dot_product(k, a + i * n, 1, a + k, n);
    blk.sync();
    // Pivot: LAPACK's first row of largest magnitude. Each thread scans its
    // rows below k (NaN never wins a strict >), then every thread combines
    // the team's candidates in the same order; a NaN or unbeaten diagonal stays.
    const L diag = pivot_magnitude(a[k * n + k]);  // read before the barrier: rank 0 may swap it after
    L cand = L(-1);
    int cand_row = n;
    for (int i = k + 1 + tm.rank; i < n; i += tm.size) {
      const L v = pivot_magnitude(a[i * n + k]);
      if (v > cand) cand = v, cand_row = i;
    }
    best_val[tm.rank] = cand, best_row[tm.rank] = cand_row;
    blk.sync();
    L best = L(-1);
    int p = n;
    for (int r = 0; r < tm.size; ++r)
      if (best_val[r] > best || (best_val[r] == best && best_row[r] < p)) best = best_val[r], p = best_row[r];
    if (!(best > diag)) p = k;
    if (tm.rank == 0) piv[k] = p;
    if (p != k)  // whole rows: L's part moves with them
      for (int j = tm.rank; j < n; j += tm.size) {
        const E u = a[k * n + j];
        a[k * n + j] = a[p * n + j], a[p * n + j] = u;
      }
    blk.sync();
    const pivot_inverse<E> pinv(a[k * n + k]);
    acc.flip(p != k);
    acc.multiply(pinv.p);
    info = first_zero_pivot(info, pinv.p, k);
    // Row k right of the diagonal receives the earlier steps; column k below
    // it becomes L's (disjoint entries).
    if (k > 0)
      for (int j = k + 1 + tm.rank; j < n; j += tm.size)
        a[k * n + j] = a[k * n + j] - dot_product(k, a + k * n, 1, a + j, n);
    for (int i = k + 1 + tm.rank; i < n; i += tm.size) a[i * n + k] = pinv.apply(a[i * n + k]);
    blk.sync();
    if ((k & 15) == 15) acc.normalize();
  }
  acc.normalize();
  return info;
}

// Solves A x = rhs for one column, given team_factor's LU and pivots; element
// i of the column is col[i * ld]. Same order of operations as solve() in lu.hpp.
template <class E>
TINYLA_HD void solve_column(int n, const E* lu, const int* piv, E* col, int64_t ld, bool singular) {
  for (int k = 0; k < n; ++k) {
    const int p = piv[k];
    if (p != k) {
      const E u = col[k * ld];
      col[k * ld] = col[p * ld], col[p * ld] = u;
    }
    if (k > 0) col[k * ld] = col[k * ld] - dot_product(k, lu + k * n, 1, col, ld);
  }
  for (int i = n - 1; i >= 0; --i) {
    E s = col[i * ld];
    for (int c = i + 1; c < n; ++c) s = sub_mul(s, lu[i * n + c], col[c * ld]);
    col[i * ld] = pivot_inverse<E>(lu[i * n + i]).apply(s);
  }
  if (singular)
    for (int i = 0; i < n; ++i) col[i * ld] = nan_element<E>();
}

// workspace: null when the matrices fit in shared memory (plan_launch), else
// blocks() * teams matrices of global scratch.
template <family F, class E, class Block>
TINYLA_HD void team_kernel(Block& blk, const job& jb, int team_size, E* workspace) {
  using L = lane_of<E>;
  using R = lane_real<L>;
  const int n = int(jb.n);
  const int64_t nn = int64_t(n) * n;
  const int teams = blk.threads() / team_size, team = blk.thread() / team_size;
  const team_id tm{blk.thread() % team_size, team_size};
  const team_layout<R> at(team_size, n);  // must match plan_launch
  const int64_t per_team = at.up(at.scratch + (workspace ? 0 : nn * int64_t(sizeof(E))));
  char* mine = static_cast<char*>(blk.shared()) + team * per_team;
  int* piv = reinterpret_cast<int*>(mine);
  auto* best_val = reinterpret_cast<R*>(mine + at.values);
  int* best_row = reinterpret_cast<int*>(mine + at.rows);
  E* lu = workspace ? workspace + (blk.block() * teams + team) * nn : reinterpret_cast<E*>(mine + at.scratch);
  const E* a = static_cast<const E*>(jb.a);
  E* x = static_cast<E*>(jb.x);
  const int64_t nx = F == family::solve ? n * jb.nrhs : nn;  // x elements per matrix
  for (int64_t base = blk.block() * teams; base < jb.batch; base += blk.blocks() * teams) {
    const int64_t b = base + team;
    const bool active = b < jb.batch;
    // Inactive teams (past the batch's end) factor whatever their slot holds:
    // the barriers inside team_factor are block-wide.
    if (active) for (int64_t i = tm.rank; i < nn; i += team_size) lu[i] = a[b * nn + i];
    if constexpr (F == family::solve) {
      const int count = int(min_of<int64_t>(teams, jb.batch - base));
      block_copy(blk, static_cast<const E*>(jb.b) + base * nx, x + base * nx, count * nx);
    }
    blk.sync();
    det_accum<E> acc;
    const L info = team_factor(blk, tm, n, lu, piv, best_val, best_row, acc);
    if (active) {
      if constexpr (F != family::determinant) {
        const int m = F == family::solve ? int(jb.nrhs) : n;
        // Column j of the solution; for an inverse, column j of the identity,
        // stored as row j when the transpose is asked for.
        const bool tr = F == family::inverse && jb.transpose_x;
        for (int j = tm.rank; j < m; j += team_size) {
          E* col = x + b * nx + (tr ? int64_t(j) * n : j);
          const int64_t ld = tr ? 1 : m;
          if constexpr (F == family::inverse)
            for (int i = 0; i < n; ++i) col[i * ld] = make_element<E>(i == j ? 1.0 : 0.0);
          solve_column(n, lu, piv, col, ld, info != L(0));
        }
      }
      if (tm.rank == 0) store_outputs(jb, b, acc, info);
    }
    blk.sync();  // the next round overwrites lu and piv
  }
}

}  // namespace tinyla::TINYLA_KERNEL_NS
