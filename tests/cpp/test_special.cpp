// Documented values for singular matrices, NaN/Inf entries, n = 0, empty
// batches and in-place calls, for every dtype and across the fast path, the
// closed forms (n = 1, 2) and the LAPACK path (n > 32).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "reference.hpp"

namespace {

using namespace ref;

template <class T> class Special : public ::testing::Test {};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(Special, Types);

const int sizes[] = {1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 40};

template <class T> bool all_nan(const T* x, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!isnan_any(x[i])) return false;
  return true;
}

// Exactly singular matrices that stay exactly singular under any rounding: a
// zero column, a zero row, a zero matrix. info must be LAPACK getrf's.
// (Equal rows are not among them: getf2 scales by a reciprocal, so l = a*(1/a)
// need not be 1 and LAPACK itself often finds no zero pivot.)
TYPED_TEST(Special, SingularMatricesGiveDocumentedValuesAndLapackInfo) {
  using T = TypeParam;
  using R = real_t<T>;
  for (int n : sizes) {
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " variant=" + std::to_string(variant));
      const int64_t batch = 11;
      auto a = make_batch<T>(kind::random, batch, n, 17 * n + variant);
      for (int64_t b = 0; b < batch; ++b) {
        T* m = a.data() + b * n * n;
        const int c = int(b % n), r0 = int((b + 1) % n);
        if (variant == 0)
          for (int i = 0; i < n; ++i) m[i * n + c] = T(0);
        if (variant == 1)
          for (int j = 0; j < n; ++j) m[r0 * n + j] = T(0);
        if (variant == 2)
          for (int i = 0; i < n * n; ++i) m[i] = T(0);
      }
      std::vector<T> sign(batch), d(batch), x(a.size()), sol(size_t(batch) * n * 2), rhs(sol.size(), T(1));
      std::vector<R> logabs(batch);
      std::vector<int32_t> info(batch), info_s(batch);
      ASSERT_EQ(slogdet(batch, n, a.data(), sign.data(), logabs.data()), TINYLA_OK);
      ASSERT_EQ(det(batch, n, a.data(), d.data()), TINYLA_OK);
      ASSERT_EQ(inv(batch, n, a.data(), x.data(), info.data()), TINYLA_OK);
      ASSERT_EQ(solve(batch, n, 2, a.data(), rhs.data(), sol.data(), info_s.data()), TINYLA_OK);
      for (int64_t b = 0; b < batch; ++b) {
        const auto l = lapack_lu(a.data() + b * n * n, n, false);
        ASSERT_GT(l.info, 0) << "the construction must be exactly singular for LAPACK too, matrix " << b;
        EXPECT_EQ(sign[b], T(0)) << b;
        EXPECT_EQ(logabs[b], -std::numeric_limits<R>::infinity()) << b;
        EXPECT_EQ(d[b], T(0)) << b;
        EXPECT_EQ(info[b], l.info) << b;
        EXPECT_EQ(info_s[b], l.info) << b;
        EXPECT_TRUE(all_nan(x.data() + b * n * n, size_t(n) * n)) << b;
        EXPECT_TRUE(all_nan(sol.data() + b * n * 2, size_t(n) * 2)) << b;
      }
    }
  }
}

