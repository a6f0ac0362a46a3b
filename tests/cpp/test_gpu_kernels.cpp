// The GPU kernels, run on the host (gpu_emulation.hpp), must give the CPU
// backend's bits: the same src/kernels math.
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "all_ops.hpp"
#include "cpu/dispatch.hpp"
#include "gpu_emulation.hpp"

namespace {

using namespace ref;
namespace kern = tinyla::TINYLA_KERNEL_NS;

// The kernels' element type for T (complex: cplx, layout-compatible).
template <class T> using element_of = kern::kernel_element<T>;

// The kernels planned with `options`, on at most max_blocks blocks (hip_step_loop:
// gpu_emulation::run's).
template <class T> auto emulated_gpu(int64_t max_blocks, kern::plan_options options = {}, bool hip_step_loop = false) {
  return [=](tinyla::dtype, const tinyla::job& jb) {
    return gpu_emulation::run<T>(jb, max_blocks, options, hip_step_loop);
  };
}

template <class T> class GpuKernels : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(tinyla::cpu::select_backend("scalar")); }
  void TearDown() override { tinyla::cpu::choose_backend_for_this_cpu(); }
};
// The element types this build emulates (tests/cpp/CMakeLists.txt: TINYLA_EMULATED_TYPES).
template <std::size_t... I> using emulated_types =
    ::testing::Types<std::tuple_element_t<I, gpu_emulation::element_types>...>;
using Types = emulated_types<TINYLA_EMULATED_TYPES>;
TYPED_TEST_SUITE(GpuKernels, Types);

// Every plan the launcher can make stays within the kernels' launch bounds and
// the shared-memory budget, and the team kernel's workspace within its bound.
TYPED_TEST(GpuKernels, PlansRespectLaunchBoundsAndBudgets) {
  using E = element_of<TypeParam>;
  for (auto kind : {tinyla::op::slogdet, tinyla::op::inv, tinyla::op::solve, tinyla::op::adjugate}) {
    for (int64_t n : {0, 1, 2, 3, 5, 6, 7, 8, 9, 16, 31, 32, 33, 77, 78, 100, 129, 1000, 11000}) {
      for (int64_t batch : {int64_t(1), int64_t(1000), int64_t(1) << 40}) {
        for (bool staged : {false, true}) {
          const tinyla::job jb{.kind = kind, .batch = batch, .n = n, .nrhs = 4};
          // (staged: both ways of staging an inverse, the per-thread kernels' and the teams')
          const kern::launch_plan p =
              kern::plan_launch<E>(jb, {.stage_outputs = staged, .team_inverse_in_shared = staged});
          SCOPED_TRACE("op " + std::to_string(int(kind)) + " n=" + std::to_string(n) +
                       " batch=" + std::to_string(batch) + (staged ? " staged" : ""));
          EXPECT_EQ(p.stage_outputs,
                    staged && p.per_thread && n > 2 && (kind == tinyla::op::inv || kind == tinyla::op::adjugate));
          // The teams' inverse in shared memory only where asked, beside an LU there.
          if (p.inverse_in_shared) {
            EXPECT_TRUE(staged && kind == tinyla::op::inv);
            EXPECT_TRUE(!p.per_thread && p.workspace_bytes == 0);
          }
          EXPECT_LE(p.block_threads, p.per_thread ? kern::max_per_thread_block : kern::max_team_block);
          EXPECT_GE(p.block_threads, p.per_thread ? 32 : p.team_size);
          if (p.warp_width > 0) {  // whole 64-thread waves of whole teams, each holding the matrix's rows
            EXPECT_EQ(p.team_size, p.warp_width);
            EXPECT_LE(n, p.warp_width);
            EXPECT_EQ(p.block_threads % kern::wave_threads, 0);  // no half-idle AMD wave
            EXPECT_EQ(p.workspace_bytes, 0);
          }
          // As planned, a warp team exactly where n fills more than half of the narrowest
          // width that holds it (past the per-thread kernel; the shared budget allowing).
          if (!p.per_thread && n <= kern::max_warp_width && n > kern::max_per_thread_n)
            EXPECT_EQ(p.warp_width, n <= 16 ? 16 : 32);
          if (!p.per_thread && n <= kern::max_per_thread_n) EXPECT_EQ(p.warp_width, 0);
          if (!p.per_thread && p.warp_width == 0 && n <= kern::max_warp_width) {
            // the LU in shared memory: a team in each aligned slot of a warp
            EXPECT_EQ(p.team_size, kern::warp_slot(n));
            EXPECT_GE(p.team_size, n);
            EXPECT_TRUE(kern::team_in_warp(p.team_size, p.block_threads, p.workspace_bytes == 0));
          }
          EXPECT_LE(p.shared_bytes, kern::plan_options{}.shared_budget);
          EXPECT_GE(p.blocks, 1);
          EXPECT_LE(p.blocks, kern::max_grid_blocks);
          if (p.workspace_bytes > 0)
            EXPECT_LE(p.workspace_bytes,
                      std::max(kern::max_workspace_bytes, n * n * int64_t(sizeof(E)) * p.block_threads));
          if (p.stage_outputs) EXPECT_EQ(p.block_threads % 32, 0);  // whole warps share their slots
        }
      }
    }
  }
}

