// The lane-primitive probe: tests/cpp/lane_probe.cpp, compiled once per CPU ISA
// with that ISA's flags (as src/cpu/backend_isa.cpp), applies every lane
// primitive to the same inputs with the ISA's lane types; test_lanes.cpp
// compares the results with the scalar lane's bit for bit. Plain arrays only
// across the boundary: a probe must not instantiate inline code shared with
// other translation units (the linker could keep its AVX-512 copy).
#pragma once

#include <cstdint>

namespace lane_probe {

// One output array per primitive; complex ones take (x, y) and (z, x) as operands.
enum output : int {
  fmadd,
  sqrt_lane,
  absval,
  min_by_select,
  less_any,
  frexp_mantissa,
  frexp_exponent,
  ldexp,
  is_nan,
  comparisons,  // bit k: the k-th of x < y, >, <=, >=, ==, !=, then (x < y) & (z < x), | and !(x < y)
  lane_index,   // the sum over w of select(only_lane(w), w, 0): a lane's place in its lane type
  log_scaled,
  c_multiply_re,
  c_multiply_im,
  c_sub_mul_re,
  c_sub_mul_im,
  c_modulus,
  c_max_component,
  c_pivot_magnitude,
  c_divide_re,
  c_divide_im,
  c_reciprocal_re,
  c_reciprocal_im,
  c_unit_phase_re,
  c_unit_phase_im,
  c_is_infinite,
  output_count
};

// Inputs x, y, z of `count` values (a multiple of max_width) and integral exponents e;
// out: output_count arrays of `count` values, out[k * count + i]. `paired`: the lane
// type of two registers (simd_pair) instead of one.
inline constexpr int max_width = 32;
template <class R>
using probe_fn = void (*)(const R* x, const R* y, const R* z, const R* e, std::int64_t count, bool paired, R* out);
struct probe {
  const char* isa;   // as the backend's name
  int vector_bytes;  // 0: scalar lanes
  probe_fn<float> f32;
  probe_fn<double> f64;
};

}  // namespace lane_probe
