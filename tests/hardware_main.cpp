// main() for hardware-only test binaries: where no hardware PMU exists, say so and report "skipped" to ctest.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "events/perf_syscall.hpp"

int main(int argc, char** argv) {
  if (!selfperf::detail::hardware_cycles_available()) {
    std::printf("skipped: no hardware PMU (%s opening cycles)\n", std::strerror(errno));
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
