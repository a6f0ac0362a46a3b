// Application threads calling tinyla at once, while another changes the thread count:
// every result is the single-threaded one, bit for bit. Its own executable, so that
// scripts/test can build it under ThreadSanitizer without the whole suite.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "reference.hpp"

namespace {

using namespace ref;

template <class T> struct results {
  std::vector<T> sign, x, sol;
  std::vector<real_t<T>> logabs;
  std::vector<int32_t> info;
  bool operator==(const results& o) const {
    auto bits = [](const auto& u, const auto& v) {
      return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(u[0])) == 0;
    };
    return bits(sign, o.sign) && bits(x, o.x) && bits(sol, o.sol) && bits(logabs, o.logabs) && bits(info, o.info);
  }
};

template <class T> results<T> compute(const std::vector<T>& a, const std::vector<T>& b, int64_t batch, int n) {
  results<T> r{std::vector<T>(batch), std::vector<T>(a.size()), std::vector<T>(b.size()), std::vector<real_t<T>>(batch),
               std::vector<int32_t>(batch)};
  EXPECT_EQ(slogdet_inv(batch, n, a.data(), r.sign.data(), r.logabs.data(), r.x.data()), TINYLA_OK);
  EXPECT_EQ(solve(batch, n, 1, a.data(), b.data(), r.sol.data(), r.info.data()), TINYLA_OK);
  return r;
}

template <class T> void callers_and_thread_changes(int n) {
  const int64_t batch = 512;
  const auto a = make_batch<T>(kind::random, batch, n, 17 + n);
  const auto b = make_batch<T>(kind::random, batch * n, 1, 19);  // (batch, n, 1)
  tinyla_set_num_threads(1);
  const results<T> expect = compute(a, b, batch, n);
  std::atomic<int> wrong{0};
  std::atomic<bool> stop{false};
  std::thread changer([&] {
    for (int i = 0; !stop; i = (i + 1) % 4) tinyla_set_num_threads(1 + i);
  });
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int i = 0; i < 4; ++i)
        if (!(compute(a, b, batch, n) == expect)) ++wrong;
    });
  for (auto& t : callers) t.join();
  stop = true;
  changer.join();
  tinyla_set_num_threads(0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Concurrency, CallersWhileTheThreadCountChangesGetIdenticalBits) {
  // The closed form (one task at this batch), the elimination and the LAPACK path, both split
  // into tasks (dispatch.cpp splits from ~1e6 units of work: n = 16 and 33 here, not n = 5).
  for (int n : {2, 16, 33}) {
    SCOPED_TRACE(n);
    callers_and_thread_changes<double>(n);
    callers_and_thread_changes<std::complex<float>>(n);
  }
}

}  // namespace
