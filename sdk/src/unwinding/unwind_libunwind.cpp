// libunwind local unwinding: the fast cached trace for signal handlers, and the process's set-up for it.
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>

#include <pthread.h>

#include "sampling/fork_guard.hpp"
#include "selfperf/unwind.hpp"

// Defined by the preload library, which loads libunwind here, at the set-up, instead of at the program's start
// (sdk/preload/libunwind_on_demand.cpp); a program linked with libunwind has none. False: not loaded, and the
// set-up stays not made, so samples keep the DWARF walk's frames.
extern "C" [[gnu::weak]] bool selfperf_load_libunwind() noexcept;

namespace selfperf {

namespace {

// Frames between this function and the interrupted one: unwind_libunwind, the sampler's handler chain,
// the sigreturn trampoline. Generous; unused slots cost nothing but stack.
constexpr int kHandlerFrames = 24;
constexpr int kMaxTrace = 512 + kHandlerFrames;

// fork() waits for every thread to be out of libunwind (fork_guard.hpp). A trace takes the loader's lock on a
// cache miss (dl_iterate_phdr: dl_load_write_lock, which glibc 2.36 does not reset in a child) and libunwind's
// own mempool lock; a fork while another thread was inside one (a handler's trace, or the drain thread's first
// trace, the set-up) left the child that lock held for good: a profiled program's forked child stuck in its
// first dl_iterate_phdr (attaching its thread; a C++ throw would have stuck the same), 1 run in ~15 of
// profile_workload in the emulated arm64 machine. A handler that meets a fork under way does without libunwind
// (the sample keeps the DWARF walk's frames); the set-up waits for the fork.
detail::ForkGate g_fork_gate;

}  // namespace

std::size_t unwind_libunwind(const RegisterState& interrupted, std::span<std::uint64_t> out) noexcept {
  if (out.empty()) return 0;
  std::array<void*, kMaxTrace> trace;
  int want = static_cast<int>(std::min<std::size_t>(out.size(), kMaxTrace - kHandlerFrames)) + kHandlerFrames;
  if (!g_fork_gate.try_enter()) return 0;
  const int got = unw_backtrace(trace.data(), want);
  g_fork_gate.leave();
  // The trace starts in the handler; the interrupted frame is the one whose address is the ucontext's IP
  // (libunwind reports the exact IP after a signal frame, not IP - 1).
  int first = -1;
  for (int i = 0; i < got && i < kHandlerFrames + 1; ++i) {
    auto pc = reinterpret_cast<std::uint64_t>(trace[static_cast<std::size_t>(i)]);
    if (pc == interrupted.ip || pc + 1 == interrupted.ip) {
      first = i;
      break;
    }
  }
  std::size_t n = 0;
  out[n++] = interrupted.ip;
  if (first < 0) return n;  // the trace did not cross the signal frame: keep the leaf alone
  for (int i = first + 1; i < got && n < out.size(); ++i) {
    auto pc = reinterpret_cast<std::uint64_t>(trace[static_cast<std::size_t>(i)]);
#if defined(__aarch64__)
    // libunwind's aarch64 trace reports a caller as its return address - 1 (inside the call); every other
    // unwinder, and its own cursor, give the return address itself. Instructions are 4-byte aligned.
    if ((pc & 3u) == 3u) ++pc;
#endif
    out[n++] = pc;
  }
  return n;
}

namespace {

// One frame is enough to make the thread's trace cache; each frame more costs a cold DWARF lookup (tens of µs).
void trace_once() noexcept {
  void* frame = nullptr;
  g_fork_gate.enter();
  unw_backtrace(&frame, 1);
  g_fork_gate.leave();
}

// unw_backtrace's per-thread trace cache is 256 KiB, filled when created (16384 frame slots): made for every
// attached thread, it was 0.26 of the 0.28 MB a profiled thread cost. It is made lazily instead, on a thread's
// first fallback, where that is safe in a signal handler. Making it takes libunwind's mempool (its lock held
// with every signal blocked, so a handler never waits on its own thread; memory by mmap), then stores it with
// pthread_setspecific, which allocates only for a key >= 32 in a thread that has none such yet. So the first
// trace of the process (here, where allocation is allowed) finds libunwind's key: the one slot below 32 it
// filled. Where none is found (a program with 32 keys already, or libunwind traced before us) every
// thread's cache is made at attach, as before.
std::atomic<LibunwindSetup> g_setup{LibunwindSetup::not_yet};

// The first trace fills this thread's cache too: ~2 ms of CPU on a VM (64 fresh pages), a fifth of what the
// preload library cost /bin/true, which is why a profiler may put it off until samples come.
void prepare_process() noexcept {
  if (&selfperf_load_libunwind != nullptr && !selfperf_load_libunwind()) return;
  detail::fork_waits_for(g_fork_gate);  // allocates: here, before any trace, where that is allowed
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  constexpr unsigned kFirstLevelKeys = 32;  // glibc's PTHREAD_KEY_2NDLEVEL_SIZE: no allocation below it
  std::array<void*, kFirstLevelKeys> before;
  for (unsigned k = 0; k < kFirstLevelKeys; ++k) before[k] = pthread_getspecific(k);
  trace_once();
  unsigned filled = 0;
  for (unsigned k = 0; k < kFirstLevelKeys; ++k)
    if (before[k] == nullptr && pthread_getspecific(k) != nullptr) ++filled;
  g_setup.store(filled == 1 ? LibunwindSetup::lazy : LibunwindSetup::per_thread, std::memory_order_release);
}

std::once_flag g_process_once;

}  // namespace

LibunwindSetup libunwind_setup() noexcept { return g_setup.load(std::memory_order_acquire); }

void prepare_libunwind_process() noexcept { std::call_once(g_process_once, prepare_process); }

bool prepare_libunwind_this_thread() noexcept {
  bool first = false;
  std::call_once(g_process_once, [&] {
    prepare_process();
    first = true;
  });
  if (libunwind_setup() != LibunwindSetup::per_thread) return false;  // lazy, or libunwind not loaded
  if (!first) trace_once();  // this thread's cache now: a handler must not make it
  return true;
}

}  // namespace selfperf
