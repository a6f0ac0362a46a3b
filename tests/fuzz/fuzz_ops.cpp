// libFuzzer harness: every op of the C API on a fuzzer-chosen batch, checked against each
// other, across the CPU backends (ISAs) and against LAPACK and a long-double LU.
// Built by -DTINYLA_FUZZ=ON with clang (scripts/test runs it under ASan + UBSan with the seed
// corpus of tests/fuzz/seeds.py). Any failed invariant aborts with a message.
//
// Input (bytes; missing ones read as 0):
//   [0] dtype (mod 4: f32 f64 c64 c128)   [1] n (< 192: mod 11, else mod 41)   [2] batch - 1 (mod 6)
//   [3] nrhs (mod 5)
//   [4] base (mod 5: uniform(-1,1), integers -3..3, integers with row n-1 = row 0 + row 1,
//       identity, uniform with row 1 = 2 x row 0)
//   [5..12] seed of the base   [13] scale: every entry times 2^(8 * int8)
//   then overrides, 11 bytes each: entry index (uint16, mod the entry count), kind, 8 payload
//   bytes. (kind & 3) mod 3: 0 the payload's bits as the real type, 1 a special value
//   (palette[payload[0]]), 2 a small integer payload[0] mod 7 - 3; kind & 4: the imaginary part.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu/dispatch.hpp"
#include "reference.hpp"

namespace {

using namespace ref;

#define FUZZ_CHECK(cond, ...)                                                                                          \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      std::fprintf(stderr, "tinyla_fuzz: invariant failed: %s (line %d): ", #cond, __LINE__);                          \
      std::fprintf(stderr, __VA_ARGS__);                                                                               \
      std::fputc('\n', stderr);                                                                                        \
      std::abort();                                                                                                    \
    }                                                                                                                  \
  } while (0)

struct reader {
  const uint8_t* data;
  size_t size, at = 0;
  uint8_t byte() { return at < size ? data[at++] : 0; }
  template <class U> U value() {
    unsigned char b[sizeof(U)];
    for (auto& c : b) c = byte();
    U u;
    std::memcpy(&u, b, sizeof(U));
    return u;
  }
  bool done() const { return at >= size; }
};

template <class R> R special(uint8_t i) {
  using lim = std::numeric_limits<R>;
  const R big = big_scale<R>();
  const R palette[] = {0,
                       -R(0),
                       1,
                       -1,
                       R(0.5),
                       2,
                       3,
                       lim::denorm_min(),
                       -lim::denorm_min(),
                       lim::min(),
                       -lim::min(),
                       lim::max(),
                       -lim::max(),
                       lim::infinity(),
                       -lim::infinity(),
                       lim::quiet_NaN(),
                       1 / big,
                       big,
                       lim::epsilon(),
                       R(0.75) * lim::max()};
  return palette[i % (sizeof(palette) / sizeof(R))];
}

template <class T> std::vector<T> make_input(reader& in, int64_t batch, int n, std::mt19937_64& g) {
  using R = real_t<T>;
  const int base = in.byte() % 5;
  g.seed(in.value<uint64_t>());
  const int scale = 8 * int(int8_t(in.byte()));
  const int64_t count = batch * n * n;
  std::vector<T> a(static_cast<size_t>(count));
  std::uniform_int_distribution<int> small(-3, 3);
  for (auto& v : a) v = base == 1 || base == 2 ? T(R(small(g))) : random_entry<T>(g);
  for (int64_t b = 0; b < batch; ++b) {
    T* m = a.data() + b * n * n;
    for (int j = 0; j < n; ++j) {
      if (base == 2 && n >= 3) m[(n - 1) * n + j] = m[j] + m[n + j];
      if (base == 3)
        for (int i = 0; i < n; ++i) m[i * n + j] = T(i == j ? 1 : 0);
      if (base == 4 && n >= 2) m[n + j] = R(2) * m[j];
    }
  }
  for (auto& v : a) v *= std::ldexp(R(1), scale);
  while (!in.done() && count > 0) {
    const int64_t at = in.value<uint16_t>() % count;
    const uint8_t kind = in.byte();
    const auto payload = in.value<uint64_t>();
    R x;
    const int value = (kind & 3) % 3;  // apart from bit 2 (the part)
    if (value == 0) std::memcpy(&x, &payload, sizeof(R));
    else if (value == 1) x = special<R>(uint8_t(payload));
    else x = R(int(payload % 7) - 3);
    if constexpr (is_complex<T>) a[at] = kind & 4 ? T(a[at].real(), x) : T(x, a[at].imag());
    else a[at] = x;
  }
  return a;
}

