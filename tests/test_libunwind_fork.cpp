// fork() while another thread is inside libunwind. A trace-cache miss looks the address up through
// dl_iterate_phdr, which holds the loader's dl_load_write_lock while it calls back; glibc 2.36 does not reset
// that lock in a fork's child, so a fork during the lookup left the child a lock nobody would release: its
// first dl_iterate_phdr (libunwind, a C++ throw, the preload library attaching its thread) hung for good. Seen
// as a profiled program's forked child stuck, 1 run in ~15 in the emulated arm64 machine, where the cold
// lookups take long enough; here the lookup is held open on purpose. Its own binary: the process's libunwind
// set-up is once per process, and dl_iterate_phdr is interposed (exported from this executable). Not under a
// sanitizer: its runtime calls dl_iterate_phdr while it starts, before this executable's code may run.
#include <doctest.h>

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "sampler_workload.hpp"
#include "selfperf/unwind.hpp"

namespace {

using Callback = int (*)(dl_phdr_info*, size_t, void*);

// Armed, the next lookup holds the loader's lock (inside the real dl_iterate_phdr's callback) for kHold.
std::atomic<bool> g_armed{false};
std::atomic<bool> g_held{false};
constexpr auto kHold = std::chrono::milliseconds(300);

struct Forwarded {
  Callback callback;
  void* data;
};

[[maybe_unused]] int hold_then_forward(dl_phdr_info* info, size_t size, void* p) {
  auto* f = static_cast<Forwarded*>(p);
  if (g_armed.exchange(false)) {
    g_held.store(true);
    std::this_thread::sleep_for(kHold);  // the lock is held: this is the window a fork may fall in
  }
  return f->callback(info, size, f->data);
}

// The code this trace goes through is traced for the first time: its return address misses every cache.
[[gnu::noinline]] void trace_cold_frame() {
  std::array<std::uint64_t, 64> out{};
  selfperf::RegisterState regs;  // no interrupted frame: the trace itself is what matters here
  selfperf::unwind_libunwind(regs, out);
  asm volatile("" ::: "memory");  // not a tail call: this frame stays on the stack
}

int count_objects(dl_phdr_info*, size_t, void* n) {
  ++*static_cast<int*>(n);
  return 0;
}

}  // namespace

#if !SELFPERF_TEST_ASAN && !SELFPERF_TEST_TSAN
constexpr bool kInterposed = true;
// libunwind's lookups come here (the executable's definition comes first in symbol lookup).
extern "C" int dl_iterate_phdr(Callback callback, void* data) {
  static const auto real = reinterpret_cast<int (*)(Callback, void*)>(::dlsym(RTLD_NEXT, "dl_iterate_phdr"));
  Forwarded f{callback, data};
  return real(hold_then_forward, &f);
}
#else
constexpr bool kInterposed = false;
#endif

TEST_CASE("a fork while another thread is inside libunwind's lookup leaves the child the loader's lock free") {
  if (!kInterposed) {
    MESSAGE("skipped under a sanitizer: its runtime's start calls dl_iterate_phdr before this test's may run");
    return;
  }
  selfperf::prepare_libunwind_process();
  REQUIRE(selfperf::libunwind_setup() != selfperf::LibunwindSetup::not_yet);

  g_armed.store(true);
  std::thread tracer([] {
    selfperf::prepare_libunwind_this_thread();
    g_armed.store(true);  // the thread's own set-up may have used the first lookup
    trace_cold_frame();
  });
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!g_held.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  REQUIRE_MESSAGE(g_held.load(), "the cold trace made no dl_iterate_phdr lookup: nothing to fork under");

  const pid_t pid = ::fork();  // the tracer is inside the lookup, the lock held, for the next kHold
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(5);  // a child stuck on the lock dies of SIGALRM instead of hanging the test
    int objects = 0;
    ::dl_iterate_phdr(count_objects, &objects);
    ::_exit(objects > 0 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  tracer.join();
  INFO("child status ", status);
  CHECK_FALSE(WIFSIGNALED(status));  // SIGALRM: stuck on the lock the fork copied held
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
