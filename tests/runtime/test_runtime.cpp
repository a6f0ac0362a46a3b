// libtinyla_mgpu (MLIR's mgpu* ABI on tinyla's runtime) against the
// call-counting stand-in driver: what reaches the driver, the error paths,
// and many threads at once. ctest sets TINYLA_GPU_DRIVER to the stand-in.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include "mgpu/mgpu.h"
#include "stand_in.hpp"

namespace {

std::map<std::string, long> stats() { return stand_in::parse(tinyla_mgpu_stats()); }

// Runs a command with extra environment; returns the stand-in's report and
// (through `output`) what the command printed.
std::map<std::string, long> run_with_stand_in(const std::string& exe, const std::string& env, std::string* output) {
  // One file per process: ctest runs these tests in parallel processes (and CI runs may overlap).
  const std::string report = ::testing::TempDir() + "tinyla_stand_in_report." + std::to_string(getpid()) + ".txt",
                    log = report + ".log";
  std::remove(report.c_str());
  const std::string cmd = "TINYLA_STAND_IN_REPORT=" + report + " " + env + " " + exe + " > " + log + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream l(log);
  *output = std::string(std::istreambuf_iterator<char>(l), {});
  std::ifstream r(report);
  std::string line;
  std::getline(r, line);
  std::remove(report.c_str());
  std::remove(log.c_str());
  return stand_in::parse(line);
}

const char ptx[] = "// a PTX module (the stand-in only counts)\n.version 7.0\n.target sm_80\n";

TEST(Runtime, StreamsComeFromThePool) {
  const auto before = stats();
  std::vector<void*> held;
  for (int i = 0; i < 3; ++i) held.push_back(mgpuStreamCreate());  // three at once: three streams
  for (void* s : held) {
    ASSERT_NE(s, nullptr);
    mgpuStreamDestroy(s);
  }
  for (int i = 0; i < 100; ++i) {  // one at a time: the pool's
    void* s = mgpuStreamCreate();
    mgpuStreamSynchronize(s);
    mgpuStreamDestroy(s);
  }
  const auto after = stats();
  EXPECT_LE(after.at("streams_created") - before.at("streams_created"), 3);
  EXPECT_GE(after.at("stream_reuses") - before.at("stream_reuses"), 100);
}

// A thread keeps its last released stream for its next create; when the thread
// ends, that stream goes back to the pool for the others.
TEST(Runtime, AnEndingThreadGivesItsStreamBack) {
  const auto before = stats();
  for (int i = 0; i < 20; ++i)
    std::thread([] {
      void* s = mgpuStreamCreate();
      mgpuStreamSynchronize(s);
      mgpuStreamDestroy(s);
    }).join();
  const auto after = stats();
  EXPECT_LE(after.at("streams_created") - before.at("streams_created"), 1);
  EXPECT_GE(after.at("stream_reuses") - before.at("stream_reuses"), 19);
}

TEST(Runtime, ModulesAndFunctionsAreCachedByContent) {
  const auto before = stats();
  std::vector<char> copy(ptx, ptx + sizeof ptx);  // same bytes, another address: the same module
  void* m1 = mgpuModuleLoadJIT(const_cast<char*>(ptx), 2);
  void* m2 = mgpuModuleLoadJIT(copy.data(), 2);
  ASSERT_NE(m1, nullptr);
  EXPECT_EQ(m1, m2);
  void* f1 = mgpuModuleGetFunction(m1, "kernel_a");
  void* f2 = mgpuModuleGetFunction(m2, "kernel_a");
  void* g = mgpuModuleGetFunction(m1, "kernel_b");
  EXPECT_EQ(f1, f2);
  EXPECT_NE(f1, g);
  mgpuModuleUnload(m1);
  mgpuModuleUnload(m2);
  EXPECT_EQ(mgpuModuleLoadJIT(const_cast<char*>(ptx), 2), m1);  // still loaded: a hit
  mgpuModuleUnload(m1);
  const auto after = stats();
  EXPECT_LE(after.at("modules_loaded") - before.at("modules_loaded"), 1);  // 0 if an earlier test loaded it
  EXPECT_EQ(after.at("module_cache_hits") - before.at("module_cache_hits"),
            2 + (after.at("modules_loaded") == before.at("modules_loaded") ? 1 : 0));
  EXPECT_LE(after.at("function_lookups") - before.at("function_lookups"), 2);
}

TEST(Runtime, ErrorsAreReportedAndDoNotCrash) {
  const auto before = stats();
  char bad[] = "bad module";
  EXPECT_EQ(mgpuModuleLoad(bad, sizeof bad), nullptr);      // invalid image
  EXPECT_EQ(mgpuModuleLoad(nullptr, 0), nullptr);           // no image
  EXPECT_EQ(mgpuModuleGetFunction(nullptr, "k"), nullptr);  // after a failed load
  void* m = mgpuModuleLoadJIT(const_cast<char*>(ptx), 2);
  EXPECT_EQ(mgpuModuleGetFunction(m, ""), nullptr);                              // unknown kernel
  mgpuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr, 0);  // launch of nothing
  const auto after = stats();
  EXPECT_EQ(after.at("errors") - before.at("errors"), 4);  // null module lookups are not the driver's business
  EXPECT_EQ(after.at("launches"), before.at("launches"));
}

