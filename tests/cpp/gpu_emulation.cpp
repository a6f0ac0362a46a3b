// gpu_emulation::run for one element type, GPU_EMULATION_TYPE (an index into
// element_types): the kernel bodies, their launch plan (src/gpu/kernels.hpp) and the
// grid-stride loops are the code the CUDA/HIP build compiles, run on a grid
// that may be smaller than the batch so that every block strides.
#include "gpu_emulation.hpp"

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "gpu/kernels.hpp"

// Stack switches annotated for AddressSanitizer (its fake stacks and stack
// bounds follow the fibers); no-ops in other builds.
#if defined(__SANITIZE_ADDRESS__)
#define GPU_EMULATION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPU_EMULATION_ASAN 1
#endif
#endif
#ifdef GPU_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace gpu_emulation {
namespace {

namespace kern = tinyla::TINYLA_KERNEL_NS;

#ifdef GPU_EMULATION_ASAN
void start_switch(void** fake_stack, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
void finish_switch(void* fake_stack, const void** old_bottom, size_t* old_size) {
  __sanitizer_finish_switch_fiber(fake_stack, old_bottom, old_size);
}
void unpoison(void* p, size_t size) { __asan_unpoison_memory_region(p, size); }
#else
void start_switch(void**, const void*, size_t) {}
void finish_switch(void*, const void**, size_t*) {}
void unpoison(void*, size_t) {}
#endif

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "gpu_emulation: %s\n", what);
  std::abort();
}

// A fiber's saved context: start() makes one that calls entry on the given
// stack, swap() saves the running one in `from` and resumes `to`. On x86-64 a
// stack pointer, switched by pushing and popping the callee-saved registers:
// glibc's swapcontext also saves the signal mask, a system call that made a
// switch cost 1 us here, most of the warp kernels' emulation (a shuffle is a
// barrier). Elsewhere ucontext.
#if defined(__x86_64__)
// Not .globl: each translation unit that includes it has its own copy.
asm(R"(
  .text
  .p2align 4
  .type gpu_emulation_switch, @function
gpu_emulation_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gpu_emulation_switch, .-gpu_emulation_switch
)");
extern "C" void gpu_emulation_switch(void** save_sp, void* resume_sp);
struct context {
  void* sp = nullptr;
};
void start(context& c, char* stack, size_t bytes, void (*entry)()) {
  auto** top = reinterpret_cast<void**>(reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15));
  *--top = nullptr;                              // entry's return address: it never returns
  *--top = reinterpret_cast<void*>(entry);       // where the first switch returns to
  for (int i = 0; i < 6; ++i) *--top = nullptr;  // the six registers it pops
  c.sp = top;
}
void swap(context& from, context& to) { gpu_emulation_switch(&from.sp, to.sp); }
#else
struct context {
  ucontext_t uc{};
};
void start(context& c, char* stack, size_t bytes, void (*entry)()) {
  if (getcontext(&c.uc) != 0) fail("getcontext failed");
  c.uc.uc_stack = {.ss_sp = stack, .ss_flags = 0, .ss_size = bytes};
  c.uc.uc_link = nullptr;  // fibers never return from entry(): they switch back
  makecontext(&c.uc, entry, 0);
}
void swap(context& from, context& to) {
  if (swapcontext(&from.uc, &to.uc) != 0) fail("swapcontext failed");
}
#endif

class fiber_block;

struct host_block {
  int tid, nthreads;
  int64_t bid, nblocks;
  fiber_block* team;  // null: a per-thread kernel, which never synchronizes
  void* smem;
  int thread() const { return tid; }
  int threads() const { return nthreads; }
  int64_t block() const { return bid; }
  int64_t blocks() const { return nblocks; }
  void sync();
  void sync_warp();
  template <class T> T shuffle(T v, int src, int width);
  unsigned reduce_max(unsigned v) { return reduce(v, true); }
  unsigned reduce_min(unsigned v) { return reduce(v, false); }
  unsigned reduce(unsigned v, bool largest);
  void* shared() const { return smem; }
};

