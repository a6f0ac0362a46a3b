// tinyla core benchmark: ns per matrix for tinyla (1 thread and all threads),
// a LAPACK getrf-per-matrix loop (what numpy/jnp do on CPU), Eigen's
// fixed-size path (what a C++ user would write) and, where Intel MKL is
// installed, MKL's batched and compact APIs, measured side by side in this
// run, with their ratios and two anchors: the memory floor (input read + output
// written at this machine's copy bandwidth for that working set) and the share of
// one core's FMA peak (measured at the backend's vector width). Then tinyla's time
// per matrix from a cache-sized input (256 KiB) to a DRAM-sized one (64 MiB), beside
// what DRAM costs this machine for a loop of the same bytes per time (--cache-sweep: that
// part alone).
//
// Usage: tinyla_bench_core [--quick] [--input-mib=8] [--cache-sweep]
// MKL: libmkl_rt.so.{3,2} from $TINYLA_MKL_LIB, the loader's path, or .venv/lib
// (`pip install mkl` in the dev venv), dlopen'ed: optional, no build dependency.
#include <dlfcn.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tinyla/tinyla.h"

extern "C" {
void sgetrf_(const int*, const int*, float*, const int*, int*, int*);
void dgetrf_(const int*, const int*, double*, const int*, int*, int*);
void sgetri_(const int*, float*, const int*, const int*, float*, const int*, int*);
void dgetri_(const int*, double*, const int*, const int*, double*, const int*, int*);
void sgetrs_(const char*, const int*, const int*, const float*, const int*, const int*, float*, const int*, int*,
             std::size_t);
void dgetrs_(const char*, const int*, const int*, const double*, const int*, const int*, double*, const int*, int*,
             std::size_t);
void openblas_set_num_threads(int) __attribute__((weak));
}

namespace {

bool quick = false;
using clock_type = std::chrono::steady_clock;

// Contenders timed side by side: round after round, each contender once per round
// (interleaved, so drifts of a shared machine hit all alike); each one's best.
std::vector<double> best_times(const std::vector<std::function<void()>>& fns) {
  std::vector<double> best(fns.size(), 1e30);
  const double budget = quick ? 0.05 : 0.6;
  double total = 0;
  for (int round = 0; round < 50 && (round < 3 || total < budget); ++round)
    for (size_t i = 0; i < fns.size(); ++i) {
      const auto t0 = clock_type::now();
      fns[i]();
      const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
      best[i] = std::min(best[i], dt);
      total += dt;
    }
  return best;
}
double best_time(const std::function<void()>& fn) { return best_times({fn})[0]; }

// Vector FMAs at the vector width of tinyla's backend, as fast as one core runs them:
// 12 independent chains (more than latency x pipes on current x86 and Arm cores), lanes
// the compiler cannot prove equal (else it computes one). Returns the flops done (an
// FMA counting 2).
template <int Bytes> double fma_chains(long iters) {
  typedef double V __attribute__((vector_size(Bytes)));  // (a `using` alias would drop the attribute)
  constexpr int lanes = Bytes / 8, chains = 12;
  double ramp[lanes];
  for (int l = 0; l < lanes; ++l) ramp[l] = l * 1e-9;
  asm("" : "+m"(ramp));
  V step, acc[chains];
  std::memcpy(&step, ramp, sizeof step);
  for (int i = 0; i < chains; ++i) acc[i] = step + (1.0 + i * 1e-3);
  const V m = step + 0.999999, c = step + 1e-6;
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < chains; ++i) acc[i] = acc[i] * m + c;  // one FMA each (-ffp-contract=fast, GCC's default)
  double sum = 0;
  for (int i = 0; i < chains; ++i) {
    double parts[lanes];
    std::memcpy(parts, &acc[i], sizeof parts);
    for (double part : parts) sum += part;
  }
  static volatile double sink;
  sink = sum;
  return 2.0 * lanes * chains * double(iters);
}
double backend_fma_chains(const std::string& backend, long iters) {
#if defined(__AVX512F__)
  if (backend == "avx512") return fma_chains<64>(iters);
#endif
#if defined(__AVX2__)
  if (backend == "avx2") return fma_chains<32>(iters);
#endif
  if (backend == "scalar") return fma_chains<8>(iters);
  return fma_chains<16>(iters);
}
long fma_iterations() { return quick ? 1 << 20 : 1 << 23; }
// The FMA peak of one core (flops per second) at the backend's vector width, measured.
double backend_fma_peak(const std::string& backend) {
  double flops = 0;
  const double seconds = best_time([&] { flops = backend_fma_chains(backend, fma_iterations()); });
  return flops / seconds;
}

