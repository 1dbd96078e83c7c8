// Whole-program profile options from the environment, and a Profiler run in-process that writes all three
// files, and fork() waiting for its drain thread. (LD_PRELOAD, fork and exec are checked by
// check_profile_preload.sh.)
#include <doctest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "events/perf_syscall.hpp"
#include "sampling/fork_guard.hpp"
#include "perf_data_test_util.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/profile.hpp"

using namespace selfperf;

namespace {

struct EnvGuard {
  explicit EnvGuard(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      names.push_back(k);
      if (v) ::setenv(k, v, 1);
      else ::unsetenv(k);
    }
  }
  ~EnvGuard() {
    for (auto* k : names) ::unsetenv(k);
  }
  std::vector<const char*> names;
};

volatile std::uint64_t sink;

[[gnu::noinline]] void profiled_spin() {
  timespec start{}, now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  std::uint64_t x = sink;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ULL + 1;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 200);
  sink = x;
}

double seconds(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; }

// CPU spent in the kernel: reads from /dev/zero (each 1 MiB is cleared there) until this thread has 400 ms
// of system time, then 200 ms in user space. Returns the thread's user and system seconds.
[[gnu::noinline]] std::pair<double, double> spin_in_kernel() {
  static char buffer[1 << 20];
  const int fd = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  rusage start{}, now{};
  ::getrusage(RUSAGE_THREAD, &start);
  do {
    for (int i = 0; i < 20; ++i) REQUIRE(::read(fd, buffer, sizeof buffer) > 0);  // a sample may cut it short
    ::getrusage(RUSAGE_THREAD, &now);
  } while (seconds(now.ru_stime) - seconds(start.ru_stime) < 0.4);
  ::close(fd);
  profiled_spin();
  ::getrusage(RUSAGE_THREAD, &now);
  return {seconds(now.ru_utime) - seconds(start.ru_utime), seconds(now.ru_stime) - seconds(start.ru_stime)};
}

}  // namespace

TEST_CASE("profile options come from SELFPERF_* variables") {
  {
    EnvGuard env({{"SELFPERF_PROFILE", "/tmp/x.data"}, {"SELFPERF_EVENT", "task-clock"},
                  {"SELFPERF_FREQUENCY", "250"}, {"SELFPERF_UNWINDER", "libunwind"}});
    auto o = profile_options_from_env();
    CHECK(o.output == "/tmp/x.data");
    CHECK(o.event == "task-clock");
    CHECK(o.frequency == 250);
    CHECK(o.unwinder == Unwinder::libunwind);
  }
  {
    EnvGuard env({{"SELFPERF_PROFILE", nullptr}, {"SELFPERF_FREQUENCY", nullptr}, {"SELFPERF_UNWINDER", "kernel"}});
    auto o = profile_options_from_env();
    CHECK(o.output.empty());
    CHECK(o.frequency == 999);
    CHECK(o.unwinder == Unwinder::kernel);
  }
  {
    EnvGuard env({{"SELFPERF_FREQUENCY", "fast"}});
    CHECK_THROWS_WITH_AS(profile_options_from_env(), doctest::Contains("SELFPERF_FREQUENCY=fast"), Error);
  }
  {
    EnvGuard env({{"SELFPERF_FREQUENCY", "0"}});
    CHECK_THROWS_AS(profile_options_from_env(), Error);
  }
  {
    EnvGuard env({{"SELFPERF_UNWINDER", "magic"}});
    CHECK_THROWS_WITH_AS(profile_options_from_env(), doctest::Contains("frame_pointer"), Error);
  }
  CHECK_THROWS_AS(Profiler(ProfileOptions{}), Error);  // no output path
  {
    EnvGuard env({{"SELFPERF_RENDER", "0"}});
    CHECK_FALSE(profile_options_from_env().render);
  }
  {
    EnvGuard env({{"SELFPERF_RENDER", nullptr}});
    CHECK(profile_options_from_env().render);
  }
  // perf's "-" means standard output, which is the program's here (and every child's): refused, not a file
  // named "-", and the way that works named.
  ProfileOptions to_stdout;
  to_stdout.output = "-";
  CHECK_THROWS_WITH_AS(Profiler{to_stdout}, doctest::Contains("selfperf record -o -"), Error);
}

