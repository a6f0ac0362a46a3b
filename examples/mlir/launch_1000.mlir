// 1000 synchronous launches of an empty kernel: the program of the LLVM Discourse thread
// "Repeated calls to a ROCm kernel are very slow" (5.4 s on ROCm with MLIR's own runtime).
// MLIR's gpu-to-llvm lowering turns each gpu.launch_func into calls of the mgpu*
// runtime ABI (mgpuModuleGetFunction, mgpuStreamCreate, mgpuLaunchKernel,
// mgpuStreamSynchronize, mgpuStreamDestroy); the module itself is loaded once, from a
// global constructor. run.sh lowers this file with Debian's mlir-opt-22 and
// mlir-translate-22 and links it against libtinyla_mgpu.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @empty() kernel {
      gpu.return
    }
  }
  func.func @main() -> i32 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c1000 = arith.constant 1000 : index
    scf.for %i = %c0 to %c1000 step %c1 {
      gpu.launch_func @kernels::@empty blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    }
    %ok = arith.constant 0 : i32
    return %ok : i32
  }
}