// log_det_laplacian's plans: a block of whole warps within its launch bounds, groups of the
// narrowest power of two that holds n threads, the shared memory within the budget and as the
// kernel lays it out; past n = 32 nothing (the launcher says TINYLA_UNSUPPORTED).
TYPED_TEST(GpuKernels, LogDetLaplacianPlansRespectLaunchBoundsAndBudgets) {
  using E = element_of<TypeParam>;
  for (int64_t n = 0; n <= 40; ++n)
    for (int64_t batch : {int64_t(1), int64_t(1000), int64_t(1) << 40}) {
      const tinyla::job jb{.kind = tinyla::op::log_det_laplacian, .batch = batch, .n = n, .tangent_count = 3 * n};
      const kern::launch_plan p = kern::plan_launch<E>(jb, {});
      SCOPED_TRACE("n=" + std::to_string(n) + " batch=" + std::to_string(batch));
      if (n > kern::max_laplacian_n) {
        EXPECT_EQ(p.blocks, 0);
        continue;
      }
      EXPECT_FALSE(p.per_thread);
      EXPECT_EQ(p.team_size, kern::warp_slot(n));
      EXPECT_GE(p.team_size, n);
      EXPECT_EQ(p.block_threads % 32, 0);
      EXPECT_LE(p.block_threads, kern::laplacian_block);
      EXPECT_EQ(p.shared_bytes, kern::laplacian_layout(n, p.block_threads / p.team_size).total * int64_t(sizeof(E)));
      EXPECT_LE(p.shared_bytes, kern::plan_options{}.shared_budget);
      EXPECT_EQ(p.blocks, std::min<int64_t>(batch, kern::max_grid_blocks));
    }
}

// The same runner on arrays a and x that start one element (of alignof(T) < 16
// bytes) past a 16-byte boundary: the per-thread kernel's direct loads then
// cannot be vector loads.
template <class T, class Run> auto misaligned(Run run) {
  return [=](tinyla::dtype t, const tinyla::job& jb) {
    const int64_t a_count = jb.batch * jb.n * jb.n;
    const int64_t x_count = jb.kind == tinyla::op::solve ? jb.batch * jb.n * jb.nrhs : a_count;
    auto shifted = [](std::vector<std::max_align_t>& storage, int64_t count) {
      storage.resize(size_t(count + 1) * sizeof(T) / sizeof(std::max_align_t) + 1);
      return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(storage.data()) + alignof(T));
    };
    static_assert(alignof(std::max_align_t) >= 16 && alignof(T) < 16);
    std::vector<std::max_align_t> a_storage, x_storage;
    tinyla::job moved = jb;
    T* a = shifted(a_storage, a_count);
    if (jb.a) std::copy_n(static_cast<const T*>(jb.a), a_count, a), moved.a = a;
    T* x = shifted(x_storage, x_count);
    if (jb.x) moved.x = x;
    const tinyla_status status = run(t, moved);
    if (jb.x) std::copy_n(x, x_count, static_cast<T*>(jb.x));
    return status;
  };
}

