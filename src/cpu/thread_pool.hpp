// A small persistent thread pool: run(tasks, fn) calls fn(i) for every i in
// [0, tasks) on the workers and the calling thread and returns when all are
// done. One run at a time; a run requested while another is in progress (a
// second user thread, or a nested call) executes inline on its caller. When
// the system refuses a thread, the pool runs with the workers it got.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tinyla::cpu {

class thread_pool {
 public:
  explicit thread_pool(int threads);
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
  std::mutex m_;
  std::condition_variable wake_, finished_;
  const std::function<void(int)>* fn_ = nullptr;
  int tasks_ = 0;
  std::atomic<int> next_{0}, done_{0};
  int busy_ = 0;  // workers inside drain() for the current generation
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace tinyla::cpu