// One block's GPU threads as fibers on the calling host thread. A
// thread runs until it reaches a barrier or returns. A block barrier (sync())
// lets its threads on when every thread of the block has reached it; a warp
// barrier (sync_warp(), and every shuffle) when every thread of the warp (32
// consecutive threads) has. Between block barriers each warp runs to the next
// one before the next warp starts (a GPU may schedule so), the warps in
// ascending order, then descending: a read of another warp's write ordered by
// warp barriers alone reads the wrong value in one of them. The threads run in
// an order that changes between barriers (ascending, descending,
// pseudo-random): a thread reading another's write with no barrier between
// reads the wrong value for some order, and the bitwise comparison fails. (A
// host thread per GPU thread and a std::barrier, as before, made the 4n
// barriers per matrix OS context switches: the GpuKernels tests took 34 s in
// the release build, 7 s as fibers.)
class fiber_block {
 public:
  using body_fn = void (*)(void* body, host_block& blk);

  explicit fiber_block(int threads)
      : fibers_(size_t(threads)),
        order_(size_t(threads)),
        slots_{std::vector<slot>(size_t(threads)), std::vector<slot>(size_t(threads))} {
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    stride_ = stack_bytes + page;
    void* m =
        mmap(nullptr, stride_ * threads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) fail("no memory for the fibers' stacks");
    stacks_ = static_cast<char*>(m);
    for (int t = 0; t < threads; ++t)  // a guard page below each stack: an overflow faults
      if (mprotect(stacks_ + stride_ * t, page, PROT_NONE) != 0) fail("mprotect of a guard page failed");
  }
  ~fiber_block() { munmap(stacks_, stride_ * fibers_.size()); }
  fiber_block(const fiber_block&) = delete;
  fiber_block& operator=(const fiber_block&) = delete;

  // Runs body(blk) for every thread of block `bid` to the end.
  void run(int64_t bid, int64_t nblocks, void* smem, body_fn fn, void* body) {
    const int threads = int(fibers_.size());
    random_.seed(uint64_t(bid));
    for (int t = 0; t < threads; ++t) {
      fiber& f = fibers_[size_t(t)];
      f.blk = host_block{t, threads, bid, nblocks, this, smem};
      f.fn = fn, f.body = body, f.state = phase::running, f.shuffles = 0;
      char* stack = this->stack(t);
      unpoison(stack, stack_bytes);  // a previous block's frames may be left poisoned
      start(f.ctx, stack, stack_bytes, &entry);
    }
    uint64_t segment = 0;
    for (uint64_t interval = 0;; ++interval) {
      // Each warp to its next block barrier (or its end) before the next warp starts, the
      // warps in ascending order in one interval and descending in the next.
      const int warps = (threads + warp - 1) / warp;
      for (int i = 0; i < warps; ++i) run_warp(interval % 2 ? warps - 1 - i : i, threads, segment);
      int done = 0, at_block = 0;
      for (const fiber& f : fibers_) done += f.state == phase::done, at_block += f.state == phase::at_barrier;
      if (done == threads) return;
      if (at_block != threads) fail("sync() reached by some threads of a block, not all (undefined on a GPU)");
      for (fiber& f : fibers_) f.state = phase::running;
    }
  }

  void sync() { wait(phase::at_barrier); }
  void sync_warp() { wait(phase::at_warp_barrier); }

  // A shuffle: v into this thread's slot, a barrier, then thread from's slot.
  // Two sets of slots, alternate shuffles in each: a thread writes its next
  // value only after the next barrier, when every thread has read this one.
  template <class T> T shuffle(int tid, T v, int from) {
    static_assert(sizeof(T) <= sizeof(slot));
    fiber& f = *current_;
    slot* slots = slots_[f.shuffles++ % 2].data();
    std::memcpy(&slots[tid], &v, sizeof v);
    sync_warp();  // the group is within the warp: a warp's threads read their slots only
    std::memcpy(&v, &slots[from], sizeof v);
    return v;
  }

  // The largest (smallest) v of the warp: as shuffle, every thread then reading the
  // warp's slots.
  unsigned reduce(int tid, unsigned v, bool largest) {
    fiber& f = *current_;
    slot* slots = slots_[f.shuffles++ % 2].data();
    slots[tid] = v;
    sync_warp();
    for (int i = tid & ~(warp - 1); i < (tid & ~(warp - 1)) + warp; ++i) {
      const auto u = unsigned(slots[i]);
      v = largest ? std::max(v, u) : std::min(v, u);
    }
    return v;
  }

