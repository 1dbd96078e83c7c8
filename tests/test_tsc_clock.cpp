// TscClock: perf time <-> TSC conversions against 128-bit references, and against the real clock
// where this machine's perf page publishes cap_user_time_zero.
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

#include <doctest.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
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

namespace {

// A cpu-clock:u sampling event of this thread recording PERF_SAMPLE_TIME into a small ring buffer:
// its samples carry perf's own clock, and its first page is the page TscClock reads.
class TimedSamples {
 public:
  static constexpr std::size_t kDataPages = 8;

  TimedSamples() {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.sample_period = 100'000;  // ns of CPU time
    attr.sample_type = PERF_SAMPLE_TIME;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    fd_ = selfperf::detail::open_event(attr, "cpu-clock:u", 0, -1, -1);
    size_ = (1 + kDataPages) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    map_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (map_ == MAP_FAILED) map_ = nullptr;
  }
  ~TimedSamples() {
    if (map_) munmap(map_, size_);
  }
  TimedSamples(const TimedSamples&) = delete;
  TimedSamples& operator=(const TimedSamples&) = delete;

  bool mapped() const { return map_ != nullptr; }
  const volatile perf_event_mmap_page& page() const { return *static_cast<const volatile perf_event_mmap_page*>(map_); }
  int fd() const { return fd_.get(); }

  std::uint64_t data_head() const { return __atomic_load_n(&page().data_head, __ATOMIC_ACQUIRE); }

  // Timestamps of the PERF_RECORD_SAMPLEs written so far (the buffer is far from wrapping).
  std::vector<std::uint64_t> sample_times() const {
    std::vector<std::uint64_t> times;
    const auto* data = static_cast<const unsigned char*>(map_) + page().data_offset;
    const std::uint64_t head = data_head();
    for (std::uint64_t pos = 0; pos + sizeof(perf_event_header) <= head && head <= page().data_size;) {
      perf_event_header header;
      std::memcpy(&header, data + pos, sizeof header);
      if (header.size < sizeof header) break;
      if (header.type == PERF_RECORD_SAMPLE && header.size >= sizeof header + sizeof(std::uint64_t)) {
        std::uint64_t time;
        std::memcpy(&time, data + pos + sizeof header, sizeof time);
        times.push_back(time);
      }
      pos += header.size;
    }
    return times;
  }

 private:
  selfperf::detail::Fd fd_;
  void* map_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

TEST_CASE("a real perf page: where it has cap_user_time_zero, rdtsc converts to perf's sample clock") {
  TimedSamples samples;
  REQUIRE_MESSAGE(samples.mapped(), "mmap of the sampling event's buffer failed, errno ", errno);

  // Samples taken between two rdtsc reads must carry perf times between their conversions.
  const std::uint64_t tsc_before = TscClock::now_tsc();
  REQUIRE(ioctl(samples.fd(), PERF_EVENT_IOC_ENABLE, 0) == 0);
  const std::uint64_t give_up = monotonic_ns() + 10'000'000'000ULL;  // only against a hang: no sample ever
  volatile std::uint64_t spin = 0;
  while (samples.data_head() == 0 && monotonic_ns() < give_up) spin = spin + 1;
  REQUIRE(ioctl(samples.fd(), PERF_EVENT_IOC_DISABLE, 0) == 0);
  const std::uint64_t tsc_after = TscClock::now_tsc();
  const std::vector<std::uint64_t> times = samples.sample_times();
  REQUIRE_MESSAGE(!times.empty(), "cpu-clock produced no sample while this thread spun for 10 s");
  for (std::size_t i = 1; i < times.size(); ++i) CHECK(times[i] >= times[i - 1]);

  const auto& page = samples.page();
  const auto clock = TscClock::from_page(page);
  const bool published = page.cap_user_time_zero && page.time_mult != 0 && page.time_shift < 64;
  CHECK(clock.has_value() == (published && selfperf::kTimestampCounterSupported));
  if (!clock) {
    std::printf("skipped subcase: this kernel's page has no cap_user_time_zero (capabilities %#" PRIx64
                ", e.g. a VM whose sched clock is not the TSC); %zu samples at perf times %" PRIu64 "..\n",
                static_cast<std::uint64_t>(page.capabilities), times.size(), times.front());
    return;
  }

  // perf's clock is the sched clock, computed from the TSC with the very mult/shift/offset the page
  // publishes: equal up to rdtsc reordering around the ioctls, hence a few microseconds of slack.
  constexpr std::uint64_t kSlack = 10'000;
  const std::uint64_t lo = clock->to_perf_ns(tsc_before), hi = clock->to_perf_ns(tsc_after);
  std::printf("%zu samples in perf time [%" PRIu64 ", %" PRIu64 "], rdtsc brackets [%" PRIu64 ", %" PRIu64 "]\n",
              times.size(), times.front(), times.back(), lo, hi);
  for (std::uint64_t t : times) {
    CHECK(t + kSlack >= lo);
    CHECK(t <= hi + kSlack);
  }

  // The sched clock starts near CLOCK_MONOTONIC but is not NTP-disciplined: allow 1 s plus 500 ppm
  // (the kernel's limit on NTP frequency correction) of the time since boot. A wrong formula or field
  // is off by orders of magnitude more.
  const std::uint64_t before = monotonic_ns();
  const std::uint64_t perf_now = clock->now_perf_ns();
  const std::uint64_t after = monotonic_ns();
  const std::uint64_t bound = 1'000'000'000ULL + after / 2000;
  std::printf("perf clock from rdtsc %" PRIu64 " ns, CLOCK_MONOTONIC [%" PRIu64 ", %" PRIu64 "]\n", perf_now, before,
              after);
  CHECK(perf_now + bound >= before);
  CHECK(perf_now <= after + bound);
  CHECK(clock->now_perf_ns() >= perf_now);
}
