#include "cpu/dispatch.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include <pthread.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <xmmintrin.h>
#endif

#include "cpu/thread_pool.hpp"

namespace tinyla::cpu {
namespace {

// The floating-point environment every share of a batch runs in, on whichever thread: round to
// nearest, subnormals kept (not flushed, not read as zero), exceptions masked; the thread's own
// is restored afterwards. XLA's CPU runtime calls the custom calls on threads that flush
// subnormals (MXCSR's FTZ and DAZ set), while tinyla's workers kept them: a batch's results
// depended on the thread that computed each share (and a subnormal pivot read as a zero one).
// A caller's unmasked exceptions would trap on the infinities and NaNs the kernels make and
// select away.
class ieee_environment {
 public:
  ieee_environment() {
#if defined(__x86_64__)
    saved_ = _mm_getcsr();
    changed_ = (saved_ & ~flags) != ieee;
    if (changed_) _mm_setcsr(ieee);
#elif defined(__aarch64__)
    asm volatile("mrs %0, fpcr" : "=r"(saved_));
    changed_ = saved_ != ieee;
    if (changed_) asm volatile("msr fpcr, %0" : : "r"(ieee));
#endif
  }
  ~ieee_environment() {
#if defined(__x86_64__)
    if (changed_) _mm_setcsr(saved_);
#elif defined(__aarch64__)
    if (changed_) asm volatile("msr fpcr, %0" : : "r"(saved_));
#endif
  }
  ieee_environment(const ieee_environment&) = delete;
  ieee_environment& operator=(const ieee_environment&) = delete;

