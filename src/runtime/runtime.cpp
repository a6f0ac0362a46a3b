#include "runtime/runtime.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tinyla::runtime {
namespace {

std::uint64_t fnv1a(const char* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ std::uint8_t(p[i])) * 1099511628211ull;
  return h;
}

// The size of a GPU binary from its header: ELF (cubin, hsaco: section headers
// come last), CUDA fatbin (header + payload), clang offload bundle (HIP's
// fatbin: the end of its last entry), else NUL-terminated text (PTX).
std::size_t image_size(const void* image) {
  const auto* b = static_cast<const unsigned char*>(image);
  if (std::memcmp(b,
                  "\x7f"
                  "ELF",
                  4) == 0 &&
      b[4] == 2) {  // 64-bit ELF
    std::uint64_t shoff;
    std::uint16_t shentsize, shnum;
    std::memcpy(&shoff, b + 0x28, 8);
    std::memcpy(&shentsize, b + 0x3a, 2);
    std::memcpy(&shnum, b + 0x3c, 2);
    return std::size_t(shoff) + std::size_t(shentsize) * shnum;
  }
  std::uint32_t magic;
  std::memcpy(&magic, b, 4);
  if (magic == 0xBA55ED50u) {  // fatbin: u32 magic, u16 version, u16 header size, u64 payload size
    std::uint16_t header;
    std::uint64_t payload;
    std::memcpy(&header, b + 6, 2);
    std::memcpy(&payload, b + 8, 8);
    return std::size_t(header) + std::size_t(payload);
  }
  static constexpr char bundle_magic[] =
      "__CLANG_OFFLOAD_BUNDLE__";  // then u64 count, entries {u64 offset, size, id length, id}
  if (std::memcmp(b, bundle_magic, sizeof bundle_magic - 1) == 0) {
    std::uint64_t count, end = 0;
    std::memcpy(&count, b + 24, 8);
    const unsigned char* entry = b + 32;
    for (std::uint64_t i = 0; i < count; ++i) {
      std::uint64_t offset, size, id_length;
      std::memcpy(&offset, entry, 8);
      std::memcpy(&size, entry + 8, 8);
      std::memcpy(&id_length, entry + 16, 8);
      end = offset + size > end ? offset + size : end;
      entry += 24 + id_length;
    }
    return std::size_t(end);
  }
  return std::strlen(static_cast<const char*>(image)) + 1;
}

// Trivially destructible: global destructors (module unloads at exit) may
// still record a failure after this thread's thread_local objects are gone.
thread_local char latest_error[1024];

}  // namespace

// Every per-thread fact of the hot path in one object: in a shared library each
// thread_local costs a __tls_get_addr call per use (perf, stand-in driver: host
// time per MLIR launch 103 ns with separate ones, 62 ns like this).
struct runtime::thread_state {
  // The binding (bind_thread): the device epoch it bound, and the context that
  // made current, so that calls in it need not ask the driver.
  int bound_epoch = -1;
  handle bound_context = nullptr;
  // The stream acquired last, with its context, and the stream synchronized last
  // with nothing enqueued since: what MLIR's create, launch, synchronize,
  // destroy sequence releases, without asking the driver again.
  handle acquired_stream = nullptr, acquired_context = nullptr, idle_stream = nullptr;
  // A released idle stream kept for the next acquire (MLIR makes and destroys one
  // per launch) without the pool's lock; back to its pool at thread exit (the
  // exit hook, armed when the first one is kept).
  runtime* spare_owner = nullptr;
  handle spare_context = nullptr, spare_stream = nullptr;
  bool exit_hook_armed = false, exited = false;  // exited: streams released later go to the pool
  // The last function look-up (MLIR looks the same kernel up before every
  // launch), answered without the shared cache's lock and string key; names
  // longer than the buffer always take the shared cache.
  const runtime* lookup_owner = nullptr;
  handle lookup_module = nullptr, lookup_function = nullptr;
  char lookup_name[64] = {};

