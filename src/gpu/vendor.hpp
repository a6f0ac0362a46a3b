// One set of names for the CUDA and HIP runtimes (jaxlib's gpu/vendor.h
// pattern): the device code (kernels.cu) and the GPU tests use gpu* names
// only, and the build picks the vendor (TINYLA_GPU_HIP for HIP, CUDA
// otherwise). A host compiler (the tests) gets the runtime API only; the
// backend's host side uses neither (it launches through src/runtime). Both runtimes name things
// alike (cudaMalloc / hipMalloc), so the list is written once.
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
#define TINYLA_GPU_NAME(x) hip##x
#if defined(__HIP__)
// __syncthreads as ROCm 6 defines it (a workgroup fence around s_barrier):
// ROCm 5's header version calls into hip.bc, which clang links only from a
// full ROCm installation.
__device__ inline void gpuSyncThreads() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// The wavefront's barrier, with its memory made visible across it (a wavefront runs in
// lockstep: this orders the memory operations around it).
__device__ inline void gpuSyncWarp() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
// v of lane src of this thread's aligned group of `width` lanes (a power of 2
// up to 32): ds_bpermute, which __shfl is in the HIP headers, on 32-bit words.
__device__ inline int gpuShuffleWord(int v, int src, int width) {
  const int lane = int(__builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u)));
  return __builtin_amdgcn_ds_bpermute(((lane & ~(width - 1)) + src) * 4, v);
}
template <class T> __device__ inline T gpuShuffle(T v, int src, int width) {
  static_assert(sizeof(T) % 4 == 0);
  struct words {
    int w[sizeof(T) / 4];
  };
  words x = __builtin_bit_cast(words, v);
  for (int i = 0; i < int(sizeof(T) / 4); ++i) x.w[i] = gpuShuffleWord(x.w[i], src, width);
  return __builtin_bit_cast(T, x);
}
#endif

#else
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#endif
#define TINYLA_GPU_PLATFORM "cuda"
#define TINYLA_GPU_NAME(x) cuda##x
#define gpuSyncThreads __syncthreads
#define gpuSyncWarp __syncwarp
#if defined(__CUDACC__)
// v of lane src of this thread's aligned group of `width` lanes (a power of 2
// up to 32). The mask names the whole warp: every lane calls it (the warp teams'
// blocks are whole warps, plan_launch). A mask of the group alone differs from
// lane to lane, and nvcc 13 then wrapped every shuffle of a 16-lane team in a
// convergence loop (WARPSYNC ... ENDCOLLECTIVE: ~7 instructions a shuffle).
template <class T> __device__ inline T gpuShuffle(T v, int src, int width) { return __shfl_sync(~0u, v, src, width); }
#endif
#endif

using gpuStream_t = TINYLA_GPU_NAME(Stream_t);
using gpuError_t = TINYLA_GPU_NAME(Error_t);
#define gpuSuccess TINYLA_GPU_NAME(Success)
#define gpuGetLastError TINYLA_GPU_NAME(GetLastError)
#define gpuGetErrorString TINYLA_GPU_NAME(GetErrorString)
#define gpuGetDeviceCount TINYLA_GPU_NAME(GetDeviceCount)
#define gpuMalloc TINYLA_GPU_NAME(Malloc)
#define gpuFree TINYLA_GPU_NAME(Free)
#define gpuMallocAsync TINYLA_GPU_NAME(MallocAsync)
#define gpuFreeAsync TINYLA_GPU_NAME(FreeAsync)
#define gpuMemcpy TINYLA_GPU_NAME(Memcpy)
#define gpuMemcpyHostToDevice TINYLA_GPU_NAME(MemcpyHostToDevice)
#define gpuMemcpyDeviceToHost TINYLA_GPU_NAME(MemcpyDeviceToHost)
#define gpuMemset TINYLA_GPU_NAME(Memset)
#define gpuStreamCreateWithFlags TINYLA_GPU_NAME(StreamCreateWithFlags)
#define gpuStreamNonBlocking TINYLA_GPU_NAME(StreamNonBlocking)
#define gpuStreamSynchronize TINYLA_GPU_NAME(StreamSynchronize)
#define gpuStreamDestroy TINYLA_GPU_NAME(StreamDestroy)
#define gpuDeviceSynchronize TINYLA_GPU_NAME(DeviceSynchronize)
