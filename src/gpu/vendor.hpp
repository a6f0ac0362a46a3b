// One set of names for the CUDA and HIP runtimes (jaxlib's gpu/vendor.h
// pattern): the GPU sources and the GPU tests use gpu* names only, and the
// build picks the vendor (TINYLA_GPU_HIP for HIP, CUDA otherwise). A host
// compiler (the tests) gets the runtime API only.
#pragma once

#if defined(TINYLA_GPU_HIP)
#if defined(__HIP__)
#include <hip/hip_runtime.h>
#else
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>
#endif

#define TINYLA_GPU_PLATFORM "rocm"
using gpuStream_t = hipStream_t;
using gpuError_t = hipError_t;
#define gpuSuccess hipSuccess
#define gpuGetLastError hipGetLastError
#define gpuGetErrorString hipGetErrorString
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMallocAsync hipMallocAsync
#define gpuFreeAsync hipFreeAsync
#define gpuMemcpy hipMemcpy
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemset hipMemset
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamDestroy hipStreamDestroy
#define gpuDeviceSynchronize hipDeviceSynchronize
#if defined(__HIP__)
// __syncthreads as ROCm 6 defines it (a workgroup fence around s_barrier):
// ROCm 5's header version calls into hip.bc, which clang links only from a
// full ROCm installation.
__device__ inline void gpuSyncThreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
#endif

#else
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#endif

#define TINYLA_GPU_PLATFORM "cuda"
using gpuStream_t = cudaStream_t;
using gpuError_t = cudaError_t;
#define gpuSuccess cudaSuccess
#define gpuGetLastError cudaGetLastError
#define gpuGetErrorString cudaGetErrorString
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMallocAsync cudaMallocAsync
#define gpuFreeAsync cudaFreeAsync
#define gpuMemcpy cudaMemcpy
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemset cudaMemset
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamDestroy cudaStreamDestroy
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuSyncThreads __syncthreads
#endif
