// n > max_fast_n: one LAPACK getrf (+ getri / getrs) per matrix. The matrix is
// transposed into column-major scratch first, so LAPACK pivots the rows of A
// itself and pivots, info and results follow the same conventions as the fast
// path. The determinant is accumulated with the fast path's own det_accum.
//
// OpenBLAS 0.3.21 (Debian 12's) getrf scales by 1/pivot even when the pivot
// is subnormal (1/pivot = inf: the multipliers become inf or NaN). Where
// getrf's LU of an input without NaN holds a subnormal pivot or a NaN, the
// matrix is recomputed by the fast path's elimination (scalar lanes, run-time
// n), which divides by such pivots as reference getf2 does. The decision is
// getrf's alone, so every op (slogdet, inv, slogdet_inv, solve) takes the same
// path for a matrix and they agree bit for bit.
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/backend.hpp"
#include "kernels/lu.hpp"

extern "C" {
#define TINYLA_LAPACK_PROTOS(p, T)                                                                                     \
  void p##getrf_(const int* m, const int* n, T* a, const int* lda, int* ipiv, int* info);                              \
  void p##getri_(const int* n, T* a, const int* lda, const int* ipiv, T* work, const int* lwork, int* info);           \
  void p##getrs_(const char* trans, const int* n, const int* nrhs, const T* a, const int* lda, const int* ipiv, T* b,  \
                 const int* ldb, int* info, std::size_t trans_len);
TINYLA_LAPACK_PROTOS(s, float)
TINYLA_LAPACK_PROTOS(d, double)
TINYLA_LAPACK_PROTOS(c, std::complex<float>)
TINYLA_LAPACK_PROTOS(z, std::complex<double>)
#undef TINYLA_LAPACK_PROTOS
}

namespace tinyla::cpu {
namespace {

template <class T> struct lapack;
#define TINYLA_LAPACK_BIND(p, T)                                                                                       \
  template <> struct lapack<T> {                                                                                       \
    static constexpr auto getrf = &p##getrf_;                                                                          \
    static constexpr auto getri = &p##getri_;                                                                          \
    static constexpr auto getrs = &p##getrs_;                                                                          \
  };
TINYLA_LAPACK_BIND(s, float)
TINYLA_LAPACK_BIND(d, double)
TINYLA_LAPACK_BIND(c, std::complex<float>)
TINYLA_LAPACK_BIND(z, std::complex<double>)
#undef TINYLA_LAPACK_BIND

// Any NaN part, also beside an infinite one (as the fast path's det_accum).
template <class T> bool is_nan(T x) { return x != x; }

// dst (cols x rows, row-major) = transpose of src (rows x cols, row-major).
template <class T> void transpose(const T* src, T* dst, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) dst[std::int64_t(j) * rows + i] = src[std::int64_t(i) * cols + j];
}

template <class T> void fill_nan(T* x, std::int64_t count) {
  const auto nan = kern::nan_element<kern::kernel_element<T>>();
  for (std::int64_t i = 0; i < count; ++i) std::memcpy(static_cast<void*>(x + i), &nan, sizeof(T));
}

template <class T> bool any_nan(const std::vector<T>& v) {
  return std::any_of(v.begin(), v.end(), [](T x) { return is_nan(x); });
}

// getrf's result cannot be trusted: a NaN it made, or a subnormal pivot (see above).
template <class T> bool lapack_went_wrong(const std::vector<T>& lu, int n) {
  for (int i = 0; i < n; ++i) {
    kern::kernel_element<T> pivot;
    std::memcpy(static_cast<void*>(&pivot), &lu[std::int64_t(i) * n + i], sizeof(T));
    const auto m = kern::max_component(pivot);
    if (m != 0 && m < std::numeric_limits<decltype(m)>::min()) return true;
  }
  return any_nan(lu);
}

// det(A) from getrf's factors (lu, column-major), accumulated as the fast path's det_accum.
template <class E, class T>
kern::det_accum<E> determinant_of_factors(const std::vector<T>& lu, const std::vector<int>& ipiv) {
  const int n = int(ipiv.size());
  kern::det_accum<E> acc;
  for (int i = 0; i < n; ++i) {
    E u;
    std::memcpy(&u, &lu[std::int64_t(i) * n + i], sizeof(E));
    acc.flip(ipiv[i] != i + 1);
    acc.template multiply<true>(u);
    if ((i & 15) == 15) acc.normalize();
  }
  acc.normalize();
  return acc;
}

// adj(A) into x (adj(A)^T with transposed) from getrf's factors (lu, column-major), as
// adjugate in kernels/lu.hpp forms it: with the zero pivots z_1 < ... < z_m replaced by 1,
// getri gives G = A~^-1 = Y~ P, and adj(A) = det(P) det(U~) prod_i Y~[z_i][z_i+1] (Y~ e_z1)
// (e_zm^T G), where Y~'s column j is G's column pi(j) (pi(j): the row of A at place j);
// det(A) A^-1 where no pivot is zero. acc: det(A) from the same factors.
template <class T, class E> void adjugate_from_getrf(std::vector<T>& lu, const std::vector<int>& ipiv,
                                                     const kern::det_accum<E>& acc, std::vector<T>& work, T* x,
                                                     bool transposed) {
  const int n = int(ipiv.size());
  const auto diagonal = [&](int i) -> T& { return lu[std::int64_t(i) * n + i]; };
  std::vector<int> zeros;
  for (int i = 0; i < n; ++i)
    if (diagonal(i) == T(0)) zeros.push_back(i), diagonal(i) = T(1);
  const kern::det_accum<E> scale = zeros.empty() ? acc : determinant_of_factors<E>(lu, ipiv);  // det(P) det(U~)
  const int lwork = int(work.size());
  int info = 0;
  lapack<T>::getri(&n, lu.data(), &n, ipiv.data(), work.data(), &lwork, &info);
  const auto g = [&](int i, int j) {
    E v;
    std::memcpy(&v, &lu[std::int64_t(j) * n + i], sizeof(E));
    return v;
  };
  std::vector<int> row_at(n);  // pi: getrf's row swaps applied to 0..n-1
  for (int i = 0; i < n; ++i) row_at[i] = i;
  for (int i = 0; i < n; ++i) std::swap(row_at[i], row_at[ipiv[i] - 1]);
  E chain = kern::make_element<E>(1.0);
  for (std::size_t i = 1; i < zeros.size(); ++i) chain = chain * g(zeros[i - 1], row_at[zeros[i]]);
  const E factor = kern::scale_by(scale.reported_sign(), scale.mant);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const E v = zeros.empty() ? g(i, j) : chain * g(i, row_at[zeros.front()]) * g(zeros.back(), j);
      const E entry = kern::scale_pow2(v * factor, scale.expo);
      std::memcpy(static_cast<void*>(x + (transposed ? std::int64_t(j) * n + i : std::int64_t(i) * n + j)), &entry,
                  sizeof(T));
    }
}

