#include "cpu/dispatch.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include <pthread.h>

#include "cpu/thread_pool.hpp"

namespace tinyla::cpu {
namespace {

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

const backend_table* initial_backend() {
  if (const char* env = std::getenv("TINYLA_ISA"); env && *env) {
    if (const backend_table* t = find_backend(env)) return t;
    std::fprintf(stderr, "tinyla: TINYLA_ISA=%s is unknown or not supported by this CPU; using the best available\n",
                 env);
  }
  for (const backend_table* t : all_backends)
    if (cpu_can_run(*t)) return t;
  return &table_scalar;
}

std::atomic<const backend_table*> active_backend{nullptr};

constexpr int max_threads = 4096;  // TINYLA_NUM_THREADS and set_num_threads are capped here

int threads_from_env() {
  if (const char* env = std::getenv("TINYLA_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (*end == '\0' && v >= 0 && v <= max_threads) return int(v);
    std::fprintf(stderr, "tinyla: ignoring TINYLA_NUM_THREADS=%s (expected a non-negative integer)\n", env);
  }
  return 0;
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
  static thread_pool no_workers(1);
  return {std::shared_ptr<thread_pool>(), &no_workers};
}

std::shared_ptr<thread_pool> get_pool() {
  register_fork_handlers();
  std::lock_guard lk(pool_mutex);
  try {
    if (!pool) pool = std::make_shared<thread_pool>(resolve_threads(threads_from_env()));
  } catch (const std::bad_alloc&) {
    return calling_thread_only();
  }
  return pool;
}

}  // namespace

const backend_table& current_backend() {
  const backend_table* t = active_backend.load(std::memory_order_acquire);
  if (!t) {
    const backend_table* chosen = initial_backend();
    active_backend.compare_exchange_strong(t, chosen);
    t = active_backend.load(std::memory_order_acquire);
  }
  return *t;
}

bool select_backend(const char* name) {
  const backend_table* t = name ? find_backend(name) : nullptr;
  if (!t) return false;
  active_backend.store(t, std::memory_order_release);
  return true;
}

void set_num_threads(int n) {
  if (n < 0) return;
  register_fork_handlers();
  std::shared_ptr<thread_pool> fresh;
  try {
    fresh = std::make_shared<thread_pool>(resolve_threads(std::min(n, max_threads)));
  } catch (const std::bad_alloc&) {
    return;  // keeps the pool it has
  }
  std::lock_guard lk(pool_mutex);
  pool = std::move(fresh);  // a run in flight keeps the old pool alive
}

int num_threads() { return get_pool()->threads(); }

bool execute(dtype t, const job& jb) {
  if (jb.batch == 0) return true;
  const backend_table& backend = current_backend();
  const bool fast = jb.n <= max_fast_n || jb.kind == op::log_det_laplacian;  // no factorization: any n
  auto run = [&](std::int64_t begin, std::int64_t end) {
    if (fast) backend.run[int(t)](jb, begin, end);
    else run_lapack(t, jb, begin, end);
  };

  // Split only when each task gets enough work (~1e6 units of (n+1)^2 (n+m+1),
  // some 50-100 us) to pay for waking a worker. Chunk edges are multiples of
  // 64 matrices; each matrix's result does not depend on its neighbours, so
  // the split never changes any bits.
  std::int64_t m = 0;  // right-hand sides carried through the elimination
  if (jb.kind == op::solve) m = jb.nrhs;
  if (jb.kind == op::inv || jb.kind == op::slogdet_inv) m = jb.n;
  double work = double(jb.n + 1) * double(jb.n + 1) * double(jb.n + m + 1) * double(jb.batch);
  if (jb.kind == op::log_det_laplacian) work *= double(jb.tangent_count + 1);  // a product per tangent
  auto p = get_pool();
  const std::int64_t by_work = std::int64_t(work / 1e6) + 1;
  const std::int64_t by_batch = (jb.batch + 63) / 64;
  const int tasks = int(std::min<std::int64_t>({p->threads(), by_work, by_batch}));
  std::int64_t chunk = (jb.batch + tasks - 1) / tasks;
  chunk = (chunk + 63) / 64 * 64;

  std::atomic<bool> out_of_memory{false};
  p->run(tasks, [&](int i) {
    const std::int64_t begin = std::min(jb.batch, i * chunk), end = std::min(jb.batch, begin + chunk);
    if (begin >= end) return;
    try {
      run(begin, end);
    } catch (const std::bad_alloc&) {
      out_of_memory = true;
    }
  });
  return !out_of_memory;
}

}  // namespace tinyla::cpu
