// Every op of the C API over one batch, through any backend that runs a
// validated job: the CPU backends (what the C API calls) or the GPU kernel
// bodies emulated on the host. The outputs come back as bytes, so that
// backends can be compared bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/dispatch.hpp"
#include "job.hpp"
#include "reference.hpp"

namespace ref {

// The arrays' bytes, one after the other, for bit-for-bit comparisons; every NaN made the same
// quiet NaN, since a NaN's payload and sign depend on operand order inside an instruction.
template <class... Arrays> std::vector<unsigned char> bytes_with_one_nan(Arrays... arrays) {
  std::vector<unsigned char> bytes;
  const auto append = [&](auto& v) {
    using E = typename std::decay_t<decltype(v)>::value_type;
    if constexpr (!std::is_integral_v<E>)
      for (auto& e : v)
        if (isnan_any(e)) e = E(std::numeric_limits<real_t<E>>::quiet_NaN());
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * sizeof(E));
  };
  (append(arrays), ...);
  return bytes;
}

// One output array of run_all_ops as bytes_with_one_nan, with what a failure message needs
// to say where two backends differ.
struct op_output {
  std::string name;  // the op and the array, e.g. "slogdet_inv logabsdet"
  std::vector<unsigned char> bytes;
  int64_t per_matrix = 1;  // elements per matrix of the batch
  size_t element_bytes = 1;
  std::string (*show)(const unsigned char*) = nullptr;  // one element as text
  bool operator==(const op_output& o) const { return name == o.name && bytes == o.bytes; }
};

template <class E> std::string show_element(const unsigned char* p) {
  E e;
  std::memcpy(&e, p, sizeof(E));
  std::ostringstream s;
  s.precision(std::numeric_limits<real_t<E>>::max_digits10);
  if constexpr (is_complex<E>) s << "(" << e.real() << ", " << e.imag() << ")";
  else s << +e;
  return s.str();
}

template <class E> op_output output_bytes(std::string name, const std::vector<E>& v, int64_t per_matrix) {
  return {std::move(name), bytes_with_one_nan(v), std::max<int64_t>(per_matrix, 1), sizeof(E), &show_element<E>};
}

// What run_all_ops returns: compare with ==; first_difference says where two runs part.
struct all_outputs {
  std::vector<op_output> arrays;
  bool operator==(const all_outputs&) const = default;
};

// What the matrix at `b` of run_all_ops's batch is made of.
inline const char* matrix_kind(int64_t b) {
  static const char* kinds[] = {
      "tiny pivots", "singular", "a NaN", "scaled up", "halves (tied pivots)", "diagonal, +-0 elsewhere"};
  constexpr int count = sizeof kinds / sizeof kinds[0];
  return b % 5 ? "random" : kinds[(b / 5) % count];
}

// "" where `got` and `want` agree bit for bit; else, per array that differs, how many
// matrices do and the first of them: its kind, the entry, both values.
inline std::string first_difference(const all_outputs& got, const all_outputs& want) {
  if (got.arrays.size() != want.arrays.size()) return "different numbers of output arrays";
  std::ostringstream s;
  for (size_t k = 0; k < got.arrays.size(); ++k) {
    const op_output &g = got.arrays[k], &w = want.arrays[k];
    if (g == w) continue;
    if (g.bytes.size() != w.bytes.size()) {
      s << g.name << ": " << g.bytes.size() << " bytes, expected " << w.bytes.size() << "\n";
      continue;
    }
    const size_t eb = g.element_bytes, matrix_bytes = eb * size_t(g.per_matrix);
    int64_t first = -1, differing = 0;
    for (size_t m = 0; m * matrix_bytes < g.bytes.size(); ++m)
      if (std::memcmp(&g.bytes[m * matrix_bytes], &w.bytes[m * matrix_bytes], matrix_bytes) != 0) {
        if (first < 0) first = int64_t(m);
        ++differing;
      }
    size_t e = size_t(first) * g.per_matrix;
    while (std::memcmp(&g.bytes[e * eb], &w.bytes[e * eb], eb) == 0) ++e;
    s << g.name << ": " << differing << " of " << g.bytes.size() / matrix_bytes << " matrices differ; the first, "
      << first << " (" << matrix_kind(first) << "), at entry " << e - size_t(first) * g.per_matrix << ": "
      << g.show(&g.bytes[e * eb]) << ", expected " << w.show(&w.bytes[e * eb]) << "\n";
  }
  return s.str();
}

// A fixture whose tests may switch the CPU backend and the thread count: both restored after each.
class RestoresCpuSettings : public ::testing::Test {
 protected:
  void TearDown() override {
    tinyla::cpu::choose_backend_for_this_cpu();
    tinyla_set_num_threads(0);
  }
};

// What the C API does with a job.
inline tinyla_status run_on_cpu(tinyla::dtype t, const tinyla::job& jb) {
  if (tinyla_status s = tinyla::validate(t, jb); s != TINYLA_OK) return s;
  return tinyla::cpu::execute(t, jb) ? TINYLA_OK : TINYLA_OUT_OF_MEMORY;
}

// A random entry (parts in [-1, 1]) as halves in [-2, 2].
template <class T> T rounded_to_halves(T v) {
  const auto r = [](real_t<T> x) { return std::round(4 * x) / 2; };
  if constexpr (is_complex<T>) return T(r(v.real()), r(v.imag()));
  else return r(v);
}

