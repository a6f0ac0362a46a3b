// The thread pool across fork() and when the system refuses threads. Each case runs in a
// child process; the parent checks its exit status with a deadline, because the failures
// these guard against are hangs (joining threads a child does not have) and aborts
// (std::system_error escaping through the C API).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "tinyla/tinyla.h"

namespace {
bool forked_by_a_test = false;
}

// LeakSanitizer's hook: no leak check at the exit of a child forked here. The child inherits
// the parent's thread pool but not its workers, and each std::thread's start state, owned by
// a thread that does not exist in the child, is unreachable there (clang's LSan reports
// them; tinyla keeps the pool itself reachable). The parent is checked as usual.
extern "C" int __lsan_is_turned_off() { return forked_by_a_test; }

namespace {

// fork() with the child leading a process group of its own, so that a hung child's own
// children go with it when wait_for kills the group.
pid_t fork_group() {
  const pid_t pid = fork();
  if (pid == 0) forked_by_a_test = true;
  if (pid >= 0) setpgid(pid == 0 ? 0 : pid, pid == 0 ? 0 : pid);  // both sides: no race
  return pid;
}

// Exit status of `pid`, or -1 when it was still running after `seconds` (then its process
// group is killed), or 128 + the signal that ended it.
int wait_for(pid_t pid, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A batch big enough to be split over every thread, and its slogdet from this process.
struct batch {
  static constexpr int n = 6;
  static constexpr std::int64_t count = 1 << 15;
  std::vector<double> a, sign, logabsdet;
  batch() : a(count * n * n), sign(count), logabsdet(count) {
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal;
    for (double& x : a) x = normal(rng);
    tinyla_slogdet_f64(count, n, a.data(), sign.data(), logabsdet.data());
  }
  // Results are bit-identical for every thread count, so a recomputation must equal them.
  bool recomputes_equal() const {
    std::vector<double> s(count), l(count);
    if (tinyla_slogdet_f64(count, n, a.data(), s.data(), l.data()) != TINYLA_OK) return false;
    return s == sign && l == logabsdet;
  }
};

// In a child: computes, changes the thread count, computes, forks a grandchild that does
// the same, and leaves: through std::exit, which runs the static destructors (the pool's
// hung there), or std::_Exit (for children of a process whose other threads vanished with
// their memory in use, which LeakSanitizer's check at exit would report).
[[noreturn]] void leave(bool run_exit_handlers) {
  if (run_exit_handlers) std::exit(0);
  std::_Exit(0);
}

[[noreturn]] void child_computes_and_exits(const batch& b, bool run_exit_handlers) {
  if (!b.recomputes_equal()) std::_Exit(10);
  tinyla_set_num_threads(3);
  if (!b.recomputes_equal()) std::_Exit(11);
  const pid_t grandchild = fork();
  if (grandchild == 0) {
    if (!b.recomputes_equal()) std::_Exit(12);
    leave(run_exit_handlers);
  }
  if (wait_for(grandchild, 60) != 0) std::_Exit(13);
  leave(run_exit_handlers);
}

TEST(Process, ForkedChildAndGrandchildComputeAndExit) {
  tinyla_set_num_threads(4);  // workers exist in the parent
  const batch b;
  const pid_t child = fork_group();
  ASSERT_GE(child, 0);
  if (child == 0) child_computes_and_exits(b, true);
  EXPECT_EQ(wait_for(child, 60), 0) << "-1: the child hung (in exit() or a call)";
  EXPECT_TRUE(b.recomputes_equal()) << "the parent's pool still works";
  tinyla_set_num_threads(0);
}

// TINYLA_SANITIZED: the build's CMake option (this file itself may be built uninstrumented).
#if !defined(TINYLA_SANITIZED) && (defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
#define TINYLA_SANITIZED 1
#elif !defined(TINYLA_SANITIZED)
#define TINYLA_SANITIZED 0
#endif

TEST(Process, ForkWhileAnotherThreadComputes) {
  // Not under the sanitizers: an ASan allocator that does not take its locks around fork
  // (GCC 12's; glibc's malloc does) deadlocks a child forked while the busy thread is in malloc
  // on its first allocation (seen 2 in 90 runs; gdb: every child thread waits on
  // SizeClassAllocator64's region mutex). See google/sanitizers#1814.
  if (TINYLA_SANITIZED) GTEST_SKIP() << "ASan's allocator is not fork-safe with a busy thread";
  tinyla_set_num_threads(2);
  const batch b;
  std::atomic<bool> stop{false}, wrong{false};
  std::thread busy([&] {
    while (!stop)
      if (!b.recomputes_equal()) wrong = true;
  });
  for (int i = 0; i < 5; ++i) {
    const pid_t child = fork_group();
    ASSERT_GE(child, 0);
    if (child == 0) child_computes_and_exits(b, false);
    EXPECT_EQ(wait_for(child, 60), 0) << "fork " << i << " (-1: the child hung)";
  }
  stop = true;
  busy.join();
  EXPECT_FALSE(wrong);
  tinyla_set_num_threads(0);
}

TEST(Process, RefusedThreadsFallBackToThoseCreated) {
  if (TINYLA_SANITIZED) GTEST_SKIP() << "the sanitizers' shadow memory does not run under an address-space limit";
  const batch b;
  const pid_t child = fork_group();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Address space for this process plus 64 MiB: far fewer than 256 thread stacks (8 MiB each).
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    if (pages == 0) std::_Exit(20);
    const rlim_t limit = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (rlim_t(64) << 20);
    const rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) std::_Exit(21);
    tinyla_set_num_threads(256);
    const int got = tinyla_get_num_threads();
    if (got < 1 || got >= 256) std::_Exit(22);  // fewer threads than asked, not an abort
    if (!b.recomputes_equal()) std::_Exit(23);
    std::_Exit(0);
  }
  EXPECT_EQ(wait_for(child, 60), 0) << "128 + 6 (SIGABRT): an exception escaped the C API";
}

TEST(Process, ThreadCountIsCapped) {
  const pid_t child = fork_group();  // 4096 threads are real: in a child, gone with it
  ASSERT_GE(child, 0);
  if (child == 0) {
    tinyla_set_num_threads(1 << 30);
    std::_Exit(tinyla_get_num_threads() <= 4096 && tinyla_get_num_threads() >= 1 ? 0 : 30);
  }
  EXPECT_EQ(wait_for(child, 120), 0);
}

}  // namespace
