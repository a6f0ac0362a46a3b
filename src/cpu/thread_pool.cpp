#include "cpu/thread_pool.hpp"

#include <exception>

namespace tinyla::cpu {

thread_pool::thread_pool(int threads) {
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
    wake_.wait(lk, [&] { return stop_ || generation_ != seen; });
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
  wake_.notify_all();
  drain();
  std::unique_lock lk(m_);
  finished_.wait(lk, [&] { return done_.load() == tasks_ && busy_ == 0; });
  fn_ = nullptr;
}

}  // namespace tinyla::cpu
