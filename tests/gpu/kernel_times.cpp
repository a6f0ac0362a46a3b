// Device time of each op on the (walkers, 64, N, N) float64 workload that scripts/gpu-report
// predicts, with no framework around the launch: events on one stream around each call, best
// of 10 after a warm-up call. A benchmark, not a test (scripts/gpu-check runs it):
//   tinyla_gpu_kernel_times [walkers, default 4096] [json path, or ""] [sizes, default 1,...,8,12,16,24,32]
// prints a table (ms, and GB/s of the input and outputs moved) and writes the rows in
// bench/qmc_workload.py's JSON form, so that gpu_report.py --measured sets them beside
// the prediction: "forward" is slogdet, "grad" slogdet_inv_transposed (what jax.grad of
// slogdet calls), "inv" inv.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu/vendor.hpp"
#include "tinyla/gpu.hpp"

#define gpuEvent_t TINYLA_GPU_NAME(Event_t)
#define gpuEventCreate TINYLA_GPU_NAME(EventCreate)
#define gpuEventRecord TINYLA_GPU_NAME(EventRecord)
#define gpuEventSynchronize TINYLA_GPU_NAME(EventSynchronize)
#define gpuEventElapsedTime TINYLA_GPU_NAME(EventElapsedTime)
#define gpuGetDeviceProperties TINYLA_GPU_NAME(GetDeviceProperties)
#if defined(TINYLA_GPU_HIP)
using gpuDeviceProp = hipDeviceProp_t;
#else
using gpuDeviceProp = cudaDeviceProp;
#endif

namespace {

void check(gpuError_t e, const char* what) {
  if (e != gpuSuccess) std::fprintf(stderr, "kernel_times: %s: %s\n", what, gpuGetErrorString(e)), std::exit(1);
}

template <class Call> double best_seconds(Call call, gpuStream_t stream) {
  gpuEvent_t start, stop;
  check(gpuEventCreate(&start), "event"), check(gpuEventCreate(&stop), "event");
  call();  // warm-up: module load, kernel lookup
  check(gpuStreamSynchronize(stream), "warm-up");
  float best = 1e30f;
  for (int r = 0; r < 10; ++r) {
    check(gpuEventRecord(start, stream), "record");
    call();
    check(gpuEventRecord(stop, stream), "record");
    check(gpuEventSynchronize(stop), "synchronize");
    float ms = 0;
    check(gpuEventElapsedTime(&ms, start, stop), "elapsed");
    best = std::min(best, ms);
  }
  return best * 1e-3;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t walkers = argc > 1 ? std::atoll(argv[1]) : 4096, batch = walkers * 64;
  FILE* json = argc > 2 && *argv[2] ? std::fopen(argv[2], "w") : nullptr;
  std::vector<int> sizes;
  for (const char* p = argc > 3 ? argv[3] : "1,2,3,4,5,6,7,8,12,16,24,32"; *p;) {
    char* end;
    sizes.push_back(int(std::strtol(p, &end, 10)));
    p = *end ? end + 1 : end;
  }
  gpuStream_t stream;
  check(gpuStreamCreateWithFlags(&stream, gpuStreamNonBlocking), "stream");
  gpuDeviceProp device{};
  check(gpuGetDeviceProperties(&device, 0), "device properties");
  std::printf("device time on %s, (%lld, 64, N, N) float64, best of 10 (ms; GB/s of input + outputs)\n", device.name,
              static_cast<long long>(walkers));
  std::printf(
      "| N | slogdet ms | GB/s | slogdet_inv_t ms | GB/s | inv ms | GB/s |\n|---:|---:|---:|---:|---:|---:|---:|\n");
  // The plans' settings, for gpu_report.py to predict the same kernels.
  const auto setting = [](const char* name, const char* fallback) {
    const char* env = std::getenv(name);
    return env && *env ? env : fallback;
  };
  const char *teams = setting("TINYLA_GPU_TEAMS", "fill"), *stores = setting("TINYLA_GPU_STORES", "staged"),
             *team_inverse = setting("TINYLA_GPU_TEAM_INVERSE", "global");
  if (json)
    std::fprintf(json,
                 "{\"device\": \"%s\", \"teams\": \"%s\", \"stores\": \"%s\", \"team_inverse\": \"%s\", "
                 "\"source\": \"tinyla_gpu_kernel_times: device time, events around each call, TINYLA_GPU_TEAMS=%s "
                 "TINYLA_GPU_STORES=%s TINYLA_GPU_TEAM_INVERSE=%s\", \"rows\": [",
                 device.name, teams, stores, team_inverse, teams, stores, team_inverse);
  bool first_row = true;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (int n : sizes) {
    const size_t nn = size_t(n) * n, elements = size_t(batch) * nn;
    std::vector<double> host(elements);
    for (auto& v : host) v = uniform(rng);
    double *a, *x, *sign, *logabs;
    check(gpuMalloc(reinterpret_cast<void**>(&a), elements * 8), "malloc");
    check(gpuMalloc(reinterpret_cast<void**>(&x), elements * 8), "malloc");
    check(gpuMalloc(reinterpret_cast<void**>(&sign), size_t(batch) * 8), "malloc");
    check(gpuMalloc(reinterpret_cast<void**>(&logabs), size_t(batch) * 8), "malloc");
    check(gpuMemcpy(a, host.data(), elements * 8, gpuMemcpyHostToDevice), "copy");
    check(gpuDeviceSynchronize(), "copy");
    const double t_slogdet =
        best_seconds([&] { tinyla::gpu::slogdet<double>(batch, n, a, sign, logabs, stream); }, stream);
    const double t_grad = best_seconds(
        [&] { tinyla::gpu::slogdet_inv_transposed<double>(batch, n, a, sign, logabs, x, stream); }, stream);
    const double t_inv = best_seconds([&] { tinyla::gpu::inv<double>(batch, n, a, x, nullptr, stream); }, stream);
    const double in = double(elements) * 8, scalars = double(batch) * 16;
    std::printf("| %d | %.3f | %.0f | %.3f | %.0f | %.3f | %.0f |\n", n, t_slogdet * 1e3,
                (in + scalars) / t_slogdet / 1e9, t_grad * 1e3, (2 * in + scalars) / t_grad / 1e9, t_inv * 1e3,
                2 * in / t_inv / 1e9);
    if (json)
      for (auto [workload, t] : {std::pair{"forward", t_slogdet}, {"grad", t_grad}, {"inv", t_inv}}) {
        std::fprintf(json, "%s\n {\"workload\": \"%s\", \"n\": %d, \"walkers\": %lld, \"tinyla\": %.9g}",
                     first_row ? "" : ",", workload, n, static_cast<long long>(walkers), t);
        first_row = false;
      }
    for (void* p : {static_cast<void*>(a), static_cast<void*>(x), static_cast<void*>(sign), static_cast<void*>(logabs)})
      check(gpuFree(p), "free");
  }
  if (json) std::fprintf(json, "\n]}\n"), std::fclose(json);
  return 0;
}
