// The GPU kernels run on the host: every GPU thread a fiber on the calling
// thread, the block barrier a switch to the next fiber, shared memory a host
// buffer (gpu_emulation.cpp).
#pragma once

#include <complex>
#include <cstdint>
#include <tuple>

#include "gpu/plan.hpp"
#include "job.hpp"

namespace gpu_emulation {

// The element types, indexed as the build names them (GPU_EMULATION_TYPE, TINYLA_EMULATED_TYPES).
using element_types = std::tuple<float, double, std::complex<float>, std::complex<double>>;

// Runs job jb as the GPU backend would launch it for element type T (planned with
// `options`), on at most max_blocks blocks; hip_step_loop: a warp team's LU steps in
// one loop and its pivot by a butterfly of shuffles, as the HIP kernels run them
// (warp_step_chunk, warp_redux), not in CUDA's chunks and reductions. Defined
// for float, double and their complex types, each in its own translation unit (one
// instantiation of every kernel is most of the test build's time).
template <class T> tinyla_status run(const tinyla::job& jb, std::int64_t max_blocks,
                                     tinyla::TINYLA_KERNEL_NS::plan_options options, bool hip_step_loop = false);

}  // namespace gpu_emulation