// Equal bits, a NaN of any payload or sign matching any NaN.
template <class T> bool same(T x, T y) {
  if (isnan_any(x) || isnan_any(y)) return isnan_any(x) && isnan_any(y);
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}
bool same(int32_t x, int32_t y) { return x == y; }
template <class T> bool same(const std::vector<T>& x, const std::vector<T>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!same(x[i], y[i])) return false;
  return true;
}

template <class T> struct outputs {
  std::vector<T> sign, det, inv, inv_t, sol, sign2, inv2, inv_in_place;
  std::vector<T> tangents, grad, lap;  // log_det_laplacian on inv_t, a as Lap A, and tangents from a
  std::vector<T> det2, adj;            // det_adjugate
  std::vector<real_t<T>> logabs, logabs2;
  std::vector<int32_t> info, info_t, info_s;
};

template <class T> outputs<T> run_ops(const std::vector<T>& a, const std::vector<T>& rhs, int64_t batch, int n, int m) {
  outputs<T> o;
  const size_t nn = size_t(n) * n;
  o.sign.resize(batch), o.det.resize(batch), o.sign2.resize(batch), o.logabs.resize(batch), o.logabs2.resize(batch);
  o.inv.resize(batch * nn), o.inv_t.resize(batch * nn), o.inv2.resize(batch * nn), o.sol.resize(rhs.size());
  o.info.resize(batch), o.info_t.resize(batch), o.info_s.resize(batch);
  FUZZ_CHECK(slogdet(batch, n, a.data(), o.sign.data(), o.logabs.data()) == TINYLA_OK, "slogdet");
  FUZZ_CHECK(det(batch, n, a.data(), o.det.data()) == TINYLA_OK, "det");
  FUZZ_CHECK(inv(batch, n, a.data(), o.inv.data(), o.info.data()) == TINYLA_OK, "inv");
  FUZZ_CHECK(inv_transposed(batch, n, a.data(), o.inv_t.data(), o.info_t.data()) == TINYLA_OK, "inv_transposed");
  FUZZ_CHECK(solve(batch, n, m, a.data(), rhs.data(), o.sol.data(), o.info_s.data()) == TINYLA_OK, "solve");
  FUZZ_CHECK(slogdet_inv(batch, n, a.data(), o.sign2.data(), o.logabs2.data(), o.inv2.data()) == TINYLA_OK, "");
  o.inv_in_place = a;
  FUZZ_CHECK(inv(batch, n, o.inv_in_place.data(), o.inv_in_place.data(), nullptr) == TINYLA_OK, "in place");
  // m + 1 tangents per matrix: tangent c is a with its rows r, (r + c) odd, zeroed (skipped rows
  // beside kept ones, in every lane group).
  const int k = m + 1;
  o.tangents.resize(batch * k * nn), o.grad.resize(batch * k), o.lap.resize(batch);
  for (int64_t b = 0; b < batch; ++b)
    for (int c = 0; c < k; ++c)
      for (size_t i = 0; i < nn; ++i) o.tangents[(b * k + c) * nn + i] = (i / n + c) % 2 ? T(0) : a[b * nn + i];
  FUZZ_CHECK(log_det_laplacian(batch, n, k, o.inv_t.data(), a.data(), o.tangents.data(), o.grad.data(), o.lap.data()) ==
                 TINYLA_OK,
             "log_det_laplacian");
  o.det2.resize(batch), o.adj.resize(batch * nn);
  FUZZ_CHECK(det_adjugate(batch, n, a.data(), o.det2.data(), o.adj.data()) == TINYLA_OK, "det_adjugate");
  FUZZ_CHECK(same(o.det2, o.det), "det_adjugate's det differs from det's");
  return o;
}

// The first output in which x and y differ ("" if none), with the entry: what a failure reports.
template <class T> std::string first_difference(const outputs<T>& x, const outputs<T>& y) {
  std::string where;
  auto check = [&](const char* name, const auto& u, const auto& v) {
    if (!where.empty()) return;
    if (u.size() != v.size()) where = std::string(name) + " (size)";
    for (size_t i = 0; where.empty() && i < u.size(); ++i)
      if (!same(u[i], v[i])) where = std::string(name) + " entry " + std::to_string(i);
  };
  check("sign", x.sign, y.sign), check("logabsdet", x.logabs, y.logabs), check("det", x.det, y.det);
  check("inv", x.inv, y.inv), check("inv_transposed", x.inv_t, y.inv_t), check("solve", x.sol, y.sol);
  check("info", x.info, y.info), check("solve's info", x.info_s, y.info_s);
  check("log_det_laplacian's grad", x.grad, y.grad), check("log_det_laplacian", x.lap, y.lap);
  check("adjugate", x.adj, y.adj);
  return where;
}