 private:
  static constexpr size_t stack_bytes = size_t(256) << 10;
  static constexpr int warp = 32;
  enum class phase { running, at_barrier, at_warp_barrier, done };
  struct fiber {
    context ctx;
    host_block blk;
    body_fn fn;
    void* body;
    phase state;
    void* fake_stack;
    unsigned shuffles;  // made so far: picks the set of slots
  };
  using slot = std::uint64_t;

  void wait(phase barrier) {
    current_->state = barrier;
    switch_to_main(&current_->fake_stack);
  }

  // Runs warp w's threads, in an order that changes from segment to segment, until each
  // has returned or waits at a block barrier, letting them past their warp barriers.
  void run_warp(int w, int threads, uint64_t& segment) {
    const int first = w * warp, last = std::min(first + warp, threads);
    for (;;) {
      arrange(segment++, first, last);
      for (int i = 0; i < last - first; ++i) {
        const int t = order_[size_t(i)];
        if (fibers_[size_t(t)].state != phase::running) continue;
        current_ = &fibers_[size_t(t)];
        void* fake = nullptr;
        start_switch(&fake, stack(t), stack_bytes);
        swap(main_, current_->ctx);
        finish_switch(fake, nullptr, nullptr);
      }
      int at_warp = 0;
      for (int t = first; t < last; ++t) at_warp += fibers_[size_t(t)].state == phase::at_warp_barrier;
      if (at_warp == 0) return;
      if (at_warp != last - first)
        fail("sync_warp() or a shuffle reached by some threads of a warp, not all (undefined on a GPU)");
      for (int t = first; t < last; ++t) fibers_[size_t(t)].state = phase::running;
    }
  }

  char* stack(int t) const { return stacks_ + stride_ * size_t(t) + (stride_ - stack_bytes); }

  // The order of threads first..last - 1 in this stretch between barriers.
  void arrange(uint64_t stretch, int first, int last) {
    const auto begin = order_.begin(), end = order_.begin() + (last - first);
    std::iota(begin, end, first);
    if (stretch % 3 == 1) std::reverse(begin, end);
    if (stretch % 3 == 2) std::shuffle(begin, end, random_);
  }

  // fake_stack: where this fiber's fake stack is kept while it waits; null when
  // it finished (ASan frees its fake stack).
  void switch_to_main(void** fake_stack) {
    start_switch(fake_stack, main_bottom_, main_size_);
    swap(current_->ctx, main_);
    finish_switch(fake_stack ? *fake_stack : nullptr, &main_bottom_, &main_size_);
  }

  static void entry() {
    fiber_block& self = *current_->blk.team;
    finish_switch(nullptr, &self.main_bottom_, &self.main_size_);
    fiber& f = *self.current_;
    f.fn(f.body, f.blk);
    f.state = phase::done;
    self.switch_to_main(nullptr);
    fail("a finished fiber resumed");
  }

  std::vector<fiber> fibers_;
  std::vector<int> order_;
  std::mt19937_64 random_;  // seeded by the block's index
  std::vector<slot> slots_[2];
  char* stacks_ = nullptr;
  size_t stride_ = 0;
  context main_;
  const void* main_bottom_ = nullptr;
  size_t main_size_ = 0;
  static thread_local fiber* current_;
};
thread_local fiber_block::fiber* fiber_block::current_ = nullptr;

void host_block::sync() {
  if (!team) fail("sync() in a per-thread kernel");
  team->sync();
}

void host_block::sync_warp() {
  if (!team) fail("sync_warp() in a per-thread kernel");
  team->sync_warp();
}

template <class T> T host_block::shuffle(T v, int src, int width) {
  if (!team) fail("shuffle() in a per-thread kernel");
  if (width < 1 || width > 32 || (width & (width - 1)) != 0 || src < 0 || src >= width)
    fail("shuffle() outside an aligned group of a power-of-2 threads up to 32");
  if (nthreads % 32 != 0) fail("shuffle() in a block that ends in a partial warp (CUDA's names the whole warp)");
  return team->shuffle(tid, v, (tid & ~(width - 1)) + src);
}

unsigned host_block::reduce(unsigned v, bool largest) {
  if (!team) fail("reduce_max() or reduce_min() in a per-thread kernel");
  if (nthreads % 32 != 0) fail("reduce_max() or reduce_min() in a block that ends in a partial warp");
  return team->reduce(tid, v, largest);
}

