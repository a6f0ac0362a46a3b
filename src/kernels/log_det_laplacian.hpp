// Derivatives of log det A along tangents, given G = A^-T (the gradient of log det A): what a
// forward Laplacian (folx) needs of a determinant. For tangents D_c = dA/dx_c and H = sum_c
// d^2 A/dx_c^2 (the Laplacian of A):
//   grad_c = tr(A^-1 D_c) = sum_ij G_ij (D_c)_ij,
//   lap    = tr(A^-1 H) - sum_c tr((A^-1 D_c)^2).
// tr((A^-1 D_c)^2) needs the product M_c = A^-1 D_c = G^T D_c, n^3 multiply-adds per tangent;
// it is formed in a scratch matrix and reduced at once, never written out. Written once
// against the lane interface, as lu.hpp.
//
// Rows of D_c that are exactly zero in every lane add exact zeros to M_c (where G's row is
// finite), so they are skipped: a Slater matrix of one-electron orbitals, A_ij = phi_j(r_i),
// has one non-zero row per electron coordinate, and its M_c costs n^2 instead of n^3. The
// results are the dense product's bits either way.
#pragma once

#include "kernels/lanes.hpp"
#include "kernels/lu.hpp"

namespace tinyla::TINYLA_KERNEL_NS {

// sum_ij x_ij y_ij over n x n matrices, entries in row-major order.
template <class S, class E> TINYLA_HD E sum_of_products(S s, const E* x, const E* y) {
  const int nn = s.n() * s.n();
  E sum = make_element<E>(0.0);
  TINYLA_UNROLL_INNER
  for (int e = 0; e < nn; ++e) sum = mul_add(x[e], y[e], sum);
  return sum;
}

// m[i][k0 + u] = sum over the listed rows j of g[j][i] d[j][k0 + u], u < B: B sums in registers.
template <int B, class E>
TINYLA_HD void product_block(int n, int i, int k0, const E* g, const E* d, const int* rows, int count, E* m) {
  E acc[B];
  TINYLA_UNROLL
  for (int u = 0; u < B; ++u) acc[u] = make_element<E>(0.0);
  for (int r = 0; r < count; ++r) {
    const int j = rows[r];
    const E gji = g[j * n + i];
    TINYLA_UNROLL
    for (int u = 0; u < B; ++u) acc[u] = mul_add(gji, d[j * n + k0 + u], acc[u]);
  }
  TINYLA_UNROLL
  for (int u = 0; u < B; ++u) m[i * n + k0 + u] = acc[u];
}

// tr M and tr M^2 = sum_i (m_ii^2 + 2 sum_{k>i} m_ik m_ki), row by row (i ascending), in this order
// wherever M is formed (here and in the GPU's kernel, src/gpu/kernels.hpp): off_diagonal_pairs
// of row i (M's rows ld apart), then add_trace_terms of row i.
template <class E> TINYLA_HD E off_diagonal_pairs(const E* m, int n, int ld, int i) {
  E off = make_element<E>(0.0);
  TINYLA_UNROLL_INNER
  for (int k = i + 1; k < n; ++k) off = mul_add(m[i * ld + k], m[k * ld + i], off);
  return off;
}
template <class E> TINYLA_HD void add_trace_terms(E mii, E off, E& trace, E& square_trace) {
  trace = trace + mii;
  square_trace = mul_add(mii, mii, square_trace) + (off + off);
}

// For one tangent d: trace = tr(A^-1 d) and square_trace = tr((A^-1 d)^2), from g = A^-T.
// g_row_finite[j]: row j of g is finite in every lane. rows (n ints) and m (n x n) are scratch.
template <class S, class E> TINYLA_HD void tangent_traces(S s, const E* g, const bool* g_row_finite, const E* d,
                                                          int* rows, E* m, E& trace, E& square_trace) {
  const int n = s.n();
  int count = 0;
  TINYLA_UNROLL
  for (int j = 0; j < n; ++j) {
    bool needed = !g_row_finite[j];
    TINYLA_UNROLL_INNER
    for (int k = 0; k < n && !needed; ++k) needed = any_of(!is_zero(d[j * n + k]));
    if (needed) rows[count++] = j;
  }
  // M = G^T D, row i from columns i of G's listed rows; blocks of 8 (4 complex) sums at a time.
  constexpr int wide = element_traits<E>::is_complex ? 4 : 8;
  TINYLA_UNROLL
  for (int i = 0; i < n; ++i) {
    int k0 = 0;
    TINYLA_UNROLL
    for (; k0 + wide <= n; k0 += wide) product_block<wide>(n, i, k0, g, d, rows, count, m);
    if constexpr (wide > 4) {
      TINYLA_UNROLL
      for (; k0 + 4 <= n; k0 += 4) product_block<4>(n, i, k0, g, d, rows, count, m);
    }
    TINYLA_UNROLL
    for (; k0 < n; ++k0) product_block<1>(n, i, k0, g, d, rows, count, m);
  }
  E t = make_element<E>(0.0), q = make_element<E>(0.0);
  TINYLA_UNROLL
  for (int i = 0; i < n; ++i) add_trace_terms(m[i * n + i], off_diagonal_pairs(m, n, n, i), t, q);
  trace = t;
  square_trace = q;
}

// g_row_finite[j] for the rows of g (n x n).
template <class S, class E> TINYLA_HD void finite_rows(S s, const E* g, bool* g_row_finite) {
  const int n = s.n();
  TINYLA_UNROLL
  for (int j = 0; j < n; ++j) {
    bool finite = true;
    TINYLA_UNROLL_INNER
    for (int i = 0; i < n; ++i) finite = finite && !any_of(!is_finite(g[j * n + i]));
    g_row_finite[j] = finite;
  }
}

}  // namespace tinyla::TINYLA_KERNEL_NS
