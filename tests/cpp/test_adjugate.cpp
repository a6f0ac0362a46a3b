// det_adjugate / det_cofactors against the cofactors' definition, (-1)^(i+j) det of the minor
// without row j and column i, each minor's determinant from the long-double LU: nonsingular,
// rank n - 1 (a dependent row or column, a zero row: one zero pivot or several) and rank
// n - 2 matrices, entries near the ends of the range (det overflows, the adjugate does not),
// fixed and run-time n and n > 32 (LAPACK); the same bits on every ISA and thread count;
// bad arguments refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "all_ops.hpp"

namespace {

using namespace ref;

template <class T> tinyla_status det_adjugate(int64_t b, int64_t n, const T* a, T* d, T* adj, bool cofactors) {
  if constexpr (std::is_same_v<T, float>)
    return (cofactors ? tinyla_det_cofactors_f32 : tinyla_det_adjugate_f32)(b, n, a, d, adj);
  else if constexpr (std::is_same_v<T, double>)
    return (cofactors ? tinyla_det_cofactors_f64 : tinyla_det_adjugate_f64)(b, n, a, d, adj);
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return (cofactors ? tinyla_det_cofactors_c64 : tinyla_det_adjugate_c64)(b, n, a, d, adj);
  else return (cofactors ? tinyla_det_cofactors_c128 : tinyla_det_adjugate_c128)(b, n, a, d, adj);
}

// Matrices of every kind the adjugate distinguishes, cycling through the batch.
template <class T> std::vector<T> make_matrices(int64_t batch, int n, std::uint64_t seed) {
  using R = real_t<T>;
  auto a = make_batch<T>(kind::random, batch, n, seed);
  std::mt19937_64 g(seed + 1);
  const auto pick = [&] { return n > 0 ? int(g() % unsigned(n)) : 0; };
  for (int64_t b = 0; b < batch && n > 0; ++b) {
    T* m = a.data() + b * n * n;
    const int kind = int(b % 8);
    if (kind >= 1 && kind <= 5)  // small integers: exact zero pivots
      for (int i = 0; i < n * n; ++i) m[i] = rounded_to_halves(m[i]) * R(2);
    const int p = pick(), q = (p + 1) % n, r = (p + 2) % n;
    switch (kind) {
      case 1:  // a row dependent on two others: rank n - 1
        if (n >= 3)
          for (int j = 0; j < n; ++j) m[r * n + j] = m[p * n + j] + R(2) * m[q * n + j];
        break;
      case 2:  // a column dependent on another
        if (n >= 2)
          for (int i = 0; i < n; ++i) m[i * n + q] = R(-3) * m[i * n + p];
        break;
      case 3:  // a zero row
        for (int j = 0; j < n; ++j) m[p * n + j] = T(0);
        break;
      case 4:  // two dependent rows: rank n - 2, adj = 0
        if (n >= 3)
          for (int j = 0; j < n; ++j) m[q * n + j] = m[p * n + j], m[r * n + j] = R(-1) * m[p * n + j];
        break;
      case 5:  // a zero column and a dependent row: rank n - 2
        if (n >= 3) {
          for (int i = 0; i < n; ++i) m[i * n + p] = T(0);
          for (int j = 0; j < n; ++j) m[r * n + j] = m[q * n + j];
        }
        break;
      case 6:  // n <= 3: det overflows where the cofactors do not
        if (n <= 3)
          for (int i = 0; i < n * n; ++i) m[i] *= std::pow(big_scale<T>(), R(0.45));
        break;
      default: break;
    }
  }
  return a;
}

template <class T> struct adjugate_results {
  std::vector<T> det, adj;
};

template <class T> adjugate_results<T> run(const std::vector<T>& a, int64_t batch, int n, bool cofactors = false) {
  adjugate_results<T> r{std::vector<T>(size_t(batch)), std::vector<T>(a.size())};
  EXPECT_EQ(det_adjugate<T>(batch, n, a.data(), r.det.data(), r.adj.data(), cofactors), TINYLA_OK);
  return r;
}

// Entry (i, j) of adj(A), (-1)^(i+j) det(A without row j and column i), in long double.
template <class T> wide_t<T> cofactor_of(const T* m, int n, int i, int j) {
  using W = wide_t<T>;
  if (n == 1) return W(1);
  std::vector<T> minor;
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c)
      if (r != j && c != i) minor.push_back(m[r * n + c]);
  const auto lu = wide_lu(minor.data(), n - 1, false);
  const W d = lu.sign == W(0) ? W(0) : lu.sign * std::exp(lu.logabs);
  return (i + j) % 2 ? -d : d;
}

