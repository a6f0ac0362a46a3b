// One source of math: every SIMD instantiation (each ISA this CPU runs) gives
// the scalar-lane instantiation's bits (the per-thread GPU path), and results
// do not depend on the thread count or on a matrix's position in its group.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "all_ops.hpp"
#include "cpu/dispatch.hpp"

namespace {

using namespace ref;

template <class T> class Consistency : public RestoresCpuSettings {};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(Consistency, Types);

// Every op at size n through each SIMD backend this CPU runs, compared bit for bit with the
// scalar lanes (run_all_ops's batch, its special matrices `spacing` apart). Returns how many
// backends ran.
template <class T> int expect_simd_backends_match_scalar_lanes(int n, int64_t batch, int64_t spacing = 5) {
  if (!tinyla::cpu::select_backend("scalar")) {
    ADD_FAILURE() << "no scalar backend";
    return 0;
  }
  const auto expect = run_all_ops<T>(n, batch, &run_on_cpu, spacing);
  int compared = 0;
  for (const char* isa : {"vec128", "avx2", "avx512"}) {
    if (!tinyla::cpu::select_backend(isa)) continue;  // not built or not runnable here
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " " + isa);
    EXPECT_EQ(first_difference(run_all_ops<T>(n, batch, &run_on_cpu, spacing), expect), "");
    ++compared;
  }
  return compared;
}

TYPED_TEST(Consistency, EverySimdBackendMatchesScalarLanesBitForBit) {
  int compared = 0;
  for (int n = 0; n <= 34; ++n)
    compared += expect_simd_backends_match_scalar_lanes<TypeParam>(n, 37);  // partial groups
  EXPECT_GT(compared, 0) << "no SIMD backend ran";
}

// n = 2 with the special matrices far apart: most lane groups hold common matrices only
// (entries and det within the safe range), which the wide backends invert as the matrices lie
// in memory (backend_isa.cpp, invert_2x2_as_stored), the others one special matrix each, which
// sends the group into the lanes; a partial group at the end. Both give the scalar lanes' bits.
TYPED_TEST(Consistency, TwoByTwoGroupsOfCommonMatricesMatchScalarLanesBitForBit) {
  // groups of 16, 8 and 4 matrices, most of them common
  EXPECT_GT(expect_simd_backends_match_scalar_lanes<TypeParam>(2, 16 * 24 + 7, 40), 0) << "no SIMD backend ran";
}

// A call whose operand and output outgrow the caches (streaming_bytes in backend_isa.cpp,
// 16 MiB) takes other paths: the prefetch two groups ahead, and A^-T at run-time n leaves the
// lanes element by element instead of by transposes. Its first matrices get the bits that a
// call of those matrices alone gets.
TYPED_TEST(Consistency, CallsBeyondTheCachesGiveTheBitsOfSmallCalls) {
  using T = TypeParam;
  using tinyla::op;
  for (int n : {9, 16}) {
    const int64_t big = (int64_t(17) << 20) / (2 * int64_t(n) * n * int64_t(sizeof(T))) + 1, small = 37;
    const auto a = make_batch<T>(kind::random, big, n, 99 + n);
    for (auto [kind, transposed] : {std::pair{op::slogdet_inv, true}, std::pair{op::inv, true},
                                    std::pair{op::adjugate, true}, std::pair{op::inv, false}}) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " op " + std::to_string(int(kind)) +
                   (transposed ? " transposed" : ""));
      std::vector<T> x_big(a.size()), x_small(size_t(small) * n * n), sign_big(big), sign_small(small);
      std::vector<real_t<T>> log_big(big), log_small(small);
      const bool with_det = kind == op::slogdet_inv;
      const tinyla::job big_job{.kind = kind,
                                .batch = big,
                                .n = n,
                                .a = a.data(),
                                .x = x_big.data(),
                                .sign = with_det ? sign_big.data() : nullptr,
                                .logabsdet = with_det ? log_big.data() : nullptr,
                                .transpose_x = transposed};
      tinyla::job small_job = big_job;
      small_job.batch = small, small_job.x = x_small.data();
      if (with_det) small_job.sign = sign_small.data(), small_job.logabsdet = log_small.data();
      ASSERT_EQ(run_on_cpu(tinyla::dtype_of<T>, big_job), TINYLA_OK);
      ASSERT_EQ(run_on_cpu(tinyla::dtype_of<T>, small_job), TINYLA_OK);
      EXPECT_EQ(std::memcmp(x_big.data(), x_small.data(), x_small.size() * sizeof(T)), 0);
      EXPECT_EQ(std::memcmp(sign_big.data(), sign_small.data(), sign_small.size() * sizeof(T)), 0);
      EXPECT_EQ(std::memcmp(log_big.data(), log_small.data(), log_small.size() * sizeof(real_t<T>)), 0);
    }
  }
}