// One NaN anywhere: slogdet and det are NaN, the inverse has NaNs; the
// neighbours in the same lane group are unaffected.
TYPED_TEST(Special, NanEntriesPoisonOnlyTheirMatrix) {
  using T = TypeParam;
  using R = real_t<T>;
  const R nan = std::numeric_limits<R>::quiet_NaN();
  for (int n : sizes) {
    if (n > test_max_n()) break;  // O(n^5): the sanitizer run's bound, as its other sweeps
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = 2 * n * n + 3;
    auto a = make_batch<T>(kind::random, batch, n, 5 * n);
    auto clean = a;
    for (int64_t b = 0; b < batch; b += 2) a[b * n * n + (b / 2) % (n * n)] = T(nan);  // every other matrix
    std::vector<T> sign(batch), d(batch), x(a.size()), sign_c(batch), x_c(a.size());
    std::vector<R> logabs(batch), logabs_c(batch);
    ASSERT_EQ(slogdet(batch, n, a.data(), sign.data(), logabs.data()), TINYLA_OK);
    ASSERT_EQ(det(batch, n, a.data(), d.data()), TINYLA_OK);
    ASSERT_EQ(inv(batch, n, a.data(), x.data(), nullptr), TINYLA_OK);
    ASSERT_EQ(slogdet(batch, n, clean.data(), sign_c.data(), logabs_c.data()), TINYLA_OK);
    ASSERT_EQ(inv(batch, n, clean.data(), x_c.data(), nullptr), TINYLA_OK);
    for (int64_t b = 0; b < batch; ++b) {
      if (b % 2 == 0) {
        EXPECT_TRUE(isnan_any(sign[b]) && std::isnan(logabs[b]) && isnan_any(d[b])) << b;
        bool any = false;
        for (int i = 0; i < n * n; ++i) any |= isnan_any(x[b * n * n + i]);
        EXPECT_TRUE(any) << b;
      } else {
        EXPECT_EQ(std::memcmp(&sign[b], &sign_c[b], sizeof(T)), 0) << b;
        EXPECT_EQ(std::memcmp(&logabs[b], &logabs_c[b], sizeof(R)), 0) << b;
        EXPECT_EQ(std::memcmp(&x[b * n * n], &x_c[b * n * n], sizeof(T) * n * n), 0) << b;
      }
    }
  }
  // A complex entry with a NaN part is a NaN also beside an infinite part, at every n (the
  // elimination cannot tell such an entry, carried forward, from inf - inf). The fuzz harness
  // found (NaN, inf) and (inf, NaN) giving different answers, then a NaN entry elsewhere in the
  // matrix meeting an inf one in a pivot: logabsdet +inf where numpy's is NaN (that matrix below).
  if constexpr (is_complex<T>) {
    const R inf = std::numeric_limits<R>::infinity();
    for (int n : sizes) {
      for (const T entry : {T(inf, nan), T(-inf, nan), T(nan, inf), T(nan, -inf), T(nan, 1), T(1, nan)}) {
        std::vector<T> a(size_t(n) * n, T(0));
        for (int i = 0; i < n; ++i) a[i * n + i] = i == n / 2 ? entry : T(2);
        T sign;
        R logabs;
        ASSERT_EQ(slogdet(1, n, a.data(), &sign, &logabs), TINYLA_OK);
        EXPECT_TRUE(isnan_any(sign) && std::isnan(logabs)) << n << " " << entry << ": " << sign << " " << logabs;
      }
    }
    const auto h = [](const char* hex) { return R(std::strtod(hex, nullptr)); };
    const T found[9] = {T(h("-0x1.3c3c3c3p+61"), h("-0x1.09df122340eaep-25")),
                        T(h("-0x1.c7db5c0f1413ap-25"), h("-0x1.6fe127a2b018cp-25")),
                        T(h("0x1.0fea77d390274p-25"), h("0x1.aef02b012ad6cp-25")),
                        T(h("-0x1.000000000c3c3p-943"), h("-0x1.4f74eece3923p-25")),
                        T(h("-0x1.1882c48dbd7fp-25"), h("0x1.77f536cffd0f8p-27")),
                        T(nan, h("-0x1.d1f2b4d4caf23p-25")),
                        T(h("0x1.9a266a3e8d7dp-26"), h("0x0.000000000ffffp-1022")),
                        T(h("0x1.1a8af0346b9eep-25"), h("0x1.9ad6743bc15d2p-25")),
                        T(h("0x1.91104bcf7e7f8p-26"), inf)};
    T sign;
    R logabs;
    ASSERT_EQ(slogdet(1, 3, found, &sign, &logabs), TINYLA_OK);
    EXPECT_TRUE(isnan_any(sign) && std::isnan(logabs)) << sign << " " << logabs;
  }
}

// Inf entries propagate through the LU arithmetic as in LAPACK: logabsdet is
// +inf or NaN, never a finite number or -inf. A real sign is NaN exactly when
// logabsdet is; a complex phase may also be NaN next to logabsdet = +inf (the
// phase of an infinite pivot is undefined).
TYPED_TEST(Special, InfEntriesNeverGiveFiniteLogabsdet) {
  using T = TypeParam;
  using R = real_t<T>;
  const R inf = std::numeric_limits<R>::infinity();
  for (int n : sizes) {
    if (n > test_max_n()) break;  // O(n^5)
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = n * n;
    auto a = make_batch<T>(kind::random, batch, n, 9 * n);
    for (int64_t b = 0; b < batch; ++b) a[b * n * n + b] = T((b % 2 ? -1 : 1) * inf);
    std::vector<T> sign(batch);
    std::vector<R> logabs(batch);
    ASSERT_EQ(slogdet(batch, n, a.data(), sign.data(), logabs.data()), TINYLA_OK);
    for (int64_t b = 0; b < batch; ++b) {
      EXPECT_FALSE(std::isfinite(logabs[b])) << b;
      EXPECT_NE(logabs[b], -inf) << b;
      if constexpr (is_complex<T>) {
        if (std::isnan(logabs[b])) EXPECT_TRUE(isnan_any(sign[b])) << b;
      } else {
        EXPECT_EQ(isnan_any(sign[b]), std::isnan(logabs[b])) << b;
      }
    }
  }
  // A diagonal matrix with one infinite entry: det = +-inf exactly. Except for complex n = 2:
  // ad - bc multiplies -inf by d's zero imaginary part, a NaN part, so NaN (as any NaN part).
  for (int n : sizes) {
    std::vector<T> a(size_t(n) * n, T(0));
    for (int i = 0; i < n; ++i) a[i * n + i] = T(i == 0 ? -inf : 2);
    T sign;
    R logabs;
    ASSERT_EQ(slogdet(1, n, a.data(), &sign, &logabs), TINYLA_OK);
    if (is_complex<T> && n == 2) {
      EXPECT_TRUE(isnan_any(sign) && std::isnan(logabs)) << sign << " " << logabs;
    } else {
      EXPECT_EQ(logabs, inf) << n;
      EXPECT_EQ(sign, T(-1)) << n;
    }
  }
}

