// The fast read's arithmetic on a real PMU driver's mmap page, against read(2) of the same event:
//  - a counter narrower than 64 bits (32-bit on arm64 without the `long` term, as on cores without 64-bit
//    event counters; 48-bit on x86) is sign-extended from pmc_width: the kernel starts it at -period, with its
//    top bit set, and it wraps at every overflow. The register is also read as a core whose counters are only
//    pmc_width bits wide gives it: QEMU's PMUv3p5 counters are 64-bit, and the kernel sets the bits above 31
//    of a 32-bit event itself, so the real register alone would let a reader that skips the extension pass;
//  - time_enabled/time_running extrapolated from the page's last update with time_mult/time_shift (and
//    time_cycles/time_mask for arm64's short counter) agree with the kernel's own.
// Skipped ("no hardware PMU") where `cycles` does not open; a case reports and returns where the page gives
// no user access (kernel.perf_user_access=0 on arm64, rdpmc off on x86).
#include <doctest.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "events/arm64_user_access.hpp"
#include "selfperf/hw_read.hpp"

namespace {

// Instructions between overflows when sampling: each one wraps the counter. Well under the guest's (and the
// kernel's default) sample-rate limit, so the kernel never throttles the event.
constexpr std::uint64_t kPeriod = 1'000'003;

[[gnu::noinline]] void burn(std::uint64_t iterations) {
  std::uint64_t x = 1;
  for (std::uint64_t i = 0; i < iterations; ++i) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    asm volatile("" : "+r"(x));
  }
}

// instructions:u of this thread, opened without the library's event code so that the counter's width is the
// test's choice: on a PMU with the `rdpmc` term (arm64) user access without `long`, i.e. a 32-bit counter.
class SelfInstructions {
 public:
  explicit SelfInstructions(std::uint64_t sample_period) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    attr.sample_period = sample_period;  // no ring buffer is mapped: overflows only reprogram the counter
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    const auto pmus = selfperf::detail::user_access_pmus("/sys/bus/event_source/devices");
    if (const auto* pmu = selfperf::detail::user_access_pmu_for(attr, pmus)) {
      selfperf::detail::request_user_access(attr, *pmu, false);
      narrowed_ = true;
    }
    fd_ = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
    REQUIRE_MESSAGE(fd_ >= 0, "perf_event_open(instructions:u): " << std::string(std::strerror(errno)));
    map_ = mmap(nullptr, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), PROT_READ, MAP_SHARED, fd_, 0);
    REQUIRE_MESSAGE(map_ != MAP_FAILED, "mmap of the event page: " << std::string(std::strerror(errno)));
  }
  ~SelfInstructions() {
    if (map_ != MAP_FAILED) munmap(map_, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
    if (fd_ >= 0) close(fd_);
  }
  SelfInstructions(const SelfInstructions&) = delete;
  SelfInstructions& operator=(const SelfInstructions&) = delete;

  const volatile perf_event_mmap_page& page() const { return *static_cast<const volatile perf_event_mmap_page*>(map_); }
  bool narrowed() const { return narrowed_; }
  std::optional<selfperf::PageReading> fast() const { return selfperf::read_self(page()); }
  // The fast read of a core whose counter registers are pmc_width bits wide (zero above: ARMv8.0-8.4 event
  // counters, x86's 48-bit ones).
  std::optional<selfperf::PageReading> fast_as_narrow_core() const {
#if defined(__x86_64__) || defined(__aarch64__)
    const unsigned width = page().pmc_width;
    const std::uint64_t mask = width >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
    return selfperf::read_mmap_page(
        page(), [mask](std::uint32_t counter) noexcept { return selfperf::detail::rdpmc(counter) & mask; },
        []() noexcept { return selfperf::detail::rdtsc(); });
#else
    return std::nullopt;
#endif
  }
  selfperf::PageReading syscall_read() const {
    std::uint64_t values[3] = {};
    REQUIRE(read(fd_, values, sizeof values) == static_cast<ssize_t>(sizeof values));
    return {values[0], values[1], values[2]};
  }

 private:
  int fd_ = -1;
  void* map_ = MAP_FAILED;
  bool narrowed_ = false;
};

// How many of `rounds` self-reads fell outside the two read(2)s around them. Counts come from one counter:
// exact order. Times are two computations of one clock (the page's scaling, the kernel's): a rounding
// nanosecond or two.
struct Sandwich {
  int rounds = 0;
  int count_outside = 0;
  int time_outside = 0;
  std::string first_bad;

  void check(const selfperf::PageReading& before, const selfperf::PageReading& self,
             const selfperf::PageReading& after) {
    ++rounds;
    const bool count_ok = before.count <= self.count && self.count <= after.count;
    const bool time_ok = before.time_enabled <= self.time_enabled + 2 && self.time_enabled <= after.time_enabled + 2 &&
                         before.time_running <= self.time_running + 2 && self.time_running <= after.time_running + 2;
    count_outside += count_ok ? 0 : 1;
    time_outside += time_ok ? 0 : 1;
    if ((!count_ok || !time_ok) && first_bad.empty())
      first_bad = "round " + std::to_string(rounds) + ": read(2) " + std::to_string(before.count) + " enabled " +
                  std::to_string(before.time_enabled) + ", self " + std::to_string(self.count) + " enabled " +
                  std::to_string(self.time_enabled) + ", read(2) " + std::to_string(after.count) + " enabled " +
                  std::to_string(after.time_enabled);
  }
};

}  // namespace

