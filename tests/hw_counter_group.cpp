// Hardware counting where a PMU exists (this binary exits 77 "skipped: no hardware PMU" elsewhere).
#include <doctest.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

#include "selfperf/selfperf.hpp"

namespace {

// Exactly 3 instructions per iteration (add, sub, jnz / add, subs, b.ne), so the instruction count is known.
[[gnu::noinline]] void known_loop(std::uint64_t iterations) {
  std::uint64_t acc = 0;
  asm volatile(
#if defined(__aarch64__)
      "1:\n\t"
      "add %[acc], %[acc], #1\n\t"
      "subs %[n], %[n], #1\n\t"
      "b.ne 1b\n\t"
#else
      "1:\n\t"
      "add $1, %[acc]\n\t"
      "sub $1, %[n]\n\t"
      "jnz 1b\n\t"
#endif
      : [acc] "+r"(acc), [n] "+r"(iterations)
      :
      : "cc");
}

}  // namespace

TEST_CASE("instructions:u counts a loop of known length, cycles:u counts too") {
  selfperf::CounterGroup group{"instructions:u", "cycles:u"};
  group.enable();
  auto before = group.read();
  constexpr std::uint64_t kIterations = 10'000'000;
  known_loop(kIterations);
  auto after = group.read();
  auto instructions = selfperf::delta(before[0], after[0]);
  auto cycles = selfperf::delta(before[1], after[1]);
  CHECK(instructions.counted());
  CHECK(instructions.scaled() >= 3.0 * kIterations);
  CHECK(instructions.scaled() < 3.3 * kIterations);  // plus the reads' own instructions
  CHECK(cycles.scaled() > 0.5 * kIterations);        // at least one iteration per two cycles
  MESSAGE("read path: " << group.read_path());
}

TEST_CASE("more hardware events than counters multiplex, and scaled() extrapolates") {
  // Only the two events every PMU has: `branches` is optional on arm64 (QEMU's PMUv3 lacks it, ENOENT).
  // 34 events: more counters than PMUv3 can have (31 event counters and the cycle counter), or any x86 PMU.
  std::vector<std::string> events;
  for (int i = 0; i < 17; ++i) {
    events.push_back("instructions:u");
    events.push_back("cycles:u");
  }
  // Separate groups so the kernel can rotate them; each group reads its own multiplexing times.
  std::vector<selfperf::CounterGroup> groups;
  for (const auto& e : events) groups.emplace_back(std::vector<std::string>{e});
  for (auto& g : groups) g.enable();
  known_loop(200'000'000);
  bool multiplexed = false;
  for (auto& g : groups) {
    auto r = g.read();
    CHECK(r[0].counted());
    if (r[0].time_running < r[0].time_enabled) {
      multiplexed = true;
      CHECK(r[0].scaled() > static_cast<double>(r[0].value));
    }
  }
  CHECK(multiplexed);  // 34 hardware events cannot all be on counters at once
}

TEST_CASE("hw-cache events open on a PMU that has them") {
  std::optional<selfperf::CounterGroup> opened;
  try {
    opened.emplace(std::initializer_list<std::string_view>{"L1-dcache-loads:u", "branch-misses:u"});
  } catch (const selfperf::Error& e) {
    // Not every PMU maps L1-dcache-loads (some AMD parts, QEMU's PMUv3): a clear refusal.
    CHECK(e.errno_value() == ENOENT);
    MESSAGE("this PMU has no L1-dcache-loads: " << std::string(e.what()));  // doctest prints a char* as a pointer
    return;
  }
  auto& group = *opened;
  group.enable();
  known_loop(1'000'000);
  auto r = group.read();
  CHECK(r[0].counted());
}
