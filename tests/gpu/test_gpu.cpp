// The GPU backend.
// - On a device: every op, dtype and size against the CPU backend's bits (the
//   same src/kernels math; the GPU build contracts no fma the kernels do not
//   call), n past the fast path against LAPACK, streams, in-place calls,
//   64-bit indexing. Without a device (this project's CI) they skip, saying
//   so, and the no-device error path is checked instead.
// - StandIn*: the host side against the stand-in driver (tests/runtime/
//   stand_in_driver.cpp, which runs no kernels): every kernel a plan can pick is
//   in the library's device image under the name the host looks up, each call
//   is one launch within the kernel's bounds, the image is loaded once, the
//   workspace comes and goes on the stream; failures are statuses with reasons.
//   CMakeLists.txt runs them with TINYLA_GPU_DRIVER naming the stand-in.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "all_ops.hpp"
#include "gpu/kernels.hpp"
#include "gpu/vendor.hpp"
#include "stand_in.hpp"
#include "tinyla/gpu.hpp"

namespace {

using namespace ref;
using tinyla::op;

bool have_device() {
  int count = 0;
  return gpuGetDeviceCount(&count) == gpuSuccess && count > 0;
}
#define REQUIRE_DEVICE()                                                                                               \
  if (!have_device()) GTEST_SKIP() << "no " TINYLA_GPU_PLATFORM " device on this machine"

struct device_buffer {
  void* p = nullptr;
  explicit device_buffer(size_t bytes) {
    if (bytes) EXPECT_EQ(gpuMalloc(&p, bytes), gpuSuccess) << bytes << " bytes";
  }
  ~device_buffer() {
    if (p) (void)gpuFree(p);
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
};

// A copy from pageable host memory may return before its DMA has landed, and the kernels run
// on streams that do not wait for the legacy default stream (non-blocking ones): wait for it.
void to_device(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  ASSERT_EQ(gpuMemcpy(dst, src, bytes, gpuMemcpyHostToDevice), gpuSuccess);
  ASSERT_EQ(gpuDeviceSynchronize(), gpuSuccess);
}
void to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) ASSERT_EQ(gpuMemcpy(dst, src, bytes, gpuMemcpyDeviceToHost), gpuSuccess);
}

// One job with device pointers through the GPU C API.
template <class T> tinyla_status submit(const tinyla::job& d, void* stream) {
  namespace g = tinyla::gpu::detail;
  const auto* a = static_cast<const T*>(d.a);
  auto* x = static_cast<T*>(d.x);
  auto* sign = static_cast<T*>(d.sign);
  auto* logabs = static_cast<real_t<T>*>(d.logabsdet);
  switch (d.kind) {
    case op::slogdet: return g::c_slogdet<T>(d.batch, d.n, a, sign, logabs, stream);
    case op::det: return g::c_det<T>(d.batch, d.n, a, static_cast<T*>(d.det), stream);
    case op::inv: return (d.transpose_x ? g::c_inv_transposed<T> : g::c_inv<T>)(d.batch, d.n, a, x, d.info, stream);
    case op::solve: return g::c_solve<T>(d.batch, d.n, d.nrhs, a, static_cast<const T*>(d.b), x, d.info, stream);
    case op::slogdet_inv:
      return (d.transpose_x ? g::c_slogdet_inv_transposed<T> : g::c_slogdet_inv<T>)(d.batch, d.n, a, sign, logabs, x,
                                                                                    stream);
    case op::adjugate:
      return (d.transpose_x ? g::c_det_cofactors<T> : g::c_det_adjugate<T>)(d.batch, d.n, a, static_cast<T*>(d.det), x,
                                                                            stream);
    case op::log_det_laplacian: break;  // the CPU's alone
  }
  return TINYLA_INVALID_ARGUMENT;
}