TEST_CASE("a narrow counter is sign-extended from pmc_width and reads as read(2) across its wraps") {
  SelfInstructions event(kPeriod);
  burn(10'000);
  if (!event.fast()) {
    MESSAGE("no user access to the counter: "
            << std::string(selfperf::mmap_page_refusal_reason(event.page())) << " (nothing to check)");
    return;
  }
  const unsigned width = event.page().pmc_width;
  INFO("pmc_width " << width);
  // Below 64 bits the kernel's start value -period has bits above pmc_width that only sign extension restores:
  // a reader that took the raw counter as it is would be 2^pmc_width too high (without the extension, all 400
  // reads as a 32-bit core were outside on the emulated machine).
  REQUIRE(width < 64);
  if (event.narrowed()) CHECK(width == 32);  // user access without `long` is the 32-bit counter

  Sandwich sandwich;
  std::uint64_t last = 0;
  int backwards = 0;
  const selfperf::PageReading start = event.syscall_read();
  Sandwich narrow;
  for (int round = 0; round < 400; ++round) {
    burn(100'000);  // ~0.3-0.5 M instructions: an overflow, and the counter's wrap, every 2-3 rounds
    const selfperf::PageReading before = event.syscall_read();
    const auto self = event.fast();
    const auto as_narrow = event.fast_as_narrow_core();
    const selfperf::PageReading after = event.syscall_read();
    REQUIRE(self);
    REQUIRE(as_narrow);
    sandwich.check(before, *self, after);
    narrow.check(before, *as_narrow, after);
    backwards += self->count < last ? 1 : 0;
    last = self->count;
  }
  const std::uint64_t overflows = (last - start.count) / kPeriod;
  INFO(sandwich.first_bad);
  INFO("as a core with pmc_width-bit registers: " << narrow.first_bad);
  MESSAGE("pmc_width " << width << ": " << sandwich.rounds << " self-reads across " << overflows
                       << " overflows, " << sandwich.count_outside << " counts and " << sandwich.time_outside
                       << " times outside their read(2)s; as a core with " << width << "-bit registers "
                       << narrow.count_outside << " counts outside");
  CHECK(overflows >= 50);  // the reads straddled many wraps of the counter
  CHECK(sandwich.count_outside == 0);
  CHECK(sandwich.time_outside == 0);
  CHECK(narrow.count_outside == 0);
  CHECK(backwards == 0);
}

TEST_CASE("self-read enabled/running times, extrapolated with time_mult/time_shift, fall between read(2)'s") {
  SelfInstructions event(0);  // counting only: the kernel updates the page at schedule-in and little else
  burn(10'000);
  if (!event.fast()) {
    MESSAGE("no user access to the counter: "
            << std::string(selfperf::mmap_page_refusal_reason(event.page())) << " (nothing to check)");
    return;
  }
  if (!event.page().cap_user_time) {
    MESSAGE("the page has no cap_user_time: its times are the kernel's own (nothing to check)");
    return;
  }
  Sandwich sandwich;
  std::uint64_t longest_extrapolation = 0;
  for (int round = 0; round < 300; ++round) {
    burn(100'000);
    const selfperf::PageReading before = event.syscall_read();
    const auto self = event.fast();
    // The page's own time, as of the kernel's last update: what the self-read extrapolated from (an update
    // between the two loads makes the figure smaller, never larger).
    const std::uint64_t page_enabled = event.page().time_enabled;
    const selfperf::PageReading after = event.syscall_read();
    REQUIRE(self);
    sandwich.check(before, *self, after);
    if (self->time_enabled > page_enabled && self->time_enabled - page_enabled > longest_extrapolation)
      longest_extrapolation = self->time_enabled - page_enabled;
  }
  INFO(sandwich.first_bad);
  const bool short_counter = event.page().cap_user_time_short;
  MESSAGE("time_mult " << event.page().time_mult << ", time_shift " << event.page().time_shift
                       << ", cap_user_time_short " << short_counter << ": longest extrapolation "
                       << longest_extrapolation << " ns, " << sandwich.time_outside << " of " << sandwich.rounds
                       << " times outside their read(2)s");
  // Extrapolated over a millisecond or more, against a read(2) window of microseconds: a conversion off by a
  // few percent puts the self-read outside it (on the emulated machine, 120 ms: time_mult 0.5 % too large put
  // all 300 outside).
  CHECK(longest_extrapolation >= 1'000'000);
  CHECK(sandwich.time_outside == 0);
  CHECK(sandwich.count_outside == 0);
}