 private:
#if defined(__x86_64__)
  static constexpr unsigned ieee = 0x1f80;  // MXCSR's power-on value: every exception masked
  static constexpr unsigned flags = 0x3f;   // the sticky exception flags, not part of the mode
  unsigned saved_;
#elif defined(__aarch64__)
  static constexpr std::uint64_t ieee = 0;  // FPCR: no flush to zero, no traps, round to nearest
  std::uint64_t saved_;
#endif
  [[maybe_unused]] bool changed_ = false;
};

bool cpu_can_run(const backend_table& t) {
#if defined(__x86_64__) && defined(TINYLA_HAVE_AVX512)
  if (&t == &table_avx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#endif
#if defined(__x86_64__) && defined(TINYLA_HAVE_AVX2)
  if (&t == &table_avx2)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
#endif
#if defined(__x86_64__) && defined(TINYLA_HAVE_VEC128)
  if (&t == &table_vec128) return __builtin_cpu_supports("sse4.2");
#endif
  (void)t;
  return true;
}

// Best first.
const backend_table* const all_backends[] = {
#ifdef TINYLA_HAVE_AVX512
    &table_avx512,
#endif
#ifdef TINYLA_HAVE_AVX2
    &table_avx2,
#endif
#ifdef TINYLA_HAVE_VEC128
    &table_vec128,
#endif
    &table_scalar};

const backend_table* find_backend(const char* name) {
  for (const backend_table* t : all_backends)
    if (std::strcmp(t->name, name) == 0 && cpu_can_run(*t)) return t;
  return nullptr;
}

// Whether CPUID's vendor string (leaf 0: EBX, EDX, ECX) is vendor; false off x86-64.
bool cpu_vendor_is(const char* vendor) {
#if defined(__x86_64__)
  unsigned eax = 0, regs[3] = {};
  if (!__get_cpuid(0, &eax, &regs[0], &regs[2], &regs[1])) return false;
  char name[13] = {};
  std::memcpy(name, regs, 12);
  return std::strcmp(name, vendor) == 0;
#else
  (void)vendor;
  return false;
#endif
}

// Zen 4 (AMD family 19h with AVX-512) executes each 512-bit operation as two 256-bit
// halves (AMD's Software Optimization Guide for family 19h, "AVX-512"): the unrolled kernels
// (n <= TINYLA_MAX_FIXED_N) still gain from half the instructions, but the run-time-size
// loops above that, bound by those pipes, gain nothing and pay for a lane group twice
// AVX2's size (float64 n = 32: 64 KiB, twice the L1). Measured on one, 1 thread, avx512's
// time / avx2's: 0.5-0.94 at n <= 8 (most ops), 1.0-1.3 at n = 16, 1.2-1.5 at n = 32
// (docs/benchmarks.md, "AVX-512 on a CPU that splits it").
bool splits_512_bit_operations() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!cpu_vendor_is("AuthenticAMD") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  unsigned family = (eax >> 8) & 0xf;
  if (family == 0xf) family += (eax >> 20) & 0xff;
  return family == 0x19;  // Zen 3 is 19h too, but has no AVX-512 to split
#else
  return false;
#endif
}

// The largest lane group (bytes of one operand) whose successor the lane loop prefetches
// (backend_isa.cpp, prefetch_matrices). On the AMD guests the prefetch paid at every size, most
// from DRAM. On an Intel Xeon guest (AVX-512, 1 and 2 threads, 2 and 32 MiB of input) groups
// of 8 KiB or less still want it (without: the inverses and solves from DRAM at n = 4..7 lost up
// to 20 %), while above that, more than 128 prefetches in one burst, the L2 streamer alone
// kept up and the calls ran 1.0-1.25x faster without them (docs/benchmarks.md, "Software
// prefetch on Intel").
std::int64_t prefetch_group_bytes() { return cpu_vendor_is("GenuineIntel") ? 8192 : INT64_MAX; }

// The backend for this CPU (best first) and, in *loop, the one for n beyond the unrolled sizes.
const backend_table* initial_backend(const backend_table** loop) {
  if (const char* env = std::getenv("TINYLA_ISA"); env && *env) {
    if (const backend_table* t = find_backend(env)) return *loop = t;
    std::fprintf(stderr, "tinyla: TINYLA_ISA=%s is unknown or not supported by this CPU; using the best available\n",
                 env);
  }
  const backend_table* best = &table_scalar;
  for (const backend_table* t : all_backends)
    if (cpu_can_run(*t)) {
      best = t;
      break;
    }
  *loop = loop_backend_for(best, splits_512_bit_operations());
  return best;
}

std::atomic<const backend_table*> active_backend{nullptr};
// Where the active backend was chosen for this CPU (not by name), the backend for n beyond
// the unrolled sizes and for avx2_is_faster_when_split's cells: the active one, or AVX2 on a
// CPU that splits 512-bit operations.
std::atomic<const backend_table*> loop_backend{nullptr};

constexpr int max_threads = 4096;  // TINYLA_NUM_THREADS and set_num_threads are capped here

// The environment variable name as an integer in 0..max, or fallback where it is unset or
// empty; any other value warns and gives fallback.
int integer_from_env(const char* name, int max, int fallback) {
  if (const char* env = std::getenv(name); env && *env) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (*end == '\0' && v >= 0 && v <= max) return int(v);
    std::fprintf(stderr, "tinyla: ignoring %s=%s (expected an integer 0..%d)\n", name, env, max);
  }
  return fallback;
}

int threads_from_env() { return integer_from_env("TINYLA_NUM_THREADS", max_threads, 0); }

// How long the pool's waiting threads poll before they sleep: for the end of a call, and for
// the next call. A futex wake-up took 20-50 us on a 2-core KVM guest whose idle CPUs halt at
// once (its cpuidle driver's guest_halt_poll_ns 0), as long as a call on a few MiB; 100 us of
// polling made such calls back to back 1.1-2x faster (docs/benchmarks.md, "The thread pool").
// 1 ms, which would cover a few XLA operations between calls, measured no better over a dozen
// processes, and jnp's operation right after a tinyla call read slower. Between polls the
// thread yields its CPU to any thread ready there.
constexpr int default_spin_us = 100, max_spin_us = 1000000;

std::chrono::microseconds spin_from_env() {
  return std::chrono::microseconds(integer_from_env("TINYLA_SPIN_US", max_spin_us, default_spin_us));
}

int resolve_threads(int n) {
  if (n > 0) return n;
  return std::max(1u, std::thread::hardware_concurrency());
}

std::mutex pool_mutex;  // guards replacing the pool
std::shared_ptr<thread_pool> pool;

// fork(): the child has only the forking thread, so the pool's workers are gone and
// joining them (set_num_threads, or the pool's destructor at exit) would wait forever.
// The child sets the parent's pool aside, never destroyed (but reachable: not a leak to
// LeakSanitizer), and makes its own at its first call. pool_mutex is held across fork so
// that the child never inherits it locked by another thread.
std::vector<std::shared_ptr<thread_pool>>* const pools_of_parents = new std::vector<std::shared_ptr<thread_pool>>;

void register_fork_handlers() {
  static const bool registered = [] {
    pthread_atfork([] { pool_mutex.lock(); }, [] { pool_mutex.unlock(); },
                   [] {
                     if (pool) pools_of_parents->push_back(std::move(pool));
                     pool_mutex.unlock();
                   });
    return true;
  }();
  (void)registered;
}

// Where no pool can be allocated: the calling thread alone (a pool without workers
// allocates nothing, and the aliasing shared_ptr no control block).
std::shared_ptr<thread_pool> calling_thread_only() {
  static thread_pool no_workers(1, std::chrono::microseconds(0));
  return {std::shared_ptr<thread_pool>(), &no_workers};
}

std::shared_ptr<thread_pool> get_pool() {
  register_fork_handlers();
  std::lock_guard lk(pool_mutex);
  try {
    if (!pool) pool = std::make_shared<thread_pool>(resolve_threads(threads_from_env()), spin_from_env());
  } catch (const std::bad_alloc&) {
    return calling_thread_only();
  }
  return pool;
}

}  // namespace