// What this machine gives `threads` threads at once over one, for work they share
// nothing in: each runs `work` (the same amount); speedup = threads x t(1) / t(threads).
// On a shared or virtual machine it is below `threads`: the ceiling for tinyla's own
// speedup on the same threads, measured beside it.
double machine_speedup(int threads, const std::function<void(int)>& work) {
  const auto t = best_times({[&] { work(0); },
                             [&] {
                               std::vector<std::thread> others;
                               for (int i = 1; i < threads; ++i) others.emplace_back(work, i);
                               work(0);
                               for (auto& other : others) other.join();
                             }});
  return threads * t[0] / t[1];
}

template <class T> struct lapack;
template <> struct lapack<float> {
  static void getrf(int n, float* a, int* p, int* info) { sgetrf_(&n, &n, a, &n, p, info); }
  static void getri(int n, float* a, const int* p, float* w, int lw, int* info) { sgetri_(&n, a, &n, p, w, &lw, info); }
  static void getrs(int n, int m, const float* a, const int* p, float* b, int* info) {
    sgetrs_("N", &n, &m, a, &n, p, b, &n, info, 1);
  }
};
template <> struct lapack<double> {
  static void getrf(int n, double* a, int* p, int* info) { dgetrf_(&n, &n, a, &n, p, info); }
  static void getri(int n, double* a, const int* p, double* w, int lw, int* info) {
    dgetri_(&n, a, &n, p, w, &lw, info);
  }
  static void getrs(int n, int m, const double* a, const int* p, double* b, int* info) {
    dgetrs_("N", &n, &m, a, &n, p, b, &n, info, 1);
  }
};

