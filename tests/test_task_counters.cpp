// TaskCounters: counting another process (and the threads it starts later) with inherit, as perf stat -p does.
#include <doctest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "selfperf/error.hpp"
#include "selfperf/task_counters.hpp"

namespace {

void touch_fresh_pages(std::size_t n) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) ::_exit(3);
  auto* bytes = static_cast<volatile char*>(p);
  for (std::size_t i = 0; i < n; ++i) bytes[i * page] = 1;
}

// A child that waits for a byte on `go`, then faults `pages` pages itself and `pages` more in a thread it
// starts then, and exits.
pid_t spawn_worker(int go_read, std::size_t pages) {
  pid_t pid = ::fork();
  if (pid == 0) {
    char c;
    if (::read(go_read, &c, 1) != 1) ::_exit(2);
    touch_fresh_pages(pages);
    std::thread t([pages] { touch_fresh_pages(pages); });
    t.join();
    ::_exit(0);
  }
  return pid;
}

}  // namespace

TEST_CASE("counts a child process and the thread it starts after the attach") {
  int go[2];
  REQUIRE(::pipe(go) == 0);
  pid_t child = spawn_worker(go[0], 3000);
  REQUIRE(child > 0);
  // The child's one thread (under TSan its runtime may add a background thread of its own after the fork).
  auto tids = selfperf::threads_of(child);
  REQUIRE(!tids.empty());
  CHECK(tids.front() == child);
  selfperf::TaskCounters counters({"page-faults:u", "task-clock"}, tids);
  counters.enable();
  REQUIRE(::write(go[1], "x", 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto totals = counters.read_totals();
  REQUIRE(totals.size() == 2);
  INFO("page-faults ", totals[0].raw, ", task-clock ", totals[1].raw, " ns");
  CHECK(totals[0].event == "page-faults:u");
  CHECK(totals[0].raw >= 6000);  // the thread's faults count too: inherit
  // Not double-counted (12000 would be): a plain build faults ~1 per page; a sanitizer's shadow memory adds
  // faults of its own per page (TSan ~2x), so the bound holds in plain builds only.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  CHECK(totals[0].raw < 6000 + 1000);
#endif
  CHECK(totals[0].running_percent() == doctest::Approx(100.0));
  CHECK(totals[0].scaled() == doctest::Approx(static_cast<double>(totals[0].raw)));
  CHECK(totals[1].raw > 0);
  ::close(go[0]);
  ::close(go[1]);
}

TEST_CASE("enable_on_exec counts from the exec on, not the fork before it") {
  int go[2];
  REQUIRE(::pipe(go) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(2);
    touch_fresh_pages(5000);  // before the exec: not counted
    ::execl("/bin/true", "true", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  selfperf::TaskCounters counters({"page-faults:u"}, {child}, {.enable_on_exec = true});
  REQUIRE(::write(go[1], "x", 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto c = counters.read_totals().at(0);
  INFO("page-faults of /bin/true: ", c.raw);
  CHECK(c.counted());
  CHECK(c.raw > 10);     // the loader and libc of /bin/true fault
  CHECK(c.raw < 2000);   // the 5000 faults before the exec are not in it
  ::close(go[0]);
  ::close(go[1]);
}

TEST_CASE("a task that does not exist, and an unknown event, are named") {
  try {
    selfperf::threads_of(999999999);
    FAIL("threads_of of a missing pid succeeded");
  } catch (const selfperf::Error& e) {
    CHECK(std::string(e.what()).find("999999999") != std::string::npos);
    CHECK(e.errno_value() == ESRCH);
  }
  CHECK_THROWS_WITH_AS(selfperf::TaskCounters({"no-such-event"}, {::getpid()}), doctest::Contains("no-such-event"),
                       selfperf::Error);
}