// Every per-thread size, on blocks of 32 threads, each thread writing its own outputs
// (TINYLA_GPU_STORES=direct); the grid (2 blocks) strides. Arrays aligned for vector loads,
// and not.
TYPED_TEST(GpuKernels, PerThreadKernelMatchesCpuBitForBit) {
  using T = TypeParam;
  for (int n = 0; n <= kern::max_per_thread_n; ++n) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const kern::plan_options o{.per_thread_block = 32, .stage_outputs = false};
    const auto expected = run_all_ops<T>(n, 150);
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 150, emulated_gpu<T>(2, o)), expected), "");
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 150, misaligned<T>(emulated_gpu<T>(2, o))), expected), "")
        << "misaligned";
  }
}

// The same with the inverses' and adjugates' outputs staged per warp in shared memory
// (stage_outputs, the default): 150 matrices leave the last warp part full, and the grid strides.
TYPED_TEST(GpuKernels, PerThreadStagedOutputsMatchCpuBitForBit) {
  using T = TypeParam;
  for (int n = 0; n <= kern::max_per_thread_n; ++n) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const kern::plan_options o{.per_thread_block = 64, .stage_outputs = true};
    const tinyla::job probe{.kind = tinyla::op::inv, .batch = 150, .n = n};
    if (kern::per_thread_fits<element_of<T>>(kern::family::inverse, n))
      ASSERT_EQ(kern::plan_launch<element_of<T>>(probe, o).stage_outputs, n > 2);
    const kern::plan_options part_warps{.per_thread_block = 48, .stage_outputs = true};  // not whole warps
    EXPECT_FALSE(kern::plan_launch<element_of<T>>(probe, part_warps).stage_outputs);
    const auto expected = run_all_ops<T>(n, 150);
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 150, emulated_gpu<T>(2, o)), expected), "");
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 150, misaligned<T>(emulated_gpu<T>(2, o))), expected), "")
        << "misaligned";
  }
}

// The block sizes of the table.
TYPED_TEST(GpuKernels, PerThreadKernelAsPlannedMatchesCpu) {
  using T = TypeParam;
  for (int n : {1, 3, 8}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const tinyla::job probe{.kind = tinyla::op::slogdet, .batch = 1, .n = n};
    const int64_t batch = 2 * kern::plan_launch<element_of<T>>(probe).block_threads + 7;
    EXPECT_EQ(first_difference(run_all_ops<T>(n, batch, emulated_gpu<T>(2)), run_all_ops<T>(n, batch)), "");
  }
}

// Team kernels as planned past the per-thread sizes, up to the end of the
// CPU's fast path (the same LU there, so the bits must agree): the warp teams,
// and the LU in shared memory. Their n is a run-time value: a few sizes cover
// their loops.
TYPED_TEST(GpuKernels, TeamKernelMatchesCpuBitForBit) {
  using T = TypeParam;
  for (int n : {kern::max_per_thread_n + 1, 12, 16, 24, 32}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const tinyla::job probe{.kind = tinyla::op::slogdet, .batch = 1, .n = n};
    // As planned: a warp team, the narrowest that holds n (n fills more than half of it);
    // then the LU in shared memory, in the warp slot of that width.
    const int width = n <= 16 ? 16 : 32;
    ASSERT_EQ(kern::plan_launch<element_of<T>>(probe).warp_width, width);
    const auto expected = run_all_ops<T>(n, 26);
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 26, emulated_gpu<T>(2)), expected), "");
    const kern::plan_options shared{.warp_team_up_to = 0};
    ASSERT_EQ(kern::plan_launch<element_of<T>>(probe, shared).warp_width, 0);
    ASSERT_EQ(kern::plan_launch<element_of<T>>(probe, shared).team_size, width);
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 26, emulated_gpu<T>(2, shared)), expected), "")
        << "the LU in shared memory";
  }
}