const backend_table* loop_backend_for(const backend_table* best, bool splits_512) {
#if defined(TINYLA_HAVE_AVX512) && defined(TINYLA_HAVE_AVX2)
  if (best == &table_avx512 && splits_512) return &table_avx2;
#endif
  (void)splits_512;
  return best;
}

const backend_table& current_backend() {
  const backend_table* t = active_backend.load(std::memory_order_acquire);
  if (!t) {
    const backend_table* loop = nullptr;
    const backend_table* chosen = initial_backend(&loop);
    if (active_backend.compare_exchange_strong(t, chosen)) loop_backend.store(loop, std::memory_order_release);
    t = active_backend.load(std::memory_order_acquire);
  }
  return *t;
}

// The unrolled sizes at which AVX-512's kernels measured slower than AVX2's on a CPU that
// splits 512-bit operations (a Zen 4 guest, 1 thread, 8 MiB of input, best of 5 processes
// per backend, interleaved; cells slower in every such run, most by 1.1x or more:
// docs/benchmarks.md, "AVX-512 on a CPU that splits it"): bit n of each op's mask, by dtype.
// float64's inverse at n = 2 left it when AVX-512 inverted 2 x 2 matrices as they lie in
// memory with one division a lane group: 1.15-1.33x faster than AVX2's lanes there (1 and 2
// threads, 8 MiB).
bool avx2_is_faster_when_split(dtype t, op kind, std::int64_t n) {
  struct masks {
    unsigned determinant, inverse, determinant_and_inverse, solve, adjugate, log_det_laplacian;
  };
  constexpr auto bits = [](std::initializer_list<int> ns) {
    unsigned m = 0;
    for (int k : ns) m |= 1u << k;
    return m;
  };
  static constexpr masks slower[dtype_count] = {
      {0, 0, 0, bits({2}), 0, 0},          // float32
      {0, bits({7}), 0, 0, 0, bits({8})},  // float64
      {0, 0, 0, bits({8}), 0, 0},          // complex64
      {0, bits({2, 5}), 0, 0, 0, 0},       // complex128
  };
  if (n < 0 || n > 8) return false;  // the masks' sizes
  const masks& m = slower[int(t)];
  switch (kind) {
    case op::slogdet:
    case op::det: return (m.determinant >> n) & 1u;
    case op::inv: return (m.inverse >> n) & 1u;
    case op::slogdet_inv: return (m.determinant_and_inverse >> n) & 1u;
    case op::solve: return (m.solve >> n) & 1u;
    case op::adjugate: return (m.adjugate >> n) & 1u;
    case op::log_det_laplacian: return (m.log_det_laplacian >> n) & 1u;
    default: return false;
  }
}