TYPED_TEST(Consistency, ThreadCountsGiveIdenticalBits) {
  using T = TypeParam;
  for (int n : {1, 2, 3, 5, 8, 13, 32, 33}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = n <= 8 ? 3001 : 601;  // enough work to split over threads
    tinyla_set_num_threads(1);
    const auto expect = run_all_ops<T>(n, batch);
    // 2 threads that poll before they sleep (where the process has 2 CPUs or more), 2 that sleep
    // at once (TINYLA_SPIN_US=0, read when the pool starts), 7 (which sleep at once where the
    // process has fewer CPUs: CI's 2).
    for (auto [threads, spin] : {std::pair{2, ""}, std::pair{2, "0"}, std::pair{7, ""}}) {
      if (*spin) setenv("TINYLA_SPIN_US", spin, 1);
      tinyla_set_num_threads(threads);
      unsetenv("TINYLA_SPIN_US");
      EXPECT_EQ(tinyla_get_num_threads(), threads);
      EXPECT_EQ(first_difference(run_all_ops<T>(n, batch), expect), "")
          << threads << " threads, TINYLA_SPIN_US=" << spin;
    }
  }
}

// A matrix's result does not depend on its neighbours in the lane group:
// computing each matrix alone gives the batched bits.
TYPED_TEST(Consistency, ResultsIndependentOfPositionInBatch) {
  using T = TypeParam;
  using R = real_t<T>;
  for (int n : {1, 2, 3, 4, 7, 16}) {
    const int64_t batch = 29;
    auto a = make_batch<T>(kind::random, batch, n, 11 * n);
    for (int i = 0; i < n * n; ++i) a[3 * n * n + i] *= R(1e-3) * std::numeric_limits<R>::min();  // one tiny lane
    std::vector<T> sign(batch), x(a.size());
    std::vector<R> logabs(batch);
    ASSERT_EQ(slogdet_inv(batch, n, a.data(), sign.data(), logabs.data(), x.data()), TINYLA_OK);
    for (int64_t b = 0; b < batch; ++b) {
      T s1;
      R l1;
      std::vector<T> x1(size_t(n) * n);
      ASSERT_EQ(slogdet_inv(1, n, a.data() + b * n * n, &s1, &l1, x1.data()), TINYLA_OK);
      EXPECT_EQ(std::memcmp(&s1, &sign[b], sizeof(T)), 0) << "n=" << n << " b=" << b;
      EXPECT_EQ(std::memcmp(&l1, &logabs[b], sizeof(R)), 0) << "n=" << n << " b=" << b;
      EXPECT_EQ(std::memcmp(x1.data(), x.data() + b * n * n, sizeof(T) * n * n), 0) << "n=" << n << " b=" << b;
    }
  }
}