// The team kernels' inverses formed in shared memory (team_inverse_in_shared): the warp teams
// and the LU in shared memory as planned with it, and teams of other sizes (one, within a
// warp, across warps), both orientations (inv and slogdet_inv's A^-T, run_all_ops), the grid
// striding past several rounds of a block; and where the buffer does not fit beside the LU,
// the inverse formed in the output as before.
TYPED_TEST(GpuKernels, TeamInverseInSharedMemoryMatchesCpuBitForBit) {
  using T = TypeParam;
  const tinyla::job probe{.kind = tinyla::op::inv, .batch = 1, .n = 1};
  const auto plan = [&](int n, kern::plan_options o) {
    tinyla::job jb = probe;
    jb.n = n;
    return kern::plan_launch<element_of<T>>(jb, o);
  };
  int warp_plans = 0;  // with the buffer (complex128's from n = 31 leave no whole AMD wave a block)
  for (int n : {kern::max_per_thread_n + 1, 12, 16, 17, 24, 32}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const auto expected = run_all_ops<T>(n, 41);
    const kern::plan_options warp{.team_inverse_in_shared = true};
    ASSERT_GT(plan(n, warp).warp_width, 0);
    warp_plans += plan(n, warp).inverse_in_shared;
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 41, emulated_gpu<T>(2, warp)), expected), "") << "warp teams";
    const kern::plan_options shared{.warp_team_up_to = 0, .team_inverse_in_shared = true};
    ASSERT_TRUE(plan(n, shared).inverse_in_shared);
    ASSERT_EQ(plan(n, shared).warp_width, 0);
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 41, emulated_gpu<T>(2, shared)), expected), "")
        << "the LU in shared memory";
  }
  EXPECT_GE(warp_plans, 5);
  for (int n : {3, 13}) {
    for (int team : {1, 4, n + 2}) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " team=" + std::to_string(team));
      const kern::plan_options o{.per_thread_up_to = 2, .team_size = team, .team_inverse_in_shared = true};
      ASSERT_TRUE(plan(n, o).inverse_in_shared);
      EXPECT_EQ(first_difference(run_all_ops<T>(n, 23, emulated_gpu<T>(2, o)), run_all_ops<T>(n, 23)), "");
    }
  }
  const int n = 20;  // the LU fits the budget, the buffer beside it does not
  const kern::launch_plan lu_only = plan(n, {.warp_team_up_to = 0});
  const int64_t team_bytes = lu_only.shared_bytes / (lu_only.block_threads / lu_only.team_size);
  const kern::plan_options tight{.shared_budget = team_bytes + kern::team_inverse_bytes<element_of<T>>(n) - 16,
                                 .warp_team_up_to = 0,
                                 .team_inverse_in_shared = true};
  ASSERT_FALSE(plan(n, tight).inverse_in_shared);
  ASSERT_EQ(plan(n, tight).workspace_bytes, 0);
  EXPECT_EQ(first_difference(run_all_ops<T>(n, 23, emulated_gpu<T>(2, tight)), run_all_ops<T>(n, 23)), "")
      << "no room for the buffer";
}