template <class T> class Adjugate : public RestoresCpuSettings {};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(Adjugate, Types);

TYPED_TEST(Adjugate, MatchesTheCofactorsInLongDouble) {
  using T = TypeParam;
  using W = wide_t<T>;
  // n = 33: past the kernels, the LAPACK path (n = 40 there too cost 14 of 24 CPU-s: the
  // reference is O(n^5)).
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 32, 33}) {
    if (n > test_max_n()) break;
    const int64_t batch = n <= 16 ? 40 : 8;
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const auto a = make_matrices<T>(batch, n, 31 * n);
    const auto r = run(a, batch, n), cof = run(a, batch, n, true);
    std::vector<T> d(batch);
    ASSERT_EQ(det(batch, n, a.data(), d.data()), TINYLA_OK);
    EXPECT_EQ(std::memcmp(r.det.data(), d.data(), sizeof(T) * batch), 0) << "det: tinyla_det's bits";
    for (int64_t b = 0; b < batch; ++b) {
      const T* m = a.data() + b * n * n;
      // The cofactors' error scale: the product of the n - 1 largest row norms (Hadamard's
      // bound on every minor), also where the cofactors themselves are 0.
      std::vector<long double> norms(n);
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) norms[i] += std::norm(W(m[i * n + j]));
      std::sort(norms.begin(), norms.end());
      long double scale = 1;
      for (int i = 1; i < n; ++i) scale *= std::sqrt(norms[i]);
      const long double tol = 16.0L * n * n * eps<T>() * scale;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const W expect = cofactor_of(m, n, i, j);
          if (std::abs(expect) > std::numeric_limits<real_t<T>>::max() / 2) continue;  // not representable
          ASSERT_LE(std::abs(W(r.adj[b * n * n + i * n + j]) - expect), tol)
              << "b=" << b << " kind " << b % 8 << " (" << i << ", " << j << "): " << r.adj[b * n * n + i * n + j]
              << " vs " << double(std::real(expect));
          ASSERT_EQ(std::memcmp(&cof.adj[b * n * n + j * n + i], &r.adj[b * n * n + i * n + j], sizeof(T)), 0)
              << "det_cofactors: the transpose's bits";
        }
    }
    if (n == 3) {  // kind 6: det overflows, the adjugate is finite
      EXPECT_TRUE(std::isinf(std::abs(r.det[6])));
      for (int e = 0; e < n * n; ++e) EXPECT_TRUE(std::isfinite(std::abs(r.adj[6 * n * n + e])));
    }
  }
}

template <class T> std::vector<unsigned char> bytes_of(const adjugate_results<T>& r) {
  return bytes_with_one_nan(r.det, r.adj);
}

