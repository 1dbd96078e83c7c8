// TscClock: perf time <-> TSC conversions against 128-bit references, and against the real clock
// where this machine's perf page publishes cap_user_time_zero.
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <ctime>

#include <doctest.h>
#include <linux/perf_event.h>
#include <sys/mman.h>

#include "perf_syscall.hpp"
#include "selfperf/tsc_clock.hpp"

namespace {

using selfperf::TscClock;
using u128 = unsigned __int128;

// time_zero as the kernel computes it is often "negative" (the TSC ran before the sched clock's
// zero), so use such a value, plus typical multipliers: 3 GHz (shift 32), 2.1 GHz, 1 GHz, and a
// 100 MHz counter (10 ns per tick) with a smaller shift.
struct Params {
  std::uint64_t time_zero;
  std::uint32_t mult;
  std::uint16_t shift;
};
constexpr Params kParams[] = {
    {static_cast<std::uint64_t>(-123'456'789'012LL), 1431655765, 32},
    {987'654'321, 2045222521, 32},       // 2^32 / 2.1
    {0, 1u << 31, 31},                   // exactly 1 ns per tick
    {5'000'000'000ULL, 1342177280, 27},  // 10 ns per tick
    {42, 1, 0},                          // 1 ns per tick, no shift
};

std::uint64_t reference_ns(const Params& p, std::uint64_t tsc) {
  return p.time_zero + static_cast<std::uint64_t>((u128{tsc} * p.mult) >> p.shift);
}

std::uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

TEST_CASE("to_perf_ns follows the header's formula; to_tsc inverts it") {
  const std::uint64_t tscs[] = {
      0, 1, 2, 3, 1000, 123'456'789, 3'000'000'000ULL, 1ULL << 40, 0x0123456789abcdefULL, 1ULL << 50};
  for (const Params& p : kParams) {
    const auto clock = TscClock::from_parameters(p.time_zero, p.mult, p.shift);
    REQUIRE(clock);
    const std::uint64_t ticks_per_ns_ceil =
        (p.mult >= (1ULL << p.shift)) ? 1 : ((1ULL << p.shift) + p.mult - 1) / p.mult;
    const std::uint64_t ns_per_tick_ceil = (u128{p.mult} + (1ULL << p.shift) - 1) >> p.shift;
    for (std::uint64_t tsc : tscs) {
      CAPTURE(p.mult);
      CAPTURE(tsc);
      const std::uint64_t ns = clock->to_perf_ns(tsc);
      CHECK(ns == reference_ns(p, tsc));
      // The kernel's quot/rem form gives the same value (rem * mult fits for shift <= 32).
      const std::uint64_t quot = tsc >> p.shift, rem = tsc & ((1ULL << p.shift) - 1);
      CHECK(ns == p.time_zero + quot * p.mult + ((rem * p.mult) >> p.shift));

      // tsc -> ns -> tsc: no later than tsc, earlier by less than one ns' worth of ticks.
      const std::uint64_t back = clock->to_tsc(ns);
      CHECK(back <= tsc);
      CHECK(tsc - back < ticks_per_ns_ceil);
      CHECK(clock->to_perf_ns(back) == ns);  // the first tick of that ns

      // ns -> tsc -> ns: exact when a tick is at most 1 ns, otherwise within one tick's ns.
      for (std::uint64_t probe : {ns, ns + 1, ns + 7, ns + 1'000'000}) {
        const std::uint64_t round_trip = clock->to_perf_ns(clock->to_tsc(probe));
        CHECK(round_trip >= probe);
        CHECK(round_trip - probe < ns_per_tick_ceil);
        if (p.mult <= (1ULL << p.shift)) CHECK(round_trip == probe);
        // and it is the first such tick: one tick earlier is before probe
        const std::uint64_t first = clock->to_tsc(probe);
        if (first > 0) CHECK(clock->to_perf_ns(first - 1) < probe);
      }
    }
  }
}

TEST_CASE("from_parameters refuses what cannot be a clock") {
  CHECK_FALSE(TscClock::from_parameters(0, 0, 10));
  CHECK_FALSE(TscClock::from_parameters(0, 1, 64));
  CHECK_FALSE(TscClock::from_parameters(0, 1, 65535));
  const auto widest = TscClock::from_parameters(0, 0xffffffff, 63);
  REQUIRE(widest);  // extreme but defined
  CHECK(widest->to_perf_ns(~0ULL) == static_cast<std::uint64_t>((u128{~0ULL} * 0xffffffffu) >> 63));
}

TEST_CASE("from_page reads a synthetic page and honours cap_user_time_zero") {
  perf_event_mmap_page page{};
  page.time_zero = 777;
  page.time_mult = 1431655765;
  page.time_shift = 32;
  CHECK_FALSE(TscClock::from_page(page));  // no cap_user_time_zero
  page.cap_user_time_zero = 1;
  const auto clock = TscClock::from_page(page);
  REQUIRE(clock);
  CHECK(clock->time_zero() == 777);
  CHECK(clock->time_mult() == 1431655765);
  CHECK(clock->time_shift() == 32);
  page.lock = 3;  // an update that never finishes
  CHECK_FALSE(TscClock::from_page(page));
}

TEST_CASE("a real perf page: when it has cap_user_time_zero, perf time from rdtsc is the monotonic clock") {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const selfperf::detail::Fd fd = selfperf::detail::open_event(attr, "task-clock:u", 0, -1, -1);
  void* map = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd.get(), 0);
  REQUIRE_MESSAGE(map != MAP_FAILED, "mmap of the event's page failed, errno ", errno);
  const auto& page = *static_cast<const volatile perf_event_mmap_page*>(map);

  const auto clock = TscClock::from_page(page);
  const bool published = page.cap_user_time_zero && page.time_mult != 0 && page.time_shift < 64;
  CHECK(clock.has_value() == (published && selfperf::kTimestampCounterSupported));
  if (!clock) {
    std::printf("skipped subcase: this kernel's page has no cap_user_time_zero (capabilities %#" PRIx64
                ", e.g. a VM whose sched clock is not the TSC)\n",
                static_cast<std::uint64_t>(page.capabilities));
  } else {
    // perf's default clock is the sched clock, which on x86 with a stable TSC tracks CLOCK_MONOTONIC;
    // the two may differ by an offset and NTP slew, so the bound is generous (1 s) — it catches a
    // wrong formula or a wrong field (those are off by orders of magnitude), not clock drift.
    const std::uint64_t before = monotonic_ns();
    const std::uint64_t perf_now = clock->now_perf_ns();
    const std::uint64_t after = monotonic_ns();
    constexpr std::uint64_t kBound = 1'000'000'000;
    std::printf("perf clock from rdtsc %" PRIu64 " ns, CLOCK_MONOTONIC [%" PRIu64 ", %" PRIu64 "]\n", perf_now, before,
                after);
    CHECK(perf_now + kBound >= before);
    CHECK(perf_now <= after + kBound);
    // Later rdtsc reads convert to later perf times.
    const std::uint64_t later = clock->now_perf_ns();
    CHECK(later >= perf_now);
  }
  munmap(map, 4096);
}