const backend_table& backend_for(dtype t, op kind, std::int64_t n) {
  const backend_table& chosen = current_backend();
  if (n <= TINYLA_MAX_FIXED_N && !avx2_is_faster_when_split(t, kind, n)) return chosen;
  // Null only for a moment after the first choice (another thread's); any backend gives
  // the same bits.
  const backend_table* loop = loop_backend.load(std::memory_order_acquire);
  return loop ? *loop : chosen;
}

void choose_backend_for_this_cpu() {
  const backend_table* loop = nullptr;
  const backend_table* chosen = initial_backend(&loop);
  loop_backend.store(loop, std::memory_order_release);
  active_backend.store(chosen, std::memory_order_release);
}

bool select_backend(const char* name) {
  const backend_table* t = name ? find_backend(name) : nullptr;
  if (!t) return false;
  loop_backend.store(t, std::memory_order_release);
  active_backend.store(t, std::memory_order_release);
  return true;
}

void set_num_threads(int n) {
  if (n < 0) return;
  register_fork_handlers();
  std::shared_ptr<thread_pool> fresh;
  try {
    fresh = std::make_shared<thread_pool>(resolve_threads(std::min(n, max_threads)), spin_from_env());
  } catch (const std::bad_alloc&) {
    return;  // keeps the pool it has
  }
  std::lock_guard lk(pool_mutex);
  pool = std::move(fresh);  // a run in flight keeps the old pool alive
}

int num_threads() { return get_pool()->threads(); }

bool execute(dtype t, const job& call) {
  if (call.batch == 0) return true;
  static const std::int64_t prefetch_bytes = prefetch_group_bytes();
  job jb = call;
  jb.prefetch_group_bytes = prefetch_bytes;
  const backend_table& backend = backend_for(t, jb.kind, jb.n);
  const bool fast = jb.n <= max_fast_n || jb.kind == op::log_det_laplacian;  // no factorization: any n
  auto run = [&](std::int64_t begin, std::int64_t end) {
    if (fast) backend.run[int(t)](jb, begin, end);
    else run_lapack(t, jb, begin, end);
  };

  // Split only when each thread gets enough work (~1e6 units of (n+1)^2 (n+m+1),
  // some 50-100 us) to pay for waking a worker, and then into chunks_per_thread
  // chunks a thread, taken in turn, so that the calling thread does a worker's share
  // while the worker wakes. Chunk edges are multiples of 64 matrices; each matrix's
  // result does not depend on its neighbours, so the split never changes any bits.
  std::int64_t m = 0;  // right-hand sides carried through the elimination
  if (jb.kind == op::solve) m = jb.nrhs;
  if (family_of(jb.kind) == family::inverse || family_of(jb.kind) == family::adjugate) m = jb.n;
  double work = double(jb.n + 1) * double(jb.n + 1) * double(jb.n + m + 1) * double(jb.batch);
  if (jb.kind == op::log_det_laplacian) work *= double(jb.tangent_count + 1);  // a product per tangent
  auto p = get_pool();
  const std::int64_t by_work = std::int64_t(work / 1e6) + 1;
  const std::int64_t by_batch = (jb.batch + 63) / 64;
  const std::int64_t threads = std::min<std::int64_t>({p->threads(), by_work, by_batch});
  constexpr int chunks_per_thread = 4;
  const int tasks = int(threads > 1 ? std::min(threads * chunks_per_thread, by_batch) : 1);
  std::int64_t chunk = (jb.batch + tasks - 1) / tasks;
  chunk = (chunk + 63) / 64 * 64;

  std::atomic<bool> out_of_memory{false};
  p->run(tasks, [&](int i) {
    const std::int64_t begin = std::min(jb.batch, i * chunk), end = std::min(jb.batch, begin + chunk);
    if (begin >= end) return;
    const ieee_environment environment;
    try {
      run(begin, end);
    } catch (const std::bad_alloc&) {
      out_of_memory = true;
    }
  });
  return !out_of_memory;
}

}  // namespace tinyla::cpu
