// A small persistent thread pool: run(tasks, fn) calls fn(i) for every i in
// [0, tasks) on the workers and the calling thread and returns when all are
// done. One run at a time; a run requested while another is in progress (a
// second user thread, or a nested call) executes inline on its caller. When
// the system refuses a thread, the pool runs with the workers it got.
//
// Waiting spins for a while before it sleeps (as OpenMP runtimes and Eigen's
// pool do): a worker that sleeps on a futex takes tens of microseconds to wake
// in a virtual machine, as long as a whole call on a few MiB, and a JAX
// program calls the kernels with a few XLA operations between them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tinyla::cpu {

class thread_pool {
 public:
  // spin: how long a waiting thread polls before it sleeps (0: it sleeps at once).
  thread_pool(int threads, std::chrono::microseconds spin);
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int threads() const { return int(workers_.size()) + 1; }
  void run(int tasks, const std::function<void(int)>& fn);

 private:
  void worker_loop();
  void drain();

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one run at a time
  std::mutex m_;          // with the condition variables, for sleeping; the state is atomic for spinning
  std::condition_variable wake_, finished_;
  const std::function<void(int)>* fn_ = nullptr;
  int tasks_ = 0;
  std::atomic<int> next_{0}, done_{0};
  std::atomic<int> busy_{0};  // workers inside drain() for the current generation
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  const std::chrono::microseconds spin_;  // 0 where waiting threads sleep at once (more threads than CPUs)
};

}  // namespace tinyla::cpu
