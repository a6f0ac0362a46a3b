// One source of math: every SIMD instantiation (each ISA this CPU runs) gives
// the scalar-lane instantiation's bits (the per-thread GPU path), and results
// do not depend on the thread count or on a matrix's position in its group.
#include <gtest/gtest.h>

#include <cstring>

#include "cpu/dispatch.hpp"
#include "reference.hpp"

namespace {

using namespace ref;

// Runs every op over a batch mixing random, singular, NaN, subnormal-pivot and
// scaled matrices; returns all outputs as bytes.
template <class T> std::vector<unsigned char> run_all_ops(int n, int64_t batch) {
  using R = real_t<T>;
  auto a = make_batch<T>(kind::random, batch, n, 4242 + n);
  for (int64_t b = 0; b < batch && n > 0; b += 5) {
    T* m = a.data() + b * n * n;
    switch ((b / 5) % 5) {
      case 0: for (int i = 0; i < n * n; ++i) m[i] *= R(1e-40) * std::numeric_limits<R>::min(); break;  // tiny pivots
      case 1: for (int i = 0; i < n; ++i) m[i * n] = T(0); break;                                       // singular
      case 2: m[(b / 5) % (n * n)] = T(std::numeric_limits<R>::quiet_NaN()); break;
      case 3: for (int i = 0; i < n * n; ++i) m[i] *= big_scale<T>(); break;
      default: break;
    }
  }
  const auto rhs = make_batch<T>(kind::random, batch, n, 7);  // (batch, n, n): nrhs = n
  std::vector<T> sign(batch), d(batch), x(a.size()), sol(rhs.size()), sign2(batch), x2(a.size()), sign3(batch),
      x3(a.size()), x4(a.size());
  std::vector<R> logabs(batch), logabs2(batch), logabs3(batch);
  std::vector<int32_t> info(batch), info_s(batch);
  EXPECT_EQ(slogdet(batch, n, a.data(), sign.data(), logabs.data()), TINYLA_OK);
  EXPECT_EQ(det(batch, n, a.data(), d.data()), TINYLA_OK);
  EXPECT_EQ(inv(batch, n, a.data(), x.data(), info.data()), TINYLA_OK);
  EXPECT_EQ(solve(batch, n, n, a.data(), rhs.data(), sol.data(), info_s.data()), TINYLA_OK);
  EXPECT_EQ(slogdet_inv(batch, n, a.data(), sign2.data(), logabs2.data(), x2.data()), TINYLA_OK);
  EXPECT_EQ(slogdet_inv_transposed(batch, n, a.data(), sign3.data(), logabs3.data(), x3.data()), TINYLA_OK);
  EXPECT_EQ(inv_transposed(batch, n, a.data(), x4.data(), nullptr), TINYLA_OK);
  // Bits must match exactly, except that a NaN's payload and sign depend on
  // operand order inside an instruction, so NaNs are compared as "NaN".
  std::vector<unsigned char> bytes;
  auto append = [&](auto v) {
    if constexpr (!std::is_integral_v<typename decltype(v)::value_type>)
      for (auto& e : v)
        if (isnan_any(e)) e = std::numeric_limits<R>::quiet_NaN();
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * sizeof(v[0]));
  };
  append(sign), append(logabs), append(d), append(x), append(info), append(sol), append(info_s), append(sign2),
      append(logabs2), append(x2), append(sign3), append(logabs3), append(x3), append(x4);
  return bytes;
}

template <class T> class Consistency : public ::testing::Test {
 protected:
  void TearDown() override {
    tinyla::cpu::select_backend(best_);
    tinyla_set_num_threads(0);
  }
  const char* best_ = tinyla_cpu_backend();
};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(Consistency, Types);

TYPED_TEST(Consistency, EverySimdBackendMatchesScalarLanesBitForBit) {
  using T = TypeParam;
  int compared = 0;
  for (int n = 0; n <= 34; ++n) {
    const int64_t batch = 37;  // partial last group for every lane count
    ASSERT_TRUE(tinyla::cpu::select_backend("scalar"));
    const auto expect = run_all_ops<T>(n, batch);
    for (const char* isa : {"vec128", "avx2", "avx512"}) {
      if (!tinyla::cpu::select_backend(isa)) continue;  // not built or not runnable here
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " " + isa);
      EXPECT_TRUE(run_all_ops<T>(n, batch) == expect);
      ++compared;
    }
  }
  EXPECT_GT(compared, 0) << "no SIMD backend ran";
}

TYPED_TEST(Consistency, ThreadCountsGiveIdenticalBits) {
  using T = TypeParam;
  for (int n : {1, 2, 3, 5, 8, 13, 32, 33}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = n <= 8 ? 3001 : 601;  // enough work to split over threads
    tinyla_set_num_threads(1);
    const auto expect = run_all_ops<T>(n, batch);
    for (int threads : {2, 7}) {
      tinyla_set_num_threads(threads);
      EXPECT_EQ(tinyla_get_num_threads(), threads);
      EXPECT_TRUE(run_all_ops<T>(n, batch) == expect) << threads << " threads";
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

TEST(Backend, SelectionByName) {
  const std::string best = tinyla_cpu_backend();
  EXPECT_TRUE(tinyla::cpu::select_backend("scalar"));
  EXPECT_STREQ(tinyla_cpu_backend(), "scalar");
  EXPECT_FALSE(tinyla::cpu::select_backend("no-such-isa"));
  EXPECT_FALSE(tinyla::cpu::select_backend(nullptr));
  EXPECT_STREQ(tinyla_cpu_backend(), "scalar");
  EXPECT_TRUE(tinyla::cpu::select_backend(best.c_str()));
}

}  // namespace
