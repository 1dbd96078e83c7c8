// The libunwind calls the profiler makes, with libunwind.so.8 (and its liblzma) loaded by the process's deferred
// set-up (prepare_libunwind_process(), made by the drain thread after a pass that drained samples) instead of at
// the program's start: a process that takes no sample never unwinds with libunwind, and loading it cost
// /bin/true ~0.35 ms of CPU (docs/sampling.md, "What a process costs").
// unw_backtrace runs in the sampling handler: it calls through a pointer stored by the load, never dlopen or
// dlsym there. A handler reaches it only once libunwind_setup() says the set-up was made, which the load
// precedes; until then a sample keeps the frames the DWARF walk found (sampler_signal.cpp).
// RTLD_LOCAL, and never a NEEDED entry: libunwind also defines _Unwind_RaiseException, and a C++ throw must keep
// finding libgcc_s's, which needs no descriptor (libunwind's probes memory through a pipe: at EMFILE every
// throw ended in std::terminate).
// Linked into libselfperf_profile.so alone, ahead of libunwind (which --as-needed then leaves out); exports.map
// keeps these definitions from interposing on a program that uses libunwind itself.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <dlfcn.h>

#include <atomic>
#include <cstdio>

namespace {

std::atomic<decltype(&unw_backtrace)> g_backtrace{nullptr};
decltype(&unw_set_caching_policy) g_set_caching_policy = nullptr;  // set before any call (load_libunwind)

// The symbol names the libunwind.h macros give (unw_local_addr_space is _ULx86_64_local_addr_space, …).
#define SELFPERF_NAME_OF(symbol) SELFPERF_QUOTE(symbol)
#define SELFPERF_QUOTE(text) #text

bool load() noexcept {
  void* handle = ::dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  void* backtrace = handle ? ::dlsym(handle, "unw_backtrace") : nullptr;
  void* policy = handle ? ::dlsym(handle, SELFPERF_NAME_OF(unw_set_caching_policy)) : nullptr;
  void* space = handle ? ::dlsym(handle, SELFPERF_NAME_OF(unw_local_addr_space)) : nullptr;
  if (backtrace == nullptr || policy == nullptr || space == nullptr) {
    const char* why = ::dlerror();
    std::fprintf(stderr,
                 "selfperf: cannot load libunwind.so.8 (%s): stacks the DWARF walk cannot finish keep the frames it "
                 "found (Debian: apt-get install libunwind8)\n",
                 why ? why : "a symbol is missing");
    return false;
  }
  unw_local_addr_space = *static_cast<unw_addr_space_t*>(space);
  g_set_caching_policy = reinterpret_cast<decltype(&unw_set_caching_policy)>(policy);
  g_backtrace.store(reinterpret_cast<decltype(&unw_backtrace)>(backtrace), std::memory_order_release);
  return true;
}

}  // namespace

extern "C" {

// libunwind's own is copied here by the load; unwind_libunwind.cpp reads it only after.
unw_addr_space_t unw_local_addr_space = nullptr;

// unwind_libunwind.cpp's hook (weak there): the set-up calls it first and, where it fails, stays not made.
bool selfperf_load_libunwind() noexcept {
  static const bool loaded = load();
  return loaded;
}

int unw_backtrace(void** buffer, int size) {
  const auto fn = g_backtrace.load(std::memory_order_acquire);
  return fn != nullptr ? fn(buffer, size) : 0;
}

int unw_set_caching_policy(unw_addr_space_t space, unw_caching_policy_t policy) {
  return g_set_caching_policy != nullptr ? g_set_caching_policy(space, policy) : -UNW_EUNSPEC;
}

}  // extern "C"