// Runs every op over a batch mixing random, singular, NaN, subnormal-pivot,
// scaled, tied-pivot and signed-zero matrices (matrix_kind; one every `spacing` matrices,
// the others random); returns every output. run(dtype, job) -> status.
template <class T, class Runner = decltype(&run_on_cpu)>
all_outputs run_all_ops(int n, int64_t batch, Runner run = &run_on_cpu, int64_t spacing = 5) {
  using R = real_t<T>;
  using tinyla::op;
  auto a = make_batch<T>(kind::random, batch, n, 4242 + n);
  for (int64_t b = 0; b < batch && n > 0; b += spacing) {
    T* m = a.data() + b * n * n;
    const int64_t k = b / spacing;
    switch (k % 6) {  // matrix_kind
      case 0:
        for (int i = 0; i < n * n; ++i) m[i] *= R(1e-40) * std::numeric_limits<R>::min();
        break;  // tiny pivots
      case 1:   // singular: a zero column, somewhere (a zero pivot there), or two (rank n - 2)
        for (int i = 0; i < n; ++i) {
          m[i * n + k % n] = T(0);
          if (k % 3 == 0) m[i * n + (k + 1) % n] = T(0);
        }
        break;
      case 2: m[k % (n * n)] = T(std::numeric_limits<R>::quiet_NaN()); break;
      case 3:
        for (int i = 0; i < n * n; ++i) m[i] *= big_scale<T>();
        break;
      case 4:  // halves in [-2, 2]: pivot candidates of equal magnitude (the first must win)
        for (int i = 0; i < n * n; ++i) m[i] = rounded_to_halves(m[i]);
        break;
      default:  // diagonal, zeros of both signs elsewhere: the factors and inverse hold
                // exact zeros, whose signs come out of their sums' order and first terms
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < n; ++j) {
            if (j == i) continue;
            const R zero = (i + j) % 2 ? -R(0) : R(0);
            if constexpr (is_complex<T>) m[i * n + j] = T(zero, -zero);
            else m[i * n + j] = zero;
          }
        break;
    }
  }
  const int64_t wide = 2 * n + 1;  // a second right-hand side: more columns than a team has threads
  const auto rhs = make_batch<T>(kind::random, batch, n, 7);  // (batch, n, n): nrhs = n
  const auto rhs2 = make_batch<T>(kind::random, batch * wide, 1, 8);
  std::vector<T> sign(batch), d(batch), x(a.size()), sol(rhs.size()), sol2(rhs2.size() * n), sign2(batch), x2(a.size()),
      sign3(batch), x3(a.size()), x4(a.size()), d2(batch), adj(a.size()), cof(a.size());
  std::vector<R> logabs(batch), logabs2(batch), logabs3(batch);
  std::vector<int32_t> info(batch), info_s(batch), info_s2(batch);
  std::vector<T> b2(rhs2.size() * n);
  for (size_t i = 0; i < b2.size(); ++i) b2[i] = rhs2[i % rhs2.size()] * R(1 + int(i % 3));
  const tinyla::dtype t = tinyla::dtype_of<T>;
  const tinyla::job jobs[] = {
      {.kind = op::slogdet, .batch = batch, .n = n, .a = a.data(), .sign = sign.data(), .logabsdet = logabs.data()},
      {.kind = op::det, .batch = batch, .n = n, .a = a.data(), .det = d.data()},
      {.kind = op::inv, .batch = batch, .n = n, .a = a.data(), .x = x.data(), .info = info.data()},
      {.kind = op::solve,
       .batch = batch,
       .n = n,
       .nrhs = n,
       .a = a.data(),
       .b = rhs.data(),
       .x = sol.data(),
       .info = info_s.data()},
      {.kind = op::solve,
       .batch = batch,
       .n = n,
       .nrhs = wide,
       .a = a.data(),
       .b = b2.data(),
       .x = sol2.data(),
       .info = info_s2.data()},
      {.kind = op::slogdet_inv,
       .batch = batch,
       .n = n,
       .a = a.data(),
       .x = x2.data(),
       .sign = sign2.data(),
       .logabsdet = logabs2.data()},
      {.kind = op::slogdet_inv,
       .batch = batch,
       .n = n,
       .a = a.data(),
       .x = x3.data(),
       .sign = sign3.data(),
       .logabsdet = logabs3.data(),
       .transpose_x = true},
      {.kind = op::inv, .batch = batch, .n = n, .a = a.data(), .x = x4.data(), .transpose_x = true},
      {.kind = op::adjugate, .batch = batch, .n = n, .a = a.data(), .x = adj.data(), .det = d2.data()},
      {.kind = op::adjugate, .batch = batch, .n = n, .a = a.data(), .x = cof.data(), .transpose_x = true},
  };
  for (const auto& jb : jobs) EXPECT_EQ(run(t, jb), TINYLA_OK) << "op " << int(jb.kind);
  const int64_t nn = int64_t(n) * n;
  return {{output_bytes("slogdet sign", sign, 1), output_bytes("slogdet logabsdet", logabs, 1),
           output_bytes("det", d, 1), output_bytes("inv", x, nn), output_bytes("inv info", info, 1),
           output_bytes("solve (nrhs = n)", sol, nn), output_bytes("solve (nrhs = n) info", info_s, 1),
           output_bytes("solve (nrhs = 2n + 1)", sol2, n * wide),
           output_bytes("solve (nrhs = 2n + 1) info", info_s2, 1), output_bytes("slogdet_inv sign", sign2, 1),
           output_bytes("slogdet_inv logabsdet", logabs2, 1), output_bytes("slogdet_inv inverse", x2, nn),
           output_bytes("slogdet_inv_t sign", sign3, 1), output_bytes("slogdet_inv_t logabsdet", logabs3, 1),
           output_bytes("slogdet_inv_t inverse^T", x3, nn), output_bytes("inv_t", x4, nn),
           output_bytes("det_adjugate det", d2, 1), output_bytes("det_adjugate adjugate", adj, nn),
           output_bytes("det_cofactors", cof, nn)}};
}

}  // namespace ref
