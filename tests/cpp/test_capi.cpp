// Every bad-argument path of the C API returns TINYLA_INVALID_ARGUMENT and
// writes nothing; status strings; thread settings.
#include <gtest/gtest.h>

#include <cstring>

#include "reference.hpp"

namespace {

constexpr double sentinel = -12345.0;

struct Buffers {
  std::vector<double> a = std::vector<double>(64, 1.0), b = std::vector<double>(64, 1.0);
  std::vector<double> x = std::vector<double>(64, sentinel), s = std::vector<double>(8, sentinel),
                      l = std::vector<double>(8, sentinel), d = std::vector<double>(8, sentinel);
  std::vector<int32_t> info = std::vector<int32_t>(8, -7);
  bool untouched() const {
    auto same = [](const std::vector<double>& v) {
      for (double e : v)
        if (e != sentinel) return false;
      return true;
    };
    for (int32_t i : info)
      if (i != -7) return false;
    return same(x) && same(s) && same(l) && same(d);
  }
};

TEST(CApi, NegativeSizes) {
  Buffers z;
  EXPECT_EQ(tinyla_slogdet_f64(-1, 2, z.a.data(), z.s.data(), z.l.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_f64(2, -1, z.a.data(), z.s.data(), z.l.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_det_f64(-5, 2, z.a.data(), z.d.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_inv_f64(2, -2, z.a.data(), z.x.data(), z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_solve_f64(2, 2, -1, z.a.data(), z.b.data(), z.x.data(), z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_inv_f64(-2, 2, z.a.data(), z.s.data(), z.l.data(), z.x.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_inv_transposed_f64(2, -2, z.a.data(), z.x.data(), z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_inv_transposed_f64(-2, 2, z.a.data(), z.s.data(), z.l.data(), z.x.data()),
            TINYLA_INVALID_ARGUMENT);
  EXPECT_TRUE(z.untouched());
}

TEST(CApi, NullPointersWithWork) {
  Buffers z;
  EXPECT_EQ(tinyla_slogdet_f64(2, 2, nullptr, z.s.data(), z.l.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_f64(2, 2, z.a.data(), nullptr, z.l.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_f64(2, 2, z.a.data(), z.s.data(), nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_f64(2, 0, nullptr, z.s.data(), nullptr), TINYLA_INVALID_ARGUMENT);  // n = 0 still writes
  EXPECT_EQ(tinyla_det_f64(2, 2, z.a.data(), nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_det_f64(2, 2, nullptr, z.d.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_inv_f64(2, 2, nullptr, z.x.data(), z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_inv_f64(2, 2, z.a.data(), nullptr, z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_solve_f64(2, 2, 1, nullptr, z.b.data(), z.x.data(), z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_solve_f64(2, 2, 1, z.a.data(), nullptr, z.x.data(), z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_solve_f64(2, 2, 1, z.a.data(), z.b.data(), nullptr, z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_inv_f64(2, 2, z.a.data(), nullptr, z.l.data(), z.x.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_inv_f64(2, 2, z.a.data(), z.s.data(), nullptr, z.x.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_inv_f64(2, 2, z.a.data(), z.s.data(), z.l.data(), nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_inv_transposed_c128(2, 2, z.a.data(), nullptr, nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_inv_transposed_f32(2, 2, nullptr, nullptr, nullptr, nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_c128(2, 2, nullptr, z.s.data(), z.l.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_inv_c64(2, 2, z.a.data(), nullptr, nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_solve_f32(1, 3, 2, nullptr, nullptr, nullptr, nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_TRUE(z.untouched());
  // info is optional
  EXPECT_EQ(tinyla_inv_f64(2, 2, z.a.data(), z.x.data(), nullptr), TINYLA_OK);
}

TEST(CApi, SizeOverflow) {
  Buffers z;
  const int64_t big = int64_t(1) << 40;
  EXPECT_EQ(tinyla_slogdet_f64(big, big, z.a.data(), z.s.data(), z.l.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_slogdet_f64(INT64_MAX, 2, z.a.data(), z.s.data(), z.l.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_inv_c128(int64_t(1) << 60, 2, z.a.data(), z.x.data(), z.info.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_solve_f64(1, 2, INT64_MAX / 2, z.a.data(), z.b.data(), z.x.data(), z.info.data()),
            TINYLA_INVALID_ARGUMENT);
  // n beyond a LAPACK integer on the large-n path
  EXPECT_EQ(tinyla_det_f64(1, int64_t(1) << 32, z.a.data(), z.d.data()), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_solve_f64(1, 2, int64_t(1) << 32, z.a.data(), z.b.data(), z.x.data(), z.info.data()),
            TINYLA_INVALID_ARGUMENT);
  EXPECT_TRUE(z.untouched());
}

TEST(CApi, StatusStrings) {
  EXPECT_STREQ(tinyla_status_string(TINYLA_OK), "ok");
  EXPECT_STREQ(tinyla_status_string(TINYLA_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(tinyla_status_string(TINYLA_UNSUPPORTED), "unsupported");
  EXPECT_STREQ(tinyla_status_string(TINYLA_OUT_OF_MEMORY), "out of memory");
  EXPECT_STREQ(tinyla_status_string(TINYLA_BACKEND_ERROR), "backend error");
  EXPECT_STREQ(tinyla_status_string(static_cast<tinyla_status>(99)), "unknown status");
}

TEST(CApi, ThreadSettings) {
  tinyla_set_num_threads(3);
  EXPECT_EQ(tinyla_get_num_threads(), 3);
  tinyla_set_num_threads(-4);  // ignored
  EXPECT_EQ(tinyla_get_num_threads(), 3);
  tinyla_set_num_threads(0);
  EXPECT_GE(tinyla_get_num_threads(), 1);
}

}  // namespace
