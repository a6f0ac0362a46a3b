// gpu_emulation::run for one element type, GPU_EMULATION_TYPE (an index into
// `types`): the kernel bodies, their launch plan (src/gpu/kernels.hpp) and the
// grid-stride loops are the code the CUDA/HIP build compiles, run on a grid
// that may be smaller than the batch so that every block strides.
#include "gpu_emulation.hpp"

#include <algorithm>
#include <barrier>
#include <complex>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <tuple>
#include <vector>

#include "gpu/kernels.hpp"

namespace gpu_emulation {
namespace {

namespace kern = tinyla::TINYLA_KERNEL_NS;

struct host_block {
  int tid, nthreads;
  int64_t bid, nblocks;
  std::barrier<>* bar;
  void* smem;
  int thread() const { return tid; }
  int threads() const { return nthreads; }
  int64_t block() const { return bid; }
  int64_t blocks() const { return nblocks; }
  void sync() {
    if (!bar) {  // a kernel run as one that never synchronizes did
      std::fputs("gpu_emulation: sync() in a per-thread kernel\n", stderr);
      std::abort();
    }
    bar->arrive_and_wait();
  }
  void* shared() const { return smem; }
};

// Runs body(block) for every thread of `blocks` blocks, one block at a time, each
// GPU thread a host thread.
template <class Body> void run_grid(int64_t blocks, int threads, int64_t shared_bytes, Body body) {
  std::vector<std::max_align_t> smem(size_t(shared_bytes) / sizeof(std::max_align_t) + 1);
  for (int64_t b = 0; b < blocks; ++b) {
    std::barrier<> bar(threads);
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        host_block blk{t, threads, b, blocks, &bar, smem.data()};
        body(blk);
      });
  }
}

// The same for a kernel whose threads never synchronize nor share memory (the
// per-thread kernels): one after another on the calling thread, a valid GPU
// schedule too, and no host thread to start and join for each (the release
// build's ctest: 57 -> 44 s).
template <class Body> void run_grid_one_thread_at_a_time(int64_t blocks, int threads, Body body) {
  for (int64_t b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) {
      host_block blk{t, threads, b, blocks, nullptr, nullptr};
      body(blk);
    }
}

}  // namespace

template <class T> tinyla_status run(const tinyla::job& jb, int64_t max_blocks, kern::plan_options options) {
  if (tinyla_status s = tinyla::validate(tinyla::dtype_of<T>, jb); s != TINYLA_OK) return s;
  using E = kern::kernel_element<T>;  // complex: cplx, layout-compatible
  const kern::launch_plan plan = kern::plan_launch<E>(jb, options);
  if (plan.blocks == 0) return TINYLA_OK;
  std::vector<E> workspace(size_t(plan.workspace_bytes) / sizeof(E));
  const int64_t blocks = std::min(plan.blocks, max_blocks);
  kern::dispatch_kernel<E>(jb, plan, [&]<kern::family F, int N>() {
    if constexpr (N >= 0) {
      run_grid_one_thread_at_a_time(blocks, plan.block_threads,
                                    [&](host_block& blk) { kern::per_thread_kernel<F, N, E>(blk, jb); });
    } else {
      run_grid(blocks, plan.block_threads, plan.shared_bytes, [&](host_block& blk) {
        kern::team_kernel<F, E>(blk, jb, plan.team_size, workspace.empty() ? nullptr : workspace.data());
      });
    }
  });
  return TINYLA_OK;
}

using types = std::tuple<float, double, std::complex<float>, std::complex<double>>;
template tinyla_status run<std::tuple_element_t<GPU_EMULATION_TYPE, types>>(const tinyla::job&, int64_t,
                                                                            kern::plan_options);

}  // namespace gpu_emulation