template <class T> long double norm_inf(const T* x, int n, int cols) {
  long double worst = 0;
  for (int i = 0; i < n; ++i) {
    long double row = 0;
    for (int j = 0; j < cols; ++j) row += std::abs(wide_t<T>(x[i * cols + j]));
    worst = std::max(worst, row);
  }
  return worst;
}

// ||X A - I||_inf / (||X|| ||A||) in long double: the left residual, which getri's scheme
// (LAPACK's and tinyla's) bounds; the right one grows with a row scaling (test_accuracy.cpp).
template <class T> long double inverse_residual(const T* a, const T* x, int n) {
  long double worst = 0;
  for (int i = 0; i < n; ++i) {
    long double row = 0;
    for (int j = 0; j < n; ++j) {
      wide_t<T> s = i == j ? -1 : 0;
      for (int k = 0; k < n; ++k) s += wide_t<T>(x[i * n + k]) * wide_t<T>(a[k * n + j]);
      row += std::abs(s);
    }
    worst = std::max(worst, row);
  }
  return worst / (norm_inf(a, n, n) * norm_inf(x, n, n));
}

// log_det_laplacian against its definition in long double, where every operand is finite and
// moderate (no product leaves the range): error within a few ulps of the terms' magnitudes.
template <class T> void check_log_det_laplacian(const T* a, const outputs<T>& o, int64_t b, int n, int k) {
  using W = wide_t<T>;
  using R = real_t<T>;
  const size_t nn = size_t(n) * n;
  const T* g = o.inv_t.data() + b * nn;
  const R moderate = std::ldexp(R(1), std::numeric_limits<R>::max_exponent / 8);
  for (size_t i = 0; i < nn; ++i)
    if (!(std::abs(a[i]) < moderate && std::abs(g[i]) < moderate)) return;  // also NaN
  W lap = 0;
  long double lap_scale = 0;
  for (size_t i = 0; i < nn; ++i) lap += W(g[i]) * W(a[i]), lap_scale += std::abs(W(g[i]) * W(a[i]));
  for (int c = 0; c < k; ++c) {
    const T* d = o.tangents.data() + (b * k + c) * nn;
    std::vector<W> p(nn), abs_p(nn);  // A^-1 D = G^T D and |G|^T |D|
    for (int i = 0; i < n; ++i)
      for (int l = 0; l < n; ++l)
        for (int j = 0; j < n; ++j) {
          p[i * n + l] += W(g[j * n + i]) * W(d[j * n + l]);
          abs_p[i * n + l] += std::abs(W(g[j * n + i])) * std::abs(W(d[j * n + l]));
        }
    W trace = 0;
    long double trace_scale = 0;
    for (int i = 0; i < n; ++i) {
      trace += p[i * n + i], trace_scale += std::abs(abs_p[i * n + i]);
      for (int l = 0; l < n; ++l)
        lap -= p[i * n + l] * p[l * n + i], lap_scale += std::abs(abs_p[i * n + l] * abs_p[l * n + i]);
    }
    const long double err = std::abs(W(o.grad[b * k + c]) - trace);
    FUZZ_CHECK(err <= 8.0L * (n + 2) * eps<T>() * trace_scale, "log_det_laplacian grad error %Lg", err);
  }
  const long double err = std::abs(W(o.lap[b]) - lap);
  FUZZ_CHECK(err <= 8.0L * (2 * n + 4) * eps<T>() * lap_scale + std::numeric_limits<R>::min(),
             "log_det_laplacian error %Lg (scale %Lg)", err, lap_scale);
}