template <class T> struct tinyla_ops;
#define TINYLA_BIND(T, sfx)                                                                                            \
  template <> struct tinyla_ops<T> {                                                                                   \
    static void slogdet(int64_t b, int64_t n, const T* a, T* s, T* l) { tinyla_slogdet_##sfx(b, n, a, s, l); }         \
    static void inv(int64_t b, int64_t n, const T* a, T* x) { tinyla_inv_##sfx(b, n, a, x, nullptr); }                 \
    static void solve(int64_t b, int64_t n, int64_t m, const T* a, const T* r, T* x) {                                 \
      tinyla_solve_##sfx(b, n, m, a, r, x, nullptr);                                                                   \
    }                                                                                                                  \
  };
TINYLA_BIND(float, f32)
TINYLA_BIND(double, f64)

enum class kind { slogdet, inv, solve1, solven };
const char* kind_name(kind k) {
  switch (k) {
    case kind::slogdet: return "slogdet";
    case kind::inv: return "inv";
    case kind::solve1: return "solve(nrhs=1)";
    case kind::solven: return "solve(nrhs=n)";
  }
  return "";
}

// sign and log|det| from getrf's factors (pivots 1-based; null: no pivoting).
template <class T> void slogdet_of_lu(int n, const T* lu, const int* piv, T& sign, T& logabs) {
  sign = 1, logabs = 0;
  for (int j = 0; j < n; ++j) {
    const T u = lu[size_t(j) * n + j];
    if (piv && piv[j] != j + 1) sign = -sign;
    if (u < 0) sign = -sign;
    logabs += std::log(std::fabs(u));
  }
}

// LAPACK loop: copy (getrf works in place; the input must survive), factor, finish.
// The matrices are row-major, i.e. LAPACK sees A^T: same |det|, and
// inv(A^T)^T = inv(A), so no transposes are needed for slogdet and inv.
template <class T> void lapack_loop(kind k, int64_t batch, int n, const T* a, const T* rhs, T* out, T* out2) {
  std::vector<T> lu(size_t(n) * n), work(size_t(64) * n + 1), b(size_t(n) * n);
  std::vector<int> piv(n);
  const int m = k == kind::solve1 ? 1 : n;
  for (int64_t i = 0; i < batch; ++i) {
    std::memcpy(lu.data(), a + i * n * n, sizeof(T) * n * n);
    int info = 0;
    lapack<T>::getrf(n, lu.data(), piv.data(), &info);
    if (k == kind::slogdet) {
      slogdet_of_lu(n, lu.data(), piv.data(), out[i], out2[i]);
    } else if (k == kind::inv) {
      lapack<T>::getri(n, lu.data(), piv.data(), work.data(), int(work.size()), &info);
      std::memcpy(out + i * n * n, lu.data(), sizeof(T) * n * n);
    } else {
      // Row-major A is A^T to LAPACK: solve with trans = 'T' would be the
      // direct call; transposing B costs the same either way.
      std::memcpy(b.data(), rhs + i * n * m, sizeof(T) * n * m);
      lapack<T>::getrs(n, m, lu.data(), piv.data(), b.data(), &info);
      std::memcpy(out + i * n * m, b.data(), sizeof(T) * n * m);
    }
  }
}

// Intel MKL, dlopen'ed when present (its LP64 interface: MKL_INT = int). Two contenders:
// - "MKL batch": ?getrf_batch_strided + ?getri_oop_batch_strided / ?getrs_batch_strided,
//   partial pivoting as LAPACK (tinyla's numerics);
// - "MKL compact": the compact API without pivoting (?getrfnp_compact, ?getrinp_compact;
//   ?trsm_compact for solves), matrices interleaved across SIMD lanes as tinyla's lane
//   groups are. No pivoting: not tinyla's accuracy, a speed reference only. The pack
//   into and unpack out of MKL's compact layout are counted (tinyla counts its own).
// Row-major input is A^T to MKL's column-major routines, as in lapack_loop.
struct mkl_api {
  enum : int { col_major = 102, left = 141, upper = 121, lower = 122, trans = 112, non_unit = 131, unit = 132 };
  void* handle = nullptr;
  void (*set_num_threads)(int) = nullptr;
  int (*get_format_compact)() = nullptr;
  template <class T> struct fns {
    void (*getrf_batch)(const int*, const int*, T*, const int*, const int*, int*, const int*, const int*, int*);
    void (*getri_oop_batch)(const int*, const T*, const int*, const int*, const int*, const int*, T*, const int*,
                            const int*, const int*, int*);
    void (*getrs_batch)(const char*, const int*, const int*, const T*, const int*, const int*, const int*, const int*,
                        T*, const int*, const int*, const int*, int*);
    int (*get_size_compact)(int, int, int, int);
    void (*gepack_compact)(int, int, int, const T* const*, int, T*, int, int, int);
    void (*geunpack_compact)(int, int, int, T* const*, int, const T*, int, int, int);
    void (*getrfnp_compact)(int, int, int, T*, int, int*, int, int);
    void (*getrinp_compact)(int, int, T*, int, T*, int, int*, int, int);
    void (*trsm_compact)(int, int, int, int, int, int, int, T, const T*, int, T*, int, int, int);
  };
  fns<float> s{};
  fns<double> d{};
  template <class T> const fns<T>& get() const {
    if constexpr (sizeof(T) == 4) return s;
    else return d;
  }
  std::string where;

  mkl_api() {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("TINYLA_MKL_LIB"); env && *env) paths.push_back(env);
    for (const char* dir : {"", ".venv/lib/"})
      for (const char* version : {"3", "2"}) paths.push_back(std::string(dir) + "libmkl_rt.so." + version);
    for (const auto& p : paths)
      if ((handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        where = p;
        break;
      }
    if (!handle) return;
    bool ok = true;
    auto bind = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(handle, name));
      ok = ok && f;
    };
    bind(set_num_threads, "MKL_Set_Num_Threads");
    bind(get_format_compact, "mkl_get_format_compact");
    auto bind_type = [&](auto& f, const char* p) {
      const std::string x = p;
      bind(f.getrf_batch, (x + "getrf_batch_strided").c_str());
      bind(f.getri_oop_batch, (x + "getri_oop_batch_strided").c_str());
      bind(f.getrs_batch, (x + "getrs_batch_strided").c_str());
      bind(f.get_size_compact, ("mkl_" + x + "get_size_compact").c_str());
      bind(f.gepack_compact, ("mkl_" + x + "gepack_compact").c_str());
      bind(f.geunpack_compact, ("mkl_" + x + "geunpack_compact").c_str());
      bind(f.getrfnp_compact, ("mkl_" + x + "getrfnp_compact").c_str());
      bind(f.getrinp_compact, ("mkl_" + x + "getrinp_compact").c_str());
      bind(f.trsm_compact, ("mkl_" + x + "trsm_compact").c_str());
    };
    bind_type(s, "s");
    bind_type(d, "d");
    if (!ok) {
      where = "found at " + where + " but without the batched/compact API";
      dlclose(handle);
      handle = nullptr;
      return;
    }
    set_num_threads(1);
  }
  bool present() const { return handle != nullptr; }
};
const mkl_api& mkl() {
  static const mkl_api api;
  return api;
}

