// Counts on a real PMU driver, through the library's public API: a group of three hardware events takes the
// fast path and agrees with read(2) of the same leader; Scope deltas of a loop with a known number of
// instructions are exact to a small constant. Runs wherever `cycles` and `instructions` count exactly at user
// level (x86 hardware; the emulated arm64 machine with -icount, tests/emulated); skipped elsewhere.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include <doctest.h>
#include <unistd.h>

#include "selfperf/counter_group.hpp"
#include "selfperf/region.hpp"

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

TEST_CASE("a group of three hardware events: the fast path, between two read(2)s of its leader") {
  selfperf::CounterGroup group{"instructions", "cycles", "cpu-cycles"};
  group.enable();
  counted_loop(100000);
  for (int round = 0; round < 20; ++round) {
    counted_loop(10000);
    const LeaderRead before = read_leader(group);
    const selfperf::GroupReading fast = group.read();
    const LeaderRead after = read_leader(group);
    INFO("round " << round << ", read path: " << group.read_path());
    REQUIRE(group.read_path() == "rdpmc");
    REQUIRE(fast.size() == 3);
    REQUIRE(before.nr == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      INFO("member " << i << ": read(2) " << before.members[i].value << " <= fast " << fast[i].value
                     << " <= read(2) " << after.members[i].value);
      CHECK(before.members[i].value <= fast[i].value);
      CHECK(fast[i].value <= after.members[i].value);
      CHECK(fast[i].time_enabled + 2 >= before.time_enabled);
      CHECK(fast[i].time_enabled <= after.time_enabled + 2);
    }
  }
}

TEST_CASE("Scope deltas of a loop with a known instruction count are exact to a small constant") {
  selfperf::CounterGroup group{"instructions", "cycles"};
  group.enable();
  selfperf::Region small("small"), large("large");
  constexpr std::uint64_t kSmall = 100000, kLarge = 300000;
  for (int i = 0; i < 5; ++i) {
    {
      selfperf::Scope scope(group, small);
      counted_loop(kSmall);
    }
    {
      selfperf::Scope scope(group, large);
      counted_loop(kLarge);
    }
  }
  REQUIRE(group.read_path() == "rdpmc");
  REQUIRE(small.calls() == 5);
  REQUIRE(large.calls() == 5);
  // The constant (the Scope's own reads, the call) cancels in the difference of the two regions.
  const double difference = large.totals(0).min - small.totals(0).min;
  INFO("instructions: small min " << small.totals(0).min << ", large min " << large.totals(0).min);
  CHECK(std::fabs(difference - 2.0 * (kLarge - kSmall)) <= 16.0);
  // And each delta is the loop's own count plus a constant well under a thousand instructions.
  CHECK(small.totals(0).min >= 2.0 * kSmall);
  CHECK(small.totals(0).min <= 2.0 * kSmall + 1000.0);
}