// A runner for run_all_ops: copies the job's arrays to the device, runs it on
// `stream`, copies the results back.
template <class T> auto on_gpu(gpuStream_t stream) {
  return [stream](tinyla::dtype, const tinyla::job& jb) {
    const size_t e = sizeof(T), r = sizeof(real_t<T>), nb = size_t(jb.batch);
    const size_t a_bytes = nb * jb.n * jb.n * e, b_bytes = nb * jb.n * jb.nrhs * e;
    const size_t x_bytes = jb.kind == op::solve ? b_bytes : a_bytes;
    device_buffer a(a_bytes), b(jb.b ? b_bytes : 0), x(jb.x ? x_bytes : 0), sign(jb.sign ? nb * e : 0),
        logabs(jb.logabsdet ? nb * r : 0), det(jb.det ? nb * e : 0), info(jb.info ? nb * 4 : 0);
    to_device(a.p, jb.a, a_bytes);
    if (jb.b) to_device(b.p, jb.b, b_bytes);
    tinyla::job d = jb;
    d.a = a.p, d.b = jb.b ? b.p : nullptr, d.x = x.p, d.sign = sign.p, d.logabsdet = logabs.p, d.det = det.p;
    d.info = static_cast<std::int32_t*>(info.p);
    const tinyla_status s = submit<T>(d, stream);
    EXPECT_EQ(gpuStreamSynchronize(stream), gpuSuccess) << tinyla_gpu_last_error();
    if (jb.x) to_host(jb.x, x.p, x_bytes);
    if (jb.sign) to_host(jb.sign, sign.p, nb * e);
    if (jb.logabsdet) to_host(jb.logabsdet, logabs.p, nb * r);
    if (jb.det) to_host(jb.det, det.p, nb * e);
    if (jb.info) to_host(jb.info, info.p, nb * 4);
    return s;
  };
}

struct stream_holder {
  gpuStream_t s{};
  stream_holder() { EXPECT_EQ(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking), gpuSuccess); }
  ~stream_holder() { (void)gpuStreamDestroy(s); }
};

TEST(NoDevice, ErrorsAreClearAndNothingCrashes) {
  if (have_device()) GTEST_SKIP() << "a device is present: the Device tests run instead";
  double sign[4], logabs[4];
  const auto* bogus = reinterpret_cast<const double*>(std::uintptr_t(64));
  // Arguments are checked on the host first; an empty batch launches nothing.
  EXPECT_EQ(tinyla_gpu_slogdet_f64(-1, 3, bogus, sign, logabs, nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_gpu_slogdet_f64(4, 3, nullptr, sign, logabs, nullptr), TINYLA_INVALID_ARGUMENT);
  EXPECT_EQ(tinyla_gpu_slogdet_f64(0, 3, nullptr, nullptr, nullptr, nullptr), TINYLA_OK);
  // A launch without a device is a backend error with the runtime's reason.
  EXPECT_EQ(tinyla_gpu_slogdet_f64(4, 3, bogus, sign, logabs, nullptr), TINYLA_BACKEND_ERROR);
  EXPECT_STRNE(tinyla_gpu_last_error(), "");
  try {
    tinyla::gpu::inv<double>(4, 3, bogus, sign);
    ADD_FAILURE() << "no exception";
  } catch (const tinyla::error& e) {
    EXPECT_EQ(e.status(), TINYLA_BACKEND_ERROR);
    EXPECT_NE(std::string(e.what()).find("tinyla::gpu::inv(batch=4, n=3): backend error ("), std::string::npos)
        << e.what();
  }
  EXPECT_STREQ(tinyla_gpu_platform(), TINYLA_GPU_PLATFORM);
}

// ---- the host side against the stand-in driver -------------------------------------

namespace kern = tinyla::TINYLA_KERNEL_NS;
template <class T> using kern_element = kern::kernel_element<T>;

std::string stand_in_path() {
  const char* path = std::getenv("TINYLA_GPU_DRIVER");
  return path ? path : "";
}

// Calls every op of type T for size n on (never dereferenced) "device"
// pointers; adds the kernel each must launch to `kernels`, and checks what
// reached the driver.
template <class T> void every_op_on_the_stand_in(int64_t n, void* stream, std::set<int>& kernels) {
  const int64_t batch = 3, nrhs = 2;
  std::vector<T> a(size_t(batch * n * n) + 1), b(size_t(batch * n * nrhs) + 1), x(a.size() + b.size()), s(batch);
  std::vector<real_t<T>> logabs(batch);
  std::vector<std::int32_t> info(batch);
  for (op kind : {op::slogdet, op::det, op::inv, op::solve, op::slogdet_inv, op::adjugate})
    for (bool transposed : {false, true}) {
      if (transposed && kind != op::inv && kind != op::slogdet_inv && kind != op::adjugate) continue;
      tinyla::job jb{.kind = kind,
                     .batch = batch,
                     .n = n,
                     .nrhs = kind == op::solve ? nrhs : 0,
                     .a = a.data(),
                     .b = b.data(),
                     .x = x.data(),
                     .sign = s.data(),
                     .logabsdet = logabs.data(),
                     .det = s.data(),
                     .info = info.data(),
                     .transpose_x = transposed};
      if (kind == op::det || kind == op::adjugate) jb.sign = jb.logabsdet = nullptr, jb.info = nullptr;
      if (kind != op::det && kind != op::adjugate) jb.det = nullptr;
      const auto plan = kern::plan_launch<kern_element<T>>(jb, kern::launch_options());
      SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n) + " op=" + std::to_string(int(kind)) +
                   (transposed ? " transposed" : "") + (plan.per_thread ? " per-thread" : " team"));
      kernels.insert(kern::kernel_index(tinyla::dtype_of<T>, kern::family_of(kind), kern::variant_of(plan, n)));
      auto before = stand_in::counts();  // empty (all 0) before the driver loads
      ASSERT_EQ(submit<T>(jb, stream), TINYLA_OK) << tinyla_gpu_last_error();
      auto after = stand_in::counts();
      EXPECT_EQ(after["launch"] - before["launch"], 1);
      const long workspace = plan.workspace_bytes > 0 ? 1 : 0;
      EXPECT_EQ(after["alloc_async"] - before["alloc_async"], workspace);
      EXPECT_EQ(after["free_async"] - before["free_async"], workspace);
      jb.batch = 0;  // an empty batch launches nothing
      ASSERT_EQ(submit<T>(jb, stream), TINYLA_OK);
      EXPECT_EQ(stand_in::counts()["launch"], after["launch"]);
    }
}

