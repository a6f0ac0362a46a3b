// Every lane primitive on every CPU ISA built, against the scalar lane bit for
// bit, and the scalar lane against the C library (std::fma, sqrt, frexp, ldexp,
// hypot, log, complex division) — on subnormals, ±0, ±inf, NaN, the extremes of
// the exponent range and ordinary values, so that a wrong primitive shows up
// here rather than as a wrong determinant.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/dispatch.hpp"
#include "lane_probe.hpp"
#include "reference.hpp"

// One per ISA built into the library: lane_probes.inc (written by CMake) lists them.
#define LANE_PROBE(isa) extern const lane_probe::probe lane_probe_##isa;
#include "lane_probes.inc"
#undef LANE_PROBE
#define LANE_PROBE(isa) &lane_probe_##isa,
static const lane_probe::probe* const probes[] = {
#include "lane_probes.inc"
};
#undef LANE_PROBE

namespace {

using lane_probe::output;

template <class R> struct inputs {
  std::vector<R> x, y, z, e;
  std::int64_t count = 0;
};

// Every pair of special values as (x, y), z cycling through them, exponents
// from -2 * max_exponent to 2 * max_exponent; then random values.
template <class R> inputs<R> make_inputs() {
  using lim = std::numeric_limits<R>;
  const R special[] = {0,
                       -R(0),
                       lim::denorm_min(),
                       -lim::denorm_min(),
                       lim::min(),
                       lim::min() / 3,
                       -lim::min(),
                       R(1),
                       R(-1),
                       R(0.5),
                       R(1.5),
                       R(-3),
                       lim::epsilon(),
                       1 + lim::epsilon(),
                       lim::max(),
                       -lim::max(),
                       lim::max() / 4,
                       lim::infinity(),
                       -lim::infinity(),
                       lim::quiet_NaN(),
                       std::ldexp(R(1.25), lim::max_exponent - 3),
                       std::ldexp(R(-1.75), lim::min_exponent + 2)};
  const int k = int(std::size(special));
  const int exps[] = {0,
                      1,
                      -1,
                      7,
                      -30,
                      lim::max_exponent,
                      -lim::max_exponent,
                      2 * lim::max_exponent,
                      -2 * lim::max_exponent,
                      lim::max_exponent - lim::min_exponent + lim::digits};
  inputs<R> in;
  for (int i = 0; i < k; ++i)
    for (int j = 0; j < k; ++j) {
      in.x.push_back(special[i]), in.y.push_back(special[j]), in.z.push_back(special[(i + 3 * j) % k]);
      in.e.push_back(R(exps[(i * k + j) % std::size(exps)]));
    }
  std::mt19937_64 g(7);
  std::uniform_real_distribution<R> u(-4, 4);
  std::uniform_int_distribution<int> ex(lim::min_exponent - 10, lim::max_exponent);
  while (in.x.size() % lane_probe::max_width != 0 || in.x.size() < size_t(k * k + 512)) {
    in.x.push_back(std::ldexp(u(g), ex(g) / 4)), in.y.push_back(u(g)), in.z.push_back(std::ldexp(u(g), ex(g)));
    in.e.push_back(R(ex(g) / 8));
  }
  in.count = std::int64_t(in.x.size());
  return in;
}

template <class R> lane_probe::probe_fn<R> fn(const lane_probe::probe& p) {
  if constexpr (std::is_same_v<R, float>) return p.f32;
  else return p.f64;
}

template <class R> std::vector<R> run(const lane_probe::probe& p, const inputs<R>& in, bool paired) {
  std::vector<R> out(size_t(lane_probe::output_count) * size_t(in.count));
  fn<R>(p)(in.x.data(), in.y.data(), in.z.data(), in.e.data(), in.count, paired, out.data());
  return out;
}

template <class R> bool same_bits(R a, R b) {
  if (std::isnan(a) && std::isnan(b)) return true;  // payloads and signs of NaNs may differ
  return std::memcmp(&a, &b, sizeof(R)) == 0;
}

const lane_probe::probe& scalar_probe() {
  for (const auto* p : probes)
    if (std::string(p->isa) == "scalar") return *p;
  throw std::logic_error("no scalar probe");
}

template <class R> class Lanes : public ::testing::Test {};
using Reals = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Lanes, Reals);

// The lane width of a probe's lane type.
template <class R> int width(const lane_probe::probe& p, bool paired) {
  return p.vector_bytes == 0 ? 1 : p.vector_bytes / int(sizeof(R)) * (paired ? 2 : 1);  // scalar: no pairs
}