// A fatbin of two entries, as nvcc writes them: one plain, one compressed with zstd (nvcc's
// choice for code past about 10 MB, and for PTX); the stand-in must find the names of both,
// and only those (else every planned kernel of a compressed image would be "not found", and
// its check of the library's kernel names would prove nothing).
std::string fatbin_entry(std::string_view payload, std::uint64_t flags, std::uint64_t inflated_size) {
  std::string header(64, '\0');
  const auto put = [&](std::size_t at, auto value) { std::memcpy(header.data() + at, &value, sizeof value); };
  put(0, std::uint16_t(2));   // kind: ELF
  put(4, std::uint32_t(64));  // header size
  put(8, std::uint64_t(payload.size()));
  put(16, std::uint32_t(flags & 0x8000 ? payload.size() : 0));  // compressed size
  put(28, std::uint32_t(90));                                   // architecture
  put(40, flags);
  put(56, inflated_size);
  return header + std::string(payload);
}

TEST(Runtime, NamesAreLookedUpInCompressedFatbinEntries) {
  using compress_fn = std::size_t (*)(void*, std::size_t, const void*, std::size_t, int);
  void* zstd = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(zstd, nullptr) << "libzstd.so.1 (Debian's libzstd1) is needed to read compressed fatbins";
  const auto compress = reinterpret_cast<compress_fn>(dlsym(zstd, "ZSTD_compress"));
  ASSERT_NE(compress, nullptr);
  using namespace std::string_literals;  // names with their NULs, as in an ELF's string table
  const std::string packed_text = "\0kernel_packed\0"s + std::string(1000, 'x');
  std::string packed(packed_text.size() + 64, '\0');
  const std::size_t packed_size = compress(packed.data(), packed.size(), packed_text.data(), packed_text.size(), 3);
  ASSERT_LT(packed_size, packed_text.size());  // else a zstd error code
  packed.resize(packed_size);
  const std::string entries =
      fatbin_entry("\0kernel_plain\0\0"s, 0x11, 0) + fatbin_entry(packed, 0x8011, packed_text.size());
  std::string image(16, '\0');
  const std::uint32_t magic = 0xBA55ED50u;
  const std::uint16_t version = 1, header = 16;
  const std::uint64_t payload = entries.size();
  std::memcpy(image.data(), &magic, 4);
  std::memcpy(image.data() + 4, &version, 2);
  std::memcpy(image.data() + 6, &header, 2);
  std::memcpy(image.data() + 8, &payload, 8);
  image += entries;
  void* m = mgpuModuleLoad(image.data(), image.size());
  ASSERT_NE(m, nullptr);
  EXPECT_NE(mgpuModuleGetFunction(m, "kernel_plain"), nullptr);
  EXPECT_NE(mgpuModuleGetFunction(m, "kernel_packed"), nullptr);
  EXPECT_EQ(mgpuModuleGetFunction(m, "kernel_absent"), nullptr);
  image[16 + 64 + 15 + 64] ^= 0x5a;  // the zstd frame's first byte: a corrupt entry fails to load
  EXPECT_EQ(mgpuModuleLoad(image.data(), image.size()), nullptr);
  mgpuModuleUnload(m);
}

