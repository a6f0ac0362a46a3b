/* tinyla: batched linear algebra for huge batches of tiny matrices.
 *
 * Layout: row-major, contiguous (batch, n, n); element (b, i, j) of a is
 * a[(b*n + i)*n + j]. Complex types are interleaved (re, im) pairs, layout
 * compatible with C99 `float complex` / `double complex` and std::complex.
 * Suffixes: f32 = float, f64 = double, c64 = float complex, c128 = double complex.
 *
 * Every function validates its arguments first; on TINYLA_INVALID_ARGUMENT
 * nothing has been written. Per-matrix numerical problems (singular
 * matrices, NaN/Inf entries) are never an error status: they are reported
 * per matrix through the documented values and `info`.
 *
 *   slogdet      sign (real: -1, 0, +1; complex: phase with |phase| = 1, or 0)
 *                and logabsdet = log|det A|. Singular: sign 0, logabsdet -inf.
 *                NaN entry: sign and logabsdet NaN. n = 0: sign 1, logabsdet 0.
 *   det          det A, computed from the same factorization with an exact
 *                power-of-two scaling: overflows/underflows only when det
 *                itself is out of range. n = 0: 1.
 *   inv          A^-1. info[b] (nullable) = 0, or k > 0 when U(k,k) is exactly
 *                zero (LAPACK getrf convention, 1-based); then that inverse is
 *                filled with NaN.
 *   solve        X = A^-1 B for B of shape (batch, n, nrhs); info as for inv.
 *   slogdet_inv  sign, logabsdet and A^-1 from one factorization.
 *   inv_transposed, slogdet_inv_transposed
 *                the same with inv_t = (A^-1)^T written instead of A^-1, bit for bit
 *                its transpose: for real A that is d logabsdet / dA, the gradient
 *                (autodiff rules use it to skip a transposition pass).
 *   det_adjugate adj[b] = adj(A_b), the adjugate -- det(A_b) A_b^-1 where A_b is
 *                nonsingular, and defined where it is not: the derivative of the
 *                determinant, d det A = tr(adj(A) dA), finite at every matrix with finite
 *                entries (jax.grad of det). With one exactly zero pivot (rank n - 1) it is
 *                formed from the same LU with that pivot replaced by 1 (README, "Numerical
 *                conventions"); with two or more it is 0 up to rounding. det (may be NULL)
 *                receives what tinyla_det writes. The scale is applied as a mantissa and a
 *                power of two: no overflow where the entries of adj(A) are finite although
 *                det(A) overflows.
 *   det_cofactors  the same writing the cofactor matrix adj(A_b)^T, d det / dA entry by
 *                entry, bit for bit the transpose.
 *   log_det_laplacian  (below) the gradient and Laplacian of log det A from A^-T.
 *
 * In-place use (inv == a, adj == a, x == b) is allowed; other overlaps are undefined.
 */
#ifndef TINYLA_TINYLA_H
#define TINYLA_TINYLA_H

#include <stdint.h>

#if defined(_WIN32)
#define TINYLA_API __declspec(dllexport)
#else
#define TINYLA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  TINYLA_OK = 0,
  TINYLA_INVALID_ARGUMENT,
  TINYLA_UNSUPPORTED,
  TINYLA_OUT_OF_MEMORY,
  TINYLA_BACKEND_ERROR
} tinyla_status;

/* Static, never NULL (unknown values give "unknown status"). */
TINYLA_API const char* tinyla_status_string(tinyla_status s);

/* Threads used by later calls; 0 = hardware concurrency (the default, or the
 * value of the environment variable TINYLA_NUM_THREADS when set). Results are
 * bit-identical for every thread count. Negative values are ignored, values
 * above 4096 mean 4096. When the system refuses threads, tinyla runs with those
 * it got (down to the calling thread alone; tinyla_get_num_threads says how many).
 * A fork()ed child starts its own threads at its first call. Between calls and
 * at the end of one, waiting threads poll (yielding the CPU between polls) for
 * TINYLA_SPIN_US microseconds (environment, read when the threads start;
 * default 100, 0 = sleep at once) before they sleep; with more threads than
 * the process's CPUs they sleep at once. */
TINYLA_API void tinyla_set_num_threads(int n);
TINYLA_API int tinyla_get_num_threads(void);

/* Name of the CPU code path in use ("avx512", "avx2", "vec128", "scalar");
 * the environment variable TINYLA_ISA selects a supported one. */
TINYLA_API const char* tinyla_cpu_backend(void);