// Each lane its own: singular and nonsingular matrices side by side in a lane group, a NaN
// entry, on every ISA and thread count, give the scalar lanes' bits, and a matrix alone its
// bits in the batch.
TYPED_TEST(Adjugate, SameBitsEverywhere) {
  using T = TypeParam;
  int compared = 0;
  for (int n : {0, 1, 2, 3, 4, 7, 8, 11, 33}) {
    const int64_t batch = n <= 8 ? 1601 : 130;  // more than one thread's chunk
    auto a = make_matrices<T>(batch, n, 7 * n + 2);
    if (n > 0) a[9 * n * n + n * n - 1] = T(std::numeric_limits<real_t<T>>::quiet_NaN());
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    ASSERT_TRUE(tinyla::cpu::select_backend("scalar"));
    tinyla_set_num_threads(1);
    const auto expect = bytes_of(run(a, batch, n));
    for (const char* isa : {"vec128", "avx2", "avx512"}) {
      if (!tinyla::cpu::select_backend(isa)) continue;
      for (int threads : {1, 2, 7}) {
        tinyla_set_num_threads(threads);
        EXPECT_TRUE(bytes_of(run(a, batch, n)) == expect) << isa << ", " << threads << " threads";
        ++compared;
      }
    }
    const auto all = run(a, batch, n);
    if (n >= 2) EXPECT_TRUE(isnan_any(all.adj[9 * n * n]));  // (n = 1: adj = [1] whatever A holds)
    for (int64_t b = 0; b < batch && n > 0; b += 37) {       // (n = 0: no data to compare; memcmp takes no null)
      const std::vector<T> one(a.begin() + b * n * n, a.begin() + (b + 1) * n * n);
      const auto alone = run(one, 1, n);
      EXPECT_EQ(std::memcmp(alone.adj.data(), all.adj.data() + b * n * n, sizeof(T) * n * n), 0) << "b=" << b;
    }
  }
  EXPECT_GT(compared, 0) << "no SIMD backend ran";
}

// In place (adj == a), as inv allows: the out-of-place bits, det too, both layouts.
TYPED_TEST(Adjugate, InPlaceEqualsOutOfPlace) {
  using T = TypeParam;
  for (int n : {1, 2, 3, 5, 8, 9, 16, 33}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = 21;
    const auto a = make_matrices<T>(batch, n, 5 * n + 1);
    for (bool cofactors : {false, true}) {
      const auto expect = run(a, batch, n, cofactors);
      std::vector<T> in_place = a, d(batch);
      ASSERT_EQ(det_adjugate<T>(batch, n, in_place.data(), d.data(), in_place.data(), cofactors), TINYLA_OK);
      EXPECT_TRUE(bytes_of(adjugate_results<T>{d, in_place}) == bytes_of(expect)) << "cofactors " << cofactors;
    }
  }
}

TYPED_TEST(Adjugate, EdgeSizesAndArguments) {
  using T = TypeParam;
  const T junk = T(-7);
  std::vector<T> d(2, junk), adj(8, junk);
  // n = 0: det 1, nothing else written
  EXPECT_EQ(det_adjugate<T>(2, 0, nullptr, d.data(), nullptr, false), TINYLA_OK);
  EXPECT_EQ(d[0], T(1));
  EXPECT_EQ(d[1], T(1));
  // det is optional; n = 1: adj = [1] whatever A is (0 too)
  const std::vector<T> a1{T(0), T(5)};
  EXPECT_EQ(det_adjugate<T>(2, 1, a1.data(), nullptr, adj.data(), false), TINYLA_OK);
  EXPECT_EQ(adj[0], T(1));
  EXPECT_EQ(adj[1], T(1));
  // n = 2: the entries, moved and negated; the singular [[1, 2], [2, 4]] too
  const std::vector<T> a2{T(1), T(2), T(2), T(4)};
  EXPECT_EQ(det_adjugate<T>(1, 2, a2.data(), d.data(), adj.data(), false), TINYLA_OK);
  EXPECT_EQ(d[0], T(0));
  EXPECT_TRUE(adj[0] == T(4) && adj[1] == T(-2) && adj[2] == T(-2) && adj[3] == T(1));
  // empty batch; a missing adj or a negative size refused, nothing written
  EXPECT_EQ(det_adjugate<T>(0, 3, nullptr, nullptr, nullptr, false), TINYLA_OK);
  adj.assign(8, junk);
  EXPECT_EQ(det_adjugate<T>(1, 2, a2.data(), d.data(), nullptr, true), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(det_adjugate<T>(-1, 2, a2.data(), d.data(), adj.data(), true), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(det_adjugate<T>(1, -2, a2.data(), d.data(), adj.data(), false), TINYLA_INVALID_ARGUMENT);
  for (T v : adj) EXPECT_EQ(v, junk);
}

}  // namespace