TEST(Runtime, MemoryCallsReachTheDriver) {
  void* stream = mgpuStreamCreate();
  auto* p = static_cast<std::uint32_t*>(mgpuMemAlloc(64, stream, false));
  ASSERT_NE(p, nullptr);  // the stand-in's "device memory" is host memory
  mgpuMemset32(p, 0xdeadbeef, 16, stream);
  EXPECT_EQ(p[15], 0xdeadbeefu);
  mgpuMemset16(p, 0x1234, 2, stream);
  EXPECT_EQ(p[0], 0x12341234u);
  std::uint32_t host[16] = {};
  mgpuMemcpy(host, p, sizeof host, stream);
  EXPECT_EQ(host[15], 0xdeadbeefu);
  mgpuMemFree(p, stream);
  mgpuStreamDestroy(stream);
}

// Modules, functions and pooled streams belong to one device (context): after
// mgpuSetDefaultDevice, none of device 0's is handed out for device 1 (the
// stand-in refuses launches that mix contexts).
TEST(Runtime, EachDeviceHasItsOwnModulesAndStreams) {
  static const char image[] = "// a module loaded on both devices\n";
  const auto before = stats();
  void* m0 = mgpuModuleLoadJIT(const_cast<char*>(image), 2);
  void* s0 = mgpuStreamCreate();
  mgpuLaunchKernel(mgpuModuleGetFunction(m0, "k"), 1, 1, 1, 1, 1, 1, 0, s0, nullptr, nullptr, 0);
  mgpuStreamDestroy(s0);  // pooled, for device 0
  mgpuSetDefaultDevice(1);
  void* m1 = mgpuModuleLoadJIT(const_cast<char*>(image), 2);
  void* s1 = mgpuStreamCreate();
  EXPECT_NE(m1, m0);
  EXPECT_NE(s1, s0);
  mgpuLaunchKernel(mgpuModuleGetFunction(m1, "k"), 1, 1, 1, 1, 1, 1, 0, s1, nullptr, nullptr, 0);
  mgpuStreamDestroy(s1);
  mgpuSetDefaultDevice(0);
  void* again = mgpuStreamCreate();
  EXPECT_EQ(again, s0);  // device 0's pool
  mgpuStreamDestroy(again);
  EXPECT_EQ(mgpuModuleLoadJIT(const_cast<char*>(image), 2), m0);  // device 0's module
  const auto after = stats();
  EXPECT_EQ(after.at("modules_loaded") - before.at("modules_loaded"), 2);
  EXPECT_EQ(after.at("launches") - before.at("launches"), 2);
  EXPECT_EQ(after.at("errors"), before.at("errors"));
}

