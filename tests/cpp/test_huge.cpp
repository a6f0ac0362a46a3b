// 64-bit indexing: a batch with more than 2^31 elements. The input is an
// anonymous mapping whose untouched pages all read as zero (so 8 GiB of
// address space costs no memory); a few real matrices sit past element 2^31.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include "reference.hpp"

namespace {

using namespace ref;

TEST(Huge, BatchBeyond2To31Elements) {
  const int n = 32;
  const int64_t batch = (int64_t(1) << 21) + 3;  // batch * n * n = 2^31 + 3072 elements
  const size_t bytes = size_t(batch) * n * n * sizeof(float);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED) GTEST_SKIP() << "cannot reserve " << bytes << " bytes of address space";
  auto* a = static_cast<float*>(mem);
  const auto probe = make_batch<float>(kind::random, 3, n, 2024);
  const int64_t at[3] = {(int64_t(1) << 21) - 1, int64_t(1) << 21, batch - 1};  // straddling and past 2^31
  for (int k = 0; k < 3; ++k) std::copy(probe.begin() + k * n * n, probe.begin() + (k + 1) * n * n, a + at[k] * n * n);

  std::vector<float> sign(batch), logabs(batch);
  ASSERT_EQ(tinyla_slogdet_f32(batch, n, a, sign.data(), logabs.data()), TINYLA_OK);
  for (int k = 0; k < 3; ++k) {
    const auto w = wide_lu(probe.data() + k * n * n, n, false);
    EXPECT_EQ(sign[at[k]], float(w.sign)) << at[k];
    EXPECT_NEAR(logabs[at[k]], double(w.logabs), 1e-4 * (1 + std::abs(double(w.logabs)))) << at[k];
  }
  for (int64_t b : {int64_t(0), int64_t(1) << 20, batch - 2}) {  // zero matrices elsewhere
    EXPECT_EQ(sign[b], 0.0f) << b;
    EXPECT_EQ(logabs[b], -std::numeric_limits<float>::infinity()) << b;
  }
  munmap(mem, bytes);
}

}  // namespace