// Runs body(block) for every thread of `blocks` blocks, one block at a time,
// the block's threads as fibers.
template <class Body> void run_grid(int64_t blocks, int threads, int64_t shared_bytes, Body body) {
  std::vector<std::max_align_t> smem(size_t(shared_bytes) / sizeof(std::max_align_t) + 1);
  fiber_block fibers(threads);
  const fiber_block::body_fn fn = [](void* b, host_block& blk) { (*static_cast<Body*>(b))(blk); };
  for (int64_t b = 0; b < blocks; ++b) fibers.run(b, blocks, smem.data(), fn, &body);
}

// The same for a kernel whose threads never synchronize nor share memory (the
// per-thread kernels): one after another on the calling thread, a valid GPU
// schedule too.
template <class Body> void run_grid_one_thread_at_a_time(int64_t blocks, int threads, Body body) {
  for (int64_t b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) {
      host_block blk{t, threads, b, blocks, nullptr, nullptr};
      body(blk);
    }
}

}  // namespace

template <class T>
tinyla_status run(const tinyla::job& jb, int64_t max_blocks, kern::plan_options options, bool hip_step_loop) {
  if (tinyla_status s = tinyla::validate(tinyla::dtype_of<T>, jb); s != TINYLA_OK) return s;
  using E = kern::kernel_element<T>;  // complex: cplx, layout-compatible
  if (jb.kind == tinyla::op::log_det_laplacian && jb.n > kern::max_laplacian_n)
    return TINYLA_UNSUPPORTED;  // as backend.cpp
  const kern::launch_plan plan = kern::plan_launch<E>(jb, options);
  if (plan.blocks == 0) return TINYLA_OK;
  std::vector<E> workspace(size_t(plan.workspace_bytes) / sizeof(E));
  const int64_t blocks = std::min(plan.blocks, max_blocks);
  if (jb.kind == tinyla::op::log_det_laplacian) {
    run_grid(blocks, plan.block_threads, plan.shared_bytes, [&](host_block& blk) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (void)((kern::laplacian_width(jb.n) == kern::laplacian_widths[I]
                    ? (kern::log_det_laplacian_kernel<kern::laplacian_widths[I], E>(blk, jb), true)
                    : false) ||
               ...);
      }(std::make_index_sequence<kern::laplacian_width_count>{});
    });
    return TINYLA_OK;
  }
  kern::dispatch_kernel<E>(jb, plan, [&]<kern::family F, int V>() {
    if constexpr (V >= 0) {
      if (plan.stage_outputs) {  // the warps share their slots: fibers, with the plan's shared memory
        run_grid(blocks, plan.block_threads, plan.shared_bytes,
                 [&](host_block& blk) { kern::per_thread_kernel<F, V, E>(blk, jb, true); });
      } else {
        run_grid_one_thread_at_a_time(blocks, plan.block_threads,
                                      [&](host_block& blk) { kern::per_thread_kernel<F, V, E>(blk, jb); });
      }
    } else {
      run_grid(blocks, plan.block_threads, plan.shared_bytes, [&](host_block& blk) {
        E* scratch = workspace.empty() ? nullptr : workspace.data();
        constexpr int W = kern::warp_width_of(V);
        if constexpr (F == kern::family::inverse) {  // the kernels that form it in shared memory
          if (plan.inverse_in_shared) {
            if (hip_step_loop && W > 0)
              kern::team_kernel<F, W, E, kern::max_warp_width, false, true>(blk, jb, plan.team_size, scratch);
            else kern::team_kernel<F, W, E, 0, kern::warp_redux, true>(blk, jb, plan.team_size, scratch);
            return;
          }
        }
        if (hip_step_loop && W > 0)
          kern::team_kernel<F, W, E, kern::max_warp_width, false>(blk, jb, plan.team_size, scratch);
        else kern::team_kernel<F, W, E>(blk, jb, plan.team_size, scratch);
      });
    }
  });
  return TINYLA_OK;
}

template tinyla_status run<std::tuple_element_t<GPU_EMULATION_TYPE, element_types>>(const tinyla::job&, int64_t,
                                                                                    kern::plan_options, bool);

}  // namespace gpu_emulation