template <class T> void check_matrix(const T* a, const outputs<T>& o, int64_t b, int n, int m) {
  using R = real_t<T>;
  const size_t nn = size_t(n) * n;
  const T s = o.sign[b];
  const R l = o.logabs[b];
  const int info = o.info[b];
  // One factorization, one answer: the fused and transposed ops agree with the plain ones bit for bit.
  FUZZ_CHECK(same(o.sign2[b], s) && same(o.logabs2[b], l), "slogdet_inv's slogdet, matrix %lld", (long long)b);
  FUZZ_CHECK(o.info_t[b] == info && (m == 0 || o.info_s[b] == info), "info %d %d %d", info, o.info_t[b], o.info_s[b]);
  for (size_t i = 0; i < nn; ++i) {
    FUZZ_CHECK(same(o.inv2[b * nn + i], o.inv[b * nn + i]) && same(o.inv_in_place[b * nn + i], o.inv[b * nn + i]),
               "slogdet_inv's or the in-place inverse, entry %zu", i);
    const size_t r = i / n, c = i % n;
    FUZZ_CHECK(same(o.inv_t[b * nn + c * n + r], o.inv[b * nn + i]), "inv_transposed, entry %zu", i);
  }
  // Ranges and the singular convention.
  bool nan_in = false, finite_in = true;
  R largest = 0;
  for (size_t i = 0; i < nn; ++i) {
    nan_in |= isnan_any(a[i]);  // also a NaN part beside an infinite one
    finite_in &= std::isfinite(std::abs(a[i]));
    largest = std::max(largest, R(std::abs(a[i])));
  }
  if (!isnan_any(s)) {
    const R mag = std::abs(s);
    FUZZ_CHECK(mag == 0 || std::abs(mag - 1) <= 8 * eps<T>(), "|sign| = %g", double(mag));
    if constexpr (!is_complex<T>) FUZZ_CHECK(s == 0 || s == 1 || s == -1, "sign %g", double(s));
    FUZZ_CHECK((mag == 0) == (info > 0), "sign %g with info %d", double(mag), info);
    if (mag == 0) FUZZ_CHECK(l == -std::numeric_limits<R>::infinity() && std::abs(o.det[b]) == 0, "singular");
  }
  if (nan_in) FUZZ_CHECK(isnan_any(s) || std::abs(s) == 0, "NaN input, sign %g", double(std::abs(s)));
  if (info > 0) {
    for (size_t i = 0; i < nn; ++i) FUZZ_CHECK(isnan_any(o.inv[b * nn + i]), "singular inverse not NaN");
    FUZZ_CHECK(isnan_any(o.lap[b]), "log_det_laplacian of a NaN-filled inverse not NaN");
  }
  check_log_det_laplacian(a, o, b, n, m + 1);
  // det = sign * exp(logabsdet) wherever that is in range.
  if (!isnan_any(s) && std::abs(s) != 0 && std::isfinite(l) &&
      std::abs(l) < R(0.9) * std::log(std::numeric_limits<R>::max())) {
    const T expect = s * std::exp(l);
    FUZZ_CHECK(std::abs(o.det[b] - expect) <= 16 * eps<T>() * (1 + std::abs(l)) * std::abs(expect), "det vs slogdet");
  }
  // n = 1: the entry is the determinant, whatever its size (also a complex one whose modulus
  // is past the largest number): logabsdet log|a|, sign a / |a|, det a, to a few ulps.
  if (n == 1 && !nan_in && std::isfinite(std::abs(std::real(a[0]))) && std::isfinite(std::abs(std::imag(a[0]))) &&
      a[0] != T(0)) {
    const wide_t<T> w = a[0];
    const long double mod = std::abs(w), want = std::log(mod);
    const long double part = std::max(std::abs(std::real(w)), std::abs(std::imag(w)));
    const wide_t<T> d = o.det[b], sign_error = wide_t<T>(s) - w / mod;
    FUZZ_CHECK(std::abs(l - want) <= 4 * eps<T>() * std::max(1.0L, std::abs(want)), "n = 1: logabsdet %Lg, log|a| %Lg",
               (long double)l, want);
    FUZZ_CHECK(std::abs(sign_error) <= 8 * eps<T>(), "n = 1: sign off by %Lg", std::abs(sign_error));
    // (the phase times the mantissa rounds once more where a part lands among the subnormals)
    const long double tol = 8 * eps<T>() * part + 2 * std::numeric_limits<R>::denorm_min();
    FUZZ_CHECK(std::abs(std::real(d) - std::real(w)) <= tol && std::abs(std::imag(d) - std::imag(w)) <= tol,
               "n = 1: det is not the entry (largest part %Lg)", part);
  }
  // Finite input of moderate size (no product or pivot leaves the range): a number, and as
  // accurate as LAPACK.
  const R moderate = std::ldexp(R(1), std::numeric_limits<R>::max_exponent / 4);
  if (!finite_in || largest > moderate || n == 0) return;
  FUZZ_CHECK(!isnan_any(s) && !std::isnan(l), "finite input gave NaN: sign %g logabsdet %g", double(std::abs(s)),
             double(l));
  const auto lapack = lapack_lu(a, n, true);
  const auto wide = wide_lu(a, n, false);
  // (Debian's OpenBLAS 0.3.21 may turn a subnormal pivot into NaN: no reference then.)
  if (info == 0 && lapack.info == 0 && std::isfinite(wide.logabs) && std::isfinite(lapack.logabs)) {
    // logabsdet: as close to the long-double value as LAPACK's, or within the first-order
    // bound n u cond(A) that any backward-stable LU meets (an ill-conditioned matrix may
    // round to an exact cancellation in one order of operations and not in another).
    const long double ours = std::abs(l - wide.logabs), theirs = std::abs(lapack.logabs - wide.logabs);
    if (ours > 16 * theirs) {  // only then the condition number (a long-double inverse)
      const long double cond = norm_inf(a, n, n) * norm_inf(wide_lu(a, n, true).inv.data(), n, n);
      const long double bound = 64 * (n + 1) * eps<T>() * (1 + std::abs(wide.logabs) + cond);
      FUZZ_CHECK(ours <= bound, "logabsdet error %Lg, LAPACK's %Lg, cond %Lg", ours, theirs, cond);
    }
    bool finite_x = true;
    for (size_t i = 0; i < nn; ++i)
      finite_x &= std::isfinite(std::abs(o.inv[b * nn + i])) && std::isfinite(std::abs(lapack.inv[i]));
    if (finite_x) {
      const long double r_ours = inverse_residual(a, o.inv.data() + b * nn, n);
      const long double r_theirs = inverse_residual(a, lapack.inv.data(), n);
      FUZZ_CHECK(r_ours <= std::max<long double>(16 * r_theirs, 4 * (n + 1) * eps<T>()),
                 "inverse residual %Lg, LAPACK's %Lg", r_ours, r_theirs);
    }
  }
}

