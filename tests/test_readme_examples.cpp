// The README's quick starts, compiled and run: an example that does not compile is a bug.
#include <doctest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <vector>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <selfperf/selfperf.hpp>

namespace {

#if !defined(__x86_64__)
// The README's example reads the TSC; elsewhere the counter the library reads in its place (CNTVCT_EL0).
std::uint64_t __rdtsc() noexcept { return selfperf::TscClock::now_tsc(); }
#endif

std::vector<double> particles(4096, 1.0);
void update(double& p) { p = p * 1.0000001 + 0.5; }

void step() {
  SELFPERF_SCOPE("step");
  for (auto& p : particles) update(p);
}

}  // namespace

TEST_CASE("README: a hot loop with SELFPERF_SCOPE") {
  for (int i = 0; i < 100; ++i) step();
  std::ostringstream out;
  selfperf::report(out);
  CHECK(out.str().find("step") != std::string::npos);
}

TEST_CASE("README: CounterGroup, Region, Scope") {
  selfperf::CounterGroup group{"task-clock:u", "page-faults:u"};
  group.enable();
  selfperf::Region parse("parse");
  { selfperf::Scope s(group, parse); step(); }
  std::ostringstream out;
  selfperf::print_regions(out, group, std::array<const selfperf::Region*, 1>{&parse});
  CHECK(out.str().find("parse") != std::string::npos);
  CHECK(!group.read_path().empty());
}

TEST_CASE("README: a game frame") {
  selfperf::CounterGroup group{"task-clock", "page-faults:u"};
  group.enable();
  selfperf::FrameLoop frames(group);
  frames.set_wall_budget(std::chrono::microseconds(16'600));
  frames.set_budget("page-faults:u", 100);
  for (int i = 0; i < 10; ++i) {
    frames.begin();
    step();
    frames.end();
  }
  CHECK(frames.frames() == 10);
  CHECK(!frames.report().empty());
}

TEST_CASE("README: a trading message") {
  selfperf::Histogram latency;
  for (int i = 0; i < 1000; ++i) {
    auto t0 = __rdtsc();
    step();
    latency.record(__rdtsc() - t0);
  }
  CHECK(latency.count() == 1000);
  CHECK(latency.p50() <= latency.p99());
  CHECK(latency.p99() <= latency.max());
  CHECK(!latency.to_text().empty());
}

TEST_CASE("README: profiling") {
  auto out = std::filesystem::temp_directory_path() / ("readme-" + std::to_string(::getpid()) + ".data");
  {
    selfperf::Profiler profiler({.output = out, .event = "", .frequency = 999});
    profiler.start();
    profiler.attach_this_thread();
    for (int i = 0; i < 2000; ++i) step();
    profiler.stop();
  }
  CHECK(std::filesystem::exists(out));
  CHECK(std::filesystem::exists(out.string() + ".folded"));
  CHECK(std::filesystem::exists(out.string() + ".svg"));
  for (const char* suffix : {"", ".folded", ".svg"}) std::filesystem::remove(out.string() + suffix);
}