// A subnormal pivot (row and column p hold only s, complex s = (t, t/2)):
// every op agrees with the long-double reference. t = min/2 has a finite
// reciprocal; t = denorm_min * 2^(digits/2) has not (then row p of A^-1 and
// x_p are inf or NaN, and what lies outside their reach is checked: A^-1's
// other rows, x below p). Before the fix the complex phase was NaN (1/max|s|
// overflowed in the phase) and the LAPACK path (n > 32) returned NaN for real
// types too (OpenBLAS scales by 1/s: 0 * inf).
TYPED_TEST(Special, SubnormalPivotsGiveTheReferenceValues) {
  using T = TypeParam;
  using R = real_t<T>;
  using lim = std::numeric_limits<R>;
  for (const R t : {lim::min() / 2, std::ldexp(lim::denorm_min(), lim::digits / 2)}) {
    T s;
    if constexpr (is_complex<T>) s = T(t, t / 2);
    else s = T(t);
    const bool finite_inverse = std::isfinite(R(1) / t);
    for (int n : sizes) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " t=" + std::to_string(std::log2(t)));
      auto a = make_batch<T>(kind::diag_dominant, 1, n, 31 * n);
      const int p = n / 2;
      for (int j = 0; j < n; ++j) a[p * n + j] = a[j * n + p] = T(0);
      a[p * n + p] = s;
      const auto w = wide_lu(a.data(), n, true);
      T sign, d, sign_f;
      R logabs, logabs_f;
      std::vector<T> x(size_t(n) * n), xf(x.size()), sol(n), ones(n, T(1));
      std::vector<int32_t> info(1, -1), info_s(1, -1);
      ASSERT_EQ(slogdet(1, n, a.data(), &sign, &logabs), TINYLA_OK);
      ASSERT_EQ(det(1, n, a.data(), &d), TINYLA_OK);
      ASSERT_EQ(inv(1, n, a.data(), x.data(), info.data()), TINYLA_OK);
      ASSERT_EQ(slogdet_inv(1, n, a.data(), &sign_f, &logabs_f, xf.data()), TINYLA_OK);
      ASSERT_EQ(solve(1, n, 1, a.data(), ones.data(), sol.data(), info_s.data()), TINYLA_OK);
      const R tol = 64 * n * eps<T>();
      EXPECT_LE(std::abs(wide_t<T>(sign) - w.sign), tol) << "sign " << sign;
      EXPECT_LE(std::abs(logabs - w.logabs), tol * (1 + std::abs(w.logabs))) << logabs;
      EXPECT_FALSE(isnan_any(d));
      EXPECT_EQ(info[0], 0);
      EXPECT_EQ(info_s[0], 0);
      EXPECT_EQ(std::memcmp(&sign, &sign_f, sizeof(T)), 0);
      EXPECT_EQ(std::memcmp(&logabs, &logabs_f, sizeof(R)), 0);
      auto finite = [](T v) {
        if constexpr (is_complex<T>) return std::isfinite(v.real()) && std::isfinite(v.imag());
        else return std::isfinite(v);
      };
      auto reference_row = [&](int i) {
        return std::vector<wide_t<T>>(w.inv.begin() + ptrdiff_t(i) * n, w.inv.begin() + ptrdiff_t(i + 1) * n);
      };
      std::vector<wide_t<T>> want(n, wide_t<T>(0));  // A^-1 times the ones
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) want[i] += w.inv[size_t(i) * n + j];
      if (finite_inverse) {
        EXPECT_LE(rel_err_F(x, w.inv, 0, x.size()), tol) << "inv";
        EXPECT_LE(rel_err_F(xf, w.inv, 0, xf.size()), tol) << "slogdet_inv";
        EXPECT_LE(rel_err_F(sol, want, 0, size_t(n)), tol) << "solve";
        continue;
      }
      // Row p of A^-1 holds 1/s, beyond the range: inf, or NaN (inf * 0) where the
      // substitutions carry it. No other row reaches that pivot: each keeps the
      // reference's accuracy (LAPACK's getri and numpy's inv make the rows above it NaN).
      // The solution: x_p = inf, back substitution's 0 * inf above it (n >= 3), accurate below.
      for (const auto* out : {&x, &xf}) {
        const char* op = out == &x ? "inv" : "slogdet_inv";
        bool row_p_overflows = false;
        for (int j = 0; j < n; ++j) row_p_overflows |= !finite((*out)[size_t(p) * n + j]);
        EXPECT_TRUE(row_p_overflows) << op;
        for (int i = 0; i < n; ++i)
          if (i != p) EXPECT_LE(rel_err_F(*out, reference_row(i), size_t(i) * n, size_t(n)), tol) << op << " row " << i;
      }
      EXPECT_FALSE(finite(sol[p])) << "solve";
      const std::vector<wide_t<T>> want_below(want.begin() + p + 1, want.end());
      EXPECT_LE(rel_err_F(sol, want_below, size_t(p) + 1, want_below.size()), tol) << "solve below row p";
    }
  }
  // The smallest subnormal as a 1 x 1 matrix: exact sign, det and logabsdet.
  const T smallest = T(std::numeric_limits<R>::denorm_min());
  T sign, d;
  R logabs;
  ASSERT_EQ(slogdet(1, 1, &smallest, &sign, &logabs), TINYLA_OK);
  ASSERT_EQ(det(1, 1, &smallest, &d), TINYLA_OK);
  EXPECT_EQ(sign, T(1));
  EXPECT_EQ(d, smallest);
  EXPECT_NEAR(logabs, std::log(std::numeric_limits<R>::denorm_min()), 4 * eps<T>() * std::abs(logabs));
}

