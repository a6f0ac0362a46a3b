// Host-side planning of the GPU kernels, shared by the launcher (backend.cpp),
// the device image (kernels.cu: which kernels exist) and the tests' host
// emulation: the kernel families, the launch configuration table, plan_launch,
// and the kernels' names and dispatch. The kernel bodies are kernels.hpp.
//
// Two kernel shapes (launch_plan picks one, sizes from a table):
// - per_thread: n <= max_per_thread_n, one matrix per thread, the matrix in
//   registers (compile-time n, fully unrolled), loaded and stored by its thread
//   (vector loads, all in flight at once; no shared memory).
// - team: larger n. A team of threads per matrix; the matrix sits in shared
//   memory (or in a global workspace when it does not fit; a warp team's
//   determinant: in its threads' registers, warp_rows_in_registers). The LU either
//   * in the registers of a warp team (n <= max_warp_width): W threads of one
//     warp, a row each, the pivot and U's rows exchanged by shuffles (a
//     determinant's U rows through shared memory), no block barrier per step; or
//   * in shared memory (any n, any team size): every elimination step a
//     column-parallel update between barriers; at n <= 32 each team in its own
//     slot of a warp (warp_slot), the pivot found by shuffles and the barriers
//     the warp's, else the pivot exchanged through shared memory between
//     block-wide barriers.
//   Then, straight in the output, a solve's right-hand sides one column per
//   thread, an inverse one row per thread, stored as A^-T (consecutive threads,
//   consecutive elements), and A^-1 by a transposition through the matrix's
//   place in shared memory.
// (log_det_laplacian, which factors nothing, has a kernel of its own: a block per matrix,
// below.) All are grid-stride loops over the batch with 64-bit indices. No warp size
// is assumed: a warp team's width, and a warp slot's, divides 32 and 64, its
// shuffles stay within it, and a warp barrier is reached by every thread of the block.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "job.hpp"
#include "kernels/lanes.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

using std::int64_t;

using tinyla::family;
using tinyla::family_of;

template <class T> TINYLA_HD T min_of(T a, T b) { return a < b ? a : b; }

// ---- launch configuration (the table to tune) --------------------------------------