  bool bound_to(const runtime& r) const { return bound_epoch == r.device_epoch_.load(std::memory_order_relaxed); }
  void remember_lookup(const runtime* r, handle module, handle function, const char* name) {
    const std::size_t length = std::strlen(name);
    lookup_owner = length < sizeof lookup_name ? r : nullptr;
    if (!lookup_owner) return;
    std::memcpy(lookup_name, name, length + 1);
    lookup_module = module, lookup_function = function;
  }
  // Whether name is the last one looked up: inline, as libc's strcmp costs more
  // than the rest of the look-up for names this short.
  bool looked_up_last(const char* name) const {
    for (const char* last = lookup_name;; ++name, ++last) {
      if (*name != *last) return false;
      if (*name == 0) return true;
    }
  }
  void keep_spare(runtime* owner, handle context, handle stream);

  // thread_state itself is trivially destructible, so that no access pays a guard
  // for a destructor's registration: the spare stream goes back at thread exit by
  // this hook instead.
  struct exit_hook {
    ~exit_hook() {
      thread_state& t = this_thread();
      if (t.spare_stream) t.spare_owner->pools(t.spare_context)->streams.put(t.spare_stream);
      t.spare_stream = nullptr;
      t.exited = true;
    }
  };
};

thread_local runtime::thread_state runtime::this_thread_;

// The empty asm makes the address opaque, so the caller keeps it in a register:
// GCC would otherwise call __tls_get_addr again at every use of the reference.
runtime::thread_state& runtime::this_thread() {
  thread_state* t = &this_thread_;
  asm("" : "+r"(t));
  return *t;
}

void runtime::thread_state::keep_spare(runtime* owner, handle context, handle stream) {
  if (!exit_hook_armed) {
    static thread_local exit_hook hook;
    (void)hook;  // constructed (and its destructor registered) on this first use
    exit_hook_armed = true;
  }
  spare_owner = owner, spare_context = context, spare_stream = stream;
}

runtime* runtime::get(platform p, std::string* why) {
  static std::once_flag once[3];
  static runtime* instances[3];
  const int i = int(p);
  std::call_once(once[i], [&] {
    const driver* d = load_driver(p);
    instances[i] = d ? new runtime(*d) : nullptr;  // never deleted: global destructors may call in at exit
  });
  if (why && !instances[i]) load_driver(p, why);
  return instances[i];
}

const char* runtime::last_error() { return latest_error; }
void runtime::set_last_error(const std::string& message) {
  std::snprintf(latest_error, sizeof latest_error, "%s", message.c_str());
}

runtime::runtime(const driver& d)
    : drv_(d), pooling_(!(std::getenv("TINYLA_MGPU_POOL") && std::string(std::getenv("TINYLA_MGPU_POOL")) == "0")) {}

bool runtime::fail(const std::string& message) {
  ++stats_.errors;
  set_last_error(message);
  if (print_errors_) std::fprintf(stderr, "tinyla runtime: %s\n", message.c_str());
  return false;
}

bool runtime::fail_code(int code, const char* what) {
  return fail(std::string(what) + " failed: " + drv_.error_string(code) + " (" + drv_.platform + " error " +
              std::to_string(code) + ")");
}

void runtime::set_default_device(int device) {
  default_device_ = device;
  ++device_epoch_;
}

bool runtime::bind_thread(thread_state& t) {
  const int epoch = device_epoch_.load();
  if (t.bound_epoch == epoch) return true;
  handle context = nullptr;
  if (!check(drv_.use_device(default_device_.load()), "selecting the device") ||
      !check(drv_.current_context(&context), "reading the current context"))
    return false;
  t.bound_epoch = epoch;
  t.bound_context = context;
  return true;
}

handle runtime::use_stream_context(handle stream) {
  handle current = nullptr, wanted = nullptr;
  if (!check(drv_.current_context(&current), "reading the current context")) return nullptr;
  if (stream) {
    if (!check(drv_.stream_context(stream, &wanted), "reading the stream's context")) return nullptr;
  } else {
    if (current) return current;
    if (!check(drv_.use_device(0), "selecting device 0") ||
        !check(drv_.current_context(&wanted), "reading the context"))
      return nullptr;
    current = wanted;
  }
  if (wanted != current) {
    if (!check(drv_.set_context(wanted), "making the stream's context current")) return nullptr;
    this_thread().bound_epoch = -1;  // bind_thread's device may no longer be current
  }
  return wanted;
}