// A subnormal pivot that the elimination and the inverse apply to nonzero entries:
// A = (I + E) with column p times t = min / 2 (|E| <= 0.05 / n). Step p's pivot is about
// t (subnormal; 1/t finite), the entries below it subnormal, and row p of A^-1 near 1/t.
// Each row of the inverse (row p about 1/t times the others) and the solution against
// the long-double reference.
TYPED_TEST(Special, SubnormalPivotScalesNonzeroEntriesToTheReference) {
  using T = TypeParam;
  using R = real_t<T>;
  const R t = std::numeric_limits<R>::min() / 2;
  for (int n : sizes) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    auto a = make_batch<T>(kind::random, 1, n, 57 * n);
    const int p = n / 2;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        T& e = a[i * n + j];
        e = e * R(0.05 / n) + T(i == j ? 1 : 0);
        if (j == p) e *= t;
      }
    const auto w = wide_lu(a.data(), n, true);
    T sign;
    R logabs;
    std::vector<T> x(size_t(n) * n), sol(n), ones(n, T(1));
    std::vector<int32_t> info(1, -1), info_s(1, -1);
    ASSERT_EQ(slogdet(1, n, a.data(), &sign, &logabs), TINYLA_OK);
    ASSERT_EQ(inv(1, n, a.data(), x.data(), info.data()), TINYLA_OK);
    ASSERT_EQ(solve(1, n, 1, a.data(), ones.data(), sol.data(), info_s.data()), TINYLA_OK);
    const R tol = 64 * n * eps<T>();
    EXPECT_LE(std::abs(wide_t<T>(sign) - w.sign), tol) << "sign " << sign;
    EXPECT_LE(std::abs(logabs - w.logabs), tol * std::abs(w.logabs)) << logabs;
    EXPECT_EQ(info[0], 0);
    EXPECT_EQ(info_s[0], 0);
    std::vector<wide_t<T>> row(n), want(n, wide_t<T>(0));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) row[j] = w.inv[size_t(i) * n + j], want[i] += row[j];
      EXPECT_LE(rel_err_F(x, row, size_t(i) * n, size_t(n)), tol) << "inv row " << i;
    }
    EXPECT_LE(rel_err_F(sol, want, 0, size_t(n)), tol) << "solve";
  }
}