// In place (x == b), as the C API allows: the CPU's out-of-place bits. The
// per-thread kernel reads each right-hand side whole before it writes it; the
// team kernels have nothing to copy. Some matrices singular: their X NaN.
TYPED_TEST(GpuKernels, InPlaceSolveMatchesCpu) {
  using T = TypeParam;
  for (int n : {2, 3, 8, 9, 32}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = 37, m = 2 * n + 1;
    auto a = make_batch<T>(kind::random, batch, n, 61);
    for (int64_t b = 0; b < batch; b += 4)
      for (int i = 0; i < n; ++i) a[(b * n + i) * n] = T(0);  // a zero column
    const auto rhs = make_batch<T>(kind::random, batch * n * m, 1, 62);
    std::vector<T> expected(rhs.size()), x = rhs;
    std::vector<int32_t> info(batch), info_gpu(batch, -1);
    const tinyla::job out_of_place{.kind = tinyla::op::solve,
                                   .batch = batch,
                                   .n = n,
                                   .nrhs = m,
                                   .a = a.data(),
                                   .b = rhs.data(),
                                   .x = expected.data(),
                                   .info = info.data()};
    ASSERT_EQ(run_on_cpu(tinyla::dtype_of<T>, out_of_place), TINYLA_OK);
    tinyla::job in_place = out_of_place;
    in_place.b = in_place.x = x.data(), in_place.info = info_gpu.data();
    ASSERT_EQ(emulated_gpu<T>(2)(tinyla::dtype_of<T>, in_place), TINYLA_OK);
    EXPECT_EQ(info_gpu, info);
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_TRUE(isnan_any(expected[i]) ? isnan_any(x[i]) : std::memcmp(&x[i], &expected[i], sizeof(T)) == 0)
          << "element " << i;
    EXPECT_GT(std::count(info.begin(), info.end(), 0), 0);
    EXPECT_GT(batch - std::count(info.begin(), info.end(), 0), 0);
  }
}

// The warp teams at sizes the per-thread kernel would take, and at either end
// of each width: rows past n idle in the shuffles.
TYPED_TEST(GpuKernels, WarpTeamAnySizeMatchesCpu) {
  using T = TypeParam;
  for (int n : {3, 7, 15, 17, 31}) {
    const kern::plan_options o{.per_thread_up_to = 2, .warp_team_slack = kern::max_warp_width};
    const tinyla::job probe{.kind = tinyla::op::slogdet, .batch = 1, .n = n};
    ASSERT_GT(kern::plan_launch<element_of<T>>(probe, o).warp_width, 0);
    for (bool hip_step_loop : {false, true}) {  // CUDA's chunks and reductions, HIP's one loop and butterfly
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + (hip_step_loop ? " (one step loop)" : ""));
      EXPECT_EQ(first_difference(run_all_ops<T>(n, 23, emulated_gpu<T>(2, o, hip_step_loop)), run_all_ops<T>(n, 23)),
                "");
    }
  }
}

// The team kernel at the small sizes (n <= 2 are closed forms, not LU), with
// more threads per team than rows, fewer, and one; odd and even n (whose LU rows
// are padded apart: team_ld). Teams of 4 lie in warps (shuffles, warp
// barriers), teams of n + 2 cross them (the block's barriers).
TYPED_TEST(GpuKernels, TeamKernelAnyTeamSizeMatchesCpu) {
  using T = TypeParam;
  for (int n : {3, 5, 12, 13}) {
    for (int team : {1, 4, n + 2}) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " team=" + std::to_string(team));
      const kern::plan_options o{.per_thread_up_to = 2, .team_size = team};
      const tinyla::job probe{.kind = tinyla::op::slogdet_inv, .batch = 23, .n = n};
      const kern::launch_plan p = kern::plan_launch<element_of<T>>(probe, o);
      const bool in_warp = kern::team_in_warp(p.team_size, p.block_threads, p.workspace_bytes == 0);
      if (team == 4) ASSERT_TRUE(in_warp);  // (teams of 1 may not fill a warp's worth of shared memory)
      if (team == n + 2) ASSERT_FALSE(in_warp);
      EXPECT_EQ(first_difference(run_all_ops<T>(n, 23, emulated_gpu<T>(2, o)), run_all_ops<T>(n, 23)), "");
    }
  }
}