// select_backend refuses an ISA this CPU cannot run; the one in use is restored after.
struct runnable {
  const std::string before = tinyla_cpu_backend();
  ~runnable() { tinyla::cpu::select_backend(before.c_str()); }
  bool operator()(const lane_probe::probe& p) const {
    if (tinyla::cpu::select_backend(p.isa)) return true;
    std::printf("[   INFO   ] %s: not runnable on this CPU, not compared\n", p.isa);
    return false;
  }
};

TYPED_TEST(Lanes, EverySimdIsaMatchesTheScalarLaneBitForBit) {
  using R = TypeParam;
  const runnable can_run;
  const auto in = make_inputs<R>();
  const auto reference = run(scalar_probe(), in, false);
  int compared = 0;
  for (const auto* p : probes) {
    if (std::string(p->isa) == "scalar" || !can_run(*p)) continue;
    for (bool paired : {false, true}) {
      const auto got = run(*p, in, paired);
      for (int k = 0; k < lane_probe::output_count; ++k) {
        if (k == output::less_any || k == output::lane_index) continue;  // per register: checked below
        for (std::int64_t i = 0; i < in.count; ++i) {
          const size_t at = size_t(k) * size_t(in.count) + size_t(i);
          ASSERT_TRUE(same_bits(got[at], reference[at]))
              << p->isa << (paired ? " (pair)" : "") << " output " << k << " input " << i << ": x=" << in.x[i]
              << " y=" << in.y[i] << " z=" << in.z[i] << " e=" << in.e[i] << " got " << got[at] << " scalar "
              << reference[at];
        }
      }
      ++compared;
    }
  }
  std::printf("[   INFO   ] %d SIMD lane types compared\n", compared);
}

// For each runnable probe and lane type (one register, a pair): check(name, inputs, output k's
// values, lane width) for the outputs that are per register, not per lane.
template <class R, class Check> void check_per_register(output k, Check check) {
  const runnable can_run;
  const auto in = make_inputs<R>();
  for (const auto* p : probes) {
    if (!can_run(*p)) continue;
    for (bool paired : {false, true}) {
      const auto got = run(*p, in, paired);
      check(std::string(p->isa) + (paired ? " (pair)" : ""), in, got.data() + size_t(k) * size_t(in.count),
            width<R>(*p, paired));
    }
  }
}

// any_of over a register: 1 exactly where some lane of that register has x < y.
TYPED_TEST(Lanes, AnyOfSeesEveryLane) {
  using R = TypeParam;
  check_per_register<R>(output::less_any, [](const std::string& name, const inputs<R>& in, const R* any, int w) {
    for (std::int64_t i = 0; i < in.count; i += w) {
      bool some = false;
      for (int j = 0; j < w; ++j) some |= in.x[i + j] < in.y[i + j];
      for (int j = 0; j < w; ++j) ASSERT_EQ(any[i + j], R(some ? 1 : 0)) << name << " lanes " << i;
    }
  });
}

// only_lane(w) selects lane w of a register and no other.
TYPED_TEST(Lanes, OnlyLaneIsThatLane) {
  using R = TypeParam;
  check_per_register<R>(output::lane_index, [](const std::string& name, const inputs<R>& in, const R* index, int w) {
    for (std::int64_t i = 0; i < in.count; ++i) ASSERT_EQ(index[i], R(i % w)) << name << " lane " << i;
  });
}