// A zero pivot (k = 2) followed by a pivot that overflowed to inf in the
// elimination (-big - big): singular, as LAPACK's info says, not 0 * inf = NaN.
TYPED_TEST(Special, ZeroPivotBeforeAnOverflowedPivotStaysSingular) {
  using T = TypeParam;
  using R = real_t<T>;
  const R big = std::numeric_limits<R>::max() / 4 * 3;
  for (int n : sizes) {
    if (n < 3) continue;
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    std::vector<T> a(size_t(n) * n, T(0));
    for (int i = 3; i < n; ++i) a[i * n + i] = T(1);
    const T top[9] = {T(1), T(1), T(big), T(1), T(1), T(-big), T(0), T(0), T(1)};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) a[i * n + j] = top[3 * i + j];
    T sign, d;
    R logabs;
    std::vector<T> x(a.size());
    int32_t info = -1;
    ASSERT_EQ(slogdet(1, n, a.data(), &sign, &logabs), TINYLA_OK);
    ASSERT_EQ(det(1, n, a.data(), &d), TINYLA_OK);
    ASSERT_EQ(inv(1, n, a.data(), x.data(), &info), TINYLA_OK);
    EXPECT_EQ(sign, T(0));
    EXPECT_EQ(logabs, -std::numeric_limits<R>::infinity());
    EXPECT_EQ(d, T(0));
    EXPECT_EQ(info, lapack_lu(a.data(), n, false).info);
    EXPECT_EQ(info, 2);
    EXPECT_TRUE(all_nan(x.data(), x.size()));
  }
}

// n = 0: sign 1, logabsdet 0, det 1 (numpy's convention); nothing else written.
TYPED_TEST(Special, ZeroSizeMatricesAndEmptyBatches) {
  using T = TypeParam;
  using R = real_t<T>;
  const T* none = nullptr;
  T* out_none = nullptr;
  R* real_none = nullptr;
  std::vector<T> sign(3, T(7)), d(3, T(7));
  std::vector<R> logabs(3, 7);
  std::vector<int32_t> info(3, 7);
  ASSERT_EQ(slogdet(3, 0, none, sign.data(), logabs.data()), TINYLA_OK);
  ASSERT_EQ(det(3, 0, none, d.data()), TINYLA_OK);
  ASSERT_EQ(inv(3, 0, none, out_none, info.data()), TINYLA_OK);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sign[i], T(1));
    EXPECT_EQ(logabs[i], R(0));
    EXPECT_EQ(d[i], T(1));
    EXPECT_EQ(info[i], 0);
  }
  ASSERT_EQ(solve(3, 0, 4, none, none, out_none, info.data()), TINYLA_OK);
  ASSERT_EQ(slogdet_inv(2, 0, none, sign.data(), logabs.data(), out_none), TINYLA_OK);
  // Empty batches need no pointers at all.
  for (int n : {0, 1, 5, 40}) {
    EXPECT_EQ(slogdet(0, n, none, out_none, real_none), TINYLA_OK);
    EXPECT_EQ(det(0, n, none, out_none), TINYLA_OK);
    EXPECT_EQ(inv(0, n, none, out_none, nullptr), TINYLA_OK);
    EXPECT_EQ(solve(0, n, 3, none, none, out_none, nullptr), TINYLA_OK);
    EXPECT_EQ(slogdet_inv(0, n, none, out_none, real_none, out_none), TINYLA_OK);
  }
  // nrhs = 0: nothing to solve, info still reported.
  const auto a = make_batch<T>(kind::random, 2, 3, 1);
  std::vector<int32_t> info2(2, 7);
  ASSERT_EQ(solve(2, 3, 0, a.data(), none, out_none, info2.data()), TINYLA_OK);
  EXPECT_EQ(info2[0], 0);
  EXPECT_EQ(info2[1], 0);
}

// In place: inv(a -> a) and solve(b -> b) give the out-of-place bits.
TYPED_TEST(Special, InPlaceEqualsOutOfPlace) {
  using T = TypeParam;
  for (int n : sizes) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = 21;
    const auto a = make_batch<T>(kind::random, batch, n, 3 * n);
    const auto b = make_batch<T>(kind::random, batch, n, 4 * n);  // nrhs = n
    std::vector<T> x(a.size()), y = a, s(b.size()), t = b;
    ASSERT_EQ(inv(batch, n, a.data(), x.data(), nullptr), TINYLA_OK);
    ASSERT_EQ(inv(batch, n, y.data(), y.data(), nullptr), TINYLA_OK);
    EXPECT_EQ(std::memcmp(x.data(), y.data(), sizeof(T) * x.size()), 0);
    ASSERT_EQ(solve(batch, n, n, a.data(), b.data(), s.data(), nullptr), TINYLA_OK);
    ASSERT_EQ(solve(batch, n, n, a.data(), t.data(), t.data(), nullptr), TINYLA_OK);
    EXPECT_EQ(std::memcmp(s.data(), t.data(), sizeof(T) * s.size()), 0);
  }
}