// Matrices too large for the shared-memory budget live in a global workspace.
TYPED_TEST(GpuKernels, TeamKernelWithGlobalWorkspaceMatchesCpu) {
  using T = TypeParam;
  for (int n : {9, 20}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const kern::plan_options o{.shared_budget = 256};  // less than one matrix
    // (a warp team's determinant needs no shared memory: its rows are in registers)
    const tinyla::job probe{.kind = tinyla::op::slogdet_inv, .batch = 23, .n = n};
    ASSERT_GT(kern::plan_launch<element_of<T>>(probe, o).workspace_bytes, 0);
    EXPECT_EQ(first_difference(run_all_ops<T>(n, 23, emulated_gpu<T>(3, o)), run_all_ops<T>(n, 23)), "");
  }
}

// Past the CPU's fast path (n > 32: LAPACK there): as accurate as LAPACK,
// both measured against the long-double LU.
TYPED_TEST(GpuKernels, LargeNAsAccurateAsLapack) {
  using T = TypeParam;
  using R = real_t<T>;
  const int n = 40;
  const int64_t batch = 5;
  const auto a = make_batch<T>(kind::random, batch, n, 99);
  std::vector<T> sign(batch), x(a.size());
  std::vector<R> logabs(batch);
  const tinyla::job jb{.kind = tinyla::op::slogdet_inv,
                       .batch = batch,
                       .n = n,
                       .a = a.data(),
                       .x = x.data(),
                       .sign = sign.data(),
                       .logabsdet = logabs.data()};
  ASSERT_EQ(emulated_gpu<T>(2)(tinyla::dtype_of<T>, jb), TINYLA_OK);
  for (int64_t b = 0; b < batch; ++b) {
    const auto wide = wide_lu(a.data() + b * n * n, n, true);
    const auto lapack = lapack_lu(a.data() + b * n * n, n, true);
    const long double floor = n * eps<T>();
    EXPECT_LE(std::abs(logabs[b] - wide.logabs),
              32 * std::abs(lapack.logabs - wide.logabs) + floor * std::abs(wide.logabs));
    EXPECT_LE(std::abs(wide_t<T>(sign[b]) - wide.sign), 32 * std::abs(wide_t<T>(lapack.sign) - wide.sign) + floor);
    EXPECT_LE(rel_err_F(x, wide.inv, b * n * n, n * n), 32 * rel_err_F(lapack.inv, wide.inv, 0, n * n) + floor);
  }
}

// The adjugate past the CPU's fast path, against the long-double one: det(A) A^-1, and where
// column c of A is zero, its one nonzero row c, adj(A)[c][j] = det(A with column c set to e_j)
// (Cramer). The GPU's team kernel within 32x the CPU's (LAPACK's LU) error.
TYPED_TEST(GpuKernels, LargeNAdjugateAsAccurateAsLapack) {
  using T = TypeParam;
  using W = wide_t<T>;
  const int n = 40, zero_column = 17;
  const int64_t batch = 4, nn = int64_t(n) * n;
  auto a = make_batch<T>(kind::random, batch, n, 98);
  for (int i = 0; i < n; ++i) a[(3 * n + i) * n + zero_column] = T(0);  // matrix 3: rank n - 1
  std::vector<T> gpu(a.size()), cpu(a.size());
  tinyla::job jb{.kind = tinyla::op::adjugate, .batch = batch, .n = n, .a = a.data(), .x = gpu.data()};
  ASSERT_EQ(emulated_gpu<T>(2)(tinyla::dtype_of<T>, jb), TINYLA_OK);
  jb.x = cpu.data();
  ASSERT_EQ(run_on_cpu(tinyla::dtype_of<T>, jb), TINYLA_OK);
  for (int64_t b = 0; b < batch; ++b) {
    SCOPED_TRACE("matrix " + std::to_string(b));
    std::vector<W> expected(size_t(nn), W(0));
    const auto det_of = [](const wide_result<T>& r) { return r.sign * W(std::exp(r.logabs)); };
    if (b < 3) {
      const auto wide = wide_lu(a.data() + b * nn, n, true);
      for (int64_t i = 0; i < nn; ++i) expected[i] = det_of(wide) * wide.inv[i];
    } else {
      std::vector<T> m(a.begin() + b * nn, a.begin() + (b + 1) * nn);
      for (int j = 0; j < n; ++j) {
        for (int i = 0; i < n; ++i) m[i * n + zero_column] = T(i == j ? 1 : 0);
        expected[zero_column * n + j] = det_of(wide_lu(m.data(), n, false));
      }
    }
    const long double cpu_err = rel_err_F(cpu, expected, b * nn, nn), gpu_err = rel_err_F(gpu, expected, b * nn, nn);
    EXPECT_LE(gpu_err, 32 * cpu_err + n * eps<T>()) << "cpu " << double(cpu_err);
  }
}