TYPED_TEST(Lanes, ScalarLaneMatchesTheCLibrary) {
  using R = TypeParam;
  using lim = std::numeric_limits<R>;
  const auto in = make_inputs<R>();
  const auto got = run(scalar_probe(), in, false);
  auto at = [&](output k, std::int64_t i) { return got[size_t(k) * size_t(in.count) + size_t(i)]; };
  auto ulps = [](long double a, long double b) {
    if (a == b) return 0.0L;
    return std::fabs(a - b) / (std::fabs(b) * lim::epsilon() + lim::denorm_min());
  };
  for (std::int64_t i = 0; i < in.count; ++i) {
    const R x = in.x[i], y = in.y[i], z = in.z[i];
    const int e = int(in.e[i]);
    SCOPED_TRACE("x=" + std::to_string(x) + " y=" + std::to_string(y) + " z=" + std::to_string(z) +
                 " e=" + std::to_string(e));
    EXPECT_TRUE(same_bits(at(output::fmadd, i), std::fma(x, y, z)));
    EXPECT_TRUE(same_bits(at(output::sqrt_lane, i), std::sqrt(std::fabs(x))));
    EXPECT_TRUE(same_bits(at(output::absval, i), std::fabs(x)));
    EXPECT_TRUE(same_bits(at(output::min_by_select, i), x < y ? x : y));
    EXPECT_EQ(at(output::is_nan, i), R(std::isnan(x) ? 1 : 0));
    const bool compared[] = {x<y, x> y, x <= y, x >= y, x == y, x != y, x < y && z < x, x < y || z < x, !(x < y)};
    int bits = 0;
    for (int k = 0; k < int(std::size(compared)); ++k) bits |= int(compared[k]) << k;
    EXPECT_EQ(at(output::comparisons, i), R(bits));
    if (std::isfinite(x) && x != 0) {
      int ex;
      const R m = std::frexp(x, &ex);
      EXPECT_TRUE(same_bits(at(output::frexp_mantissa, i), m));
      EXPECT_EQ(at(output::frexp_exponent, i), R(ex));
      // log(|m| 2^(ex + e)) within 2 ulps of its terms' sizes (a long-double evaluation)
      const long double log_m = std::log(std::fabs((long double)m)), log_2e = (long double)(ex + e) * std::log(2.0L);
      EXPECT_LE(std::fabs(at(output::log_scaled, i) - (log_m + log_2e)),
                2 * lim::epsilon() * (std::fabs(log_m) + std::fabs(log_2e)))
          << at(output::log_scaled, i) << " vs " << double(log_m + log_2e);
    } else {
      EXPECT_TRUE(same_bits(at(output::frexp_mantissa, i), x));  // 0, inf, NaN unchanged
    }
    EXPECT_TRUE(same_bits(at(output::ldexp, i), std::ldexp(x, e)));
    // Complex primitives on finite operands of moderate size.
    const std::complex<long double> p(x, y), q(z, x);
    const bool moderate = std::isfinite(x) && std::isfinite(y) && std::isfinite(z) &&
                          std::fabs(x) < std::sqrt(lim::max()) / 4 && std::fabs(y) < std::sqrt(lim::max()) / 4 &&
                          std::fabs(z) < std::sqrt(lim::max()) / 4;
    if (std::isfinite(x) && std::isfinite(y)) {
      EXPECT_LE(ulps(at(output::c_modulus, i), R(std::hypot((long double)x, (long double)y))), 2);  // may be inf
      EXPECT_EQ(at(output::c_max_component, i), std::max(std::fabs(x), std::fabs(y)));
      EXPECT_EQ(at(output::c_pivot_magnitude, i), std::fabs(x) + std::fabs(y));
      if (x != 0 || y != 0) {
        const std::complex<long double> ph(at(output::c_unit_phase_re, i), at(output::c_unit_phase_im, i));
        EXPECT_LE(std::abs(ph - p / std::abs(p)), 4 * lim::epsilon()) << ph.real() << " " << ph.imag();
      }
    } else if (std::isinf(x) || std::isinf(y)) {
      EXPECT_EQ(at(output::c_modulus, i), lim::infinity());  // C99: an infinite part, even beside NaN
      EXPECT_EQ(at(output::c_is_infinite, i), R(1));
    }
    if (moderate && std::abs(q) > std::sqrt(lim::min()) * 4 && std::abs(p) > std::sqrt(lim::min()) * 4) {
      const std::complex<long double> quo = p / q, got_quo(at(output::c_divide_re, i), at(output::c_divide_im, i));
      EXPECT_LE(std::abs(got_quo - quo), 8 * lim::epsilon() * std::abs(quo));
      const std::complex<long double> rec = 1.0L / p,
                                      got_rec(at(output::c_reciprocal_re, i), at(output::c_reciprocal_im, i));
      EXPECT_LE(std::abs(got_rec - rec), 8 * lim::epsilon() * std::abs(rec));
      const std::complex<long double> prod = p * q;
      const std::complex<long double> got_prod(at(output::c_multiply_re, i), at(output::c_multiply_im, i));
      EXPECT_LE(std::abs(got_prod - prod), 4 * lim::epsilon() * std::abs(p) * std::abs(q));
    }
    if (x == 0 && y == 0) {
      EXPECT_EQ(at(output::c_reciprocal_re, i), 0);  // a zero pivot leaves its column untouched
      EXPECT_EQ(at(output::c_reciprocal_im, i), 0);
    }
  }
}

}  // namespace