// Scratch of one MKL contender for one workload, allocated once (not timed).
template <class T> struct mkl_runner {
  kind k;
  int n, m, batch;
  const T *a, *rhs;
  T *out, *out2;
  std::vector<T> lu, compact, compact_b, work;
  std::vector<int> piv, info;
  std::vector<const T*> in_ptrs, rhs_ptrs;
  std::vector<T*> out_ptrs;
  int format = 0;

  mkl_runner(kind k_, int n_, int m_, int64_t batch_, const T* a_, const T* rhs_, T* out_, T* out2_)
      : k(k_), n(n_), m(m_), batch(int(batch_)), a(a_), rhs(rhs_), out(out_), out2(out2_) {
    lu.resize(size_t(batch) * n * n), piv.resize(size_t(batch) * n), info.resize(size_t(batch));
    format = mkl().get_format_compact();
    const auto& f = mkl().get<T>();
    compact.resize(size_t(f.get_size_compact(n, n, format, batch)) / sizeof(T) + 1);
    if (k == kind::solve1 || k == kind::solven)
      compact_b.resize(size_t(f.get_size_compact(n, m, format, batch)) / sizeof(T) + 1);
    if (k == kind::inv) {  // workspace query
      T size = 0;
      int status = 0;
      f.getrinp_compact(col_major, n, compact.data(), n, &size, -1, &status, format, batch);
      work.resize(std::max<size_t>(1, size_t(size)));
    }
    for (int i = 0; i < batch; ++i) {
      in_ptrs.push_back(a + size_t(i) * n * n);
      out_ptrs.push_back(k == kind::slogdet ? lu.data() + size_t(i) * n * n
                                            : out + size_t(i) * n * (k == kind::inv ? n : m));
      if (rhs) rhs_ptrs.push_back(rhs + size_t(i) * n * m);
    }
  }
  void slogdet_from_lu(bool pivoted) {
    for (int i = 0; i < batch; ++i)
      slogdet_of_lu(n, lu.data() + size_t(i) * n * n, pivoted ? piv.data() + size_t(i) * n : nullptr, out[i], out2[i]);
  }
  void batched() {
    const auto& f = mkl().get<T>();
    const int nn = n * n, piv_stride = n;
    std::memcpy(lu.data(), a, sizeof(T) * lu.size());  // getrf works in place; the input must survive
    f.getrf_batch(&n, &n, lu.data(), &n, &nn, piv.data(), &piv_stride, &batch, info.data());
    if (k == kind::slogdet) return slogdet_from_lu(true);
    if (k == kind::inv)
      return f.getri_oop_batch(&n, lu.data(), &n, &nn, piv.data(), &piv_stride, out, &n, &nn, &batch, info.data());
    // A X = B through the factors of A^T (trans = 'T'), B as MKL sees its memory: for m = 1
    // tinyla's solve; for m > 1 B^T (the same work without two transposes, as in lapack_loop).
    const int nm = n * m;
    std::memcpy(out, rhs, sizeof(T) * size_t(batch) * nm);
    f.getrs_batch("T", &n, &m, lu.data(), &n, &nn, piv.data(), &piv_stride, out, &n, &nm, &batch, info.data());
  }
  void compact_no_pivot() {
    const auto& f = mkl().get<T>();
    f.gepack_compact(col_major, n, n, in_ptrs.data(), n, compact.data(), n, format, batch);
    int status = 0;
    f.getrfnp_compact(col_major, n, n, compact.data(), n, &status, format, batch);
    if (k == kind::slogdet) {
      f.geunpack_compact(col_major, n, n, out_ptrs.data(), n, compact.data(), n, format, batch);
      return slogdet_from_lu(false);
    }
    if (k == kind::inv) {
      f.getrinp_compact(col_major, n, compact.data(), n, work.data(), int(work.size()), &status, format, batch);
      return f.geunpack_compact(col_major, n, n, out_ptrs.data(), n, compact.data(), n, format, batch);
    }
    // A X = B as U^T L^T X = B with L U = A^T, B as MKL sees its memory (as in batched()).
    f.gepack_compact(col_major, n, m, rhs_ptrs.data(), n, compact_b.data(), n, format, batch);
    f.trsm_compact(col_major, left, upper, trans, non_unit, n, m, T(1), compact.data(), n, compact_b.data(), n, format,
                   batch);
    f.trsm_compact(col_major, left, lower, trans, unit, n, m, T(1), compact.data(), n, compact_b.data(), n, format,
                   batch);
    f.geunpack_compact(col_major, n, m, out_ptrs.data(), n, compact_b.data(), n, format, batch);
  }
  static constexpr int col_major = mkl_api::col_major, left = mkl_api::left, lower = mkl_api::lower,
                       upper = mkl_api::upper, trans = mkl_api::trans, unit = mkl_api::unit,
                       non_unit = mkl_api::non_unit;
};

