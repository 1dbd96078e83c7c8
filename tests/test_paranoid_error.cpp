// perf_event_paranoid 3 (Debian's and Android's kernels boot with it): an unprivileged process gets nothing,
// software events included, and the error must say so and how to change it, not just "Permission denied".
// Below 3, or with privilege, the same group opens. The emulated arm64 machine (tests/emulated) runs this
// binary as nobody at paranoid 3; elsewhere the level is whatever the host has.
#include <doctest.h>

#include <fstream>
#include <string>
#include <unistd.h>

#include "selfperf/counter_group.hpp"
#include "selfperf/error.hpp"

namespace {

int paranoid_level() {
  std::ifstream in("/proc/sys/kernel/perf_event_paranoid");
  int level = 2;
  in >> level;
  return level;
}

// CAP_PERFMON or CAP_SYS_ADMIN bypass the level; root has both in every pass the suite runs.
bool privileged() { return geteuid() == 0; }

}  // namespace

TEST_CASE("at perf_event_paranoid 3 an unprivileged open fails with the level, the sysctl and the capability") {
  const int level = paranoid_level();
  INFO("perf_event_paranoid " << level << ", euid " << geteuid());
  if (level < 3 || privileged()) {
    selfperf::CounterGroup group{"task-clock"};
    CHECK(group.size() == 1);
    return;
  }
  std::string message;
  try {
    selfperf::CounterGroup group{"task-clock"};
  } catch (const selfperf::Error& e) {
    message = e.what();
  }
  INFO("error: " << message);
  REQUIRE(!message.empty());
  CHECK(message.find("perf_event_paranoid is " + std::to_string(level)) != std::string::npos);
  CHECK(message.find("forbids perf_event_open for unprivileged users") != std::string::npos);
  CHECK(message.find("sysctl kernel.perf_event_paranoid") != std::string::npos);
  CHECK(message.find("CAP_PERFMON") != std::string::npos);
}
