#include <doctest.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "selfperf/selfperf.hpp"
#include "test_support.hpp"

namespace {

using selfperf::test::burn_cpu;
using selfperf::test::sleep_ms;
using selfperf::test::thread_cpu_ns;

// Read syscalls made by this process so far (/proc/self/io "syscr").
long read_syscalls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  long value = 0;
  while (io >> key >> value)
    if (key == "syscr:") return value;
  return -1;
}

bool hardware_pmu() { return selfperf::probe().hardware_events; }

}  // namespace

TEST_CASE("page-faults:u grows by at least the number of fresh pages touched") {
  selfperf::CounterGroup group{"page-faults:u"};
  const std::size_t pages = 256;
  group.enable();
  auto before = group.read();
  selfperf::test::touch_fresh_pages(pages);
  auto after = group.read();
  group.disable();
  CHECK(selfperf::delta(before[0], after[0]).count >= pages);
  CHECK(after[0].counted());
}

TEST_CASE("task-clock grows with busy work and stays near zero while sleeping") {
  selfperf::CounterGroup group{"task-clock"};
  group.enable();
  auto t0 = group.read();
  burn_cpu(30'000'000);
  auto t1 = group.read();
  sleep_ms(100);
  auto t2 = group.read();
  const auto busy = selfperf::delta(t0[0], t1[0]).count;
  const auto asleep = selfperf::delta(t1[0], t2[0]).count;
  CHECK(busy >= 25'000'000u);
  CHECK(asleep < 20'000'000u);  // 100 ms asleep costs well under 20 ms of CPU
  CHECK(asleep < busy);
}

TEST_CASE("context-switches counts sleeps where kernel counting is allowed, and says why not otherwise") {
  selfperf::CounterGroup group{"context-switches"};
  group.enable();
  auto before = group.read();
  for (int i = 0; i < 20; ++i) sleep_ms(1);
  auto after = group.read();
  const auto switches = selfperf::delta(before[0], after[0]).count;
  if (selfperf::probe().kernel_counting) {
    CHECK_FALSE(group.user_only());
    CHECK(switches >= 20u);  // every sleep blocks, and blocking is a context switch
  } else {
    CHECK(group.user_only());
    CHECK(switches == 0u);
    REQUIRE(group.notes().size() >= 2);
    CHECK(group.notes()[0].find("perf_event_paranoid") != std::string::npos);
    CHECK(group.notes()[1].find("always reads 0") != std::string::npos);
  }
}

TEST_CASE("an explicit :u is honoured even when the kernel could be counted") {
  selfperf::CounterGroup group{"context-switches:u", "task-clock:u"};
  CHECK(group.event(0).exclude_kernel);
  CHECK(group.event(1).exclude_kernel);
  CHECK_FALSE(group.user_only());  // the user asked for it: nothing was narrowed behind their back
  REQUIRE_FALSE(group.notes().empty());
  CHECK(group.notes()[0].find("context-switches:u") != std::string::npos);
}

TEST_CASE("a group reads every member with one read(2)") {
  selfperf::CounterGroup group{"task-clock", "page-faults", "cpu-clock"};
  REQUIRE(group.size() == 3);
  group.enable();
  burn_cpu(2'000'000);
  const long base0 = read_syscalls();
  const long base1 = read_syscalls();
  const long per_probe = base1 - base0;  // reads made by read_syscalls() itself
  const long start = read_syscalls();
  selfperf::GroupReading r;
  for (int i = 0; i < 100; ++i) group.read(r);
  const long end = read_syscalls();
  CHECK(end - start - per_probe == 100);
  REQUIRE(r.size() == 3);
  // One read: the kernel reports one enabled/running time for the whole group.
  CHECK(r[0].time_enabled == r[1].time_enabled);
  CHECK(r[1].time_enabled == r[2].time_enabled);
  CHECK(r[0].time_running > 0);
  CHECK(r[0].value > 0);
  CHECK(r[2].value > 0);
  CHECK(r[0].id != r[1].id);
  CHECK(r[1].id != r[2].id);
  CHECK(std::string(group.read_path()).rfind("syscall:", 0) == 0);
}

