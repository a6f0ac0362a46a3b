#include "cpu/thread_pool.hpp"

#include <sched.h>

#include <chrono>
#include <exception>

namespace tinyla::cpu {
namespace {

// The CPUs this process may run on. A pool with more threads than those sleeps at once:
// a spinning thread would take a CPU from one with work.
int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return int(std::thread::hardware_concurrency());
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// True once done() holds, false if it still does not after spin (at once for 0).
template <class Done> bool spin_until(std::chrono::microseconds spin, Done done) {
  if (spin.count() == 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + spin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    sched_yield();  // a thread woken on this CPU (XLA's next operation) runs now, not after the spin
  }
}

}  // namespace

thread_pool::thread_pool(int threads, std::chrono::microseconds spin)
    : spin_(threads <= usable_cpus() ? spin : std::chrono::microseconds(0)) {
  try {
    workers_.reserve(threads - 1);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::exception&) {
    // No more threads to be had (std::system_error: limits, address space; or no memory
    // for one): run with the workers we got, down to none (the calling thread alone).
  }
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lk(m_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::drain() {
  for (int i; (i = next_.fetch_add(1)) < tasks_;) {
    (*fn_)(i);
    done_.fetch_add(1);
  }
}

void thread_pool::worker_loop() {
  std::uint64_t seen = 0;
  std::unique_lock lk(m_);
  for (;;) {
    auto woken = [&] { return stop_ || generation_ != seen; };
    if (!woken()) {
      lk.unlock();
      spin_until(spin_, woken);
      lk.lock();
      wake_.wait(lk, woken);
    }
    if (stop_) return;
    seen = generation_;
    ++busy_;  // run() does not return (and reset the task state) while we drain
    lk.unlock();
    drain();
    lk.lock();
    --busy_;
    finished_.notify_all();
  }
}

void thread_pool::run(int tasks, const std::function<void(int)>& fn) {
  std::unique_lock run_lock(run_mutex_, std::try_to_lock);
  if (!run_lock || workers_.empty() || tasks <= 1) {
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  {
    std::unique_lock lk(m_);
    // A worker that woke late for the previous run may still be leaving drain().
    finished_.wait(lk, [&] { return busy_ == 0; });
    fn_ = &fn;
    tasks_ = tasks;
    next_ = 0;
    done_ = 0;
    ++generation_;
  }
  // Workers still spinning from the last run join by themselves; wake sleepers for the rest.
  for (int i = 1; i < tasks && i <= int(workers_.size()); ++i) wake_.notify_one();
  drain();
  auto finished = [&] { return done_ == tasks_ && busy_ == 0; };
  if (!spin_until(spin_, finished)) {
    std::unique_lock lk(m_);
    finished_.wait(lk, finished);
  }
  std::lock_guard lk(m_);
  fn_ = nullptr;
}

}  // namespace tinyla::cpu
