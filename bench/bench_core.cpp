// tinyla core benchmark: ns per matrix for tinyla (1 thread and all threads),
// a LAPACK getrf-per-matrix loop (what numpy/jnp do on CPU), and Eigen's
// fixed-size path (what a C++ user would write), all measured in this run,
// with their ratios, plus the machine's copy bandwidth for scale.
//
// Usage: tinyla_bench_core [--quick]
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
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

// Best-of-repeats wall time of fn(), in seconds.
double best_time(const std::function<void()>& fn) {
  double best = 1e30, total = 0;
  const double budget = quick ? 0.02 : 0.25;
  for (int rep = 0; rep < 50 && (rep < 3 || total < budget); ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
    total += dt;
  }
  return best;
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
      T sign = 1, logabs = 0;
      for (int j = 0; j < n; ++j) {
        T u = lu[size_t(j) * n + j];
        if (piv[j] != j + 1) sign = -sign;
        if (u < 0) sign = -sign;
        logabs += std::log(std::fabs(u));
      }
      out[i] = sign, out2[i] = logabs;
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

double copy_bandwidth_gbs(size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes);
  double t = best_time([&] { std::memcpy(dst.data(), src.data(), bytes); });
  return 2.0 * double(bytes) / t / 1e9;  // read + write
}

template <class T> void run_dtype(const char* dtype_name, const std::vector<int>& sizes) {
  std::printf("\n## %s\n\n", dtype_name);
  std::printf(
      "| op | N | batch | tinyla 1 thr | tinyla %d thr | LAPACK loop | Eigen fixed | vs LAPACK | vs Eigen | %d thr "
      "speedup |\n",
      tinyla_get_num_threads(), tinyla_get_num_threads());
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const int all_threads = tinyla_get_num_threads();
  for (kind k : {kind::slogdet, kind::inv, kind::solve1, kind::solven}) {
    for (int n : sizes) {
      int64_t batch = n <= 8 ? (1 << 18) : (n <= 16 ? (1 << 15) : (1 << 13));
      if (quick) batch /= 16;
      const int m = k == kind::solve1 ? 1 : n;
      std::mt19937_64 gen(42);
      std::uniform_real_distribution<T> dist(-1, 1);
      std::vector<T> a(size_t(batch) * n * n), rhs(size_t(batch) * n * m), out(size_t(batch) * n * n + batch),
          out2(batch);
      for (auto& v : a) v = dist(gen);
      for (auto& v : rhs) v = dist(gen);

      auto tinyla_call = [&] {
        if (k == kind::slogdet) tinyla_ops<T>::slogdet(batch, n, a.data(), out.data(), out2.data());
        else if (k == kind::inv) tinyla_ops<T>::inv(batch, n, a.data(), out.data());
        else tinyla_ops<T>::solve(batch, n, m, a.data(), rhs.data(), out.data());
      };
      tinyla_set_num_threads(1);
      const double t1 = best_time(tinyla_call);
      tinyla_set_num_threads(all_threads);
      const double tall = best_time(tinyla_call);
      const double tl = best_time([&] { lapack_loop<T>(k, batch, n, a.data(), rhs.data(), out.data(), out2.data()); });
      const double te = best_time([&] {
        eigen_dispatch<T>(n, k, batch, a.data(), rhs.data(), out.data(), out2.data(),
                          std::integer_sequence<int, 1, 2, 3, 4, 8, 16, 32>{});
      });
      const double ns = 1e9 / double(batch);
      std::printf("| %s | %d | %lld | %.2f | %.2f | %.1f | %.1f | %.1fx | %.1fx | %.2fx |\n", kind_name(k), n,
                  (long long)batch, t1 * ns, tall * ns, tl * ns, te * ns, tl / t1, te / t1, t1 / tall);
      if (k == kind::slogdet && n <= 2) {
        const double bytes = double(sizeof(T)) * (n * n + 2);  // read A, write sign + logabsdet
        const double bw = copy_bandwidth_gbs(size_t(batch) * sizeof(T) * (n * n + 2) / 2);
        std::printf(
            "|  | (N=%d: %.1f GB/s moved = %.0f%% of copy bandwidth %.1f GB/s, same working-set size, 1 thr) "
            "|||||||||\n",
            n, bytes / (t1 * ns), 100.0 * bytes / (t1 * ns) / bw, bw);
      }
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--quick") quick = true;
  if (openblas_set_num_threads) openblas_set_num_threads(1);
  tinyla_set_num_threads(0);
  std::printf("# tinyla core benchmark: ns per matrix (lower is better); ratios = other / tinyla 1 thread\n");
  std::printf("CPU backend: %s, threads: %d, hardware threads: %u\n", tinyla_cpu_backend(), tinyla_get_num_threads(),
              std::thread::hardware_concurrency());
  std::printf("copy bandwidth (memcpy, 256 MiB, 1 thread): %.1f GB/s\n", copy_bandwidth_gbs(size_t(256) << 20));
  const std::vector<int> sizes = {1, 2, 3, 4, 8, 16, 32};
  run_dtype<double>("float64", sizes);
  run_dtype<float>("float32", sizes);
  return 0;
}