TEST_CASE("the read path says why the fast path was not taken") {
  selfperf::CounterGroup group{"task-clock"};
  group.enable();
  (void)group.read();
  CHECK(std::string(group.read_path()).find("syscall: no PMU") == 0);
  selfperf::CounterGroup consistent({"task-clock"}, selfperf::GroupOptions{.consistent = true});
  consistent.enable();
  (void)consistent.read();
  CHECK(std::string(consistent.read_path()).find("consistent") != std::string::npos);
}

TEST_CASE("reset zeroes and disable stops counting") {
  selfperf::CounterGroup group{"task-clock"};
  group.enable();
  burn_cpu(10'000'000);
  auto counted = group.read()[0].value;
  CHECK(counted >= 8'000'000u);
  group.reset();
  auto after_reset = group.read()[0].value;
  CHECK(after_reset < counted);
  group.disable();
  auto stopped = group.read()[0];
  burn_cpu(10'000'000);
  auto still = group.read()[0];
  CHECK(still.value == stopped.value);
  CHECK(still.time_enabled == stopped.time_enabled);
}

TEST_CASE("every member counts again after disable and enable, whichever PMU it is on") {
  // task-clock has a PMU of its own; page-faults is on the software PMU. On Linux 6.18, PERF_EVENT_IOC_ENABLE
  // with PERF_IOC_FLAG_GROUP on the leader left a member on another PMU than the leader's off until the
  // thread's next context switch.
  const std::size_t pages = 64;
  for (bool page_faults_leads : {false, true}) {
    CAPTURE(page_faults_leads);
    selfperf::CounterGroup group = page_faults_leads ? selfperf::CounterGroup{"page-faults", "task-clock"}
                                                     : selfperf::CounterGroup{"task-clock", "page-faults"};
    const std::size_t faults = page_faults_leads ? 0 : 1;
    for (int cycle = 0; cycle < 3; ++cycle) {
      CAPTURE(cycle);
      group.enable();
      auto before = group.read();
      selfperf::test::touch_fresh_pages(pages);
      auto after = group.read();
      group.disable();
      CHECK(selfperf::delta(before[faults], after[faults]).count >= pages);
      CHECK(selfperf::delta(before[1 - faults], after[1 - faults]).count > 0);  // task-clock ran too
      group.reset();
    }
  }
}

TEST_CASE("a group calibrated for its overhead counts every member once enabled") {
  selfperf::CounterGroup group({"task-clock", "page-faults"}, {.subtract_overhead = true});
  group.enable();
  auto before = group.read();
  selfperf::test::touch_fresh_pages(64);
  auto after = group.read();
  CHECK(selfperf::delta(before[1], after[1]).count >= 64u);
}

TEST_CASE("a group created disabled counts nothing until enabled") {
  selfperf::CounterGroup group{"task-clock", "page-faults"};
  burn_cpu(5'000'000);
  auto r = group.read();
  CHECK(r[0].value == 0u);
  CHECK_FALSE(r[0].counted());
}

TEST_CASE("scaling: value x enabled / running, and not-counted is distinct from zero") {
  selfperf::CounterValue v{.value = 100, .time_enabled = 200, .time_running = 50, .id = 1};
  CHECK(v.scaled() == doctest::Approx(400.0));
  selfperf::CounterValue full{.value = 7, .time_enabled = 10, .time_running = 10, .id = 1};
  CHECK(full.scaled() == doctest::Approx(7.0));
  selfperf::CounterValue never{.value = 0, .time_enabled = 10, .time_running = 0, .id = 1};
  CHECK_FALSE(never.counted());
  CHECK(never.scaled() == 0.0);
  selfperf::CounterValue zero{.value = 0, .time_enabled = 10, .time_running = 10, .id = 1};
  CHECK(zero.counted());

  // Deltas are scaled from deltas, not from the running totals.
  selfperf::CounterValue a{.value = 1000, .time_enabled = 1000, .time_running = 1000, .id = 1};
  selfperf::CounterValue b{.value = 1300, .time_enabled = 2000, .time_running = 1250, .id = 1};
  auto d = selfperf::delta(a, b);
  CHECK(d.count == 300u);
  CHECK(d.time_enabled == 1000u);
  CHECK(d.time_running == 250u);
  CHECK(d.scaled() == doctest::Approx(1200.0));
  CHECK(b.scaled() == doctest::Approx(2080.0));
  auto none = selfperf::delta(b, b);
  CHECK_FALSE(none.counted());
}