template <class T, int N> void eigen_loop(kind k, int64_t batch, const T* a, const T* rhs, T* out, T* out2) {
  using Mat = Eigen::Matrix<T, N, N, (N > 1 ? Eigen::RowMajor : Eigen::ColMajor)>;
  for (int64_t i = 0; i < batch; ++i) {
    Eigen::Map<const Mat> A(a + i * N * N);
    if (k == kind::slogdet) {
      T d = A.determinant();
      out[i] = d > 0 ? T(1) : (d < 0 ? T(-1) : T(0));
      out2[i] = std::log(std::fabs(d));
    } else if (k == kind::inv) {
      Eigen::Map<Mat>(out + i * N * N) = A.inverse();
    } else if (k == kind::solve1) {
      using Vec = Eigen::Matrix<T, N, 1>;
      Eigen::Map<Vec>(out + i * N) = Eigen::PartialPivLU<Mat>(A).solve(Eigen::Map<const Vec>(rhs + i * N));
    } else {
      Eigen::Map<Mat>(out + i * N * N) = Eigen::PartialPivLU<Mat>(A).solve(Eigen::Map<const Mat>(rhs + i * N * N));
    }
  }
}

template <class T, int... Ns> void eigen_dispatch(int n, kind k, int64_t batch, const T* a, const T* rhs, T* out,
                                                  T* out2, std::integer_sequence<int, Ns...>) {
  ((n == Ns ? eigen_loop<T, Ns>(k, batch, a, rhs, out, out2) : void()), ...);
}

// A vectorized copy loop, not memcpy (glibc's rep movsb took 39 us for 64 KiB on a Zen 3
// guest, 3 us for 128 KiB). The + 0.0 keeps GCC from calling memcpy for it.
void copy_doubles(const double* __restrict src, double* __restrict dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = src[i] + 0.0;
}

// Copy bandwidth (read + write, bytes per second) of a working set of `bytes`, one thread.
double copy_bandwidth(size_t bytes) {
  static std::map<size_t, double> measured;
  auto [it, fresh] = measured.try_emplace(bytes, 0.0);
  if (fresh) {
    const size_t count = bytes / 2 / sizeof(double);
    std::vector<double> src(count, 1.0), dst(count);
    it->second = double(bytes) / best_time([&] { copy_doubles(src.data(), dst.data(), count); });
  }
  return it->second;
}