// The caller's floating-point environment changes no result: XLA's CPU runtime calls custom
// calls on threads that flush subnormals (MXCSR's FTZ and DAZ), and a program may unmask
// exceptions, which the kernels' infinities and NaNs (selected away or documented) would trap
// on. Every op's every output, on one thread and on the pool's, with subnormals flushed,
// rounding toward zero and invalid, division-by-zero and overflow unmasked on the calling
// thread: the bits of the default environment, and the caller's environment as it was after.
TYPED_TEST(Consistency, CallersFloatingPointEnvironmentChangesNoResult) {
  using T = TypeParam;
#if defined(__x86_64__)
  constexpr unsigned flush = (1u << 15) | (1u << 6);                 // FTZ, DAZ
  constexpr unsigned unmasked = (1u << 7) | (1u << 9) | (1u << 10);  // invalid, divide by zero, overflow
  constexpr unsigned toward_zero = 3u << 13;                         // the rounding control
  const unsigned callers = (_mm_getcsr() | flush | toward_zero) & ~unmasked;
  int calls = 0;
  auto in_callers_environment = [&](tinyla::dtype t, const tinyla::job& jb) {
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(callers);
    const tinyla_status status = run_on_cpu(t, jb);
    const unsigned after = _mm_getcsr() & ~0x3fu;  // the exception flags aside
    _mm_setcsr(saved);
    EXPECT_EQ(after, callers & ~0x3fu) << "the caller's environment was not restored";
    ++calls;
    return status;
  };
  for (int n : {1, 2, 3, 8, 33}) {
    if (n > test_max_n()) break;  // the sanitizer run: not the LAPACK path
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = n <= 8 ? 3001 : 301;  // the pool splits it
    tinyla_set_num_threads(1);
    const auto expect = run_all_ops<T>(n, batch);
    for (int threads : {1, 2}) {
      tinyla_set_num_threads(threads);
      EXPECT_EQ(first_difference(run_all_ops<T>(n, batch, in_callers_environment), expect), "") << threads;
    }
  }
  EXPECT_GT(calls, 0);
#else
  GTEST_SKIP() << "sets x86-64's MXCSR";
#endif
}

// A complex 2x2 whose larger parts cancel exactly: det is a subnormal part times an entry,
// [[-s, -3s + e i], [-s, -3s]] has det = e s i (e = 9 x the least subnormal), and the inverse
// overflows: rounded, (0, inf), (-1/s, -inf), (0, -inf), (0, inf). Every entry is in the
// closed form's safe range (its larger part is), so a lane group of such matrices takes the
// unscaled form, and beside a neighbour outside that range the split form: both lift the
// subnormal det for its reciprocal. (tests/fuzz found the unscaled form taking it unlifted:
// NaN and inf in every entry, and an inverse that depended on its neighbours and the ISA.)
template <class T> void subnormal_det_of_a_complex_2x2_everywhere() {
  using R = real_t<T>;
  const R s = 4096, e = 9 * std::numeric_limits<R>::denorm_min(), inf = std::numeric_limits<R>::infinity();
  const T a[4] = {T(-s), T(-3 * s, e), T(-s), T(-3 * s)};
  const T expect[4] = {T(0, inf), T(-1 / s, -inf), T(0, -inf), T(0, inf)};
  const T outside = T(std::ldexp(R(1), std::numeric_limits<R>::min_exponent / 2));  // below the safe range
  std::vector<T> first;  // the first configuration's inverse: every other gives its bits
  for (const char* isa : {"scalar", "vec128", "avx2", "avx512"}) {
    if (!tinyla::cpu::select_backend(isa)) continue;
    for (bool beside_split : {false, true}) {
      SCOPED_TRACE(type_name<T>() + " " + isa + (beside_split ? ", beside a split neighbour" : ", alone"));
      std::vector<T> batch(a, a + 4);
      if (beside_split) batch.insert(batch.begin(), {outside, T(1), T(1), T(1)});
      const int64_t count = int64_t(batch.size() / 4), at = count - 1;
      std::vector<T> x(batch.size()), xf(batch.size()), sign(count);
      std::vector<R> logabs(count);
      ASSERT_EQ(inv(count, 2, batch.data(), x.data(), nullptr), TINYLA_OK);
      ASSERT_EQ(slogdet_inv(count, 2, batch.data(), sign.data(), logabs.data(), xf.data()), TINYLA_OK);
      const std::vector<T> got(x.begin() + 4 * at, x.begin() + 4 * at + 4);
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(got[i].real(), expect[i].real()) << i;
        EXPECT_EQ(got[i].imag(), expect[i].imag()) << i;
      }
      EXPECT_EQ(std::memcmp(got.data(), xf.data() + 4 * at, sizeof(T) * 4), 0) << "slogdet_inv";
      EXPECT_EQ(sign[at], T(0, 1));
      EXPECT_NEAR(logabs[at], std::log(e) + std::log(s), 4 * eps<T>() * -std::log(e));
      if (first.empty()) first = got;
      EXPECT_EQ(std::memcmp(got.data(), first.data(), sizeof(T) * 4), 0);
    }
  }
  tinyla::cpu::choose_backend_for_this_cpu();
}