runtime::context_pools* runtime::pools(handle context) {
  if (!context) return nullptr;
  std::lock_guard<std::mutex> lock(contexts_mutex_);
  for (auto& [c, p] : contexts_)
    if (c == context) return p.get();
  return contexts_.emplace_back(context, std::make_unique<context_pools>()).second.get();
}

runtime::context_pools* runtime::current_pools(thread_state& t) {
  // Bound (bind_thread) and not moved since (use_stream_context unbinds when it
  // switches): the bound context is current.
  if (t.bound_to(*this) && t.bound_context) return pools(t.bound_context);
  handle context = nullptr;
  if (!check(drv_.current_context(&context), "reading the current context")) return nullptr;
  if (!context) fail("no current context (no device selected on this thread)");
  return pools(context);
}

handle runtime::handle_pool::take() {
  std::lock_guard<std::mutex> lock(mutex);
  if (idle.empty()) return nullptr;
  handle h = idle.back();
  idle.pop_back();
  return h;
}

void runtime::handle_pool::put(handle h) {
  std::lock_guard<std::mutex> lock(mutex);
  idle.push_back(h);
}

handle runtime::acquire_stream(thread_state& t) {
  const handle bound = t.bound_to(*this) ? t.bound_context : nullptr;
  handle s = nullptr;
  if (pooling_ && bound && t.spare_stream && t.spare_owner == this && t.spare_context == bound) {
    s = t.spare_stream, t.spare_stream = nullptr;
  } else {
    context_pools* p = current_pools(t);
    if (!p) return nullptr;
    s = pooling_ ? p->streams.take() : nullptr;
  }
  if (s) {
    ++stats_.stream_reuses;
  } else {
    if (!check(drv_.stream_create(&s), "creating a stream")) return nullptr;
    ++stats_.streams_created;
  }
  t.acquired_stream = s, t.acquired_context = bound;
  return s;
}

bool runtime::synchronize(thread_state& t, handle stream) {
  if (!check(drv_.stream_synchronize(stream), "synchronizing a stream")) return false;
  t.idle_stream = stream;
  return true;
}

void runtime::enqueued(thread_state& t, handle stream) {
  if (stream == t.idle_stream) t.idle_stream = nullptr;
}

void runtime::release_stream(thread_state& t, handle stream) {
  if (!stream) return;
  if (!pooling_) {
    check(drv_.stream_destroy(stream), "destroying a stream");
    return;
  }
  // Idle before anyone else gets it: synchronized here unless this thread did
  // with nothing enqueued since (MLIR synchronizes before it destroys).
  handle context = stream == t.acquired_stream ? t.acquired_context : nullptr;
  if ((stream != t.idle_stream && !check(drv_.stream_synchronize(stream), "synchronizing a released stream")) ||
      (!context && !check(drv_.stream_context(stream, &context), "reading a released stream's context")) || !context) {
    check(drv_.stream_destroy(stream), "destroying a failed stream");
    return;
  }
  if (stream == t.acquired_stream) t.acquired_stream = nullptr;
  if (stream == t.idle_stream) t.idle_stream = nullptr;
  if (!t.spare_stream && !t.exited) t.keep_spare(this, context, stream);
  else pools(context)->streams.put(stream);
}

handle runtime::acquire_event() {
  context_pools* p = current_pools(this_thread());
  if (!p) return nullptr;
  if (handle e = pooling_ ? p->events.take() : nullptr) return e;
  handle e = nullptr;
  if (!check(drv_.event_create(&e), "creating an event")) return nullptr;
  ++stats_.events_created;
  return e;
}