template <class T> void run_typed(const job& jb, std::int64_t begin, std::int64_t end, range_fn own_elimination) {
  using E = kern::kernel_element<T>;
  const int n = int(jb.n), nrhs = int(jb.nrhs);
  const std::int64_t nn = std::int64_t(n) * n, nb = std::int64_t(n) * nrhs;
  std::vector<T> lu(nn), work;
  std::vector<int> ipiv(n);
  std::vector<T> rhs(jb.kind == op::solve ? nb : 0);
  const bool inverse = jb.kind == op::inv || jb.kind == op::slogdet_inv || jb.kind == op::adjugate;
  if (inverse) work.resize(std::max<std::int64_t>(1, 64 * n));

  for (std::int64_t b = begin; b < end; ++b) {
    const T* a = static_cast<const T*>(jb.a) + b * nn;
    const bool has_nan = std::any_of(a, a + nn, [](T v) { return is_nan(v); });
    transpose(a, lu.data(), n, n);
    int info = 0;
    lapack<T>::getrf(&n, &n, lu.data(), &n, ipiv.data(), &info);
    if (!has_nan && lapack_went_wrong(lu, n)) {
      own_elimination(jb, b, b + 1);
      continue;
    }

    kern::det_accum<E> acc = determinant_of_factors<E>(lu, ipiv);
    if (has_nan && info == 0) acc.mant = std::numeric_limits<kern::lane_of<E>>::quiet_NaN();

    if (jb.kind == op::adjugate) {
      adjugate_from_getrf(lu, ipiv, acc, work, static_cast<T*>(jb.x) + b * nn, jb.transpose_x);
    } else if (inverse) {
      T* x = static_cast<T*>(jb.x) + b * nn;
      if (info == 0) {
        const int lwork = int(work.size());
        int info2 = 0;
        lapack<T>::getri(&n, lu.data(), &n, ipiv.data(), work.data(), &lwork, &info2);
        if (jb.transpose_x) std::copy(lu.begin(), lu.end(), x);  // column-major A^-1 = row-major A^-T
        else transpose(lu.data(), x, n, n);
      } else {
        fill_nan(x, nn);
      }
    } else if (jb.kind == op::solve) {
      T* x = static_cast<T*>(jb.x) + b * nb;
      if (info == 0) {
        transpose(static_cast<const T*>(jb.b) + b * nb, rhs.data(), n, nrhs);
        const char trans = 'N';
        int info2 = 0;
        lapack<T>::getrs(&trans, &n, &nrhs, lu.data(), &n, ipiv.data(), rhs.data(), &n, &info2, 1);
        transpose(rhs.data(), x, nrhs, n);
      } else {
        fill_nan(x, nb);
      }
    }
    if (jb.info) jb.info[b] = info;
    const E sign = acc.reported_sign();
    if (jb.sign) std::memcpy(static_cast<void*>(static_cast<T*>(jb.sign) + b), &sign, sizeof(T));
    if (jb.logabsdet) static_cast<kern::lane_of<E>*>(jb.logabsdet)[b] = acc.logabsdet();
    if (jb.det) {
      const E d = acc.determinant();
      std::memcpy(static_cast<void*>(static_cast<T*>(jb.det) + b), &d, sizeof(T));
    }
  }
}

}  // namespace

void run_lapack(dtype t, const job& jb, std::int64_t begin, std::int64_t end) {
  with_dtype(
      t, [&](auto info) { run_typed<typename decltype(info)::type>(jb, begin, end, table_scalar.run[int(info.id)]); });
}

}  // namespace tinyla::cpu
