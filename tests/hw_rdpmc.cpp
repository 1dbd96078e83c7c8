// The production rdpmc fast path on a real PMU: agrees with read(2) and survives migration between CPUs.
// Where `cycles` cannot be opened, or its page does not allow rdpmc, the binary exits 77 (skipped)
// before doctest runs.
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include <doctest.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "selfperf/hw_read.hpp"

namespace {

perf_event_attr cycles_attr() {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.exclude_kernel = 1;  // allowed unprivileged; rdpmc then counts user cycles only, as read(2) does
  attr.exclude_hv = 1;
  attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  return attr;
}

void burn(int n) {
  volatile std::uint64_t x = 0;
  for (int i = 0; i < n; ++i) x = x + static_cast<std::uint64_t>(i);
}

// cycles:u of the calling thread with its one-page mapping.
class SelfCycles {
 public:
  SelfCycles() {
    fd_ = selfperf::detail::Fd(selfperf::detail::perf_event_open(attr_, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
    if (!fd_) return;
    map_ = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd_.get(), 0);
    if (map_ == MAP_FAILED) map_ = nullptr;
  }
  ~SelfCycles() {
    if (map_) munmap(map_, 4096);
  }
  SelfCycles(const SelfCycles&) = delete;
  SelfCycles& operator=(const SelfCycles&) = delete;

  bool open() const { return fd_ && map_; }
  const volatile perf_event_mmap_page& page() const { return *static_cast<const volatile perf_event_mmap_page*>(map_); }
  std::optional<selfperf::PageReading> fast() const { return selfperf::read_self(page()); }
  // read(2) of {value, time_enabled, time_running}; nullopt if it fails.
  std::optional<selfperf::PageReading> syscall() const {
    std::uint64_t values[3] = {};
    if (read(fd_.get(), values, sizeof values) != static_cast<ssize_t>(sizeof values)) return std::nullopt;
    return selfperf::PageReading{values[0], values[1], values[2]};
  }
  // The fast read, after letting the event get scheduled onto a counter if it was not yet.
  std::optional<selfperf::PageReading> fast_when_running() const {
    for (int i = 0; i < 100; ++i) {
      if (auto reading = fast()) return reading;
      burn(10000);
    }
    return std::nullopt;
  }

 private:
  perf_event_attr attr_ = cycles_attr();
  selfperf::detail::Fd fd_;
  void* map_ = nullptr;
};

[[noreturn]] void skip(const char* why) {
  std::printf("skipped: %s\n", why);
  std::fflush(stdout);
  std::exit(77);
}

// Runs before doctest's main so that a machine without a PMU skips the whole binary.
const bool kHardwarePresent = [] {
  if (!selfperf::kUserPmcReadSupported) skip("no hardware PMU (the fast path is x86-64 and aarch64 only)");
  SelfCycles cycles;
  if (!cycles.open()) {
    char why[200];
    std::snprintf(why, sizeof why, "no hardware PMU (cycles: %s)", std::strerror(errno));
    skip(why);
  }
  burn(100000);
  if (!cycles.fast_when_running()) {
    char why[200];
    const auto reason = selfperf::mmap_page_refusal_reason(cycles.page());
#if defined(__aarch64__)
    const char* hint = "kernel.perf_user_access 0? sudo sysctl kernel.perf_user_access=1";
#else
    const char* hint = "rdpmc disabled in /sys/bus/event_source/devices/cpu/rdpmc?";
#endif
    std::snprintf(why, sizeof why, "no hardware PMU usable from user space (cycles page: %.*s; %s)",
                  static_cast<int>(reason.size()), reason.data(), hint);
    skip(why);
  }
  return true;
}();

void check_ordered(const selfperf::PageReading& earlier, const selfperf::PageReading& later) {
  // Counts come from the same counter: exact order. Times come from two computations of the same
  // sched clock (the page's TSC scaling vs. the kernel's), so allow a rounding nanosecond or two.
  CHECK(earlier.count <= later.count);
  CHECK(earlier.time_enabled <= later.time_enabled + 2);
  CHECK(earlier.time_running <= later.time_running + 2);
}

}  // namespace

TEST_CASE("rdpmc agrees with read(2)") {
  REQUIRE(kHardwarePresent);
  SelfCycles cycles;
  REQUIRE(cycles.open());
  burn(100000);
  for (int round = 0; round < 100; ++round) {
    const auto before = cycles.fast_when_running();
    const auto middle = cycles.syscall();
    const auto after = cycles.fast_when_running();
    REQUIRE(before);
    REQUIRE(middle);
    REQUIRE(after);
    check_ordered(*before, *middle);
    check_ordered(*middle, *after);
    // Between the two fast reads only the user-space side of one read(2) ran: far below 10M cycles.
    CHECK(after->count - before->count < 10'000'000);
    CHECK(middle->time_running > 0);
    burn(1000);
  }
}

TEST_CASE("rdpmc survives migration between CPUs") {
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  if (cpus.size() < 2) {
    std::printf("skipped subcase: only one CPU allowed\n");
    return;
  }

  // A reader thread reads its own counter continuously while this thread moves it between two CPUs,
  // so migrations land at arbitrary points of the read (the seqlock must catch them).
  std::atomic<bool> stop{false};
  std::atomic<int> reader_cpu{-1};
  std::atomic<std::uint64_t> fast_reads{0}, bad{0}, fallbacks{0};
  std::atomic<pid_t> reader_tid{0};
  std::thread reader([&] {
    SelfCycles cycles;
    if (!cycles.open()) {
      bad = 1;
      reader_tid = -1;
      return;
    }
    reader_tid = selfperf::detail::current_tid();
    std::optional<selfperf::PageReading> last;
    for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      reader_cpu.store(sched_getcpu(), std::memory_order_relaxed);
      const auto reading = cycles.fast();
      if (!reading) {
        fallbacks.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      fast_reads.fetch_add(1, std::memory_order_relaxed);
      if (last && (reading->count < last->count || reading->time_enabled + 2 < last->time_enabled)) ++bad;
      last = reading;
      if (i % 64 == 0) {
        const auto sys = cycles.syscall();
        if (!sys || sys->count < last->count) ++bad;
        const auto after = cycles.fast();
        if (sys && after && after->count < sys->count) ++bad;
      }
    }
  });
  while (reader_tid.load() == 0) sched_yield();
  REQUIRE(reader_tid.load() > 0);

  int migrations = 0;
  for (int round = 0; round < 200; ++round) {
    const int target = cpus[round % 2];
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(target, &one);
    REQUIRE(sched_setaffinity(reader_tid.load(), sizeof one, &one) == 0);
    while (reader_cpu.load(std::memory_order_relaxed) != target) sched_yield();
    ++migrations;
  }
  stop = true;
  reader.join();
  std::printf("%d migrations, %" PRIu64 " fast reads, %" PRIu64 " fallbacks\n", migrations, fast_reads.load(),
              fallbacks.load());
  CHECK(bad.load() == 0);
  CHECK(fast_reads.load() > 0);
}