// jax.grad of det at singular integer matrices (tests/python: rank 2, a dependent row, a
// dependent column whose zero pivot is not the last, a zero row, rank n - 2, a random one):
// the team kernel past the CPU's fast path (n = 33: the LU across warps; the CPU's is
// LAPACK's) finite and within 1e-9 of the batch's largest cofactor of the CPU's, as the
// Python test asks of both against exact cofactors. Double precision only (float32's
// cofactors of a rank n - 1 matrix at n = 33 are rounding residues on either side).
TYPED_TEST(GpuKernels, AdjugateOfSingularIntegerMatricesMatchesCpu) {
  using T = TypeParam;
  using R = real_t<T>;
  if constexpr (sizeof(R) < 8) GTEST_SKIP() << "double precision only";
  else {
    for (int n : {9, 33}) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
      const int64_t batch = 6, nn = int64_t(n) * n;
      std::mt19937_64 rng(5 + n);
      std::uniform_int_distribution<int> entry(-3, 3);
      std::vector<T> a(size_t(batch * nn));
      for (auto& v : a) v = T(R(entry(rng)));
      const auto at = [&](int64_t b, int i, int j) -> T& { return a[size_t(b * nn + int64_t(i) * n + j)]; };
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) at(0, i, j) = T(R(i * n + j + 1));             // rank 2
      for (int j = 0; j < n; ++j) at(1, 2, j) = at(1, 0, j) + R(2) * at(1, 1, j);  // rank n - 1
      for (int i = 0; i < n; ++i) at(2, i, 1) = R(-3) * at(2, i, 0);               // a zero pivot before the last
      for (int j = 0; j < n; ++j) at(3, 1, j) = T(0);                              // a zero row
      for (int j = 0; j < n; ++j) at(4, 1, j) = at(4, 0, j), at(4, 2, j) = R(2) * at(4, 0, j);  // rank n - 2
      std::vector<T> gpu(a.size()), cpu(a.size());
      tinyla::job jb{
          .kind = tinyla::op::adjugate, .batch = batch, .n = n, .a = a.data(), .x = cpu.data(), .transpose_x = true};
      ASSERT_EQ(run_on_cpu(tinyla::dtype_of<T>, jb), TINYLA_OK);
      jb.x = gpu.data();
      ASSERT_EQ(emulated_gpu<T>(2)(tinyla::dtype_of<T>, jb), TINYLA_OK);
      R largest = 0, worst = 0;
      for (size_t i = 0; i < cpu.size(); ++i) {
        ASSERT_TRUE(std::isfinite(std::abs(gpu[i]))) << "entry " << i;
        largest = std::max<R>(largest, std::abs(cpu[i]));
        worst = std::max<R>(worst, std::abs(gpu[i] - cpu[i]));
      }
      EXPECT_LE(worst, R(1e-9) * largest);
    }
  }
}

