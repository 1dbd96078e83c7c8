// Programs that are hostile to the sampler's signal, and handlers that cannot keep up: the program runs to its
// end, the per-user signal queue is never flooded, and each problem is reported once.
//
// Nothing here waits for time to pass: workers burn their own CPU time (CLOCK_THREAD_CPUTIME_ID), which is
// what cpu-clock counts, so the number of overflows each one causes is fixed by the test.
#include <doctest.h>

#include <atomic>
#include <barrier>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sampler_workload.hpp"
#include "selfperf/sampler.hpp"

using selfperf_test::CodeRange;

using selfperf::Sampler;
using selfperf::Unwinder;

SELFPERF_TEST_BURN(sig_burn, 0x61)

namespace {

constexpr std::uint64_t kPeriodNs = 100'000;  // cpu-clock: one overflow per 100 µs of the thread's CPU time
// Far more overflows than one batch of credits (16): without the credits, each would queue a signal.
constexpr std::uint64_t kOverflows = 300;
constexpr std::uint64_t kMostPending = 2 * 16;

std::atomic<std::uint64_t> g_sink{0};

// Whether real-time signals can be queued for this user now. When other processes of the user have filled
// the per-user queue (RLIMIT_SIGPENDING), the kernel sends SIGIO instead, which no program blocks or takes
// over here: the cases below would test that fallback, not the program's signal setup.
bool signal_queue_has_room() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return true;
  unsigned long queued = 0, limit = 0;
  char line[256];
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "SigQ: %lu/%lu", &queued, &limit) == 2) break;
  std::fclose(f);
  return limit == 0 || queued + 4 * kOverflows < limit;
}

bool skip_when_queue_full() {
  if (signal_queue_has_room()) return false;
  MESSAGE("skipped: this user's real-time signal queue is full (other processes), so the kernel sends SIGIO");
  return true;
}