// n = 2 is a closed form: det == 0 exactly when ad == bc exactly, so equal
// or power-of-two-proportional rows are singular, with info 2 (info 1 when
// the first column is zero), as an exact LU would say.
TYPED_TEST(Special, TwoByTwoDetectsExactSingularity) {
  using T = TypeParam;
  using R = real_t<T>;
  auto a = make_batch<T>(kind::random, 20, 2, 77);
  for (int b = 0; b < 20; ++b) {
    T* m = a.data() + 4 * b;
    const R f = b % 2 ? R(1) : R(-0.25);
    m[2] = f * m[0], m[3] = f * m[1];
  }
  std::vector<T> sign(20), x(80);
  std::vector<R> logabs(20);
  std::vector<int32_t> info(20);
  ASSERT_EQ(slogdet(20, 2, a.data(), sign.data(), logabs.data()), TINYLA_OK);
  ASSERT_EQ(inv(20, 2, a.data(), x.data(), info.data()), TINYLA_OK);
  for (int b = 0; b < 20; ++b) {
    EXPECT_EQ(sign[b], T(0)) << b;
    EXPECT_EQ(logabs[b], -std::numeric_limits<R>::infinity()) << b;
    EXPECT_EQ(info[b], 2) << b;
    EXPECT_TRUE(all_nan(x.data() + 4 * b, 4)) << b;
  }
}

// The n = 2 closed form stays accurate under cancellation and extreme row
// scales, where an unscaled ad - bc would overflow or underflow.
TYPED_TEST(Special, TwoByTwoClosedFormUnderCancellationAndScaling) {
  using T = TypeParam;
  using R = real_t<T>;
  const R big = big_scale<T>();
  // det = (1+u)^2 - (1+2u) * 1 = u^2: everything but u^2 cancels.
  const R u = eps<T>();
  std::vector<T> a = {T(1 + u), T(1 + 2 * u), T(1), T(1 + u)};
  T sign;
  R logabs;
  ASSERT_EQ(slogdet(1, 2, a.data(), &sign, &logabs), TINYLA_OK);
  EXPECT_EQ(sign, T(1));
  EXPECT_NEAR(logabs, 2 * std::log(u), 64 * u);
  // Rows scaled by big and 1/big: det = (ad - bc) exactly scaled.
  std::vector<T> s = {T(3 * big), T(big), T(1 / big), T(2 / big)};  // det = 6 - 1 = 5
  ASSERT_EQ(slogdet(1, 2, s.data(), &sign, &logabs), TINYLA_OK);
  EXPECT_EQ(sign, T(1));
  EXPECT_NEAR(logabs, std::log(R(5)), 8 * u);
  T d;
  ASSERT_EQ(det(1, 2, s.data(), &d), TINYLA_OK);
  EXPECT_NEAR(std::real(d), R(5), 8 * u * 5);
}

