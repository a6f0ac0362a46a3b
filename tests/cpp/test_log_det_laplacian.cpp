// log_det_laplacian against its definition evaluated in long double, for every
// type, fixed and run-time n (and n > 32); tangents with zero rows (the skipped
// ones) give the bits of dense ones, on every ISA, thread count and lane
// group; bad arguments are refused, edge sizes give zeros.
#include <gtest/gtest.h>

#include <cstring>

#include "all_ops.hpp"

namespace {

using namespace ref;

template <class T>
tinyla_status log_det_laplacian(int64_t b, int64_t n, int64_t k, const T* g, const T* h, const T* d, T* grad, T* lap) {
  if constexpr (std::is_same_v<T, float>) return tinyla_log_det_laplacian_f32(b, n, k, g, h, d, grad, lap);
  else if constexpr (std::is_same_v<T, double>) return tinyla_log_det_laplacian_f64(b, n, k, g, h, d, grad, lap);
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return tinyla_log_det_laplacian_c64(b, n, k, g, h, d, grad, lap);
  else return tinyla_log_det_laplacian_c128(b, n, k, g, h, d, grad, lap);
}

template <class T> struct operands {
  int64_t batch;
  int n, k;
  std::vector<T> g, h, d;  // A^-T, the Laplacian of A, the tangents (batch, k, n, n)
};

// Random operands; tangent rows zeroed in patterns that differ from matrix to matrix (one
// non-zero row, a few, none, all), so that lane groups mix skipped and computed rows.
template <class T> operands<T> make_operands(int64_t batch, int n, int k, std::uint64_t seed) {
  operands<T> o{batch,
                n,
                k,
                make_batch<T>(kind::random, batch, n, seed),
                make_batch<T>(kind::random, batch, n, seed + 1),
                make_batch<T>(kind::random, batch * k, n, seed + 2)};
  std::mt19937_64 rng(seed + 3);
  for (int64_t m = 0; m < batch * k; ++m) {
    T* t = o.d.data() + m * n * n;
    const int pattern = int(rng() % 4), keep = n ? int(rng() % n) : 0;
    for (int i = 0; i < n; ++i) {
      const bool zero = pattern == 0 ? i != keep : pattern == 1 ? (i + m) % 3 == 0 : pattern == 2;
      if (zero)
        for (int j = 0; j < n; ++j) t[i * n + j] = T(0);
    }
  }
  return o;
}

template <class T> struct results {
  std::vector<T> grad, lap;
};

template <class T> results<T> run(const operands<T>& o) {
  results<T> r{std::vector<T>(size_t(o.batch) * o.k), std::vector<T>(size_t(o.batch))};
  EXPECT_EQ(log_det_laplacian<T>(o.batch, o.n, o.k, o.g.data(), o.h.data(), o.d.data(), r.grad.data(), r.lap.data()),
            TINYLA_OK);
  return r;
}

// The definition in long double, with the sum of the terms' magnitudes for an error bound.
template <class T> void check_against_reference(const operands<T>& o, const results<T>& r) {
  using W = wide_t<T>;
  using R = real_t<T>;
  const int n = o.n;
  for (int64_t b = 0; b < o.batch; ++b) {
    const T* g = o.g.data() + b * n * n;
    W lap = 0;
    long double lap_scale = 0;
    for (int e = 0; e < n * n; ++e)
      lap += W(g[e]) * W(o.h[b * n * n + e]), lap_scale += std::abs(W(g[e]) * W(o.h[b * n * n + e]));
    for (int c = 0; c < o.k; ++c) {
      const T* d = o.d.data() + (b * o.k + c) * n * n;
      std::vector<W> m(size_t(n) * n), abs_m(size_t(n) * n);  // G^T D and |G|^T |D|
      for (int i = 0; i < n; ++i)
        for (int k = 0; k < n; ++k)
          for (int j = 0; j < n; ++j) {
            m[i * n + k] += W(g[j * n + i]) * W(d[j * n + k]);
            abs_m[i * n + k] += std::abs(W(g[j * n + i])) * std::abs(W(d[j * n + k]));
          }
      W trace = 0, square = 0;
      long double trace_scale = 0, square_scale = 0;
      for (int i = 0; i < n; ++i) {
        trace += m[i * n + i], trace_scale += std::abs(abs_m[i * n + i]);
        for (int k = 0; k < n; ++k)
          square += m[i * n + k] * m[k * n + i], square_scale += std::abs(abs_m[i * n + k] * abs_m[k * n + i]);
      }
      lap -= square, lap_scale += square_scale;
      const long double tol = 8.0L * (n + 2) * eps<T>() * trace_scale;
      EXPECT_LE(std::abs(W(r.grad[b * o.k + c]) - trace), tol) << "b=" << b << " c=" << c;
    }
    const long double tol = 8.0L * (2 * n + 4) * eps<T>() * lap_scale + std::numeric_limits<R>::min();
    EXPECT_LE(std::abs(W(r.lap[b]) - lap), tol) << "b=" << b;
  }
}

template <class T> class LogDetLaplacian : public RestoresCpuSettings {};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(LogDetLaplacian, Types);

TYPED_TEST(LogDetLaplacian, MatchesTheDefinitionInLongDouble) {
  using T = TypeParam;
  for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 31, 32, 33, 40}) {
    for (int k : {0, 1, n <= 16 ? 3 * n : 5}) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " k=" + std::to_string(k));
      const auto o = make_operands<T>(13, n, k, 100 * n + k);
      check_against_reference(o, run(o));
    }
  }
}

