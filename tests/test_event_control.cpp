// The perf_event ioctls and prctls (event_control.hpp), on software events that every machine has.
#include <doctest.h>

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <set>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/event_control.hpp"
#include "selfperf/sampling_event.hpp"

namespace {

// Page faults are deterministic: touching n fresh anonymous pages faults n times in this thread.
void touch_fresh_pages(std::size_t n) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  auto* bytes = static_cast<volatile char*>(p);
  for (std::size_t i = 0; i < n; ++i) bytes[i * page] = 1;
  ::munmap(p, n * page);
}

perf_event_attr fault_sampling(std::uint64_t period) {
  perf_event_attr attr = selfperf::to_attr(selfperf::parse_event("page-faults:u"));
  attr.sample_period = period;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_IDENTIFIER;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return attr;
}

std::uint64_t count_of(int fd) {
  std::uint64_t v = 0;
  REQUIRE(::read(fd, &v, sizeof v) == sizeof v);
  return v;
}

}  // namespace

TEST_CASE("PERF_EVENT_IOC_PERIOD changes how many faults make a sample") {
  selfperf::SamplingEvent event(fault_sampling(10), "page-faults:u", 0, 64);
  event.enable();
  touch_fresh_pages(1000);
  std::size_t at_10 = event.read_samples([](const selfperf::SampleRecord&) {});
  selfperf::set_sample_period(event.fd(), 100);
  touch_fresh_pages(1000);
  std::size_t at_100 = event.read_samples([](const selfperf::SampleRecord&) {});
  event.disable();
  INFO("samples at period 10: ", at_10, ", after PERF_EVENT_IOC_PERIOD 100: ", at_100);
  // Each touched page faults at least once; a sanitizer's shadow memory adds faults per page (ASan ~1.1x,
  // TSan ~2x), so the check is on the ratio the new period makes, not on absolute counts.
  CHECK(at_10 >= 100);
  CHECK(at_100 >= 9);
  CHECK(at_10 >= 6 * at_100);   // the period went from 10 to 100 (the first overflow after it keeps the old one)
  CHECK(at_10 <= 14 * at_100);
  CHECK_THROWS_AS(selfperf::set_sample_period(event.fd(), 0), selfperf::Error);
}

TEST_CASE("PERF_EVENT_IOC_PAUSE_OUTPUT discards records while paused, and counts them as lost") {
  selfperf::SamplingEvent event(fault_sampling(1), "page-faults:u", 0, 64);
  event.enable();
  selfperf::pause_output(event.fd(), true);
  touch_fresh_pages(200);
  CHECK(event.read_samples([](const selfperf::SampleRecord&) {}) == 0);
  selfperf::pause_output(event.fd(), false);
  touch_fresh_pages(200);
  std::size_t resumed = event.read_samples([](const selfperf::SampleRecord&) {});
  event.disable();
  CHECK(resumed >= 200);
  CHECK(event.ring().stats().lost >= 200);  // the PERF_RECORD_LOST the kernel writes once resumed
  CHECK(count_of(event.fd()) >= 400);        // the event counted throughout
}

TEST_CASE("PERF_EVENT_IOC_SET_OUTPUT sends a second event's samples into the first one's ring, told apart by PERF_EVENT_IOC_ID") {
  selfperf::SamplingEvent owner(fault_sampling(1), "page-faults:u", 0, 64);
  perf_event_attr second_attr = fault_sampling(2);
  selfperf::detail::Fd second = selfperf::detail::open_event(second_attr, "page-faults:u", 0, -1, -1);
  selfperf::redirect_output(second.get(), owner.fd());
  std::uint64_t owner_id = selfperf::event_id(owner.fd());
  std::uint64_t second_id = selfperf::event_id(second.get());
  CHECK(owner_id != second_id);

  owner.enable();
  ::ioctl(second.get(), PERF_EVENT_IOC_ENABLE, 0);
  touch_fresh_pages(100);
  ::ioctl(second.get(), PERF_EVENT_IOC_DISABLE, 0);
  owner.disable();
  std::size_t from_owner = 0, from_second = 0, other = 0;
  owner.read_samples([&](const selfperf::SampleRecord& s) {
    if (s.identifier == owner_id) ++from_owner;
    else if (s.identifier == second_id) ++from_second;
    else ++other;
  });
  INFO("owner ", from_owner, " (id ", owner_id, "), redirected ", from_second, " (id ", second_id, ")");
  // Both rings' worth arrives in one ring. (How the kernel splits a fault that overflows both events is its
  // own: on 6.18 the period-1 owner shows 50 and the period-2 event 100, in perf_event_open from C as well.)
  CHECK(from_owner > 0);
  CHECK(from_second > 0);
  CHECK(from_owner + from_second >= 100);
  CHECK(other == 0);

  // An event with its own mapping cannot be redirected: the message says why.
  selfperf::SamplingEvent mapped(fault_sampling(1), "page-faults:u", 0, 8);
  try {
    selfperf::redirect_output(mapped.fd(), owner.fd());
    FAIL("SET_OUTPUT of a mapped event succeeded");
  } catch (const selfperf::Error& e) {
    CHECK(std::strstr(e.what(), "PERF_EVENT_IOC_SET_OUTPUT") != nullptr);
  }
}

TEST_CASE("PR_TASK_PERF_EVENTS_DISABLE stops every event of the process, _ENABLE resumes them") {
  perf_event_attr attr = selfperf::to_attr(selfperf::parse_event("page-faults:u"));
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  selfperf::detail::Fd fd = selfperf::detail::open_event(attr, "page-faults:u", 0, -1, -1);
  ::ioctl(fd.get(), PERF_EVENT_IOC_ENABLE, 0);
  touch_fresh_pages(100);
  selfperf::disable_process_events();
  std::uint64_t before = count_of(fd.get());
  touch_fresh_pages(100);
  std::uint64_t during = count_of(fd.get());
  selfperf::enable_process_events();
  touch_fresh_pages(100);
  std::uint64_t after = count_of(fd.get());
  CHECK(before >= 100);
  CHECK(during == before);
  CHECK(after >= before + 100);
}