TEST_CASE("groups are move-only and close their fds") {
  int leader = -1;
  {
    selfperf::CounterGroup a{"task-clock", "page-faults"};
    leader = a.leader_fd();
    CHECK(fcntl(leader, F_GETFD) >= 0);
    CHECK((fcntl(leader, F_GETFD) & FD_CLOEXEC) != 0);
    selfperf::CounterGroup b(std::move(a));
    CHECK(b.size() == 2);
    b.enable();
    burn_cpu(1'000'000);
    CHECK(b.read()[0].value > 0);
    std::vector<std::string> names{"cpu-clock"};
    selfperf::CounterGroup c(names);
    c = std::move(b);
    CHECK(c.leader_fd() == leader);
  }
  errno = 0;
  CHECK(fcntl(leader, F_GETFD) == -1);
  CHECK(errno == EBADF);
}

TEST_CASE("an unsupported hardware event explains that there is no PMU") {
  if (hardware_pmu()) {
    MESSAGE("this machine has a hardware PMU: cycles opens, nothing to check");
    return;
  }
  try {
    selfperf::CounterGroup group{"cycles"};
    FAIL("cycles opened without a PMU");
  } catch (const selfperf::Error& e) {
    CHECK(e.errno_value() == ENOENT);
    CHECK(std::string(e.what()).find("'cycles'") != std::string::npos);
    CHECK(std::string(e.what()).find("no hardware PMU") != std::string::npos);
  }
}

TEST_CASE("an invalid attribute names the event and the attribute") {
  perf_event_attr attr = selfperf::to_attr(selfperf::parse_event("task-clock:u"));
  attr.read_format = 1ull << 40;  // no such read_format bit
  try {
    (void)selfperf::detail::open_event(attr, "task-clock:u", 0, -1, -1);
    FAIL("the kernel accepted an unknown read_format bit");
  } catch (const selfperf::Error& e) {
    CHECK(e.errno_value() == EINVAL);
    CHECK(std::string(e.what()).find("'task-clock:u'") != std::string::npos);
    CHECK(std::string(e.what()).find("rejected an attribute") != std::string::npos);
  }
}

TEST_CASE("running out of file descriptors gives EMFILE with advice") {
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
  rlimit low = old;
  low.rlim_cur = 64;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> filler;  // use up every descriptor below the limit
  for (;;) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    filler.push_back(fd);
  }
  std::string message;
  int err = 0;
  try {
    selfperf::CounterGroup group{"task-clock"};
  } catch (const selfperf::Error& e) {
    message = e.what();
    err = e.errno_value();
  }
  for (int fd : filler) close(fd);
  setrlimit(RLIMIT_NOFILE, &old);
  CHECK(err == EMFILE);
  CHECK(message.find("'task-clock'") != std::string::npos);
  CHECK(message.find("file descriptors") != std::string::npos);
}

TEST_CASE("kernel-side counting without privilege is refused with paranoid advice") {
  if (selfperf::probe().kernel_counting) {
    MESSAGE("privileged or paranoid < 2: the kernel may be counted, EACCES cannot be provoked");
    return;
  }
  try {
    selfperf::CounterGroup group{"task-clock:k"};
    FAIL("task-clock:k opened at perf_event_paranoid >= 2 without CAP_PERFMON");
  } catch (const selfperf::Error& e) {
    CHECK(e.errno_value() == EACCES);
    CHECK(std::string(e.what()).find("perf_event_paranoid") != std::string::npos);
    CHECK(std::string(e.what()).find("CAP_PERFMON") != std::string::npos);
  }
}

TEST_CASE("too many members is a clear error, not a truncated group") {
  std::vector<std::string> many(selfperf::kMaxGroupMembers + 1, "task-clock");
  CHECK_THROWS_WITH_AS(selfperf::CounterGroup{many}, doctest::Contains("split it"), selfperf::Error);
  CHECK_THROWS_AS(selfperf::CounterGroup{std::vector<std::string>{}}, selfperf::Error);
}

TEST_CASE("the capability report names what is missing") {
  auto report = selfperf::probe();
  CHECK(report.perf_event_open);
  CHECK_FALSE(report.pmus.empty());
  std::ostringstream out;
  out << report;
  CHECK(out.str().find("perf_event_paranoid") != std::string::npos);
  CHECK(out.str().find("cap_user_rdpmc") != std::string::npos);
  if (!report.hardware_events) CHECK(report.fast_path_verdict().find("syscall: no PMU") == 0);
}