// The machine's own speedup on `threads` threads (machine_speedup) for the FMA loop and
// for copying 8 MiB each (working sets as bench's 8 MiB input), printed beside tinyla's.
void print_machine_speedup(const std::string& backend, int threads, const char* when) {
  if (threads < 2) return;
  const double fma = machine_speedup(threads, [&](int) { backend_fma_chains(backend, fma_iterations() / 4); });
  const size_t count = (8 << 20) / 2 / sizeof(double);
  std::vector<std::vector<double>> src(threads, std::vector<double>(count, 1.0)), dst(threads, src[0]);
  const double copy = machine_speedup(threads, [&](int i) { copy_doubles(src[i].data(), dst[i].data(), count); });
  std::printf(
      "this machine's own speedup on %d threads over 1 (%s; the ceiling of tinyla's): FMA loop %.2fx, "
      "copy of 8 MiB each %.2fx\n",
      threads, when, fma, copy);
}

// One op at one n on a batch of random matrices whose input takes `input_bytes`.
template <class T> struct workload {
  kind k;
  int n, m;
  int64_t batch;
  std::vector<T> a, rhs, out, out2;

  workload(kind k_, int n_, double input_bytes) : k(k_), n(n_), m(k_ == kind::solve1 ? 1 : n_) {
    batch = std::max<int64_t>(64, int64_t(input_bytes / (sizeof(T) * inputs_per_matrix())));
    std::mt19937_64 gen(42);
    std::uniform_real_distribution<T> dist(-1, 1);
    a.resize(size_t(batch) * n * n), rhs.resize(is_solve() ? size_t(batch) * n * m : 0);
    out.resize(size_t(batch) * n * n), out2.resize(size_t(batch));
    for (auto& v : a) v = dist(gen);
    for (auto& v : rhs) v = dist(gen);
  }
  void tinyla() {
    if (k == kind::slogdet) tinyla_ops<T>::slogdet(batch, n, a.data(), out.data(), out2.data());
    else if (k == kind::inv) tinyla_ops<T>::inv(batch, n, a.data(), out.data());
    else tinyla_ops<T>::solve(batch, n, m, a.data(), rhs.data(), out.data());
  }
  void lapack() { lapack_loop<T>(k, batch, n, a.data(), rhs.data(), out.data(), out2.data()); }
  void eigen() {
    eigen_dispatch<T>(n, k, batch, a.data(), rhs.data(), out.data(), out2.data(),
                      std::integer_sequence<int, 1, 2, 3, 4, 8, 16, 32>{});
  }
  bool is_solve() const { return k == kind::solve1 || k == kind::solven; }
  double inputs_per_matrix() const { return double(n) * n + (is_solve() ? double(n) * m : 0); }
  // What one matrix must move at least: its input read, its output written.
  double bytes_per_matrix() const {
    const double outputs = k == kind::slogdet ? 2 : (k == kind::inv ? double(n) * n : double(n) * m);
    return sizeof(T) * (inputs_per_matrix() + outputs);
  }
  // LAPACK's operation counts (an FMA is 2): getrf 2n^3/3, + getri 4n^3/3, + getrs 2n^2 m.
  double flops_per_matrix() const {
    const double n3 = double(n) * n * n;
    if (k == kind::slogdet) return 2 * n3 / 3;
    if (k == kind::inv) return 2 * n3;
    return 2 * n3 / 3 + 2.0 * n * n * m;
  }
};

const std::vector<int> sizes = {1, 2, 3, 4, 8, 16, 32};
constexpr kind all_kinds[] = {kind::slogdet, kind::inv, kind::solve1, kind::solven};
double fma_peak_f64 = 0;  // flops per second, one core

