// One ISA's lane probe (see lane_probe.hpp). CMake defines TINYLA_KERNEL_NS,
// TINYLA_VECTOR_BYTES and LANE_PROBE (the exported probe's name).
#include "lane_probe.hpp"

#include <cstring>
#include <iterator>
#include <type_traits>

#include "cpu/simd.hpp"
#include "kernels/lu.hpp"

namespace tinyla::TINYLA_KERNEL_NS {
namespace {

template <class R, int P> struct probe_lane {
  static constexpr int width = TINYLA_VECTOR_BYTES == 0 ? 1 : TINYLA_VECTOR_BYTES / int(sizeof(R));
  using type = std::conditional_t<width == 1, R, std::conditional_t<P == 2, simd_pair<R, width>, simd<R, width>>>;
};

template <class L, class R> L load(const R* p) {
  L v;
  std::memcpy(static_cast<void*>(&v), p, sizeof(L));
  return v;
}
template <class L, class R> void store(R* p, L v) { std::memcpy(p, static_cast<const void*>(&v), sizeof(L)); }
template <class L> L as_lane(mask_of<L> m) { return select(m, L(1), L(0)); }

template <class R, class L> void run(const R* x, const R* y, const R* z, const R* e, std::int64_t count, R* out) {
  using namespace lane_probe;
  constexpr int w = lane_traits<L>::width;
  auto put = [&](output k, std::int64_t i, L v) { store(out + k * count + i, v); };
  for (std::int64_t i = 0; i < count; i += w) {
    const L a = load<L>(x + i), b = load<L>(y + i), c = load<L>(z + i), k = load<L>(e + i);
    put(output::fmadd, i, tinyla::TINYLA_KERNEL_NS::fmadd(a, b, c));
    put(output::sqrt_lane, i, tinyla::TINYLA_KERNEL_NS::sqrt_lane(tinyla::TINYLA_KERNEL_NS::absval(a)));
    put(output::absval, i, tinyla::TINYLA_KERNEL_NS::absval(a));
    put(output::min_by_select, i, select(a < b, a, b));
    put(output::less_any, i, L(any_of(a < b) ? 1 : 0));
    L ex;
    const L m = frexp2(a, ex);
    put(output::frexp_mantissa, i, m);
    put(output::frexp_exponent, i, select(m == a, L(0), ex));  // unspecified where x is 0, inf or NaN
    put(output::ldexp, i, ldexp2(a, k));
    put(output::is_nan, i, as_lane<L>(tinyla::TINYLA_KERNEL_NS::is_nan(a)));
    const mask_of<L> lt = a < b, ca = c < a;  // & | ! of bools are ints: cast back below
    const mask_of<L> masks[] = {lt, a > b, a <= b, a >= b, a == b, a != b, mask_of<L>(lt & ca), mask_of<L>(lt | ca),
                                !lt};
    L bits(0);
    for (int k = 0; k < int(std::size(masks)); ++k) bits = bits + select(masks[k], L(1 << k), L(0));
    put(output::comparisons, i, bits);
    L index(0);
    for (int j = 0; j < w; ++j) index = index + select(lane_traits<L>::only_lane(j), L(j), L(0));
    put(output::lane_index, i, index);
    L e2;
    const L m2 = frexp2(tinyla::TINYLA_KERNEL_NS::absval(a), e2);
    put(output::log_scaled, i, tinyla::TINYLA_KERNEL_NS::log_scaled(m2, e2 + k));
    const cplx<L> p{a, b}, q{c, a};
    const cplx<L> prod = p * q, sm = sub_mul(p, q, cplx<L>{b, c});
    put(output::c_multiply_re, i, prod.re), put(output::c_multiply_im, i, prod.im);
    put(output::c_sub_mul_re, i, sm.re), put(output::c_sub_mul_im, i, sm.im);
    put(output::c_modulus, i, modulus(p));
    put(output::c_max_component, i, max_component(p));
    put(output::c_pivot_magnitude, i, pivot_magnitude(p));
    cplx<L> scaled = p;
    scale_into_range(scaled);  // unit_phase's input, as det_accum::multiply gives it
    const cplx<L> quo = divide(p, q), rec = reciprocal_or_zero(p), ph = unit_phase(scaled);
    put(output::c_divide_re, i, quo.re), put(output::c_divide_im, i, quo.im);
    put(output::c_reciprocal_re, i, rec.re), put(output::c_reciprocal_im, i, rec.im);
    put(output::c_unit_phase_re, i, ph.re), put(output::c_unit_phase_im, i, ph.im);
    put(output::c_is_infinite, i, as_lane<L>(is_infinite(p)));
  }
}

template <class R>
void probe_type(const R* x, const R* y, const R* z, const R* e, std::int64_t count, bool paired, R* out) {
  if (paired) run<R, typename probe_lane<R, 2>::type>(x, y, z, e, count, out);
  else run<R, typename probe_lane<R, 1>::type>(x, y, z, e, count, out);
}

}  // namespace
}  // namespace tinyla::TINYLA_KERNEL_NS

#define LANE_PROBE_STR2(x) #x
#define LANE_PROBE_STR(x) LANE_PROBE_STR2(x)
extern const lane_probe::probe LANE_PROBE = {LANE_PROBE_STR(TINYLA_KERNEL_NS), TINYLA_VECTOR_BYTES,
                                             &tinyla::TINYLA_KERNEL_NS::probe_type<float>,
                                             &tinyla::TINYLA_KERNEL_NS::probe_type<double>};