// Rows and columns spanning more than the exponent range (t next to 1/t):
// row scaling alone flushed the small entries to zero, calling
// [[t, 1/t], [2t, 1/t]] (det = -1) singular. Each entry is now split into
// mantissa and exponent. Lanes in the safe range keep their bits when a
// neighbour in the same lane group takes the split path.
TYPED_TEST(Special, TwoByTwoWithEntriesSpanningTheExponentRange) {
  using T = TypeParam;
  using R = real_t<T>;
  const R t = 1 / (big_scale<T>() * 8);
  const std::vector<std::vector<T>> cases = {
      {T(t), T(1 / t), T(2 * t), T(1 / t)},  // det = -1
      {T(t), T(1 / t), T(2 * t), T(3 * t)},  // det = 3t^2 - 2 ~ -2
      {T(1 / t), T(1 / t), T(t), T(2 * t)},  // det = 1
      {T(t), T(1 / t), T(1 / t), T(t)},      // det = t^2 - 1/t^2
      {T(t), T(t * t), T(2 / t), T(1)},      // det = t - 2t = -t
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    SCOPED_TRACE(type_name<T>() + " case " + std::to_string(c));
    const T* a = cases[c].data();
    const auto w = wide_lu(a, 2, true);
    T sign, x[4], sol[2];
    const T ones[2] = {T(1), T(1)};
    R logabs;
    int32_t info = -1, info_s = -1;
    ASSERT_EQ(slogdet(1, 2, a, &sign, &logabs), TINYLA_OK);
    ASSERT_EQ(inv(1, 2, a, x, &info), TINYLA_OK);
    ASSERT_EQ(solve(1, 2, 1, a, ones, sol, &info_s), TINYLA_OK);
    EXPECT_EQ(info, 0);
    EXPECT_EQ(info_s, 0);
    EXPECT_EQ(sign, T(std::real(w.sign)));
    EXPECT_LE(std::abs(logabs - w.logabs), 8 * eps<T>() * (1 + std::abs(w.logabs))) << logabs;
    // Entrywise against the reference rounded to T (entries beyond T's range
    // are inf or 0 there too).
    auto expect_close = [](T got, wide_t<T> want, long double scale, int i) {
      const long double tol = 8 * eps<T>() * scale + 4 * std::numeric_limits<R>::denorm_min();
      if (std::isfinite(std::abs(T(want)))) EXPECT_LE(std::abs(wide_t<T>(got) - want), tol) << i;
      else EXPECT_EQ(got, T(want)) << i;
    };
    for (int i = 0; i < 4; ++i) expect_close(x[i], w.inv[i], std::abs(w.inv[i]), i);
    for (int i = 0; i < 2; ++i)
      expect_close(sol[i], w.inv[2 * i] + w.inv[2 * i + 1], std::abs(w.inv[2 * i]) + std::abs(w.inv[2 * i + 1]), i);
  }
  // The same cases between ordinary matrices in one batch: every matrix as alone.
  const int64_t batch = 64;
  auto mixed = make_batch<T>(kind::random, batch, 2, 99);
  for (int64_t b = 0; b < batch; b += 7) std::copy_n(cases[b % cases.size()].data(), 4, mixed.data() + 4 * b);
  auto rhs = make_batch<T>(kind::random, batch, 2, 98);                         // 2 x 2: two right-hand sides
  for (int64_t b = 3; b < batch; b += 5) rhs[4 * b + b % 4] *= big_scale<T>();  // some out of range
  std::vector<T> sign(batch), x(4 * batch), sol(4 * batch);
  std::vector<R> logabs(batch);
  ASSERT_EQ(slogdet(batch, 2, mixed.data(), sign.data(), logabs.data()), TINYLA_OK);
  ASSERT_EQ(inv(batch, 2, mixed.data(), x.data(), nullptr), TINYLA_OK);
  ASSERT_EQ(solve(batch, 2, 2, mixed.data(), rhs.data(), sol.data(), nullptr), TINYLA_OK);
  for (int64_t b = 0; b < batch; ++b) {
    T s1, x1[4], sol1[4];
    R l1;
    ASSERT_EQ(slogdet(1, 2, mixed.data() + 4 * b, &s1, &l1), TINYLA_OK);
    ASSERT_EQ(inv(1, 2, mixed.data() + 4 * b, x1, nullptr), TINYLA_OK);
    ASSERT_EQ(solve(1, 2, 2, mixed.data() + 4 * b, rhs.data() + 4 * b, sol1, nullptr), TINYLA_OK);
    EXPECT_EQ(std::memcmp(&s1, &sign[b], sizeof(T)), 0) << b;
    EXPECT_EQ(std::memcmp(&l1, &logabs[b], sizeof(R)), 0) << b;
    EXPECT_EQ(std::memcmp(x1, &x[4 * b], sizeof(x1)), 0) << b;
    EXPECT_EQ(std::memcmp(sol1, &sol[4 * b], sizeof(sol1)), 0) << b;
  }
}

