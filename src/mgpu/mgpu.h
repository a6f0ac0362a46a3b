/* libtinyla_mgpu: the runtime ABI that MLIR's gpu-to-llvm lowering calls (the
 * mgpu* functions of mlir/lib/ExecutionEngine/CudaRuntimeWrappers.cpp and
 * RocmRuntimeWrappers.cpp), with MLIR 22's signatures. MLIR-generated code
 * declares these itself; this header is for the library (which includes it, so
 * definitions and declarations cannot drift) and for C/C++ callers and tests. */
#ifndef TINYLA_MGPU_H
#define TINYLA_MGPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* StridedMemRefType<char, rank>: the descriptor of a ranked memref. */
typedef struct {
  char* allocated;
  char* aligned;
  int64_t offset;
  int64_t sizes_and_strides[1]; /* sizes[rank], then strides[rank] */
} tinyla_mgpu_memref;

void* mgpuModuleLoad(void* data, size_t size);
void* mgpuModuleLoadJIT(void* data, int opt_level);
void mgpuModuleUnload(void* module);
void* mgpuModuleGetFunction(void* module, const char* name);
/* MLIR <= 17 passes 11 arguments, later versions a 12th (the parameter count). */
void mgpuLaunchKernel(void* function, intptr_t grid_x, intptr_t grid_y, intptr_t grid_z, intptr_t block_x,
                      intptr_t block_y, intptr_t block_z, int32_t shared_bytes, void* stream, void** params,
                      void** extra, size_t param_count);
void* mgpuStreamCreate(void);
void mgpuStreamDestroy(void* stream);
void mgpuStreamSynchronize(void* stream);
void mgpuStreamWaitEvent(void* stream, void* event);
void* mgpuEventCreate(void);
void mgpuEventDestroy(void* event);
void mgpuEventSynchronize(void* event);
void mgpuEventRecord(void* event, void* stream);
void* mgpuMemAlloc(uint64_t bytes, void* stream, bool host_shared);
void mgpuMemFree(void* ptr, void* stream);
void mgpuMemcpy(void* dst, void* src, size_t bytes, void* stream);
void mgpuMemset32(void* dst, uint32_t value, size_t count, void* stream);
void mgpuMemset16(void* dst, uint16_t value, size_t count, void* stream);
void mgpuMemHostRegister(void* ptr, uint64_t bytes);
void mgpuMemHostUnregister(void* ptr);
void mgpuMemHostRegisterMemRef(int64_t rank, tinyla_mgpu_memref* descriptor, int64_t element_bytes);
void mgpuMemHostUnregisterMemRef(int64_t rank, tinyla_mgpu_memref* descriptor, int64_t element_bytes);
void mgpuSetDefaultDevice(int32_t device);

/* Not part of MLIR's ABI: what reached the driver and what the caches answered, as
 * "platform=.. streams_created=.. stream_reuses=.. modules_loaded=.. ..." (tests, benchmarks). */
const char* tinyla_mgpu_stats(void);

#ifdef __cplusplus
}
#endif

#endif /* TINYLA_MGPU_H */