void runtime::release_event(handle event) {
  if (!event) return;
  if (!pooling_) {
    check(drv_.event_destroy(event), "destroying an event");
    return;
  }
  // Into the current context's pool: the driver cannot say an event's context;
  // mgpu's calls come from the thread's default device, where it was made.
  if (context_pools* p = current_pools(this_thread())) p->events.put(event);
  else check(drv_.event_destroy(event), "destroying an event");
}

handle runtime::load_module(const void* image, std::size_t size, bool jit, int opt_level) {
  if (!image) return fail("loading a module: no binary (null pointer)"), nullptr;
  handle context = nullptr;
  if (!check(drv_.current_context(&context), "reading the current context")) return nullptr;
  if (size == 0) size = image_size(image);
  const char* bytes = static_cast<const char*>(image);
  const std::uint64_t key = fnv1a(bytes, size) ^ std::uint64_t(reinterpret_cast<std::uintptr_t>(context));
  std::lock_guard<std::mutex> lock(modules_mutex_);  // held across the load: one load per binary
  auto [first, last] = modules_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    module_entry& e = *it->second;
    if (e.context == context && e.image.size() == size && std::memcmp(e.image.data(), bytes, size) == 0) {
      ++e.refs;
      ++stats_.module_cache_hits;
      return e.module;
    }
  }
  handle m = nullptr;
  const int code = jit ? drv_.module_load_jit(&m, image, opt_level) : drv_.module_load(&m, image);
  if (!check(code, "loading a module")) return nullptr;
  ++stats_.modules_loaded;
  auto entry = std::make_unique<module_entry>();
  entry->context = context;
  entry->image.assign(bytes, bytes + size);
  entry->module = m;
  entry->refs = 1;
  module_of_[m] = entry.get();
  modules_.emplace(key, std::move(entry));
  return m;
}

void runtime::unload_module(handle module) {
  std::lock_guard<std::mutex> lock(modules_mutex_);
  auto it = module_of_.find(module);
  if (it == module_of_.end()) {
    char text[96];
    std::snprintf(text, sizeof text, "unloading a module this runtime did not load (%p)", module);
    fail(text);
    return;
  }
  if (it->second->refs > 0) --it->second->refs;  // stays loaded: see runtime.hpp
}

handle runtime::function(thread_state& t, handle module, const char* name) {
  if (!module || !name) return fail("function lookup without a module or a name"), nullptr;
  if (pooling_ && t.lookup_owner == this && t.lookup_module == module && t.looked_up_last(name)) {
    ++stats_.function_cache_hits;
    return t.lookup_function;
  }
  std::lock_guard<std::mutex> lock(functions_mutex_);
  auto key = std::make_pair(module, std::string(name));
  if (auto it = functions_.find(key); pooling_ && it != functions_.end()) {
    ++stats_.function_cache_hits;
    t.remember_lookup(this, module, it->second, name);
    return it->second;
  }
  handle f = nullptr;
  if (!check(drv_.module_get_function(&f, module, name), ("looking up kernel " + key.second).c_str())) return nullptr;
  ++stats_.function_lookups;
  t.remember_lookup(this, module, f, name);
  functions_.insert_or_assign(std::move(key), f);
  return f;
}

bool runtime::launch(thread_state& t, handle function, const unsigned grid[3], const unsigned block[3],
                     unsigned shared_bytes, handle stream, void** params, void** extra) {
  if (!function) return fail("launch of a null function (an earlier load or lookup failed)");
  constexpr unsigned default_shared = 48 * 1024;
  if (shared_bytes > default_shared) {
    std::lock_guard<std::mutex> lock(functions_mutex_);
    unsigned& allowed = shared_opt_in_[function];
    if (shared_bytes > allowed) {
      if (!check(drv_.allow_dynamic_shared(function, int(shared_bytes)), "raising the dynamic shared memory limit"))
        return false;
      allowed = shared_bytes;
    }
  }
  enqueued(t, stream);
  if (!check(drv_.launch(function, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes, stream,
                         params, extra),
             "launching a kernel"))
    return false;
  ++stats_.launches;
  return true;
}

}  // namespace tinyla::runtime
