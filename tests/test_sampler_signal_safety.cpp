// The sampling handler is async-signal-safe: no allocation while it runs (malloc is intercepted in this
// binary), errno is preserved, and malloc-heavy threads sampled at a high rate neither deadlock nor crash.
#include <doctest.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <vector>

#include <unistd.h>

#include "sampler_workload.hpp"
#include "spin_without_cfi.hpp"
#include "selfperf/sampler.hpp"

using selfperf::Sampler;
using selfperf::Unwinder;

#if defined(__SANITIZE_ADDRESS__) || SELFPERF_TEST_TSAN
// Sanitizers own malloc; the interception below would replace theirs. The stress part still runs.
constexpr bool kMallocIntercepted = false;
#else
constexpr bool kMallocIntercepted = true;
#endif

namespace {

[[gnu::tls_model("initial-exec")]] thread_local bool t_in_handler = false;
std::atomic<std::uint64_t> g_allocations_in_handler{0};
std::atomic<std::uint64_t> g_handler_runs{0};

[[maybe_unused]] void note_allocation() {
  if (t_in_handler) g_allocations_in_handler.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

#if !defined(__SANITIZE_ADDRESS__) && !SELFPERF_TEST_TSAN
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

void* malloc(std::size_t size) {
  note_allocation();
  return __libc_malloc(size);
}
void* calloc(std::size_t n, std::size_t size) {
  note_allocation();
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t size) {
  note_allocation();
  return __libc_realloc(p, size);
}
void* memalign(std::size_t alignment, std::size_t size) {
  note_allocation();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(std::size_t alignment, std::size_t size) {
  note_allocation();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t size) {
  note_allocation();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void free(void* p) {
  note_allocation();
  __libc_free(p);
}
}
#endif

namespace {

struct sigaction g_sampler_action;
struct sigaction g_sampler_sigio;

// Runs the sampler's handler with t_in_handler set: the test's view of "inside the handler".
void spy(int signo, siginfo_t* info, void* context) {
  t_in_handler = true;
  g_handler_runs.fetch_add(1, std::memory_order_relaxed);
  const struct sigaction& inner = signo == SIGIO ? g_sampler_sigio : g_sampler_action;
  inner.sa_sigaction(signo, info, context);
  t_in_handler = false;
}

void wrap(int signo, struct sigaction& saved) {
  REQUIRE(sigaction(signo, nullptr, &saved) == 0);
  REQUIRE((saved.sa_flags & SA_SIGINFO) != 0);
  CHECK((saved.sa_flags & SA_RESTART) != 0);
  struct sigaction sa = saved;
  sa.sa_sigaction = spy;
  REQUIRE(sigaction(signo, &sa, nullptr) == 0);
}

void unwrap(int signo, const struct sigaction& saved) { sigaction(signo, &saved, nullptr); }

std::atomic<std::uint64_t> g_sink{0};

// Allocation churn of varied sizes (tcache, fastbins, large chunks) plus an errno the handler must not touch.
std::uint64_t hammer(std::uint64_t seed, std::uint64_t iterations, std::atomic<std::uint64_t>& errno_broken) {
  std::vector<void*> live(64, nullptr);
  std::uint64_t x = seed;
  for (std::uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    std::size_t slot = (x >> 33) % live.size();
    std::free(live[slot]);
    std::size_t size = 16u << ((x >> 20) % 12);
    live[slot] = std::malloc(size);
    static_cast<char*>(live[slot])[0] = static_cast<char>(i);
    errno = static_cast<int>(i % 1000) + 1;
    for (int k = 0; k < 50; ++k) asm volatile("" : "+r"(x));
    if (errno != static_cast<int>(i % 1000) + 1) errno_broken.fetch_add(1);
  }
  for (void* p : live) std::free(p);
  return x;
}

void run_safety_check(Unwinder unwinder) {
  Sampler::Options options;
  options.event = "cpu-clock";
  // 50 kHz per thread; 5 kHz under ASan, whose slower handler would otherwise fall behind, and whose queued
  // real-time signals would fill the per-user RLIMIT_SIGPENDING that concurrently running tests share.
  options.period = selfperf_test::kAsan ? 200'000 : 20'000;
  options.unwinder = unwinder;
  options.buffer_capacity = 256;
  Sampler sampler(options);
  sampler.start();
  wrap(sampler.signal_number(), g_sampler_action);
  wrap(SIGIO, g_sampler_sigio);
  g_allocations_in_handler = 0;
  g_handler_runs = 0;
  std::atomic<std::uint64_t> errno_broken{0};
  std::atomic<bool> done{false};
  std::thread drainer([&] {
    // Paced, not spinning: on two cores a spinning drainer would starve the threads being sampled.
    while (!done.load()) {
      sampler.drain([](const selfperf::Sample&) {});
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back(sampler.attached([&, t] { g_sink += hammer(t + 1, (selfperf_test::kTsan || selfperf_test::kAsan) ? 200'000 : 2'000'000, errno_broken); }));
  for (auto& t : threads) t.join();
  done = true;
  drainer.join();
  auto totals = sampler.stop();
  unwrap(SIGIO, g_sampler_sigio);
  unwrap(sampler.signal_number(), g_sampler_action);
  INFO("handler runs " << g_handler_runs.load() << ", samples " << totals.samples << ", lost " << totals.lost);
  CHECK(totals.samples > 0);
  CHECK(g_handler_runs.load() >= totals.signals);
  CHECK(errno_broken.load() == 0);
  if (kMallocIntercepted) CHECK(g_allocations_in_handler.load() == 0);
}

}  // namespace

TEST_CASE("the interception sees allocations made inside a handler (the spy works)") {
  if (!kMallocIntercepted) return;
  t_in_handler = true;
  void* p = std::malloc(32);
  t_in_handler = false;
  std::free(p);
  CHECK(g_allocations_in_handler.exchange(0) == 1);
}

TEST_CASE("frame-pointer handler: no allocation, errno preserved, under malloc churn") {
  run_safety_check(Unwinder::frame_pointer);
}

TEST_CASE("libunwind handler: no allocation, errno preserved, under malloc churn") {
  if (selfperf_test::kTsan) {
    MESSAGE("skipped under TSan: the sampler refuses Unwinder::libunwind there");
    return;
  }
  run_safety_check(Unwinder::libunwind);
}

TEST_CASE("kernel-callchain handler: no allocation, errno preserved, under malloc churn") {
  run_safety_check(Unwinder::kernel);
}

TEST_CASE("libunwind's first fallback on a thread makes its trace cache inside the handler, without allocation") {
  if (selfperf_test::kTsan) {
    MESSAGE("skipped under TSan: the sampler refuses Unwinder::libunwind there");
    return;
  }
  // The trace cache (256 KiB) is no longer made at attach: a thread whose samples need libunwind makes it in
  // its handler, on the first one. Threads that only spin in code without CFI need it on every sample.
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = selfperf_test::kAsan ? 2'000'000 : 500'000;  // 2 kHz (500 Hz under ASan)
  options.unwinder = Unwinder::libunwind;
  options.buffer_capacity = 1024;
  Sampler sampler(options);
  sampler.start();
  Sampler::ThreadAttachment first(sampler);  // the process's first libunwind thread, if no earlier case made one
  wrap(sampler.signal_number(), g_sampler_action);
  wrap(SIGIO, g_sampler_sigio);
  g_allocations_in_handler = 0;
  std::vector<std::thread> threads;
  std::vector<pid_t> spinners(3, 0);
  for (int t = 0; t < 3; ++t)
    threads.emplace_back(sampler.attached([&spinners, t] {
      spinners[static_cast<std::size_t>(t)] = static_cast<pid_t>(::gettid());
      for (int burst = 0; burst < 20; ++burst) selfperf_test_spin_without_cfi(2'000'000);
    }));
  for (auto& t : threads) t.join();
  const Sampler::Totals totals = sampler.stop();
  unwrap(SIGIO, g_sampler_sigio);
  unwrap(sampler.signal_number(), g_sampler_action);
  INFO("samples " << totals.samples << ", by libunwind " << totals.unwound_by_libunwind << ", partially "
                  << totals.unwound_partially);
  // A thread's first sample in code without CFI always goes to libunwind (its budget starts full), so every
  // spinning thread that was sampled made its trace cache in a handler.
  for (pid_t tid : spinners) {
    std::uint64_t samples = 0;
    for (const auto& thread : totals.threads)
      if (thread.tid == tid) samples += thread.samples;
    CHECK(samples > 0);
  }
  CHECK(totals.unwound_by_libunwind >= 3);
  if (kMallocIntercepted) CHECK(g_allocations_in_handler.load() == 0);
}
