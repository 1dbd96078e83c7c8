// The three-function workload (50/30/20 % of CPU time) profiled by selfperf's own sampler through the
// Profiler: writes OUT (perf.data), OUT.folded and OUT.svg for perf report / flame graph checks.
//
//   profile_three_functions OUT.data [total-ms]
#include <time.h>

#include <cstdio>
#include <cstdlib>

#include "selfperf/error.hpp"
#include "selfperf/profile.hpp"

namespace {

volatile std::uint64_t sink;

std::int64_t thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Each burns its share of CPU time in its own loop, so its samples land in its own body.
[[gnu::noinline, gnu::noipa]] void burn_alpha(std::int64_t ms) {
  const auto end = thread_cpu_ms() + ms;
  std::uint64_t x = sink;
  while (thread_cpu_ms() < end)
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ULL + 1;
  sink = x;
}

[[gnu::noinline, gnu::noipa]] void burn_beta(std::int64_t ms) {
  const auto end = thread_cpu_ms() + ms;
  std::uint64_t x = sink;
  while (thread_cpu_ms() < end)
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ULL + 3;
  sink = x;
}

[[gnu::noinline, gnu::noipa]] void burn_gamma(std::int64_t ms) {
  const auto end = thread_cpu_ms() + ms;
  std::uint64_t x = sink;
  while (thread_cpu_ms() < end)
    for (int i = 0; i < 200000; ++i) x = x * 6364136223846793005ULL + 5;
  sink = x;
}

[[gnu::noinline, gnu::noipa]] void run_workload(std::int64_t total_ms) {
  // Interleaved in rounds so a load spike on the machine hits all three alike.
  for (std::int64_t done = 0; done < total_ms; done += 100) {
    burn_alpha(50);
    burn_beta(30);
    burn_gamma(20);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s OUT.data [total-ms]\n", argv[0]);
    return 2;
  }
  const std::int64_t total = argc > 2 ? std::atoll(argv[2]) : 2000;
  try {
    selfperf::ProfileOptions options;
    options.output = argv[1];
    options.event = "cpu-clock";
    options.frequency = 1000;
    selfperf::Profiler profiler(options);
    profiler.start();
    run_workload(total);
    profiler.stop();
    std::printf("wrote %s: %llu samples, %llu lost\n", argv[1],
                static_cast<unsigned long long>(profiler.samples_written()),
                static_cast<unsigned long long>(profiler.lost()));
  } catch (const selfperf::Error& e) {
    std::fprintf(stderr, "profile_three_functions: %s\n", e.what());
    return 1;
  }
  return 0;
}