// Many threads creating and destroying streams and events, loading the same
// module, looking up and launching (CI runs this under ThreadSanitizer).
TEST(Runtime, ConcurrentUse) {
  const auto before = stats();
  constexpr int threads = 16, rounds = 200;
  static const char image[] = "// another PTX module, loaded by every thread\n";
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([] {
      for (int i = 0; i < rounds; ++i) {
        void* m = mgpuModuleLoadJIT(const_cast<char*>(image), 3);
        void* f = mgpuModuleGetFunction(m, i % 2 ? "odd" : "even");
        void* s = mgpuStreamCreate();
        void* e = mgpuEventCreate();
        mgpuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr, 0);
        mgpuEventRecord(e, s);
        mgpuStreamWaitEvent(s, e);
        mgpuStreamSynchronize(s);
        mgpuEventDestroy(e);
        mgpuStreamDestroy(s);
        mgpuModuleUnload(m);
      }
    });
  for (auto& t : pool) t.join();
  const auto after = stats();
  EXPECT_EQ(after.at("launches") - before.at("launches"), threads * rounds);
  EXPECT_EQ(after.at("modules_loaded") - before.at("modules_loaded"), 1);
  EXPECT_EQ(after.at("function_lookups") - before.at("function_lookups"), 2);
  EXPECT_LE(after.at("streams_created") - before.at("streams_created"), threads);
  EXPECT_LE(after.at("events_created") - before.at("events_created"), threads);
  EXPECT_EQ(after.at("errors"), before.at("errors"));
}

#ifdef TINYLA_MLIR_EXAMPLE
// The report's program, compiled by MLIR 22: 1000 launches, one stream, one
// module load and one function lookup reach the driver. `env` picks the API.
void expect_one_of_each(const char* exe, const std::string& env, bool hip) {
  const std::string driver = std::string("TINYLA_GPU_DRIVER=") + TINYLA_STAND_IN_DRIVER + " " + env;
  std::string output;
  auto n = run_with_stand_in(exe, driver, &output);
  EXPECT_EQ(n["hip_init"], hip ? 1 : 0) << output;
  EXPECT_EQ(n["launch"], 1000) << output;
  EXPECT_EQ(n["stream_create"], 1) << output;
  EXPECT_EQ(n["module_load"], 1) << output;
  EXPECT_EQ(n["get_function"], 1) << output;
  // Per launch only the launch and the program's own synchronize: the stream goes
  // back to the pool without a second one, and no context is asked for while the
  // thread's binding holds (one look-up when it binds).
  EXPECT_EQ(n["stream_sync"], 1000) << output;
  EXPECT_LE(n["ctx_get"], 2) << output;
  EXPECT_EQ(n["stream_ctx"], 0) << output;
  EXPECT_EQ(output, "");  // no error printed
  // Without the pool: what MLIR's own wrappers cost (a stream and a lookup per launch).
  n = run_with_stand_in(exe, driver + " TINYLA_MGPU_POOL=0", &output);
  EXPECT_EQ(n["launch"], 1000) << output;
  EXPECT_EQ(n["stream_create"], 1000) << output;
  EXPECT_EQ(n["get_function"], 1000) << output;
}

TEST(MlirProgram, ThousandLaunchesReachTheDriverOnce) { expect_one_of_each(TINYLA_MLIR_EXAMPLE, "", false); }

#ifdef TINYLA_MLIR_EXAMPLE_ROCM
// Lowered for AMD (a gfx90a code object), through the HIP entry points.
TEST(MlirProgram, RocmLoweringThroughHip) {
  expect_one_of_each(TINYLA_MLIR_EXAMPLE_ROCM, "TINYLA_GPU_PLATFORM=rocm", true);
}
#endif

TEST(MlirProgram, NoDriverOrNoDeviceIsAClearErrorNotACrash) {
  std::string output;
  run_with_stand_in(TINYLA_MLIR_EXAMPLE, "TINYLA_GPU_DRIVER=/nonexistent/libcuda.so.1", &output);
  EXPECT_NE(output.find("tinyla runtime: no GPU driver could be loaded (/nonexistent/libcuda.so.1:"), std::string::npos)
      << output;
  const std::string driver = std::string("TINYLA_GPU_DRIVER=") + TINYLA_STAND_IN_DRIVER;
  run_with_stand_in(TINYLA_MLIR_EXAMPLE, driver + " TINYLA_FAKE_NO_DEVICE=1", &output);
  EXPECT_NE(output.find("initialization failed (no CUDA-capable device is detected"), std::string::npos) << output;
}
#endif

}  // namespace