TEST_CASE("a Profiler writes perf.data, folded stacks and an SVG of what ran") {
  test::TempDir dir;
  ProfileOptions options;
  options.output = dir / "p.data";
  options.event = "cpu-clock";
  options.frequency = 500;
  {
    Profiler profiler(options);
    profiler.start();
    profiled_spin();
    profiler.stop();
    profiler.stop();  // idempotent
    CHECK(profiler.samples_written() > 20);  // 200 ms of CPU at 500 Hz is ~100
  }
  PerfDataReader r(options.output);
  REQUIRE(r.events().size() == 1);
  CHECK(r.events()[0].name.find("cpu-clock") != std::string::npos);
  std::size_t samples = 0;
  PerfRecord rec;
  while (r.next_record(rec)) samples += rec.type == PERF_RECORD_SAMPLE;
  CHECK(samples > 20);
  std::ifstream folded(dir / "p.data.folded");
  std::stringstream text;
  text << folded.rdbuf();
  CHECK(text.str().find("profiled_spin") != std::string::npos);
  std::ifstream svg(dir / "p.data.svg");
  std::stringstream svg_text;
  svg_text << svg.rdbuf();
  CHECK(svg_text.str().find("profiled_spin") != std::string::npos);
  CHECK(svg_text.str().find("</svg>") != std::string::npos);
}

// perf report, perf script and selfperf record's merge take the file's event for what was sampled: it must
// say whether kernel time was. cpu-clock as root counts it (the samples are the system calls' user stacks); it
// used to be written as cpu-clock:u whatever was opened, so profiles of root and nobody differed unsaid.
TEST_CASE("a profile's event says whether kernel time was sampled, as the samples show") {
  for (const char* name : {"cpu-clock", "cpu-clock:u"}) {
    const std::string event = name;
    CAPTURE(event);
    test::TempDir dir;
    ProfileOptions options;
    options.output = dir / "k.data";
    options.event = event;
    options.frequency = 500;
    options.render = false;
    std::pair<double, double> cpu;
    std::uint64_t samples = 0;
    {
      Profiler profiler(options);
      profiler.start();
      cpu = spin_in_kernel();
      profiler.stop();
      samples = profiler.samples_written();
    }
    PerfDataReader r(options.output);
    REQUIRE(r.events().size() == 1);
    const bool kernel = r.events()[0].attr.exclude_kernel == 0;
    CHECK(kernel == (event == "cpu-clock" && detail::kernel_counting_allowed()));
    // 500 Hz of the CPU time the event counts, with room for the rate's ramp-up and the tick's granularity.
    const double user = cpu.first * 500, system = cpu.second * 500;
    INFO("samples " << samples << ", user time " << user << " and system time " << system
                    << " samples' worth");
    if (kernel) CHECK(static_cast<double>(samples) > 0.5 * (user + system));
    else CHECK(static_cast<double>(samples) < user + 0.5 * system);
  }
}

namespace {
// The state letter of thread tid in /proc (R running, S sleeping, ...).
char thread_state(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}
}  // namespace

TEST_CASE("fork() waits until a profiler's drain thread is between passes") {
  // The drain thread's lock, held here as if mid-pass. The forking thread must block in fork() until it is
  // released: once that thread is seen asleep, fork() must not have returned yet.
  // Static, not on the stack: a later test's lock at the same address would be the same lock to TSan, whose
  // lock-order graph then sees an inversion between two tests' locks.
  static std::mutex work;
  detail::fork_waits_for(work, detail::ForkLockRank::profiler);
  work.lock();
  std::atomic<pid_t> forker_tid{0};
  std::atomic<bool> fork_returned{false};
  std::thread forker([&] {
    forker_tid = static_cast<pid_t>(::gettid());
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    fork_returned = true;
    int status = 0;
    ::waitpid(child, &status, 0);
  });
  while (forker_tid == 0 || thread_state(forker_tid) != 'S') std::this_thread::yield();
  CHECK_FALSE(fork_returned.load());
  work.unlock();
  forker.join();
  CHECK(fork_returned.load());
  detail::fork_no_longer_waits_for(work);
}

TEST_CASE("fork() takes the library's locks outermost first, whatever order they were registered in") {
  // A profiler's drain pass holds its lock and then takes its sampler's; here the outer lock is registered
  // first, the inner one after. Were the inner one taken first at fork (the order of registration reversed,
  // as it once was), fork() would hold it while waiting for the outer one, and the drain pass, wanting the
  // inner one next, would never give the outer one back.
  static std::mutex outer;  // static: see the test above
  static std::mutex inner;
  detail::fork_waits_for(outer, detail::ForkLockRank::profiler);
  detail::fork_waits_for(inner, detail::ForkLockRank::leaf);
  outer.lock();
  std::atomic<pid_t> forker_tid{0};
  std::thread forker([&] {
    forker_tid = static_cast<pid_t>(::gettid());
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
  });
  while (forker_tid == 0 || thread_state(forker_tid) != 'S') std::this_thread::yield();
  const bool inner_free = inner.try_lock();  // the drain pass's next step
  CHECK(inner_free);
  if (inner_free) inner.unlock();
  outer.unlock();
  forker.join();
  detail::fork_no_longer_waits_for(inner);
  detail::fork_no_longer_waits_for(outer);
}
