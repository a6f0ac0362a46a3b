// The GPU launch runtime: small objects with one job each over the lazily
// loaded driver (driver.hpp). Thread-safe; one per platform and process, never
// destroyed (global destructors of MLIR programs call into it at exit, in any
// order). Its users: libtinyla_mgpu (MLIR's mgpu* ABI) and tinyla's GPU
// backend (src/gpu/backend.cpp).
//
// Everything a driver makes belongs to a context (CUDA; on HIP: a device), so
// pools and modules are kept per context: the calling thread's current one.
// Callers make the right one current first: bind_thread (mgpu: the default
// device, mgpuSetDefaultDevice's) or use_stream_context (the backend: the
// context of the caller's stream).
// - stream pool: non-blocking streams, reused; a stream is synchronized when it
//   is released, so one taken from the pool is idle.
// - event pool: events, reused.
// - module cache: keyed by (context, the binary's content: a copy of its
//   bytes); loads are refcounted, and a module stays loaded when its count
//   drops to 0 (a later load of the same binary hits the cache; the driver
//   frees it at exit).
// - function cache: (module, name) -> function, and for each function the
//   dynamic shared memory it was opted in to (CUDA: above 48 KiB).
// TINYLA_MGPU_POOL=0 turns the stream/event pools and the function cache off
// (for comparisons: what MLIR's own runtime wrappers do).
//
// What the runtime is: the holder of these pools and caches and of the driver
// table. It does not wrap the rest of the driver: its users call drv() for
// memory, copies and synchronization, and check() the codes they get.
//
// A failed driver call makes the method return null/false; last_error() says
// why (this thread's latest failure), and with print_errors it also goes to
// stderr (the mgpu ABI has no other way to say it).
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
  // The process's runtime for `p`; nullptr when no driver loads (`why` says why).
  static runtime* get(platform p, std::string* why = nullptr);
  // This thread's latest failure ("" if none yet): the one error channel of the
  // runtime and of its users (the GPU backends record theirs with set_last_error).
  static const char* last_error();
  static void set_last_error(const std::string& message);

  const driver& drv() const { return drv_; }
  counters& stats() { return stats_; }
  void print_errors(bool on) { print_errors_ = on; }

  void set_default_device(int device);

  // What this thread knows without asking the driver (runtime.cpp). The hot
  // methods below take it, so that a caller making several calls looks it up
  // once: a thread_local in a shared library costs a __tls_get_addr call per
  // look-up. The overloads without it look it up themselves.
  struct thread_state;
  static thread_state& this_thread();

  // Makes the default device current on this thread; false on failure.
  bool bind_thread(thread_state& t);
  // Makes the stream's context current on this thread (for the null stream: the
  // current context, else device 0's primary one, as the CUDA runtime would)
  // and returns it; nullptr on failure.
  handle use_stream_context(handle stream);

  // In the current context.
  handle acquire_stream(thread_state& t);
  // Back to the pool of the stream's own context.
  void release_stream(thread_state& t, handle stream);
  void release_stream(handle stream) { release_stream(this_thread(), stream); }
  // Synchronizes a stream, and remembers it is idle until enqueued() (or a launch)
  // says otherwise: releasing it then needs no second synchronize.
  bool synchronize(thread_state& t, handle stream);
  bool synchronize(handle stream) { return synchronize(this_thread(), stream); }
  void enqueued(thread_state& t, handle stream);
  void enqueued(handle stream) { enqueued(this_thread(), stream); }
  handle acquire_event();
  void release_event(handle event);

  // In the current context. size: the image's bytes, or 0 to read it off the
  // image (ELF, CUDA fatbin, clang offload bundle, or NUL-terminated text such as PTX).
  handle load_module(const void* image, std::size_t size, bool jit, int opt_level);
  void unload_module(handle module);
  handle function(thread_state& t, handle module, const char* name);
  handle function(handle module, const char* name) { return function(this_thread(), module, name); }
  bool launch(thread_state& t, handle function, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
              handle stream, void** params, void** extra);
  bool launch(handle function, const unsigned grid[3], const unsigned block[3], unsigned shared_bytes, handle stream,
              void** params, void** extra) {
    return launch(this_thread(), function, grid, block, shared_bytes, stream, params, extra);
  }

  // True when `code` is success; else records (and maybe prints) the failure.
  bool check(int code, const char* what) { return code == 0 || fail_code(code, what); }
  bool fail(const std::string& message);  // records a failure that is not a driver code; false

 private:
  bool fail_code(int code, const char* what);  // check's failure path; false

  explicit runtime(const driver& d);

  struct module_entry {
    handle context = nullptr;
    std::vector<char> image;
    handle module = nullptr;
    int refs = 0;
  };

  const driver& drv_;
  const bool
      pooling_;  // false (TINYLA_MGPU_POOL=0): a stream per create, a driver lookup per call, as MLIR's own wrappers do
  std::atomic<bool> print_errors_{false};
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
  struct context_pools {
    handle_pool streams, events;
  };
  std::mutex contexts_mutex_;
  std::vector<std::pair<handle, std::unique_ptr<context_pools>>> contexts_;  // few: one per device
  context_pools* pools(handle context);                                      // nullptr if no context
  static thread_local thread_state this_thread_;
  context_pools* current_pools(thread_state& t);  // of the current context; nullptr (recorded) if none is current

  std::mutex modules_mutex_;
  std::unordered_multimap<std::uint64_t, std::unique_ptr<module_entry>> modules_;  // by content hash (+ context)
  std::unordered_map<handle, module_entry*> module_of_;

  std::mutex functions_mutex_;
  std::map<std::pair<handle, std::string>, handle> functions_;
  std::unordered_map<handle, unsigned> shared_opt_in_;
};

}  // namespace tinyla::runtime