std::uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// Burns this thread's CPU for `ns` (handler time included, as cpu-clock counts it).
void burn_cpu(std::uint64_t ns) {
  const std::uint64_t until = thread_cpu_ns() + ns;
  while (thread_cpu_ns() < until) {
    g_sink += sig_burn(2'000);
    selfperf_test::signal_point();
  }
}

Sampler::Options options() {
  Sampler::Options o;
  o.event = "cpu-clock";
  o.period = kPeriodNs;
  o.unwinder = Unwinder::frame_pointer;
  o.buffer_capacity = 4096;
  return o;
}

// stderr into a memory file for the duration: what the sampler says, to count its lines.
class CapturedStderr {
 public:
  CapturedStderr() : file_(memfd_create("stderr", 0)), saved_(dup(2)) {
    REQUIRE(file_ >= 0);
    REQUIRE(saved_ >= 0);
    std::fflush(stderr);
    dup2(file_, 2);
  }
  ~CapturedStderr() {
    restore();
    close(file_);
  }
  std::string text() {
    restore();
    std::string out;
    char buf[4096];
    for (off_t at = 0;;) {
      ssize_t n = pread(file_, buf, sizeof buf, at);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  int file_;
  int saved_;
};

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Counts the sampler's handler runs on threads that set t_counted, then runs the sampler's handler.
[[gnu::tls_model("initial-exec")]] thread_local bool t_counted = false;
std::atomic<std::uint64_t> g_counted_runs{0};
struct sigaction g_sampler_action;

void counting_spy(int signo, siginfo_t* info, void* context) {
  if (t_counted) g_counted_runs.fetch_add(1, std::memory_order_relaxed);
  g_sampler_action.sa_sigaction(signo, info, context);
}

void install_spy(int signo, void (*spy)(int, siginfo_t*, void*)) {
  REQUIRE(sigaction(signo, nullptr, &g_sampler_action) == 0);
  struct sigaction sa = g_sampler_action;
  sa.sa_sigaction = spy;
  REQUIRE(sigaction(signo, &sa, nullptr) == 0);
}

void remove_spy(int signo) { sigaction(signo, &g_sampler_action, nullptr); }

void block(int signo, int how) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  pthread_sigmask(how, &set, nullptr);
}

}  // namespace

TEST_CASE("a thread that blocks the sampling signal holds at most a batch of signals, and is reported once") {
  if (skip_when_queue_full()) return;
  if (selfperf_test::kTsan) {
    // TSan puts its own handler in front of every signal and emulates the program's masks and handlers on
    // top of it: what the kernel queues is not what the program sees.
    MESSAGE("skipped under TSan: it interposes signal masks and handlers");
    return;
  }
  CapturedStderr captured;
  Sampler sampler(options());
  sampler.start();
  const int signo = sampler.signal_number();
  install_spy(signo, counting_spy);
  g_counted_runs = 0;

  std::atomic<int> phase{0};
  std::uint64_t delivered_at_unblock = 0;
  std::uint64_t after_unblock = 0;
  std::thread worker(sampler.attached([&] {
    t_counted = true;
    block(signo, SIG_BLOCK);
    burn_cpu(kOverflows * kPeriodNs);
    phase = 1;
    phase.notify_all();
    phase.wait(1);  // main looks at it now: drain() twice
    const std::uint64_t before = g_counted_runs.load();
    block(signo, SIG_UNBLOCK);  // every pending instance runs before this returns
    selfperf_test::signal_point();
    delivered_at_unblock = g_counted_runs.load() - before;
    burn_cpu(kOverflows * kPeriodNs);  // sampled again: the last pending signal granted new credits
    after_unblock = g_counted_runs.load() - before - delivered_at_unblock;
    t_counted = false;
  }));
  phase.wait(0);
  sampler.drain([](const selfperf::Sample&) {});
  sampler.drain([](const selfperf::Sample&) {});
  phase = 2;
  phase.notify_all();
  worker.join();
  const Sampler::Totals totals = sampler.stop();
  remove_spy(signo);
  const std::string text = captured.text();

  INFO("signals delivered at unblock " << delivered_at_unblock << ", handler runs after " << after_unblock
                                       << ", samples " << totals.samples << "; stderr: " << text);
  CHECK(delivered_at_unblock <= kMostPending);  // ~kOverflows without the credits
  CHECK(after_unblock > 0);
  CHECK(totals.threads_not_signalled == 1);
  CHECK(count(text, "blocks signal " + std::to_string(signo)) == 1);
}

namespace {

std::atomic<std::uint64_t> g_program_handler_runs{0};
void program_handler(int) { g_program_handler_runs.fetch_add(1, std::memory_order_relaxed); }

// The program sets `action` on the sampler's signal while a worker burns; returns what stderr said.
std::string program_takes_the_signal(void (*action)(int), Sampler::Totals& totals, std::uint64_t& runs_after) {
  CapturedStderr captured;
  Sampler sampler(options());
  sampler.start();
  const int signo = sampler.signal_number();
  struct sigaction ours;
  REQUIRE(sigaction(signo, nullptr, &ours) == 0);
  struct sigaction theirs {};
  theirs.sa_handler = action;
  sigemptyset(&theirs.sa_mask);
  REQUIRE(sigaction(signo, &theirs, nullptr) == 0);
  g_program_handler_runs = 0;

  std::atomic<int> phase{0};
  std::thread worker(sampler.attached([&] {
    burn_cpu(kOverflows * kPeriodNs);
    phase = 1;
    phase.notify_all();
    phase.wait(1);
    burn_cpu(kOverflows * kPeriodNs);  // after the sampler noticed: nothing more reaches the program
  }));
  phase.wait(0);
  sampler.drain([](const selfperf::Sample&) {});
  sampler.drain([](const selfperf::Sample&) {});
  const std::uint64_t runs_at_notice = g_program_handler_runs.load();
  phase = 2;
  phase.notify_all();
  worker.join();
  totals = sampler.stop();
  runs_after = g_program_handler_runs.load() - runs_at_notice;
  // The sampler's handler back for the test cases after this one (the process keeps one per signal).
  sigaction(signo, &ours, nullptr);
  return captured.text();
}

}  // namespace

TEST_CASE("a program that ignores the sampling signal: reported once, no signal queued for it") {
  if (skip_when_queue_full()) return;
  Sampler::Totals totals;
  std::uint64_t runs_after = 0;
  const std::string text = program_takes_the_signal(SIG_IGN, totals, runs_after);
  INFO("stderr: " << text);
  CHECK(totals.threads_not_signalled == 1);
  CHECK(count(text, "ignored signal") == 1);
}

TEST_CASE("a program that installs its own handler on the sampling signal gets at most a batch of ours") {
  if (skip_when_queue_full()) return;
  if (selfperf_test::kTsan) {
    // TSan puts its own handler in front of every signal and emulates the program's masks and handlers on
    // top of it: what the kernel queues is not what the program sees.
    MESSAGE("skipped under TSan: it interposes signal masks and handlers");
    return;
  }
  Sampler::Totals totals;
  std::uint64_t runs_after = 0;
  const std::string text = program_takes_the_signal(program_handler, totals, runs_after);
  INFO("program handler runs " << g_program_handler_runs.load() << ", after the sampler noticed " << runs_after
                               << "; stderr: " << text);
  CHECK(g_program_handler_runs.load() <= kMostPending);  // ~kOverflows without the credits
  CHECK(runs_after == 0);
  CHECK(totals.threads_not_signalled == 1);
  CHECK(count(text, "installed its own handler") == 1);
}

namespace {

// A handler that costs three sampling periods of CPU: without degrading, the thread never leaves it.
void slow_spy(int signo, siginfo_t* info, void* context) {
  const std::uint64_t until = thread_cpu_ns() + 3 * kPeriodNs;
  while (thread_cpu_ns() < until) {
  }
  g_sampler_action.sa_sigaction(signo, info, context);
}

}  // namespace

TEST_CASE("a handler slower than the sampling period lowers the rate; the thread finishes its work") {
  if (skip_when_queue_full()) return;  // the slow handler wraps the real-time signal, not SIGIO
  CapturedStderr captured;
  Sampler sampler(options());
  sampler.start();
  const int signo = sampler.signal_number();
  install_spy(signo, slow_spy);
  std::thread worker(sampler.attached([] {
    // Fixed work (not CPU time, which the handler's share would inflate): it ends only if the thread gets
    // to run between samples.
    for (int i = 0; i < 200; ++i) {
      g_sink += sig_burn(20'000);
      selfperf_test::signal_point();
    }
  }));
  worker.join();
  const Sampler::Totals totals = sampler.stop();
  remove_spy(signo);
  const std::string text = captured.text();
  REQUIRE(totals.threads.size() == 1);
  INFO("rate lowered " << totals.rate_lowered << " times, to a period of " << totals.threads[0].rate
                       << " ns; samples " << totals.samples << ", signals " << totals.signals << "; stderr: "
                       << text);
  if (!selfperf_test::kTsan) {  // TSan runs handlers at its own points, one per pending signal number
    CHECK(totals.rate_lowered > 0);
    CHECK(totals.threads[0].rate > kPeriodNs);
    CHECK(count(text, "could not keep up") == 1);
  }
  CHECK(totals.samples > 0);
}

TEST_CASE("with a low descriptor limit and many threads, the threads past it run unsampled; reported once") {
  CapturedStderr captured;  // its descriptors are taken before the limit is lowered
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  constexpr int kThreads = 80;
  std::uint64_t failed = 0;
  std::uint64_t program_open_failures = 0;
  std::uint64_t samples = 0;
  for (int round = 0; round < 3; ++round) {
    Sampler::Options o = options();
    o.attach_new_threads = true;
    Sampler sampler(o);
    sampler.start();
    rlimit low{64, saved.rlim_max};
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    std::barrier all_started(kThreads + 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        all_started.arrive_and_wait();  // every thread alive, each holding its event (if it got one)
        burn_cpu(10 * kPeriodNs);
        all_started.arrive_and_wait();
      });
    all_started.arrive_and_wait();
    // The program's own descriptors: the sampler left it a reserve.
    int fds[8];
    for (int& fd : fds) {
      fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) ++program_open_failures;
    }
    for (int fd : fds)
      if (fd >= 0) close(fd);
    all_started.arrive_and_wait();
    for (auto& t : threads) t.join();
    setrlimit(RLIMIT_NOFILE, &saved);
    const Sampler::Totals totals = sampler.stop();
    failed += totals.attach_failed;
    samples += totals.samples;
  }
  const std::string text = captured.text();
  INFO("attach failures " << failed << ", program open failures " << program_open_failures << ", samples "
                          << samples << "; stderr: " << text);
  CHECK(failed > 0);
  CHECK(program_open_failures == 0);
  CHECK(samples > 0);  // the threads that got an event were sampled
  CHECK(count(text, "not sampled") == 1);
}