// log_det_laplacian of type T at size n on stand-in pointers: one launch of its kernel (added
// to `kernels`), none for an empty batch; past n = 32 TINYLA_UNSUPPORTED and no launch.
template <class T> void log_det_laplacian_on_the_stand_in(int64_t n, std::set<int>& kernels) {
  const int64_t batch = 3, k = 2;
  std::vector<T> g(size_t(batch * n * n) + 1), d(size_t(batch * k * n * n) + 1), grad(batch * k), lap(batch);
  namespace gd = tinyla::gpu::detail;
  const auto call = [&](int64_t b) {
    return gd::c_log_det_laplacian<T>(b, n, k, g.data(), g.data(), d.data(), grad.data(), lap.data(), nullptr);
  };
  SCOPED_TRACE(type_name<T>() + " log_det_laplacian n=" + std::to_string(n));
  auto before = stand_in::counts();
  if (n > kern::max_laplacian_n) {
    EXPECT_EQ(call(batch), TINYLA_UNSUPPORTED);
    EXPECT_NE(std::string(tinyla_gpu_last_error()).find("n <= 32"), std::string::npos) << tinyla_gpu_last_error();
    EXPECT_EQ(stand_in::counts()["launch"], before["launch"]);
    return;
  }
  kernels.insert(kern::kernel_count + kern::laplacian_kernel_index(tinyla::dtype_of<T>, n));
  ASSERT_EQ(call(batch), TINYLA_OK) << tinyla_gpu_last_error();
  auto after = stand_in::counts();
  EXPECT_EQ(after["launch"] - before["launch"], 1);
  ASSERT_EQ(call(0), TINYLA_OK);
  EXPECT_EQ(stand_in::counts()["launch"], after["launch"]);
}

TEST(StandIn, EveryPlannedKernelIsInTheImageAndEachCallIsOneLaunch) {
  ASSERT_NE(stand_in_path(), "") << "ctest runs this with TINYLA_GPU_DRIVER=<the stand-in driver>";
  std::set<int> kernels;
  // Every per-thread n, the team kernel in shared memory, and (n = 100 in
  // float64 and complex: past the shared-memory budget) with a workspace, and
  // both warp teams.
  for (int64_t n : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 32, 33, 100}) {
    every_op_on_the_stand_in<float>(n, nullptr, kernels);
    every_op_on_the_stand_in<double>(n, nullptr, kernels);
    every_op_on_the_stand_in<std::complex<float>>(n, nullptr, kernels);
    every_op_on_the_stand_in<std::complex<double>>(n, nullptr, kernels);
    log_det_laplacian_on_the_stand_in<float>(n, kernels);
    log_det_laplacian_on_the_stand_in<double>(n, kernels);
    log_det_laplacian_on_the_stand_in<std::complex<float>>(n, kernels);
    log_det_laplacian_on_the_stand_in<std::complex<double>>(n, kernels);
  }
  auto c = stand_in::counts();
  EXPECT_EQ(c["module_load"], 1);                      // the image, once (in the one context)
  EXPECT_EQ(c["get_function"], long(kernels.size()));  // each kernel looked up once, and found
  EXPECT_GT(kernels.size(), 4u * 4u * 6u);             // most per-thread n of every family and type, and teams
}

