// One set of names for the CUDA and HIP runtimes (jaxlib's gpu/vendor.h
// pattern): the GPU sources use gpu* names only, and the build picks the vendor
// (TINYLA_GPU_HIP for HIP, CUDA otherwise).
#pragma once

#if defined(TINYLA_GPU_HIP)
#include <hip/hip_runtime.h>

#define TINYLA_GPU_PLATFORM "rocm"
using gpuStream_t = hipStream_t;
using gpuError_t = hipError_t;
#define gpuSuccess hipSuccess
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuMallocAsync hipMallocAsync
#define gpuFreeAsync hipFreeAsync
// __syncthreads as ROCm 6 defines it (a workgroup fence around s_barrier):
// ROCm 5's header version calls into hip.bc, which clang links only from a
// full ROCm installation.
__device__ inline void gpuSyncThreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

#else
#include <cuda_runtime.h>

#define TINYLA_GPU_PLATFORM "cuda"
using gpuStream_t = cudaStream_t;
using gpuError_t = cudaError_t;
#define gpuSuccess cudaSuccess
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuMallocAsync cudaMallocAsync
#define gpuFreeAsync cudaFreeAsync
#define gpuSyncThreads __syncthreads
#endif