// log_det_laplacian's kernel (a block per matrix, the tangents shared out among groups of a
// warp) gives the CPU's bits: every n it takes, tangent counts that leave groups idle, rows
// of tangents zero in patterns that differ from tangent to tangent (the kernel skips them
// per matrix, the CPU per lane group), G's rows with an infinity (never skipped: 0 * inf),
// on a grid smaller than the batch. Past n = 32: TINYLA_UNSUPPORTED, nothing written.
TYPED_TEST(GpuKernels, LogDetLaplacianMatchesCpuBitForBit) {
  using T = TypeParam;
  using R = real_t<T>;
  for (int n : {0, 1, 2, 3, 5, 8, 9, 16, 17, 31, 32})
    for (int k : {0, 1, 7, 3 * n + 1}) {
      const int64_t batch = 5;
      std::vector<T> g = make_batch<T>(kind::random, batch, n, 11 + n), h = make_batch<T>(kind::random, batch, n, 12);
      std::vector<T> d = make_batch<T>(kind::random, batch * k, n, 13 + k);
      std::mt19937_64 rng(uint64_t(n * 100 + k));
      for (int64_t t = 0; t < batch * k; ++t)
        for (int i = 0; i < n; ++i)
          if (rng() % 3 != 0)
            for (int j = 0; j < n; ++j) d[(t * n + i) * n + j] = T(0);
      if (n > 1) g[size_t(n) * n + n + 1] = T(std::numeric_limits<R>::infinity());  // matrix 1, row 1
      const auto run = [&](auto submit, std::vector<T>& grad, std::vector<T>& lap) {
        grad.assign(size_t(batch) * k, T(-7)), lap.assign(size_t(batch), T(-7));
        const tinyla::job jb{.kind = tinyla::op::log_det_laplacian,
                             .batch = batch,
                             .n = n,
                             .a = g.data(),
                             .b = h.data(),
                             .tangent_count = k,
                             .tangents = d.data(),
                             .grad = grad.data(),
                             .laplacian = lap.data()};
        return submit(tinyla::dtype_of<T>, jb);
      };
      std::vector<T> grad_cpu, lap_cpu, grad_gpu, lap_gpu;
      const auto cpu = [](tinyla::dtype t, const tinyla::job& jb) {
        return tinyla::cpu::execute(t, jb) ? TINYLA_OK : TINYLA_OUT_OF_MEMORY;
      };
      ASSERT_EQ(run(cpu, grad_cpu, lap_cpu), TINYLA_OK);
      ASSERT_EQ(run(emulated_gpu<T>(2), grad_gpu, lap_gpu), TINYLA_OK);
      const auto same_bits = [](const std::vector<T>& x, const std::vector<T>& y) {
        return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
      };
      EXPECT_TRUE(same_bits(grad_cpu, grad_gpu)) << "grad, n=" << n << " k=" << k;
      EXPECT_TRUE(same_bits(lap_cpu, lap_gpu)) << "laplacian, n=" << n << " k=" << k;
    }
  std::vector<T> g(33 * 33), grad(1, T(-7)), lap(1, T(-7));
  const tinyla::job big{.kind = tinyla::op::log_det_laplacian,
                        .batch = 1,
                        .n = 33,
                        .a = g.data(),
                        .b = g.data(),
                        .tangent_count = 1,
                        .tangents = g.data(),
                        .grad = grad.data(),
                        .laplacian = lap.data()};
  EXPECT_EQ(emulated_gpu<T>(2)(tinyla::dtype_of<T>, big), TINYLA_UNSUPPORTED);
  EXPECT_EQ(grad[0], T(-7));
  EXPECT_EQ(lap[0], T(-7));
}
}  // namespace