template <class T> std::vector<unsigned char> bytes_of(const results<T>& r) {
  return bytes_with_one_nan(r.grad, r.lap);
}

// Every ISA, thread count and lane group gives the scalar lanes' bits, which skip zero rows
// matrix by matrix: skipping is exact. An infinite entry of A^-T in a row whose tangent row is
// zero in that matrix but not in its neighbours must not be skipped (inf * 0 is NaN).
TYPED_TEST(LogDetLaplacian, ZeroRowsGiveDenseBitsEverywhere) {
  using T = TypeParam;
  using R = real_t<T>;
  int compared = 0;
  for (int n : {0, 1, 3, 4, 8, 11, 33}) {
    const int k = n <= 11 ? 2 * n + 1 : n / 2 + 1;
    auto o = make_operands<T>(n <= 8 ? 1601 : 130, n, k, 7 * n + 1);  // more than one thread's chunk
    if (n > 0) {
      o.g[5 * n * n + n - 1] = T(std::numeric_limits<R>::infinity());  // row 0 of matrix 5
      for (int c = 0; c < k; ++c)
        for (int j = 0; j < n; ++j) o.d[(5 * k + c) * n * n + j] = T(0);
      o.g[9 * n * n + n * n - 1] = T(std::numeric_limits<R>::quiet_NaN());
    }
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    ASSERT_TRUE(tinyla::cpu::select_backend("scalar"));
    tinyla_set_num_threads(1);
    const auto expect = bytes_of(run(o));
    for (const char* isa : {"vec128", "avx2", "avx512"}) {
      if (!tinyla::cpu::select_backend(isa)) continue;
      for (int threads : {1, 2, 7}) {
        tinyla_set_num_threads(threads);
        EXPECT_TRUE(bytes_of(run(o)) == expect) << isa << ", " << threads << " threads";
        ++compared;
      }
    }
    if (n > 0) {  // the NaN and inf entries reach their matrices' Laplacians
      const auto r = run(o);
      EXPECT_TRUE(isnan_any(r.lap[5]));
      EXPECT_TRUE(isnan_any(r.lap[9]));
      EXPECT_FALSE(isnan_any(r.lap[4]));
    }
    const auto all = run(o);
    for (int64_t b = 0; b < o.batch; b += 41) {  // one matrix alone: the same bits
      operands<T> one{1, n, k, {}, {}, {}};
      one.g.assign(o.g.begin() + b * n * n, o.g.begin() + (b + 1) * n * n);
      one.h.assign(o.h.begin() + b * n * n, o.h.begin() + (b + 1) * n * n);
      one.d.assign(o.d.begin() + b * k * n * n, o.d.begin() + (b + 1) * k * n * n);
      const auto alone = run(one);
      EXPECT_EQ(std::memcmp(alone.grad.data(), all.grad.data() + b * k, sizeof(T) * k), 0) << "b=" << b;
      EXPECT_EQ(std::memcmp(alone.lap.data(), all.lap.data() + b, sizeof(T)), 0) << "b=" << b;
    }
  }
  EXPECT_GT(compared, 0) << "no SIMD backend ran";
}

