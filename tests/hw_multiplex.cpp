// Multiplexing on a real PMU driver: more hardware events than counters; each scaled count against the exact
// instruction count of a known loop, and the read's time_enabled/time_running against read(2)'s of the same
// fd, whichever path the library read it by. Runs wherever `instructions` counts exactly at user level (x86
// hardware; the emulated arm64 machine with -icount, tests/emulated); skipped elsewhere.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include <doctest.h>
#include <unistd.h>

#include "selfperf/counter_group.hpp"

namespace {

// A loop of exactly 2 instructions an iteration (decrement-and-set-flags, conditional branch back).
void counted_loop(std::uint64_t iterations) {
#if defined(__x86_64__)
  asm volatile("1: dec %0\n\tjnz 1b" : "+r"(iterations) : : "cc");
#elif defined(__aarch64__)
  asm volatile("1: subs %0, %0, #1\n\tb.ne 1b" : "+r"(iterations) : : "cc");
#else
#error "counted_loop: no known-length loop for this architecture"
#endif
}

// read(2) of a group leader opened by CounterGroup (GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID).
struct LeaderRead {
  std::uint64_t nr = 0;
  std::uint64_t time_enabled = 0;
  std::uint64_t time_running = 0;
  struct {
    std::uint64_t value;
    std::uint64_t id;
  } members[selfperf::kMaxGroupMembers] = {};
};

LeaderRead read_leader(const selfperf::CounterGroup& group) {
  LeaderRead out;
  const ssize_t got = read(group.leader_fd(), &out, sizeof out);
  REQUIRE(got >= static_cast<ssize_t>(3 * sizeof(std::uint64_t)));
  return out;
}

}  // namespace

TEST_CASE("more events than counters multiplex: scaled counts, and the read's times agree with read(2)'s") {
  // Twelve single-event groups of instructions: more than the PMU's general counters (6 on QEMU's PMUv3,
  // 4 to 8 on x86 cores), so the kernel rotates them and each runs part of the time.
  std::vector<std::unique_ptr<selfperf::CounterGroup>> groups;
  for (int i = 0; i < 12; ++i) groups.push_back(std::make_unique<selfperf::CounterGroup>(
                                   std::initializer_list<std::string_view>{"instructions"}));
  for (auto& group : groups) group->enable();
  std::vector<selfperf::GroupReading> start(groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) groups[i]->read(start[i]);
  constexpr std::uint64_t kIterations = 20000000;  // 40 M instructions: many multiplexing rotations
  counted_loop(kIterations);
  bool some_multiplexed = false;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const LeaderRead before = read_leader(*groups[i]);
    const selfperf::GroupReading end = groups[i]->read();
    const LeaderRead after = read_leader(*groups[i]);
    INFO("group " << i << " (read path " << groups[i]->read_path() << "): enabled " << end[0].time_enabled
                  << " running " << end[0].time_running);
    // Whichever path the read took, its times lie between read(2)'s (a nanosecond or two of rounding apart).
    CHECK(end[0].time_enabled + 2 >= before.time_enabled);
    CHECK(end[0].time_enabled <= after.time_enabled + 2);
    CHECK(end[0].time_running + 2 >= before.time_running);
    CHECK(end[0].time_running <= after.time_running + 2);
    const selfperf::CounterDelta d = selfperf::delta(start[i][0], end[0]);
    REQUIRE(d.counted());
    some_multiplexed = some_multiplexed || d.time_running < d.time_enabled;
    // The scaled estimate of a loop of 2 x kIterations instructions (the reads around it add a few thousand).
    const double scaled = d.scaled();
    INFO("scaled " << scaled << " of " << 2.0 * kIterations << " (running " << d.time_running << " of "
                   << d.time_enabled << " ns)");
    CHECK(scaled >= 0.75 * 2.0 * kIterations);
    CHECK(scaled <= 1.25 * 2.0 * kIterations);
  }
  CHECK(some_multiplexed);
}
