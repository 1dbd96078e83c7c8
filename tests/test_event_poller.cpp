#include <doctest.h>

#include <cerrno>
#include <chrono>
#include <cstdint>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event_poller.hpp"
#include "selfperf/sampling_event.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using selfperf::EventPoller;
using selfperf::PollEvent;

namespace {

using selfperf::test::burn_cpu;

// User-only cpu-clock sampling with callchains on `tid`, woken up on every sample.
selfperf::SamplingEvent open_sampling(pid_t tid, std::uint64_t period_ns = 100000) {
  selfperf::CallchainSamplingOptions options;
  options.period = period_ns;
  options.kernel_frames = selfperf::KernelFrames::exclude;
  perf_event_attr attr = selfperf::callchain_sampling_attr(selfperf::parse_event("cpu-clock"), options);
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return selfperf::SamplingEvent(attr, "cpu-clock:u", tid, 8);
}

}  // namespace

TEST_CASE("a child that exits is reported once as a hangup and removed, not spun on") {
  int go[2];
  REQUIRE(::pipe2(go, O_CLOEXEC) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char c;
    if (::read(go[0], &c, 1) == 1) burn_cpu(20'000'000);
    ::_exit(0);
  }
  ::close(go[0]);
  auto event = open_sampling(child);
  event.enable();
  EventPoller poller;
  poller.add(event.fd(), 42);
  CHECK(poller.size() == 1);
  REQUIRE(::write(go[1], "g", 1) == 1);
  ::close(go[1]);

  std::size_t samples = 0, foreign = 0, hangups = 0, wakeups = 0;
  auto drain = [&] {
    samples += event.read_samples([&](const selfperf::SampleRecord& s) {
      if (static_cast<pid_t>(s.pid) != child) ++foreign;
    });
  };
  // Bounded: at most 400 waits of 50 ms; the child burns 20 ms of CPU and exits.
  for (int i = 0; i < 400 && hangups == 0; ++i) {
    poller.poll(50ms, [&](const PollEvent& e) {
      ++wakeups;
      CHECK(e.fd == event.fd());
      CHECK(e.key == 42);
      if (e.readable) drain();
      if (e.hangup) ++hangups;
    });
  }
  drain();  // what was written between the last wakeup and the exit
  REQUIRE(hangups == 1);
  CHECK(poller.size() == 0);
  CHECK_FALSE(poller.contains(event.fd()));
  // The fd itself keeps reporting POLLHUP: without the removal a level-triggered loop would spin.
  pollfd p{event.fd(), POLLIN, 0};
  CHECK(::poll(&p, 1, 0) == 1);
  CHECK((p.revents & POLLHUP) != 0);
  // And the poller, now empty, does not report it again.
  PollEvent out[4];
  CHECK(poller.wait(out, 0ms) == 0);

  MESSAGE("child samples " << samples << " in " << wakeups << " wakeups");
  CHECK(samples > 0);
  CHECK(foreign == 0);
  CHECK(event.undecodable() == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
}

TEST_CASE("several events are polled together and stay in the set while their tasks live") {
  auto a = open_sampling(0);
  auto b = open_sampling(0);
  EventPoller poller;
  poller.add(a.fd(), 1);
  poller.add(b.fd(), 2);
  a.enable();
  b.enable();
  burn_cpu(5'000'000);  // ≈50 samples each at 100 µs; wakeup on every sample
  a.disable();
  b.disable();
  bool seen[3] = {false, false, false};
  PollEvent out[8];
  const std::size_t n = poller.wait(out, 1000ms);
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(out[i].key <= 2);
    CHECK(out[i].readable);
    CHECK_FALSE(out[i].hangup);
    seen[out[i].key] = true;
  }
  CHECK(seen[1]);
  CHECK(seen[2]);
  CHECK(poller.size() == 2);
  CHECK(a.read_samples([](const selfperf::SampleRecord&) {}) > 0);
  CHECK(b.read_samples([](const selfperf::SampleRecord&) {}) > 0);
  CHECK(poller.remove(b.fd()));
  CHECK_FALSE(poller.remove(b.fd()));
  CHECK(poller.size() == 1);
}

TEST_CASE("poller errors are clear") {
  EventPoller poller;
  CHECK_THROWS_AS(poller.add(-1, 0), selfperf::Error);
  int regular = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  REQUIRE(regular >= 0);
  try {
    poller.add(regular, 0);
    FAIL("a regular file cannot be polled");
  } catch (const selfperf::Error& e) {
    CHECK(e.errno_value() == EPERM);
  }
  ::close(regular);
  CHECK(poller.size() == 0);

  auto event = open_sampling(0);
  poller.add(event.fd(), 5);
  CHECK_THROWS_WITH_AS(poller.add(event.fd(), 6), doctest::Contains("already"), selfperf::Error);
  PollEvent out[1];
  CHECK_THROWS_WITH_AS(poller.wait(out, -1ms), doctest::Contains("negative"), selfperf::Error);
  // Nothing enabled, nothing to read: a bounded wait returns empty.
  CHECK(poller.wait(out, 10ms) == 0);
}