// TINYLA_GPU_TEAMS (ctest runs StandIn.* with it unset, "warp", "shared" and a bad value)
// and TINYLA_GPU_TEAM_SIZE (unset, 16 and a bad value): the plan options the launcher
// takes, whose kernels the test above then finds it looking up.
TEST(StandIn, TeamsFromTheEnvironment) {
  const std::string teams = std::getenv("TINYLA_GPU_TEAMS") ? std::getenv("TINYLA_GPU_TEAMS") : "";
  const std::string size = std::getenv("TINYLA_GPU_TEAM_SIZE") ? std::getenv("TINYLA_GPU_TEAM_SIZE") : "";
  const bool sized = size == "16";                 // a given size: the LU in shared memory for every n
  const bool shared = teams == "shared" || sized;  // else (fill, warp, a bad value) the warp teams
  const auto plan = [](int n) {
    const tinyla::job jb{.kind = op::slogdet_inv, .batch = 1, .n = n};
    const auto p = kern::plan_launch<double>(jb, kern::launch_options());
    EXPECT_FALSE(p.per_thread) << n;
    return p;
  };
  // A warp team wherever n fills more than half of its width (the narrowest that holds n).
  for (int n : {9, 12, 14, 16}) EXPECT_EQ(plan(n).warp_width, shared ? 0 : 16) << n;
  for (int n : {17, 24, 28, 30, 32}) EXPECT_EQ(plan(n).warp_width, shared ? 0 : 32) << n;
  // The LU in shared memory: teams of the given size, else a warp slot up to n = 32
  for (int n : {12, 24, 40})
    if (plan(n).warp_width == 0) EXPECT_EQ(plan(n).team_size, sized ? 16 : n <= 32 ? kern::warp_slot(n) : n) << n;
}

TEST(StandIn, LaunchesOnTheCallersStream) {
  ASSERT_NE(stand_in_path(), "") << "ctest runs this with TINYLA_GPU_DRIVER=<the stand-in driver>";
  void* lib = dlopen(stand_in_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  void* stream = nullptr;
  if (std::string(tinyla_gpu_platform()) == "cuda")
    ASSERT_EQ(reinterpret_cast<int (*)(void**, unsigned)>(dlsym(lib, "cuStreamCreate"))(&stream, 1), 0);
  else ASSERT_EQ(reinterpret_cast<int (*)(void**, unsigned)>(dlsym(lib, "hipStreamCreateWithFlags"))(&stream, 1), 0);
  std::set<int> kernels;
  every_op_on_the_stand_in<double>(5, stream, kernels);
  every_op_on_the_stand_in<std::complex<float>>(40, stream, kernels);
  dlclose(lib);
}

// Threads launching at once: one module load per context, every call one launch.
TEST(StandIn, ConcurrentCalls) {
  ASSERT_NE(stand_in_path(), "") << "ctest runs this with TINYLA_GPU_DRIVER=<the stand-in driver>";
  constexpr int threads = 8, rounds = 50;
  std::vector<double> a(64 * 64 * 4), out(a.size()), sign(4), logabs(4);
  auto before = stand_in::counts();
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        const int64_t n = (t + i) % 2 ? 1 + (t + i) % 8 : 20 + t;  // per-thread and team kernels
        if (tinyla_gpu_slogdet_inv_f64(4, n, a.data(), sign.data(), logabs.data(), out.data(), nullptr) != TINYLA_OK)
          ++failures;
      }
    });
  for (auto& th : pool) th.join();
  auto after = stand_in::counts();
  EXPECT_EQ(failures.load(), 0) << tinyla_gpu_last_error();
  EXPECT_EQ(after["launch"] - before["launch"], threads * rounds);
  EXPECT_EQ(after["module_load"], 1);
}

// ctest runs this with a driver that is missing or finds no device, and the
// reason it must give in TINYLA_TEST_EXPECTED_ERROR.
TEST(StandInFailing, ClearErrorNoCrash) {
  const char* expected = std::getenv("TINYLA_TEST_EXPECTED_ERROR");
  ASSERT_NE(expected, nullptr) << "ctest runs this with TINYLA_TEST_EXPECTED_ERROR set";
  double a[9] = {}, sign[1], logabs[1];
  for (int round = 0; round < 2; ++round) {  // and again: the failure is remembered, not retried into a crash
    EXPECT_EQ(tinyla_gpu_slogdet_f64(1, 3, a, sign, logabs, nullptr), TINYLA_BACKEND_ERROR);
    EXPECT_NE(std::string(tinyla_gpu_last_error()).find(expected), std::string::npos) << tinyla_gpu_last_error();
  }
}

