// CounterGroup's rdpmc path, exercised on synthetic member pages (this VM has no PMU): the group read takes
// every member under all seqlocks at once, so members never mix scheduling intervals.
#include <doctest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <linux/perf_event.h>

#include "counting/group_pages.hpp"
#include "selfperf/counter_group.hpp"

namespace {

constexpr int kMembers = 3;
alignas(4096) perf_event_mmap_page pages[kMembers];

std::uint64_t fake_pmc(std::uint32_t) { return 0; }  // the whole count lives in `offset`
std::uint64_t fake_timestamp() { return 0; }

template <class T, class V>
void store(T& field, V value) {
  __atomic_store_n(&field, static_cast<T>(value), __ATOMIC_RELEASE);
}

// One "scheduling interval" per generation: every member's fields derive from it.
void publish(std::uint64_t generation) {
  for (int i = 0; i < kMembers; ++i) store(pages[i].lock, pages[i].lock + 1);
  for (int i = 0; i < kMembers; ++i) {
    store(pages[i].offset, static_cast<std::int64_t>(generation * 1000 + static_cast<std::uint64_t>(i)));
    store(pages[i].time_enabled, static_cast<std::uint64_t>(generation * 10));
    store(pages[i].time_running, static_cast<std::uint64_t>(generation * 10));
  }
  for (int i = 0; i < kMembers; ++i) store(pages[i].lock, pages[i].lock + 1);
}

void init_pages() {
  std::memset(pages, 0, sizeof pages);
  for (int i = 0; i < kMembers; ++i) {
    pages[i].cap_user_rdpmc = 1;
    pages[i].index = static_cast<std::uint32_t>(i + 1);
    pages[i].pmc_width = 48;
  }
  publish(1);
}

}  // namespace

TEST_CASE("a group on rdpmc-capable pages reads one interval for all members, on the owning thread only") {
  init_pages();
  selfperf::CounterGroup group{"task-clock", "page-faults", "cpu-clock"};
  std::vector<const volatile perf_event_mmap_page*> view{&pages[0], &pages[1], &pages[2]};
  selfperf::detail::CounterGroupTestAccess::use_synthetic_pages(group, view, fake_pmc, fake_timestamp);
  group.enable();

  auto first = group.read();
  REQUIRE(std::string(group.read_path()) == "rdpmc");
  CHECK(first[0].value == 1000);
  CHECK(first[2].value == 1002);
  CHECK(first[1].time_enabled == 10);
  CHECK(first[0].id != first[1].id);  // ids come from the real events

  // Another thread must not rdpmc: the counter in its CPU is not this thread's.
  std::string other_path;
  std::uint64_t other_value = 0;
  std::thread([&] {
    auto r = group.read();
    other_path = group.read_path();
    other_value = r[0].value;
  }).join();
  CHECK(other_path.find("syscall: other thread") == 0);
  CHECK(other_value != 1000);  // the real task-clock, read with read(2)

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::uint64_t generation = 2; !stop.load(std::memory_order_relaxed); ++generation) {
      publish(generation);
      for (int spin = 0; spin < 200; ++spin) asm volatile("" ::: "memory");  // let readers through
    }
  });
  int fast = 0, torn = 0;
  selfperf::GroupReading r;
  for (int n = 0; n < 20000; ++n) {
    group.read(r);
    if (std::string_view(group.read_path()) != "rdpmc") continue;  // retries exhausted: read(2) instead
    ++fast;
    const std::uint64_t generation = r[0].value / 1000;
    for (int i = 0; i < kMembers; ++i)
      if (r[static_cast<std::size_t>(i)].value != generation * 1000 + static_cast<std::uint64_t>(i) ||
          r[static_cast<std::size_t>(i)].time_enabled != generation * 10)
        ++torn;
  }
  stop = true;
  writer.join();
  CHECK(fast > 0);
  CHECK(torn == 0);

  // index 0 on any member: that member is not running, the group falls back and says why.
  store(pages[1].index, 0u);
  (void)group.read();
  CHECK(std::string(group.read_path()).find("syscall: event not running") == 0);
}
