/* tinyla on the GPU: the ops of tinyla.h on device pointers, enqueued on a
 * stream. Built as libtinyla_cuda (CUDA) or libtinyla_hip (HIP) from the same
 * source; both export these names.
 *
 * Every function takes the arrays of tinyla.h -- same layout, same per-matrix
 * conventions, same bits as the CPU backend -- as device pointers (info
 * included), plus `stream`: a cudaStream_t / hipStream_t, or NULL for the
 * default stream. The work is enqueued and the call returns: nothing
 * synchronizes; results are ready when the stream is. The call makes the
 * stream's context (device) current on the calling thread; for NULL, the
 * current context, else device 0's primary one. The driver (libcuda.so.1 /
 * libamdhip64.so) is loaded on the first call that launches.
 *
 * Status: TINYLA_INVALID_ARGUMENT as in tinyla.h (checked on the host before
 * anything is enqueued); TINYLA_OUT_OF_MEMORY when a workspace (n too large for
 * shared memory) could not be allocated; TINYLA_UNSUPPORTED for n beyond the
 * GPU path (n > ~11000; log_det_laplacian: n > 32), or when n needs a workspace and the driver has no
 * stream-ordered allocation; TINYLA_BACKEND_ERROR when there is no driver or
 * device, or the driver reports an error at launch (tinyla_gpu_last_error()
 * says which; a sticky error of earlier work on the device also shows here).
 */
#ifndef TINYLA_TINYLA_GPU_H
#define TINYLA_TINYLA_GPU_H

#include "tinyla/tinyla.h"

#ifdef __cplusplus
extern "C" {
#endif

TINYLA_DECLARE_OPS(tinyla_gpu_, f32, float, float, (, void* stream))
TINYLA_DECLARE_OPS(tinyla_gpu_, f64, double, double, (, void* stream))
TINYLA_DECLARE_OPS(tinyla_gpu_, c64, void, float, (, void* stream))
TINYLA_DECLARE_OPS(tinyla_gpu_, c128, void, double, (, void* stream))
/* log_det_laplacian for n <= 32 (larger n: TINYLA_UNSUPPORTED). */
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_gpu_, f32, float, (, void* stream))
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_gpu_, f64, double, (, void* stream))
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_gpu_, c64, void, (, void* stream))
TINYLA_DECLARE_LOG_DET_LAPLACIAN(tinyla_gpu_, c128, void, (, void* stream))

/* The reason for this thread's last TINYLA_BACKEND_ERROR / OUT_OF_MEMORY / UNSUPPORTED
 * ("" if none). Static or thread-local storage, never NULL. */
TINYLA_API const char* tinyla_gpu_last_error(void);

/* "cuda" or "rocm": the platform this library was built for. */
TINYLA_API const char* tinyla_gpu_platform(void);

#ifdef __cplusplus
}
#endif

#endif /* TINYLA_TINYLA_GPU_H */