template <class T> class Device : public ::testing::Test {};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(Device, Types);

// Up to the end of the CPU's fast path the CPU runs the same LU: same bits.
TYPED_TEST(Device, AllOpsMatchCpuBitForBit) {
  REQUIRE_DEVICE();
  using T = TypeParam;
  stream_holder stream;
  for (int n = 0; n <= 32; ++n) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = n <= 8 ? 2000 : 300;  // several blocks
    EXPECT_EQ(first_difference(run_all_ops<T>(n, batch, on_gpu<T>(stream.s)), run_all_ops<T>(n, batch)), "");
  }
}

// log_det_laplacian's kernel at every n it takes: the CPU's bits (tests/cpp/test_gpu_kernels.cpp
// checks the same on the host emulation).
TYPED_TEST(Device, LogDetLaplacianMatchesCpuBitForBit) {
  REQUIRE_DEVICE();
  using T = TypeParam;
  stream_holder stream;
  for (int n = 0; n <= 32; ++n) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = 300, k = 3 * n + 1;
    const size_t nn = size_t(n) * n;
    std::vector<T> g = make_batch<T>(kind::random, batch, n, 21 + n), h = make_batch<T>(kind::random, batch, n, 22);
    std::vector<T> d = make_batch<T>(kind::random, batch * k, n, 23);
    for (size_t t = 0; t < size_t(batch * k); ++t)  // every other tangent a single non-zero row
      if (t % 2)
        for (size_t e = 0; e < nn; ++e)
          if (e / size_t(n) != t % size_t(n)) d[t * nn + e] = T(0);
    std::vector<T> grad_cpu(size_t(batch * k)), lap_cpu(batch), grad(grad_cpu.size()), lap(batch);
    ASSERT_EQ(tinyla::detail::c_log_det_laplacian<T>(batch, n, k, g.data(), h.data(), d.data(), grad_cpu.data(),
                                                     lap_cpu.data()),
              TINYLA_OK);
    device_buffer dg(g.size() * sizeof(T)), dh(h.size() * sizeof(T)), dd(d.size() * sizeof(T)),
        dgrad(grad.size() * sizeof(T)), dlap(lap.size() * sizeof(T));
    to_device(dg.p, g.data(), g.size() * sizeof(T));
    to_device(dh.p, h.data(), h.size() * sizeof(T));
    to_device(dd.p, d.data(), d.size() * sizeof(T));
    ASSERT_EQ(tinyla::gpu::detail::c_log_det_laplacian<T>(batch, n, k, static_cast<const T*>(dg.p),
                                                          static_cast<const T*>(dh.p), static_cast<const T*>(dd.p),
                                                          static_cast<T*>(dgrad.p), static_cast<T*>(dlap.p), stream.s),
              TINYLA_OK)
        << tinyla_gpu_last_error();
    ASSERT_EQ(gpuStreamSynchronize(stream.s), gpuSuccess);
    to_host(grad.data(), dgrad.p, grad.size() * sizeof(T));
    to_host(lap.data(), dlap.p, lap.size() * sizeof(T));
    EXPECT_TRUE(grad.empty() || std::memcmp(grad.data(), grad_cpu.data(), grad.size() * sizeof(T)) == 0);
    EXPECT_EQ(std::memcmp(lap.data(), lap_cpu.data(), lap.size() * sizeof(T)), 0);
  }
}

// Past it (LAPACK on the CPU), and with the global workspace (n = 100: the
// matrix no longer fits the shared-memory budget): as accurate as LAPACK.
TYPED_TEST(Device, LargeNAsAccurateAsLapack) {
  REQUIRE_DEVICE();
  using T = TypeParam;
  using R = real_t<T>;
  for (int n : {33, 64, 100}) {
    SCOPED_TRACE(type_name<T>() + " n=" + std::to_string(n));
    const int64_t batch = 7;
    const auto a = make_batch<T>(kind::random, batch, n, 5 * n);
    std::vector<T> sign(batch), x(a.size());
    std::vector<R> logabs(batch);
    const tinyla::job jb{.kind = op::slogdet_inv,
                         .batch = batch,
                         .n = n,
                         .a = a.data(),
                         .x = x.data(),
                         .sign = sign.data(),
                         .logabsdet = logabs.data()};
    ASSERT_EQ(on_gpu<T>(nullptr)(tinyla::dtype_of<T>, jb), TINYLA_OK) << tinyla_gpu_last_error();
    for (int64_t b = 0; b < batch; ++b) {
      const auto wide = wide_lu(a.data() + b * n * n, n, true);
      const auto lapack = lapack_lu(a.data() + b * n * n, n, true);
      const long double floor = n * eps<T>();
      EXPECT_LE(std::abs(logabs[b] - wide.logabs),
                32 * std::abs(lapack.logabs - wide.logabs) + floor * std::abs(wide.logabs));
      EXPECT_LE(rel_err_F(x, wide.inv, b * n * n, n * n), 32 * rel_err_F(lapack.inv, wide.inv, 0, n * n) + floor);
    }
  }
}