template <class T> void run_dtype(const char* dtype_name, double input_bytes) {
  const int all_threads = tinyla_get_num_threads();
  const double peak = fma_peak_f64 * (8.0 / sizeof(T));
  std::printf("\n## %s, %.0f MiB of input\n\n", dtype_name, input_bytes / (1 << 20));
  const bool with_mkl = mkl().present();
  std::printf(
      "| op | N | batch | tinyla 1 thr | tinyla %d thr | %d thr speedup | LAPACK loop | Eigen fixed | MKL batch | MKL "
      "compact | vs LAPACK | vs Eigen | vs MKL batch | vs MKL compact | memory floor | of floor | of FMA peak |\n",
      all_threads, all_threads);
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (kind k : all_kinds)
    for (int n : sizes) {
      workload<T> w(k, n, input_bytes);
      std::vector<std::function<void()>> contenders = {[&] { tinyla_set_num_threads(1), w.tinyla(); },
                                                       [&] { tinyla_set_num_threads(all_threads), w.tinyla(); },
                                                       [&] { w.lapack(); }, [&] { w.eigen(); }};
      std::optional<mkl_runner<T>> mr;
      if (with_mkl) {
        mr.emplace(k, n, w.m, w.batch, w.a.data(), w.rhs.empty() ? nullptr : w.rhs.data(), w.out.data(), w.out2.data());
        contenders.push_back([&] { mr->batched(); });
        contenders.push_back([&] { mr->compact_no_pivot(); });
      }
      const auto t = best_times(contenders);
      const double ns = 1e9 / double(w.batch), t1 = t[0] * ns;
      const double floor_ns = 1e9 * w.bytes_per_matrix() / copy_bandwidth(size_t(w.batch * w.bytes_per_matrix()));
      char mkl_cols[160] = "| - | - | ", mkl_ratios[160] = "| - | - | ";
      if (with_mkl) {
        std::snprintf(mkl_cols, sizeof mkl_cols, "| %.1f | %.1f | ", t[4] * ns, t[5] * ns);
        std::snprintf(mkl_ratios, sizeof mkl_ratios, "| %.2fx | %.2fx | ", t[4] / t[0], t[5] / t[0]);
      }
      std::printf("| %s | %d | %lld | %.2f | %.2f | %.2fx | %.1f | %.1f %s%.1fx | %.2fx %s%.2f | %.0f%% | %.1f%% |\n",
                  kind_name(k), n, (long long)w.batch, t1, t[1] * ns, t[0] / t[1], t[2] * ns, t[3] * ns, mkl_cols,
                  t[2] / t[0], t[3] / t[0], mkl_ratios, floor_ns, 100 * floor_ns / t1,
                  100 * w.flops_per_matrix() / (t1 * 1e-9) / peak);
      std::fflush(stdout);
    }
}

// The machine's own cost of DRAM for work like tinyla's at n >= 8: per 8 KiB chunk (four
// 16 x 16 float64 matrices), read it, then `work` dependent multiply-adds (400: ~0.7 us on a
// Zen 3, where the n = 16 determinants of the four take ~1.7 us, so the loop asks more of
// DRAM than they do), with the next chunk prefetched or not. Returns the times per chunk at
// 256 KiB and at 64 MiB: their ratio is what no such kernel here escapes.
std::pair<double, double> dram_cost_with_work(int work, bool prefetch) {
  constexpr size_t chunk = 8 << 10;
  double t[2];
  for (int i = 0; i < 2; ++i) {
    const size_t bytes = i == 0 ? size_t(256) << 10 : size_t(64) << 20, chunks = bytes / chunk;
    std::vector<double> data(bytes / sizeof(double), 1.0);
    volatile double sink = 0;
    t[i] = best_time([&] {
             for (size_t c = 0; c < chunks; ++c) {
               const double* p = data.data() + c * (chunk / sizeof(double));
               if (prefetch && c + 1 < chunks)
                 for (size_t off = 0; off < chunk; off += 64)
                   __builtin_prefetch(reinterpret_cast<const char*>(p) + chunk + off);
               double s[4] = {0, 0, 0, 0};
               for (size_t j = 0; j < chunk / sizeof(double); j += 4)
                 for (int l = 0; l < 4; ++l) s[l] += p[j + l];
               double x = s[0] + s[1] + s[2] + s[3];
               for (int k = 0; k < work; ++k) x = x * 0.999999 + 1e-9;
               sink = sink + x;
             }
           }) /
           double(chunks);
  }
  return {t[0], t[1]};
}