/* E: element pointer type (float, double; void for the complex types, whose
 * arrays are interleaved (re, im) pairs: sign/phase, det, inv, b and x are
 * complex), R: real type of logabsdet. EXTRA: parenthesized trailing
 * parameters, e.g. (, void* stream) for the GPU API (tinyla_gpu.h). */
#define TINYLA_UNPAREN(...) __VA_ARGS__
#define TINYLA_DECLARE_OPS(prefix, sfx, E, R, EXTRA)                                                                   \
  TINYLA_API tinyla_status prefix##slogdet_##sfx(int64_t batch, int64_t n, const E* a, E* sign,                        \
                                                 R* logabsdet TINYLA_UNPAREN EXTRA);                                   \
  TINYLA_API tinyla_status prefix##det_##sfx(int64_t batch, int64_t n, const E* a, E* det TINYLA_UNPAREN EXTRA);       \
  TINYLA_API tinyla_status prefix##inv_##sfx(int64_t batch, int64_t n, const E* a, E* inv,                             \
                                             int32_t* info TINYLA_UNPAREN EXTRA);                                      \
  TINYLA_API tinyla_status prefix##solve_##sfx(int64_t batch, int64_t n, int64_t nrhs, const E* a, const E* b, E* x,   \
                                               int32_t* info TINYLA_UNPAREN EXTRA);                                    \
  TINYLA_API tinyla_status prefix##slogdet_inv_##sfx(int64_t batch, int64_t n, const E* a, E* sign, R* logabsdet,      \
                                                     E* inv TINYLA_UNPAREN EXTRA);                                     \
  TINYLA_API tinyla_status prefix##inv_transposed_##sfx(int64_t batch, int64_t n, const E* a, E* inv_t,                \
                                                        int32_t* info TINYLA_UNPAREN EXTRA);                           \
  TINYLA_API tinyla_status prefix##slogdet_inv_transposed_##sfx(int64_t batch, int64_t n, const E* a, E* sign,         \
                                                                R* logabsdet, E* inv_t TINYLA_UNPAREN EXTRA);          \
  TINYLA_API tinyla_status prefix##det_adjugate_##sfx(int64_t batch, int64_t n, const E* a, E* det,                    \
                                                      E* adj TINYLA_UNPAREN EXTRA);                                    \
  TINYLA_API tinyla_status prefix##det_cofactors_##sfx(int64_t batch, int64_t n, const E* a, E* det,                   \
                                                       E* cof TINYLA_UNPAREN EXTRA);

TINYLA_DECLARE_OPS(tinyla_, f32, float, float, ())
TINYLA_DECLARE_OPS(tinyla_, f64, double, double, ())
TINYLA_DECLARE_OPS(tinyla_, c64, void, float, ())
TINYLA_DECLARE_OPS(tinyla_, c128, void, double, ())

/* log_det_laplacian: the derivatives of log det A that a forward Laplacian needs,
 * from inv_t = A^-T (slogdet_inv_transposed's output), the tangents da = dA/dx_c of shape
 * (batch, tangents, n, n) and lap_a = sum_c d^2 A/dx_c^2 of shape (batch, n, n):
 *   grad[b][c]   = tr(A^-1 dA/dx_c),                                 shape (batch, tangents)
 *   laplacian[b] = tr(A^-1 lap_a) - sum_c tr((A^-1 dA/dx_c)^2),      shape (batch)
 * (complex: the same complex expressions, no conjugation; their real parts belong to log|det A|,
 * the imaginary ones to the phase). The product A^-1 dA/dx_c is never written; rows of a tangent
 * that are exactly zero cost nothing (a Slater matrix of one-electron orbitals: one row per
 * coordinate), with the dense product's results. Any n on the CPU (the GPU's kernel: n <= 32,
 * tinyla_gpu.h); n = 0 gives zeros. A NaN-filled inverse (tinyla's singular case) gives NaN. */
#define TINYLA_DECLARE_LOG_DET_LAPLACIAN(prefix, sfx, E, EXTRA)                                                        \
  TINYLA_API tinyla_status prefix##log_det_laplacian_##sfx(int64_t batch, int64_t n, int64_t tangents, const E* inv_t, \
                                                           const E* lap_a, const E* da, E* grad,                       \
                                                           E* laplacian TINYLA_UNPAREN EXTRA);
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_, f32, float, ())
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_, f64, double, ())
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_, c64, void, ())
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_, c128, void, ())

#ifdef __cplusplus
}
#endif

#endif /* TINYLA_TINYLA_H */