template <class T> void fuzz(reader& in, int n, int64_t batch, int m) {
  std::mt19937_64 g;
  const auto a = make_input<T>(in, batch, n, g);
  if (std::getenv("TINYLA_FUZZ_PRINT"))  // to reproduce a failure elsewhere: the matrices, exactly
    for (size_t i = 0; i < a.size(); ++i) {
      if constexpr (is_complex<T>)
        std::fprintf(stderr, "(%a, %a)%c", double(a[i].real()), double(a[i].imag()), (i + 1) % n ? ' ' : '\n');
      else std::fprintf(stderr, "%a%c", double(a[i]), (i + 1) % n ? ' ' : '\n');
    }
  std::vector<T> rhs(size_t(batch) * n * m);
  for (auto& v : rhs) v = random_entry<T>(g);
  const outputs<T> o = run_ops(a, rhs, batch, n, m);
  for (int64_t b = 0; b < batch; ++b) check_matrix(a.data() + b * n * n, o, b, n, m);
  // Every CPU backend built and runnable here gives the same bits.
  const std::string chosen = tinyla::cpu::current_backend().name;
  for (const char* isa : {"scalar", "vec128", "avx2", "avx512"}) {
    if (!tinyla::cpu::select_backend(isa)) continue;
    const std::string diff = first_difference(run_ops(a, rhs, batch, n, m), o);
    FUZZ_CHECK(diff.empty(), "backend %s differs from %s: %s", isa, chosen.c_str(), diff.c_str());
  }
  tinyla::cpu::choose_backend_for_this_cpu();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool once = (tinyla_set_num_threads(1), true);
  (void)once;
  reader in{data, size};
  const int dtype = in.byte() % 4, size_code = in.byte(), batch = 1 + in.byte() % 6, nrhs = in.byte() % 5;
  const int n = size_code < 192 ? size_code % 11 : size_code % 41;  // mostly the small sizes: more executions
  switch (dtype) {
    case 0: fuzz<float>(in, n, batch, nrhs); break;
    case 1: fuzz<double>(in, n, batch, nrhs); break;
    case 2: fuzz<std::complex<float>>(in, n, batch, nrhs); break;
    default: fuzz<std::complex<double>>(in, n, batch, nrhs); break;
  }
  return 0;
}