inline constexpr int max_per_thread_n = 8;
// ... and only while what a thread keeps live fits in this many 32-bit
// registers (A; for an inverse, computed in place, also one column and the
// n pivot rows, and for an adjugate the n zero-pivot flags; for a solve one
// column of B and the pivot rows as integers):
// past that the compiler spills to local memory (ptxas -v on sm_90: float64
// n = 8 inverses take 210 registers; complex128 n = 6 spilled 16 bytes as an
// inverse, 24 as a solve).
inline constexpr int per_thread_register_budget = 160;
template <class E> constexpr int64_t per_thread_words(family f, int64_t n) {
  const int64_t elements = n * n + (f == family::determinant ? 0 : n);
  const int64_t lane = sizeof(lane_of<E>);
  const int64_t pivot_bytes = n * (f == family::inverse    ? lane
                                   : f == family::adjugate ? 2 * lane
                                   : f == family::solve    ? 4
                                                           : 0);
  return (elements * int64_t(sizeof(E)) + pivot_bytes) / 4;
}
template <class E> constexpr bool per_thread_fits(family f, int64_t n) {
  return n <= max_per_thread_n && per_thread_words<E>(f, n) <= per_thread_register_budget;
}
// Registers a per-thread kernel is held to on NVIDIA (0: the compiler's choice under the
// launch bounds): at n >= 3 a determinant, inverse or adjugate whose arrays take at most
// 32 registers is held to 64 (an SM then holds half its threads), at most 48 to 80. ptxas
// -v, sm_90: the float64 determinant at n = 4 from 70 to 64 registers and the inverse at
// n = 3 from 66 to 64; the complex128 determinant at n = 3 and the complex64 adjugate at n = 4
// from 88 and 86 to 80 (held to 64 they spill 36 and 16 bytes). The float64 inverse at n = 4
// takes 76 under 80 (24 warps per SM); held to 64 it fits (32 warps, an 8-byte frame for the
// division's slow path) but measured 14 % slower as inv and no faster as slogdet's gradient on
// an H200 (48 -> 56 us and 46 -> 46 us at (4096, 64, 4, 4), docs/gpu.md): more warps of
// uncoalesced per-thread accesses did not pay.
// None spills ("0 bytes spill stores"; scans of the caps 64, 80 and 128 over every per-thread
// kernel, bench/register_scan.py). Held to 128, most arrays of 84 words or more spill (the
// float64 inverse at n = 6, the determinant at n = 7). Solves are left to ptxas: held to 64,
// some spill (float64 n = 4 24 bytes, complex128 n = 2 80) where others would gain warps
// without (float64 n = 1..3, complex64 n = 2; not timed).
template <class E> constexpr int per_thread_register_cap(family f, int64_t n) {
  if (f == family::solve || n < 3) return 0;
  const int64_t words = per_thread_words<E>(f, n);
  return words <= 32 ? 64 : words <= 48 ? 80 : 0;
}
// Matrices (= threads) per block of the per-thread kernel, by n, for elements
// of up to 8 bytes; halved for 16-byte ones (their registers double).
inline constexpr int per_thread_block[max_per_thread_n + 1] = {256, 256, 256, 128, 128, 128, 64, 64, 64};
// Team kernel: threads per block to aim for, and at most this many threads
// per team (larger n: each thread owns several rows and columns).
inline constexpr int team_threads_target = 128;
// Warp teams, by n: the narrowest width that holds n rows (each thread's row
// an array of that width, n a run-time value up to it).
inline constexpr int warp_widths[] = {16, 32};
inline constexpr int max_warp_width = 32;
// A warp team's determinant keeps its thread's row of the matrix in registers,
// loaded straight from global memory, and needs no shared memory for it (staged
// there, the matrices held a gfx942 CU to 6 of its 32 waves at float64
// n = 16, 2 at n = 32: its 64 KiB of LDS), while the row takes at most 64
// 32-bit registers: complex128 at W = 32 would add 128 to the 128 its sums take.
template <class E> constexpr bool warp_rows_in_registers(family f, int width) {
  return f == family::determinant && width * int64_t(sizeof(E)) <= 256;
}
// ... and hands U's row k from its owner to the other rows through shared memory
// (warp_factor): W elements a step, in two buffers used in turn.
template <class E> constexpr int64_t warp_u_rows_bytes(int width) { return 2 * width * int64_t(sizeof(E)); }
inline constexpr int max_team_size = 128;
// Largest blocks the plans make (the kernels' launch bounds: they let the
// compilers give each thread the registers that block size leaves, e.g. up to
// 255 on NVIDIA and 512 VGPRs on CDNA instead of 128 for 1024-thread blocks).
inline constexpr int max_per_thread_block = 256;
inline constexpr int max_team_block = team_threads_target > max_team_size ? team_threads_target : max_team_size;
// per_thread_register_cap as CUDA's launch bounds say it: blocks of
// max_per_thread_block threads that an SM (64 K registers) must hold at once.
template <class E> constexpr int per_thread_min_blocks(family f, int64_t n) {
  const int cap = per_thread_register_cap<E>(f, n);
  return cap > 0 ? 64 * 1024 / (cap * max_per_thread_block) : 1;
}
// Registers a team kernel is held to on NVIDIA (0: ptxas's choice). Left to itself under
// the launch bounds, ptxas (nvcc 13) kept some team kernels below the registers they need
// and put loop invariants in local memory (sm_90: the float64 solve 80 bytes at 72
// registers, the complex64 inverse 96 at 56 with 37 accesses inside the steps), and gave
// others more registers than they need (the complex128 adjugate 126, none spilled at 80).
// What it does under a cap is not monotonic in the cap, so these come from a scan
// (bench/register_scan.py, sm_90): per kernel the fewest registers without local memory at
// the most warps per SM that leaves none; where none costs warps, the warps go. Rerun
// whenever the kernels change: without the pivots' division (pivot_inverse) the float64
// solve in shared memory kept 80 bytes at its 64 (now 96: 32 -> 20 warps), the complex128
// inverse 88 at 80 (now 72: 24 -> 28), the complex64 solve 8 at 64 (now 80) and the float32
// adjugate 24 at ptxas's 64 (now 80: 32 -> 24), while the float64 W = 16 adjugate, the
// float32 W = 32 solve and the complex128 solve in shared memory gained 4 warps each, and
// the complex64 W = 16 solve as ptxas places it (80 registers; held to 80, 8 bytes). Scaling
// complex pivots whose modulus passes the largest number (scale_into_range) spilled three
// (nvcc 13 -Xptxas -v): the complex128 adjugate in shared memory 88 bytes at 80 (now ptxas's
// 128), the complex128 inverse there 16 at 72 (96 at 80; now ptxas's 96) and the complex64
// W = 16 adjugate 8 at ptxas's 80 (44 at 72; now 96, which it takes 86 of). One
// PTX serves sm_80 and sm_90 (cmake/gpu.cmake), so sm_80 gets these caps too
// (`register_scan.py --arch sm_80` prints what they keep there). scripts/gpu-report prints
// the result for sm_90.
template <class E> constexpr int team_register_cap(family f, int warp_width) {
  // By variant (the LU in shared memory, warp teams of 16, of 32), then family.
  static_assert(int(family::determinant) == 0 && int(family::inverse) == 1 && int(family::solve) == 2 &&
                int(family::adjugate) == 3);
  constexpr int f32[3][4] = {{64, 80, 80, 80}, {0, 0, 0, 0}, {96, 80, 72, 72}};
  constexpr int f64[3][4] = {{0, 96, 96, 96}, {0, 80, 96, 80}, {0, 0, 0, 0}};
  constexpr int c64[3][4] = {{72, 64, 80, 64}, {0, 0, 0, 96}, {168, 0, 0, 0}};
  constexpr int c128[3][4] = {{0, 0, 96, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  constexpr bool real = std::is_floating_point_v<E>, wide = sizeof(lane_real<lane_of<E>>) == 8;
  const auto& caps = real ? (wide ? f64 : f32) : (wide ? c128 : c64);
  return caps[warp_width == 0 ? 0 : warp_width == 16 ? 1 : 2][int(f)];
}
// ... as CUDA's launch bounds say it (0: as if not given; 1 would not be: with it ptxas
// gave the float64 determinant 92 registers instead of 72).
template <class E> constexpr int team_min_blocks(family f, int warp_width) {
  const int cap = team_register_cap<E>(f, warp_width);
  return cap > 0 ? 64 * 1024 / (cap * max_team_block) : 0;
}

// The smallest shared memory per SM / CU of the GPUs the plans size blocks for
// (an AMD CDNA CU's LDS; an H100 SM has 228 KiB), and AMD's wave: 64 threads.
inline constexpr int64_t shared_per_unit = 64 * 1024;
inline constexpr int wave_threads = 64;

struct plan_options {
  // Shared memory a kernel may use without opting in to more (48 KiB is the
  // default limit on NVIDIA; AMD's LDS is 64 KiB). Team kernels whose matrix
  // does not fit use a global workspace.
  int64_t shared_budget = 48 * 1024;
  int per_thread_up_to = max_per_thread_n;  // larger n (or past the register budget): the team kernel
  int per_thread_block = 0;                 // 0: from the table
  int warp_team_up_to = max_warp_width;     // larger n (or a team_size given): the LU in shared memory
  // ... and only where n is at most this short of the narrowest warp team that holds it (-1:
  // where n fills more than half of it, so that the LU in shared memory would take a slot as
  // wide, warp_slot; smaller n it packs several to a warp, not timed against a warp team).
  // Measured on an H100 (docs/gpu.md), float64 at 12 <= n <= 32, with the pivot found by
  // redux and no division per pivot: the warp teams ahead at every n timed, the determinant
  // 1.37-1.94x, the inverses 1.02-1.39x (before those two changes they were behind at 12
  // and 28, hence the earlier rule: within 2 of their width).
  int warp_team_slack = -1;
  int team_size = 0;  // 0: min(n, max_team_size)
  // Per-thread inverses and adjugates (n > 2): each thread's output into a slot of shared
  // memory, then each warp's 32 outputs written together, in 16-byte pieces that cover whole
  // lines (per_thread_kernel), where a thread writing its own matrix touches a line per piece
  // (an adjugate, per element, one per element). Measured on an H200 (float64, (4096, 64, n,
  // n), docs/gpu.md): slogdet's gradient 1.55-2.79x and inv 1.75-3.31x as fast as direct
  // stores at n = 3..8; the adjugates (jax.grad of det) by the same argument, not timed yet.
  // CUDA only (the HIP kernels have no such path: launch_options(platform)).
  bool stage_outputs = true;
  // Team kernels' inverses (n > max_per_thread_n): each thread's row of A^-1 formed in a
  // buffer of n x team_ld(n) elements per team in shared memory, then the team's matrix
  // written out in consecutive elements, where it forms the row in the output itself (its
  // ~n^2 reads and writes of it in global memory, where writes go through to L2), and A^-1
  // (not A^-T) goes out transposed by a second pass through global memory. Where the buffer
  // fits the budget beside the LU (else as before). Not timed yet, so not the default
  // (TINYLA_GPU_TEAM_INVERSE=shared).
  bool team_inverse_in_shared = false;
};

// The launcher's options: the defaults (TINYLA_GPU_TEAMS unset or "fill": warp teams
// where n fills more than half of one's width), or with TINYLA_GPU_TEAMS=warp the LU of every n up to 32
// past the per-thread kernel in a warp team, =shared in shared memory (the team kernel);
// TINYLA_GPU_STORES=direct writes the per-thread inverses' outputs straight out, =staged
// (the default) through shared memory (stage_outputs); TINYLA_GPU_TEAM_INVERSE=shared forms
// the team kernels' inverses in shared memory, =global (the default) in the output
// (team_inverse_in_shared); TINYLA_GPU_TEAM_SIZE=t (1..max_team_size) takes the LU in shared memory
// with teams of t threads wherever a team kernel runs (team_size: in warp slots where t is
// a power of two up to 32); so that a GPU can time each (scripts/gpu-check). Read once per
// process; another value: a warning on stderr and the default, as for TINYLA_ISA.
inline plan_options launch_options() {
  static const plan_options options = [] {
    plan_options o;
    const char* teams = std::getenv("TINYLA_GPU_TEAMS");
    if (!teams || !*teams || std::strcmp(teams, "fill") == 0) {
    } else if (std::strcmp(teams, "warp") == 0) o.warp_team_slack = max_warp_width;
    else if (std::strcmp(teams, "shared") == 0) o.warp_team_up_to = 0;
    else std::fprintf(stderr, "tinyla: TINYLA_GPU_TEAMS=%s is none of fill, warp, shared; using fill\n", teams);
    const char* stores = std::getenv("TINYLA_GPU_STORES");
    if (!stores || !*stores || std::strcmp(stores, "staged") == 0) {
    } else if (std::strcmp(stores, "direct") == 0) o.stage_outputs = false;
    else std::fprintf(stderr, "tinyla: TINYLA_GPU_STORES=%s is neither direct nor staged; using staged\n", stores);
    const char* inverse = std::getenv("TINYLA_GPU_TEAM_INVERSE");
    if (!inverse || !*inverse || std::strcmp(inverse, "global") == 0) {
    } else if (std::strcmp(inverse, "shared") == 0) o.team_inverse_in_shared = true;
    else
      std::fprintf(stderr, "tinyla: TINYLA_GPU_TEAM_INVERSE=%s is neither global nor shared; using global\n", inverse);
    if (const char* size = std::getenv("TINYLA_GPU_TEAM_SIZE"); size && *size) {
      char* end = nullptr;
      const long threads = std::strtol(size, &end, 10);
      if (*end == '\0' && threads >= 1 && threads <= max_team_size) o.team_size = int(threads);
      else
        std::fprintf(stderr, "tinyla: TINYLA_GPU_TEAM_SIZE=%s is not a team size of 1 to %d threads; ignored\n", size,
                     max_team_size);
    }
    return o;
  }();
  return options;
}
// ... as the launcher on a platform plans with them (the HIP kernels cannot stage:
// in_pieces, kernels.hpp).
inline plan_options launch_options(bool cuda) {
  plan_options o = launch_options();
  o.stage_outputs &= cuda;
  return o;
}

struct launch_plan {
  bool per_thread = true;
  int block_threads = 1;  // threads per block
  int team_size = 1;      // team kernel: threads per matrix
  int warp_width = 0;     // team kernel: its LU in the registers of a warp team this wide (0: in shared memory)
  int64_t blocks = 0;     // grid size (0: nothing to launch)
  int64_t shared_bytes = 0;
  int64_t workspace_bytes = 0;     // team kernel whose matrix does not fit in shared memory: global scratch
  bool stage_outputs = false;      // per-thread kernel: its outputs through shared memory (plan_options)
  bool inverse_in_shared = false;  // team kernel: its inverse formed in shared memory (plan_options)
};

// Per-team shared memory of the team kernel: pivot rows, the argmax
// candidates (value, row) of each thread, then the matrix when it lives in
// shared memory. Sizes rounded to 16 bytes keep every part aligned.
template <class R> struct team_layout {
  static constexpr int64_t up(int64_t bytes) { return (bytes + 15) / 16 * 16; }
  int64_t values, rows, scratch;  // byte offsets; scratch = bytes before the matrix
  constexpr team_layout(int team_size, int64_t n)
      : values(up(n * 4)), rows(values + up(team_size * int64_t(sizeof(R)))), scratch(rows + up(team_size * 4)) {}
};

// The LU in shared memory (or the global workspace) keeps its rows an odd count of
// elements apart, so that the team's threads, each on its own row in the column
// updates and the pivot search, meet in different banks: rows n apart share banks at
// even n (16 float64s are 128 bytes: every row in the same ones; measured on an H100,
// the LU in shared memory took 2.26 ms at n = 16 against 1.09 at 14). The warp teams
// keep rows n apart: their rows are in registers, read from shared memory once a step,
// and padded, their inverses compiled to more registers on sm_90 (float64 W = 32: 122
// -> 128-136) for a gain not measured.
constexpr int64_t team_ld(int64_t n, int warp_width = 0) { return warp_width > 0 ? n : n | 1; }
// The buffer a team kernel forms its inverse in (team_inverse_in_shared): entry (j, i) of A^-T
// at j * team_ld(n) + i, rows an odd count of elements apart, so that the team's threads,
// each on its own column i, and its copy to A^-1, a thread per j, meet in different banks.
template <class E> constexpr int64_t team_inverse_bytes(int64_t n) {
  return (n * team_ld(n) * int64_t(sizeof(E)) + 15) / 16 * 16;
}

// The LU in shared memory at n <= 32 puts each team in a slot of a warp, the power of two
// that holds n rows (threads past n idle in the loops): its barriers are then the warp's,
// not the block's, and it finds its pivot by shuffles, not by every thread reading every
// candidate from shared memory. Teams packed n threads apart crossed warps: 4n block
// barriers a matrix, and n^2 candidate reads a thread (at n = 24 more shared-memory
// traffic than the dot products).
constexpr int warp_slot(int64_t n) {
  int slot = 1;
  while (slot < n) slot *= 2;
  return slot;
}
// Whether a team kernel's teams each lie in one warp (and so synchronize and find pivots
// warp-wide): a power-of-two team of at most 32 threads in a block of whole warps, its
// LU in shared memory (a global workspace keeps the block's barriers, whose ordering of
// global memory holds on every backend). Decided alike by the plan and the kernel.
constexpr bool team_in_warp(int team_size, int block_threads, bool in_shared) {
  return in_shared && team_size <= 32 && 32 % team_size == 0 && block_threads % 32 == 0;
}

constexpr int64_t max_grid_blocks = int64_t(1) << 20;        // grid-stride beyond this
constexpr int64_t max_workspace_bytes = int64_t(256) << 20;  // bounds the global workspace (>= 1 block's)

// ---- log_det_laplacian's kernel (kernels.hpp) ----------------------------------------------
// A block per matrix: A^-T in shared memory, the tangents shared out among groups of
// warp_slot(n) threads of one warp (a thread per column of M_c = A^-1 dA/dx_c), each group with
// M_c and its rows' sums in shared memory. n up to max_laplacian_n (larger n: no GPU kernel,
// TINYLA_UNSUPPORTED); its column of M_c in an array of laplacian_width(n) elements, one
// kernel per width and element type: tinyla_log_det_laplacian_<dtype>_<width>.
inline constexpr int max_laplacian_n = max_warp_width;
inline constexpr int laplacian_widths[] = {8, 16, 32};
inline constexpr int laplacian_width_count = int(sizeof laplacian_widths / sizeof laplacian_widths[0]);
inline constexpr int laplacian_block = 128;  // threads per block to aim for
constexpr int laplacian_width(int64_t n) {   // the narrowest that holds n
  for (int w : laplacian_widths)
    if (n <= w) return w;
  return max_laplacian_n;
}

// Its shared memory, in elements E from the block's start: A^-T (n x n), then per group M_c
// (n rows n + 1 apart: a column's entries, written by one thread each, and a row's, read by
// one, fall in different banks) and the group's n row sums, then a square trace per group.
struct laplacian_layout {
  int width, groups;              // threads per group (a power of two up to 32), groups per block
  int64_t group_elements, total;  // elements per group, in all
  constexpr laplacian_layout(int64_t n, int groups_)
      : width(warp_slot(n)),
        groups(groups_),
        group_elements(n * (n + 1) + n),
        total(n * n + groups_ * group_elements + groups_) {}
};
// The most groups of whole warps up to laplacian_block threads whose shared memory fits the
// budget (at least one warp).
template <class E> constexpr laplacian_layout plan_laplacian_layout(int64_t n, int64_t shared_budget) {
  const int width = warp_slot(n), step = width < 32 ? 32 / width : 1;
  int groups = step;
  for (int g = step; g * width <= laplacian_block; g += step)
    if (laplacian_layout(n, g).total * int64_t(sizeof(E)) <= shared_budget) groups = g;
  return laplacian_layout(n, groups);
}

template <class E> constexpr launch_plan plan_launch(const job& jb, plan_options o = {}) {
  using R = lane_real<lane_of<E>>;
  launch_plan p;
  if (jb.batch == 0 || (jb.kind == op::log_det_laplacian && jb.n > max_laplacian_n)) return p;
  const int64_t n = jb.n, eb = sizeof(E);
  if (jb.kind == op::log_det_laplacian) {  // its own kernel (above): a block per matrix
    const laplacian_layout layout = plan_laplacian_layout<E>(n, o.shared_budget);
    p.per_thread = false;
    p.team_size = layout.width;
    p.block_threads = layout.groups * layout.width;
    p.shared_bytes = layout.total * eb;
    p.blocks = min_of(jb.batch, max_grid_blocks);
    return p;
  }
  if (n <= o.per_thread_up_to && per_thread_fits<E>(family_of(jb.kind), n)) {
    int per_block = o.per_thread_block > 0 ? o.per_thread_block : per_thread_block[n] * 8 / int(eb < 8 ? 8 : eb);
    p.block_threads = per_block;
    p.blocks = min_of((jb.batch + per_block - 1) / per_block, max_grid_blocks);
    // Staged only in blocks of whole warps: a warp writes out its 32 slots together.
    const family f = family_of(jb.kind);
    if (o.stage_outputs && n > 2 && (f == family::inverse || f == family::adjugate) && per_block % 32 == 0) {
      p.stage_outputs = true;
      p.shared_bytes = per_block * (n * n + 1) * eb;  // a slot per thread, one element apart
    }
    return p;
  }
  p.per_thread = false;
  if (o.team_size == 0 && n <= o.warp_team_up_to) {
    for (int w : warp_widths)
      if (n <= w) {
        if (w - n > (o.warp_team_slack < 0 ? w / 2 - 1 : o.warp_team_slack)) break;
        // Blocks of whole warps (32 threads: two 16-thread teams share one),
        // the matrices in shared memory or (a determinant) in registers.
        const bool in_registers = warp_rows_in_registers<E>(family_of(jb.kind), w);
        const int64_t matrix = n * team_ld(n, w) * eb;
        const int64_t lu_team =
            in_registers ? warp_u_rows_bytes<E>(w) : team_layout<R>::up(team_layout<R>(w, n).scratch + matrix);
        // (and still a whole AMD wave of teams a block: complex128 from n = 31 does not fit)
        const bool inverse_in_shared = o.team_inverse_in_shared && family_of(jb.kind) == family::inverse &&
                                       (lu_team + team_inverse_bytes<E>(n)) * (wave_threads / w) <= o.shared_budget;
        const int64_t per_team = lu_team + (inverse_in_shared ? team_inverse_bytes<E>(n) : 0);
        const int64_t most = min_of<int64_t>(team_threads_target / w, o.shared_budget / per_team);
        // Blocks of whole 64-thread waves where one fits (AMD's wave; a 32-thread
        // block would leave half a wave idle), else of whole warps: of those up to
        // `most` teams, the size whose blocks put the most teams in a CU's 64 KiB of
        // LDS (ties: the larger). float64 n = 32, a matrix and its pivot scratch
        // 8.5 KiB a team: blocks of 2 teams, 3 a CU (6 teams), against one block of 4.
        const int64_t step = most >= wave_threads / w ? wave_threads / w : 32 / w;
        int64_t teams = 0, resident = -1;
        for (int64_t t = step; t <= most; t += step) {
          const int64_t fit = t * (shared_per_unit / (t * per_team));
          if (fit >= resident) teams = t, resident = fit;
        }
        if (teams == 0) break;
        p.team_size = p.warp_width = w;
        p.inverse_in_shared = inverse_in_shared;
        p.block_threads = int(teams) * w;
        p.shared_bytes = teams * per_team;
        p.blocks = min_of((jb.batch + teams - 1) / teams, max_grid_blocks);
        return p;
      }
  }
  p.team_size = o.team_size > 0       ? o.team_size
                : n <= max_warp_width ? warp_slot(n)
                                      : int(min_of<int64_t>(n, max_team_size));
  const int64_t matrix = n * team_ld(n) * eb;
  const team_layout<R> layout(p.team_size, n);
  const bool in_shared = layout.scratch + matrix <= o.shared_budget;
  int64_t per_team = layout.up(in_shared ? layout.scratch + matrix : layout.scratch);
  p.inverse_in_shared = in_shared && o.team_inverse_in_shared && family_of(jb.kind) == family::inverse &&
                        per_team + team_inverse_bytes<E>(n) <= o.shared_budget;
  if (p.inverse_in_shared) per_team += team_inverse_bytes<E>(n);
  int64_t teams = min_of<int64_t>(team_threads_target / p.team_size, o.shared_budget / per_team);
  teams = teams < 1 ? 1 : teams;
  const int64_t slots_per_warp = 32 / p.team_size;
  if (32 % p.team_size == 0 && teams > slots_per_warp) teams -= teams % slots_per_warp;  // whole warps
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
// element type and variant:
//   tinyla_<family>_<dtype>_<n>     per-thread kernel, n = 0..max_per_thread_n
//   tinyla_<family>_<dtype>_team    team kernel, the LU in shared memory
//   tinyla_<family>_<dtype>_warp<W> team kernel, the LU in a warp team of width W
// which the host (backend.cpp) looks up by name in the module it loads. A
// variant as an int: n >= 0 for a per-thread kernel, team_variant, or
// warp_variant(W).
inline constexpr const char* family_names[] = {"determinant", "inverse", "solve", "adjugate"};
inline constexpr int family_count = int(sizeof family_names / sizeof family_names[0]);
inline constexpr int team_variant = -1;
constexpr int warp_variant(int width) { return -width; }
constexpr int warp_width_of(int variant) { return variant < team_variant ? -variant : 0; }
constexpr int variant_of(const launch_plan& p, int64_t n) {
  return p.per_thread ? int(n) : (p.warp_width > 0 ? warp_variant(p.warp_width) : team_variant);
}
inline constexpr int warp_width_count = int(sizeof warp_widths / sizeof warp_widths[0]);
inline constexpr int kernel_variants = max_per_thread_n + 2 + warp_width_count;
// Every variant: n = 0..max_per_thread_n, the team kernel, the warp teams.
inline constexpr std::array<int, kernel_variants> all_variants = [] {
  std::array<int, kernel_variants> v{};
  for (int n = 0; n <= max_per_thread_n; ++n) v[n] = n;
  v[max_per_thread_n + 1] = team_variant;
  for (int i = 0; i < warp_width_count; ++i) v[max_per_thread_n + 2 + i] = warp_variant(warp_widths[i]);
  return v;
}();
inline constexpr int kernel_count = dtype_count * family_count * kernel_variants;
constexpr int kernel_index(dtype t, family f, int variant) {
  int slot = 0;
  while (all_variants[slot] != variant) ++slot;
  return (int(t) * family_count + int(f)) * kernel_variants + slot;
}
// The kernel's name in the device image (as above).
struct kernel_name_buffer {
  char text[64];
};
inline kernel_name_buffer kernel_name(dtype t, family f, int variant) {
  kernel_name_buffer name;
  const char *fam = family_names[int(f)], *dt = dtype_name(t);
  if (variant >= 0) std::snprintf(name.text, sizeof name.text, "tinyla_%s_%s_%d", fam, dt, variant);
  else if (variant == team_variant) std::snprintf(name.text, sizeof name.text, "tinyla_%s_%s_team", fam, dt);
  else std::snprintf(name.text, sizeof name.text, "tinyla_%s_%s_warp%d", fam, dt, warp_width_of(variant));
  return name;
}

// The team kernels' inverses formed in shared memory (launch_plan's inverse_in_shared):
// tinyla_inverse_<dtype>_team_in_shared, _warp<W>_in_shared.
inline constexpr int team_inverse_kernel_count = dtype_count * (1 + warp_width_count);
constexpr int team_inverse_kernel_index(dtype t, int variant) {
  int slot = max_per_thread_n + 1;  // the team variants' first in all_variants
  while (all_variants[slot] != variant) ++slot;
  return int(t) * (1 + warp_width_count) + slot - (max_per_thread_n + 1);
}
inline kernel_name_buffer team_inverse_kernel_name(dtype t, int variant) {
  kernel_name_buffer name = kernel_name(t, family::inverse, variant);
  std::snprintf(name.text + std::strlen(name.text), sizeof name.text - std::strlen(name.text), "_in_shared");
  return name;
}

// log_det_laplacian's kernels: tinyla_log_det_laplacian_<dtype>_<laplacian_width(n)>.
constexpr int laplacian_kernel_index(dtype t, int64_t n) {
  int slot = 0;
  while (laplacian_widths[slot] != laplacian_width(n)) ++slot;
  return int(t) * laplacian_width_count + slot;
}
inline constexpr int laplacian_kernel_count = dtype_count * laplacian_width_count;
inline kernel_name_buffer laplacian_kernel_name(dtype t, int64_t n) {
  kernel_name_buffer name;
  std::snprintf(name.text, sizeof name.text, "tinyla_log_det_laplacian_%s_%d", dtype_name(t), laplacian_width(n));
  return name;
}

// Calls visit.template operator()<F, V>() for the job's kernel: its family and
// variant V (above). The GPU launcher and the host emulation in the tests both
// dispatch here.
template <class E, class Visit> void dispatch_kernel(const job& jb, const launch_plan& plan, Visit&& visit) {
  auto with_family = [&]<int V>() {
    auto kernel = [&]<family F>() {  // instantiates only the per-thread kernels plan_launch can pick
      if constexpr (V < 0 || per_thread_fits<E>(F, V)) visit.template operator()<F, V>();
    };
    switch (family_of(jb.kind)) {
      case family::determinant: return kernel.template operator()<family::determinant>();
      case family::inverse: return kernel.template operator()<family::inverse>();
      case family::solve: return kernel.template operator()<family::solve>();
      case family::adjugate: return kernel.template operator()<family::adjugate>();
    }
  };
  const int variant = variant_of(plan, jb.n);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)((variant == all_variants[I] ? (with_family.template operator()<all_variants[I]>(), true) : false) || ...);
  }(std::make_index_sequence<kernel_variants>{});
}

}  // namespace tinyla::TINYLA_KERNEL_NS