TEST(Consistency2x2, SubnormalDetOfAComplex2x2IsLiftedInEveryLaneGroup) {
  subnormal_det_of_a_complex_2x2_everywhere<std::complex<float>>();
  subnormal_det_of_a_complex_2x2_everywhere<std::complex<double>>();
}

TEST(Backend, SelectionByName) {
  const std::string best = tinyla_cpu_backend();
  EXPECT_TRUE(tinyla::cpu::select_backend("scalar"));
  EXPECT_STREQ(tinyla_cpu_backend(), "scalar");
  EXPECT_FALSE(tinyla::cpu::select_backend("no-such-isa"));
  EXPECT_FALSE(tinyla::cpu::select_backend(nullptr));
  EXPECT_STREQ(tinyla_cpu_backend(), "scalar");
  tinyla::cpu::choose_backend_for_this_cpu();
  EXPECT_EQ(tinyla_cpu_backend(), best);
}

// A backend selected by name runs every op and n (the bit-for-bit tests above rely on it);
// the choice for this CPU may hand n above the unrolled sizes, and the unrolled cells where
// AVX-512 measured slower, to AVX2, on a CPU that splits 512-bit operations, and to no other.
TEST(Backend, WhichBackendRunsEachN) {
  using tinyla::dtype;
  using tinyla::op;
  const dtype types[] = {dtype::f32, dtype::f64, dtype::c64, dtype::c128};
  const op kinds[] = {op::slogdet, op::det, op::inv, op::solve, op::slogdet_inv, op::adjugate, op::log_det_laplacian};
  int selected = 0;
  for (const char* isa : {"scalar", "vec128", "avx2", "avx512"}) {
    if (!tinyla::cpu::select_backend(isa)) continue;
    ++selected;
    for (dtype t : types)
      for (op kind : kinds)
        for (int n = 0; n <= 40; ++n) EXPECT_STREQ(tinyla::cpu::backend_for(t, kind, n).name, isa) << "n=" << n;
    const auto* table = &tinyla::cpu::current_backend();
    const auto* split = tinyla::cpu::loop_backend_for(table, true);
    EXPECT_EQ(tinyla::cpu::loop_backend_for(table, false), table) << isa;
    if (std::strcmp(isa, "avx512") == 0 && tinyla::cpu::select_backend("avx2")) {
      EXPECT_EQ(split, &tinyla::cpu::current_backend());
    } else {
      EXPECT_EQ(split, table) << isa;
    }
  }
  EXPECT_GE(selected, 1);
  tinyla::cpu::choose_backend_for_this_cpu();
  const char* best = tinyla_cpu_backend();
  EXPECT_STREQ(tinyla::cpu::backend_for(dtype::f64, op::slogdet, 1).name, best);
  const char* loop = tinyla::cpu::backend_for(dtype::f64, op::slogdet, 40).name;
  EXPECT_TRUE(std::strcmp(loop, best) == 0 || (std::strcmp(best, "avx512") == 0 && std::strcmp(loop, "avx2") == 0))
      << loop;
  int cells = 0;
  for (dtype t : types)
    for (op kind : kinds)
      for (int n = 0; n <= 40; ++n) {
        const char* name = tinyla::cpu::backend_for(t, kind, n).name;
        EXPECT_TRUE(std::strcmp(name, best) == 0 || std::strcmp(name, loop) == 0) << name << " n=" << n;
        if (tinyla::cpu::avx2_is_faster_when_split(t, kind, n)) {
          EXPECT_STREQ(name, loop) << "n=" << n;
          ++cells;
        }
      }
  EXPECT_GT(cells, 0);  // the table is not empty (float64's inverse at n = 7, e.g.)
  EXPECT_TRUE(tinyla::cpu::avx2_is_faster_when_split(dtype::f64, op::inv, 7));
  EXPECT_FALSE(tinyla::cpu::avx2_is_faster_when_split(dtype::f64, op::inv, 2));
  EXPECT_FALSE(tinyla::cpu::avx2_is_faster_when_split(dtype::f64, op::inv, 40));
}

}  // namespace
