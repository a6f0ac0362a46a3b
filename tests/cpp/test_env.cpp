// TINYLA_NUM_THREADS, TINYLA_ISA and TINYLA_SPIN_US are read when the library first needs
// them, so they are checked in a fresh process (env_probe).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

std::string probe(const std::string& env) {
  const std::string cmd = env + " " + TINYLA_ENV_PROBE + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  pclose(p);
  return out;
}

TEST(Environment, NumThreads) {
  EXPECT_EQ(probe("TINYLA_NUM_THREADS=3 TINYLA_ISA=scalar"), "3 scalar\n");
  EXPECT_EQ(probe("TINYLA_NUM_THREADS=1 TINYLA_ISA=scalar"), "1 scalar\n");
}

TEST(Environment, BadValuesWarnAndFallBack) {
  const std::string out = probe("TINYLA_NUM_THREADS=lots TINYLA_ISA=no-such-isa TINYLA_SPIN_US=soon");
  EXPECT_NE(out.find("ignoring TINYLA_NUM_THREADS=lots"), std::string::npos) << out;
  EXPECT_NE(out.find("ignoring TINYLA_SPIN_US=soon"), std::string::npos) << out;
  EXPECT_NE(out.find("TINYLA_ISA=no-such-isa is unknown"), std::string::npos) << out;
  const std::string best = probe("");  // "<threads> <best backend>"
  const std::string best_backend = best.substr(best.find(' '));
  EXPECT_NE(out.find(best_backend), std::string::npos) << "falls back to the best backend: " << out;
}

}  // namespace
