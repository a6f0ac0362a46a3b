// The C++ API (tinyla.hpp): same bits as the C API, sizes read off the spans,
// and size mismatches throw tinyla::error naming the op.
#include "tinyla/tinyla.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "reference.hpp"

namespace {

template <class T> class CppApi : public ::testing::Test {};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(CppApi, Types);

template <class T> bool same_bits(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0);
}

TYPED_TEST(CppApi, MatchesTheCApi) {
  using T = TypeParam;
  using R = tinyla::real_t<T>;
  for (int n : {1, 2, 3, 9, 33}) {
    const int64_t batch = 13, nrhs = 2;
    const auto a = ref::make_batch<T>(ref::kind::random, batch, n, n);
    std::vector<T> b(size_t(batch) * n * nrhs);
    std::mt19937_64 gen(n);
    for (auto& v : b) v = ref::random_entry<T>(gen);
    std::vector<T> sign(batch), d(batch), x(a.size()), sol(b.size()), sign2(batch), x2(a.size());
    std::vector<R> logabs(batch), logabs2(batch);
    std::vector<int32_t> info(batch), info_s(batch);
    ASSERT_EQ(ref::slogdet(batch, n, a.data(), sign.data(), logabs.data()), TINYLA_OK);
    ASSERT_EQ(ref::det(batch, n, a.data(), d.data()), TINYLA_OK);
    ASSERT_EQ(ref::inv(batch, n, a.data(), x.data(), info.data()), TINYLA_OK);
    ASSERT_EQ(ref::solve(batch, n, nrhs, a.data(), b.data(), sol.data(), info_s.data()), TINYLA_OK);
    ASSERT_EQ(ref::slogdet_inv(batch, n, a.data(), sign2.data(), logabs2.data(), x2.data()), TINYLA_OK);

    const std::span<const T> as(a);
    const auto r = tinyla::slogdet<T>(as, n);
    EXPECT_TRUE(same_bits(r.sign, sign) && same_bits(r.logabsdet, logabs));
    EXPECT_TRUE(same_bits(tinyla::det<T>(as, n), d));
    const auto ri = tinyla::inv<T>(as, n);
    EXPECT_TRUE(same_bits(ri.inverse, x) && ri.info == info);
    const auto rs = tinyla::slogdet_inv<T>(as, n);
    EXPECT_TRUE(same_bits(rs.sign, sign2) && same_bits(rs.logabsdet, logabs2) && same_bits(rs.inverse, x2));
    std::vector<T> sol2(b.size());
    std::vector<int32_t> info2(batch);
    tinyla::solve<T>(as, n, b, nrhs, sol2, info2);
    EXPECT_TRUE(same_bits(sol2, sol) && info2 == info_s);

    const int64_t k = 3;  // log_det_laplacian on A^-T, with a as Lap A and tangents from b's entries
    std::vector<T> da(size_t(batch * k) * n * n), grad(batch * k), lap(batch), grad2(batch * k), lap2(batch);
    for (size_t i = 0; i < da.size(); ++i) da[i] = b[i % b.size()];
    ASSERT_EQ(ref::log_det_laplacian(batch, n, k, x.data(), a.data(), da.data(), grad.data(), lap.data()), TINYLA_OK);
    tinyla::log_det_laplacian<T>(std::span<const T>(x), as, da, n, k, grad2, lap2);
    EXPECT_TRUE(same_bits(grad2, grad) && same_bits(lap2, lap));
  }
}

TYPED_TEST(CppApi, SizeMismatchesThrowWithTheOpName) {
  using T = TypeParam;
  using R = tinyla::real_t<T>;
  std::vector<T> a(2 * 9), sign(2), x(2 * 9), bad(3);
  std::vector<R> logabs(2), badr(3);
  auto expect_throw = [](auto&& f, const char* op) {
    try {
      f();
      ADD_FAILURE() << op << " did not throw";
    } catch (const tinyla::error& e) {
      EXPECT_EQ(e.status(), TINYLA_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
  };
  const std::span<const T> as(a);
  expect_throw([&] { tinyla::slogdet<T>(as, 3, bad, logabs); }, "slogdet");
  expect_throw([&] { tinyla::slogdet<T>(as, 3, sign, badr); }, "slogdet");
  expect_throw([&] { tinyla::slogdet<T>(as, 4); }, "slogdet");  // 18 is not a multiple of 16
  expect_throw([&] { tinyla::det<T>(as, -1); }, "det");
  expect_throw([&] { tinyla::inv<T>(as, 3, std::span<T>(bad)); }, "inv");
  expect_throw([&] { tinyla::solve<T>(as, 3, std::span<const T>(bad), 1, std::span<T>(bad)); }, "solve");
  expect_throw([&] { tinyla::slogdet_inv<T>(as, 3, sign, logabs, std::span<T>(bad)); }, "slogdet_inv");
  std::vector<T> da(2 * 2 * 9), grad(2 * 2), lap(2);
  const std::span<const T> das(da);
  expect_throw([&] { tinyla::log_det_laplacian<T>(as, as, das, 3, -1, grad, lap); }, "log_det_laplacian");
  expect_throw([&] { tinyla::log_det_laplacian<T>(as, as, das, 3, 3, grad, lap); }, "log_det_laplacian");  // da
  expect_throw([&] { tinyla::log_det_laplacian<T>(as, as, das, 3, 2, std::span<T>(bad), lap); }, "log_det_laplacian");
  expect_throw([&] { tinyla::log_det_laplacian<T>(as, as, das, 3, 2, grad, std::span<T>(bad)); }, "log_det_laplacian");
  expect_throw([&] { tinyla::log_det_laplacian<T>(as, std::span<const T>(bad), das, 3, 2, grad, lap); },
               "log_det_laplacian");
  tinyla::log_det_laplacian<T>(as, as, das, 3, 2, grad, lap);  // the sizes that fit
  // n = 0: the batch comes from the outputs
  std::vector<T> s0(4);
  std::vector<R> l0(4, R(9));
  tinyla::slogdet<T>(std::span<const T>(), 0, s0, l0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s0[i], T(1));
    EXPECT_EQ(l0[i], R(0));
  }
}

}  // namespace
