// The GPU launch runtime: small objects with one job each over the lazily
// loaded driver (driver.hpp). Thread-safe; one per process, never destroyed
// (global destructors of MLIR programs call into it at exit, in any order).
//
// - device: mgpuSetDefaultDevice's device, made current on each calling thread
//   (its primary context on CUDA) the first time that thread needs it.
// - stream pool: non-blocking streams, reused; a stream is synchronized when it
//   is released, so one taken from the pool is idle.
// - event pool: events, reused.
// - module cache: keyed by the binary's content (a copy of its bytes); loads
//   are refcounted, and a module stays loaded when its count drops to 0 (a
//   later load of the same binary hits the cache; the driver frees it at exit).
// - function cache: (module, name) -> function, and for each function the
//   dynamic shared memory it was opted in to (CUDA: above 48 KiB).
// TINYLA_MGPU_POOL=0 turns the stream/event pools and the function cache off
// (for comparisons: what MLIR's own runtime wrappers do).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/driver.hpp"

namespace tinyla::runtime {

// What reached the driver, and what the caches answered (for tests and benchmarks).
struct counters {
  std::atomic<std::int64_t> streams_created{0}, stream_reuses{0}, modules_loaded{0}, module_cache_hits{0},
      function_lookups{0}, function_cache_hits{0}, launches{0}, events_created{0}, errors{0};
};

class runtime {
 public:
  // The process's runtime; nullptr when no driver loads (the reason is printed
  // once to stderr, and `why` gets it).
  static runtime* get(std::string* why = nullptr);

  const driver& drv() const { return drv_; }
  counters& stats() { return stats_; }

  void set_default_device(int device);
  // Makes the default device current on this thread; false (error reported) if it cannot.
  bool bind_thread();

  handle acquire_stream();
  void release_stream(handle stream);
  handle acquire_event();
  void release_event(handle event);

  // size: the image's bytes, or 0 to read it off the image (ELF, fatbin, or
  // NUL-terminated text such as PTX). nullptr on failure (reported).
  handle load_module(const void* image, std::size_t size, bool jit, int opt_level);
  void unload_module(handle module);
  handle function(handle module, const char* name);
  void launch(handle function, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, handle stream,
              void** params, void** extra);

  // Reports a failed driver call (stderr; the mgpu ABI returns no status).
  // True when `code` is success.
  bool check(int code, const char* what);

 private:
  explicit runtime(const driver& d);

  struct module_entry {
    std::vector<char> image;
    handle module = nullptr;
    int refs = 0;
  };

  const driver& drv_;
  const bool pooling_;  // false (TINYLA_MGPU_POOL=0): a stream per create, a driver lookup per call, as MLIR's own wrappers do
  counters stats_;
  std::atomic<int> default_device_{0};
  std::atomic<int> device_epoch_{0};  // bumped by set_default_device: threads rebind

  // Idle handles, ready for reuse.
  struct handle_pool {
    std::mutex mutex;
    std::vector<handle> idle;
    handle take();  // nullptr when empty
    void put(handle h);
  };
  handle_pool streams_, events_;

  std::mutex modules_mutex_;
  std::unordered_multimap<std::uint64_t, std::unique_ptr<module_entry>> modules_;  // by content hash
  std::unordered_map<handle, module_entry*> module_of_;

  std::mutex functions_mutex_;
  std::map<std::pair<handle, std::string>, handle> functions_;
  std::unordered_map<handle, unsigned> shared_opt_in_;
};

}  // namespace tinyla::runtime