// A determinant at the top of the range: [[z, r], [0, g P]], r moderate, P a cyclic
// permutation of the identity and g = 1 or 2 in one of its entries, so det = +-g z. A complex
// z with parts near the largest number has a modulus up to sqrt(2) x that: each part of det
// is finite exactly where the reference's is (the determinant once overflowed as a whole to
// inf + inf i); real ones finite or +-inf as the reference. Every size: the closed forms, the
// kernels and the LAPACK path.
TYPED_TEST(Special, DeterminantAtTheTopOfTheRangeOverflowsOnlyWhereItsPartsDo) {
  using T = TypeParam;
  using R = real_t<T>;
  const R top = std::numeric_limits<R>::max();
  std::vector<T> zs = {T(R(0.95) * top), T(-R(0.4) * top)};
  if constexpr (is_complex<T>)
    for (auto [re, im] : {std::pair{0.9, 0.9}, {0.95, -0.3}, {-0.4, 0.99}, {-0.8, -0.6}, {0.3, 0.2}})
      zs.push_back(T(R(re) * top, R(im) * top));
  for (int n : sizes) {
    const int64_t batch = int64_t(zs.size()) * (n > 1 ? 2 : 1);
    auto a = make_batch<T>(kind::random, batch, n, 7 * n);
    for (int64_t b = 0; b < batch; ++b) {
      T* m = a.data() + b * n * n;
      for (int i = 1; i < n; ++i) {
        m[size_t(i) * n] = T(0);
        for (int j = 1; j < n; ++j) m[size_t(i) * n + j] = T(j == 1 + i % (n - 1) ? (i == 1 && b % 2 ? 2 : 1) : 0);
      }
      m[0] = zs[size_t(b / (n > 1 ? 2 : 1))];
    }
    std::vector<T> d(batch), sign(batch);
    std::vector<R> logabs(batch);
    ASSERT_EQ(det(batch, n, a.data(), d.data()), TINYLA_OK);
    ASSERT_EQ(slogdet(batch, n, a.data(), sign.data(), logabs.data()), TINYLA_OK);
    for (int64_t b = 0; b < batch; ++b) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " matrix " + std::to_string(b));
      const auto w = wide_lu(a.data() + b * n * n, n, false);
      const wide_t<T> want = w.sign * std::exp(w.logabs);
      EXPECT_LE(std::abs(logabs[b] - w.logabs), 8 * eps<T>() * (1 + std::abs(w.logabs)));
      auto expect_part = [](R got, long double part) {
        if (std::abs(part) <= std::numeric_limits<R>::max())
          EXPECT_LE(std::abs(got - part), 8 * eps<T>() * std::abs(part)) << got << " " << part;
        else EXPECT_EQ(got, part > 0 ? std::numeric_limits<R>::infinity() : -std::numeric_limits<R>::infinity());
      };
      if constexpr (is_complex<T>) {
        expect_part(d[b].real(), want.real());
        expect_part(d[b].imag(), want.imag());
      } else {
        expect_part(d[b], want);
      }
    }
  }
}

// A complex matrix on an axis, A or i A with A real, keeps its entries and pivots on an axis
// through the elimination, so its phase is exactly the real sign s of det(A), or i^n s, as
// numpy's p / |p| per pivot gives it. Every size (closed forms, kernels, LAPACK path), with
// products of pivots that leave the range of the complex types' unnormalized product
// (scaled_huge, scaled_tiny) or cross it part way (row_scaled in float). Up to n = 32 the
// real and complex elimination are one code, so logabsdet is the real one's within a few
// ulps (beyond, LAPACK's zgetrf and dgetrf order their sums differently).
template <class T> class AxisPhase : public ::testing::Test {};
using ComplexTypes = ::testing::Types<std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(AxisPhase, ComplexTypes);
TYPED_TEST(AxisPhase, RealAndImaginaryMatricesGiveExactPhases) {
  using T = TypeParam;
  using R = real_t<T>;
  const int64_t batch = 19;  // partial lane groups
  for (int n : sizes)
    for (kind k : {kind::random, kind::nearly_singular, kind::scaled_huge, kind::scaled_tiny, kind::row_scaled}) {
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " " + kind_name(k));
      const auto a = make_batch<R>(k, batch, n, 31 * n + int(k));
      std::vector<T> on_re(a.size()), on_im(a.size());
      for (size_t i = 0; i < a.size(); ++i) on_re[i] = T(a[i], 0), on_im[i] = T(0, a[i]);
      std::vector<R> sign(batch), logabs(batch), logabs_re(batch), logabs_im(batch);
      std::vector<T> phase_re(batch), phase_im(batch), det_re(batch);
      ASSERT_EQ(slogdet(batch, n, a.data(), sign.data(), logabs.data()), TINYLA_OK);
      ASSERT_EQ(slogdet(batch, n, on_re.data(), phase_re.data(), logabs_re.data()), TINYLA_OK);
      ASSERT_EQ(slogdet(batch, n, on_im.data(), phase_im.data(), logabs_im.data()), TINYLA_OK);
      ASSERT_EQ(det(batch, n, on_re.data(), det_re.data()), TINYLA_OK);
      const T i_to_n[4] = {T(1, 0), T(0, 1), T(-1, 0), T(0, -1)};
      for (int64_t b = 0; b < batch; ++b) {
        SCOPED_TRACE("matrix " + std::to_string(b));
        EXPECT_EQ(phase_re[b], T(sign[b], 0));
        EXPECT_EQ(phase_im[b], sign[b] * i_to_n[n % 4]);
        EXPECT_EQ(det_re[b].imag(), 0);
        if (n > 32) continue;
        const R tol = 8 * eps<T>() * (1 + std::abs(logabs[b]));
        if (std::isfinite(logabs[b])) {
          EXPECT_LE(std::abs(logabs_re[b] - logabs[b]), tol);
          EXPECT_LE(std::abs(logabs_im[b] - logabs[b]), tol);
        } else {
          EXPECT_EQ(logabs_re[b], logabs[b]);
          EXPECT_EQ(logabs_im[b], logabs[b]);
        }
      }
    }
}

}  // namespace
