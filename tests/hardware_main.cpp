// main() for hardware-only test binaries: where no hardware PMU exists, say so and report "skipped" to ctest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest.h>

#include <cstdio>
#include <cstring>

#include <linux/perf_event.h>

#include "perf_syscall.hpp"

int main(int argc, char** argv) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  selfperf::detail::Fd fd(selfperf::detail::perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (!fd) {
    std::printf("skipped: no hardware PMU (%s opening cycles)\n", std::strerror(errno));
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