// inv(a) -> a and solve(b) -> b, on a non-blocking stream.
TEST(Device, InPlaceOnAStream) {
  REQUIRE_DEVICE();
  stream_holder stream;
  for (int n : {3, 8, 20}) {
    const int64_t batch = 500;
    auto a = make_batch<double>(kind::diag_dominant, batch, n, n);
    const auto rhs = make_batch<double>(kind::random, batch, n, n + 1);
    const size_t bytes = a.size() * sizeof(double);
    device_buffer da(bytes), db(bytes), dx(bytes);
    to_device(da.p, a.data(), bytes);
    to_device(db.p, rhs.data(), bytes);
    auto* pa = static_cast<double*>(da.p);
    auto* pb = static_cast<double*>(db.p);
    auto* px = static_cast<double*>(dx.p);
    tinyla::gpu::inv<double>(batch, n, pa, px, nullptr, stream.s);
    tinyla::gpu::solve<double>(batch, n, n, pa, pb, pb, nullptr, stream.s);  // b <- A^-1 b
    tinyla::gpu::inv<double>(batch, n, pa, pa, nullptr, stream.s);           // a <- A^-1
    ASSERT_EQ(gpuStreamSynchronize(stream.s), gpuSuccess);
    std::vector<double> inv_out(a.size()), inv_in_place(a.size()), sol(a.size()), want(a.size());
    to_host(inv_out.data(), px, bytes);
    to_host(inv_in_place.data(), pa, bytes);
    to_host(sol.data(), pb, bytes);
    EXPECT_EQ(inv_out, inv_in_place) << "n=" << n;
    ASSERT_EQ(tinyla_solve_f64(batch, n, n, a.data(), rhs.data(), want.data(), nullptr), TINYLA_OK);
    EXPECT_EQ(sol, want) << "n=" << n;
  }
}

// More than 2^31 elements: 64-bit indices everywhere (8 GiB of input).
TEST(Device, HugeBatchUses64BitIndices) {
  REQUIRE_DEVICE();
  const int n = 2;
  const int64_t batch = (int64_t(1) << 29) + 5, count = batch * n * n;
  std::vector<float> a(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) a[size_t(i)] = float((i * 7919) % 1009) - 504.0f;
  device_buffer da(size_t(count) * 4), dsign(size_t(batch) * 4), dlog(size_t(batch) * 4);
  if (!da.p || !dsign.p || !dlog.p) GTEST_SKIP() << "not enough device memory for 10 GiB";
  to_device(da.p, a.data(), size_t(count) * 4);
  tinyla::gpu::slogdet<float>(batch, n, static_cast<float*>(da.p), static_cast<float*>(dsign.p),
                              static_cast<float*>(dlog.p));
  ASSERT_EQ(gpuDeviceSynchronize(), gpuSuccess);
  // The first and the last 4096 matrices against the CPU.
  for (int64_t first : {int64_t(0), batch - 4096}) {
    std::vector<float> sign(4096), logabs(4096), want_sign(4096), want_log(4096);
    to_host(sign.data(), static_cast<float*>(dsign.p) + first, 4096 * 4);
    to_host(logabs.data(), static_cast<float*>(dlog.p) + first, 4096 * 4);
    ASSERT_EQ(tinyla_slogdet_f32(4096, n, a.data() + first * n * n, want_sign.data(), want_log.data()), TINYLA_OK);
    EXPECT_EQ(std::memcmp(sign.data(), want_sign.data(), 4096 * 4), 0) << "from matrix " << first;
    EXPECT_EQ(std::memcmp(logabs.data(), want_log.data(), 4096 * 4), 0) << "from matrix " << first;
  }
}

}  // namespace