// tinyla on 1 thread with inputs from cache-sized to DRAM-sized.
template <class T> void run_cache_sweep(const char* dtype_name) {
  const double inputs[] = {256.0 * 1024, 8.0 * (1 << 20), 64.0 * (1 << 20)};
  std::printf("\n## %s, tinyla 1 thread, ns per matrix by input size\n\n", dtype_name);
  for (bool prefetch : {false, true}) {
    const auto [near, far] = dram_cost_with_work(400, prefetch);
    std::printf(
        "this machine, per 8 KiB chunk read and 400 dependent multiply-adds (%s): %.0f ns at 256 KiB, %.0f ns "
        "at 64 MiB (%.2fx)\n",
        prefetch ? "the next chunk prefetched" : "hardware prefetch alone", 1e9 * near, 1e9 * far, far / near);
  }
  std::printf("\n");
  std::printf("| op | N | 256 KiB | 8 MiB | 64 MiB | 64 MiB / 256 KiB |\n|---|---:|---:|---:|---:|---:|\n");
  tinyla_set_num_threads(1);
  for (kind k : all_kinds)
    for (int n : sizes) {
      double ns[3];
      for (int i = 0; i < 3; ++i) {
        workload<T> w(k, n, inputs[i]);
        ns[i] = 1e9 * best_time([&] { w.tinyla(); }) / double(w.batch);
      }
      std::printf("| %s | %d | %.2f | %.2f | %.2f | %.2fx |\n", kind_name(k), n, ns[0], ns[1], ns[2], ns[2] / ns[0]);
      std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
  double input_mib = 8;
  bool sweep_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") quick = true;
    else if (arg == "--cache-sweep") sweep_only = true;
    else if (arg.rfind("--input-mib=", 0) == 0) input_mib = std::stod(arg.substr(12));
    else {
      std::fprintf(stderr, "usage: tinyla_bench_core [--quick] [--input-mib=8] [--cache-sweep]\n");
      return 2;
    }
  }
  if (sweep_only) {
    run_cache_sweep<double>("float64");
    return 0;
  }
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  tinyla_set_num_threads(0);
  const std::string backend = tinyla_cpu_backend();
  fma_peak_f64 = backend_fma_peak(backend);
  std::printf("# tinyla core benchmark: ns per matrix (lower is better); ratios = other / tinyla 1 thread\n");
  std::printf("CPU backend: %s, threads: %d, hardware threads: %u\n", backend.c_str(), tinyla_get_num_threads(),
              std::thread::hardware_concurrency());
  std::printf("FMA peak of one core at the backend's vector width (measured): %.1f GFLOP/s float64\n",
              fma_peak_f64 / 1e9);
  std::printf("copy bandwidth, 1 thread: %.1f GB/s (256 KiB), %.1f GB/s (8 MiB), %.1f GB/s (256 MiB)\n",
              copy_bandwidth(256 << 10) / 1e9, copy_bandwidth(8 << 20) / 1e9, copy_bandwidth(size_t(256) << 20) / 1e9);
  std::printf("Intel MKL (batch: ?getrf_batch_strided + getri_oop / getrs; compact: no pivoting, pack counted): %s\n",
              mkl().present() ? mkl().where.c_str() : (mkl().where.empty() ? "not installed" : mkl().where.c_str()));
  std::printf(
      "memory floor = input read + output written at the copy bandwidth of that working set; FMA peak share of "
      "LAPACK's operation counts (getrf 2n^3/3, getri 4n^3/3, getrs 2n^2 nrhs)\n");
  print_machine_speedup(backend, tinyla_get_num_threads(), "before the tables");
  run_dtype<double>("float64", input_mib * (1 << 20));
  run_dtype<float>("float32", input_mib * (1 << 20));
  std::printf("\n");
  print_machine_speedup(backend, tinyla_get_num_threads(), "after them");
  run_cache_sweep<double>("float64");
  return 0;
}