TYPED_TEST(LogDetLaplacian, EdgeSizes) {
  using T = TypeParam;
  const T junk = T(-7);
  std::vector<T> grad(6, junk), lap(2, junk);
  // n = 0: the traces of 0 x 0 matrices are 0; no operand is read.
  EXPECT_EQ(log_det_laplacian<T>(2, 0, 3, nullptr, nullptr, nullptr, grad.data(), lap.data()), TINYLA_OK);
  for (T v : grad) EXPECT_EQ(v, T(0));
  for (T v : lap) EXPECT_EQ(v, T(0));
  // no tangents: the Laplacian is tr(A^-1 H)
  const std::vector<T> g{T(2), T(0), T(0), T(4)}, h{T(3), T(5), T(7), T(11)};
  EXPECT_EQ(log_det_laplacian<T>(1, 2, 0, g.data(), h.data(), nullptr, nullptr, lap.data()), TINYLA_OK);
  EXPECT_EQ(lap[0], T(2 * 3 + 4 * 11));
  // an empty batch writes nothing
  lap.assign(2, junk);
  EXPECT_EQ(log_det_laplacian<T>(0, 2, 3, nullptr, nullptr, nullptr, nullptr, nullptr), TINYLA_OK);
}

TEST(LogDetLaplacianArguments, BadArgumentsAreRefusedAndNothingIsWritten) {
  std::vector<double> g(8, 1.0), d(24, 1.0), grad(6, -7.0), lap(2, -7.0);
  auto untouched = [&] {
    for (double v : grad)
      if (v != -7.0) return false;
    for (double v : lap)
      if (v != -7.0) return false;
    return true;
  };
  const double* G = g.data();
  EXPECT_EQ(tinyla_log_det_laplacian_f64(2, 2, -1, G, G, d.data(), grad.data(), lap.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_log_det_laplacian_f64(-1, 2, 3, G, G, d.data(), grad.data(), lap.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_log_det_laplacian_f64(2, 2, 3, nullptr, G, d.data(), grad.data(), lap.data()),
            TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_log_det_laplacian_f64(2, 2, 3, G, nullptr, d.data(), grad.data(), lap.data()),
            TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_log_det_laplacian_f64(2, 2, 3, G, G, nullptr, grad.data(), lap.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_log_det_laplacian_f64(2, 2, 3, G, G, d.data(), nullptr, lap.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_log_det_laplacian_f64(2, 2, 3, G, G, d.data(), grad.data(), nullptr), TINYLA_INVALID_ARGUMENT);
  // batch * tangents * n * n elements past int64
  EXPECT_EQ(tinyla_log_det_laplacian_f64(2, 2, INT64_MAX / 4, G, G, d.data(), grad.data(), lap.data()),
            TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_log_det_laplacian_f64(INT64_MAX / 2, 1, 3, G, G, d.data(), grad.data(), lap.data()),
            TINYLA_INVALID_ARGUMENT);
  EXPECT_TRUE(untouched());
}

}  // namespace
