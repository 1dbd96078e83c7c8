// Sampling must not overwhelm the thread it samples. A rate the machine cannot afford: when taking a thread's
// samples costs it more than half its time, its rate halves (SamplingGovernor), the program finishes, and the
// sampler says so once; a rate the machine affords is left alone. A thread that blocks the signal: it holds
// at most two batches of credits' worth of queued signals, not one per overflow, and is sampled again once it
// unblocks.
//
// The cost is made by the test, not hoped for: a spy wrapped around the sampler's handler burns the thread's
// CPU time (which cpu-clock counts) on every signal, longer than the period. Without the governor the thread
// then spends all its time in handlers and never finishes; the spy gives up after a budget of CPU time so
// that the test fails instead of hanging.
#include <doctest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <csignal>
#include <ctime>
#include <string>
#include <thread>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sampler_workload.hpp"
#include "selfperf/sampler.hpp"
#include "test_support.hpp"

using selfperf::test::CapturedStderr;
using selfperf::test::count;
using selfperf::test::thread_cpu_ns;
using selfperf_test::CodeRange;
using selfperf::Sampler;
using selfperf::Unwinder;

SELFPERF_TEST_BURN(governed_burn, 0x67)

namespace {


struct sigaction g_inner_sample;
struct sigaction g_inner_sigio;
std::atomic<std::uint64_t> g_spy_burn_ns{0};
std::atomic<std::uint64_t> g_budget_ns{0};  // CPU time the spy may burn in all before it gives up
std::atomic<std::uint64_t> g_burned_ns{0};
std::atomic<bool> g_gave_up{false};
std::atomic<std::uint64_t> g_deliveries{0};  // signals the spy saw, all threads

void spy(int signo, siginfo_t* info, void* context) {
  g_deliveries.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t burn = g_spy_burn_ns.load(std::memory_order_relaxed);
  if (burn != 0 && !g_gave_up.load(std::memory_order_relaxed)) {
    const std::uint64_t now = thread_cpu_ns();
    if (g_burned_ns.fetch_add(burn, std::memory_order_relaxed) > g_budget_ns.load(std::memory_order_relaxed)) {
      // Stop this thread's events too: at this rate, even signals with an empty handler may cost the
      // machine more than the period (a VM), and the test must end to say so.
      g_gave_up.store(true, std::memory_order_relaxed);
      prctl(PR_TASK_PERF_EVENTS_DISABLE, 0, 0, 0, 0);
    } else {
      while (thread_cpu_ns() < now + burn) {
      }
    }
  }
  const struct sigaction& inner = signo == SIGIO ? g_inner_sigio : g_inner_sample;
  inner.sa_sigaction(signo, info, context);
}

void wrap(int signo, struct sigaction& saved) {
  REQUIRE(sigaction(signo, nullptr, &saved) == 0);
  REQUIRE((saved.sa_flags & SA_SIGINFO) != 0);
  struct sigaction sa = saved;
  sa.sa_sigaction = spy;
  REQUIRE(sigaction(signo, &sa, nullptr) == 0);
}

std::atomic<std::uint64_t> g_sink{0};

// CPU time of `units` bursts, unsampled: the work the sampled thread then does.
std::uint64_t cpu_ns_of(std::uint64_t units) {
  const std::uint64_t begin = thread_cpu_ns();
  for (std::uint64_t i = 0; i < units; ++i) g_sink += governed_burn(2'000);
  return thread_cpu_ns() - begin;
}

struct Run {
  Sampler::Totals totals;
  std::string said;
  std::uint64_t work_ns = 0;  // the work's CPU time unsampled
  std::uint64_t took_ns = 0;  // its CPU time sampled, handlers included
};

// About `work_ns` of CPU work on a thread sampled as `options` say, each signal costing the thread `burn_ns`
// more in the spy; the spy gives up once it has burnt 40 times the work's own CPU time.
Run run(Sampler::Options options, std::uint64_t work_ns, std::uint64_t burn_ns) {
  Run r;
  const std::uint64_t per_unit = std::max<std::uint64_t>(1, cpu_ns_of(1'000) / 1'000);
  const std::uint64_t units = work_ns / per_unit + 1;
  r.work_ns = cpu_ns_of(units);
  CapturedStderr captured;
  Sampler sampler(options);
  sampler.start();
  wrap(sampler.signal_number(), g_inner_sample);
  wrap(SIGIO, g_inner_sigio);
  g_budget_ns = 40 * r.work_ns;
  g_burned_ns = 0;
  g_gave_up = false;
  g_spy_burn_ns = burn_ns;
  std::thread worker(sampler.attached([&] {
    const std::uint64_t begin = thread_cpu_ns();
    for (std::uint64_t i = 0; i < units; ++i) {
      g_sink += governed_burn(2'000);
      selfperf_test::signal_point();
    }
    r.took_ns = thread_cpu_ns() - begin;
  }));
  worker.join();
  g_spy_burn_ns = 0;
  sampler.drain([](const selfperf::Sample&) {});
  r.totals = sampler.stop();
  sigaction(SIGIO, &g_inner_sigio, nullptr);
  sigaction(sampler.signal_number(), &g_inner_sample, nullptr);
  r.said = captured.text();
  return r;
}

Sampler::Options cpu_clock(std::uint64_t period_ns) {
  Sampler::Options o;
  o.event = "cpu-clock";
  o.period = period_ns;
  o.unwinder = Unwinder::frame_pointer;
  o.buffer_capacity = 4096;
  return o;
}

}  // namespace

TEST_CASE("a handler that costs more than the period: the rate halves until the thread gets its time back") {
  // 100 µs period, 300 µs per signal: unchecked, each signal brings three more.
  const std::uint64_t period = 100'000;
  const Run r = run(cpu_clock(period), 20'000'000, 300'000);
  INFO("work " << r.work_ns / 1000 << " µs unsampled, " << r.took_ns / 1000 << " µs sampled; rate lowered "
               << r.totals.rate_lowered << " times; said: " << r.said);
  CHECK_FALSE(g_gave_up.load());  // finished within 40 times its own CPU time
  CHECK(r.totals.samples > 0);
  REQUIRE(r.totals.threads.size() == 1);
  CHECK(r.totals.rate_lowered >= 2);  // 300 µs a signal needs a period of at least 600 µs to leave half
  CHECK(r.totals.threads[0].rate == period << r.totals.rate_lowered);
  CHECK(count(r.said, "rate was lowered to a period of") == 1);
  CHECK(count(r.said, "cpu-clock") == 1);
}

TEST_CASE("frequency mode on cpu-clock: the frequency halves (the kernel made it a period in ns)") {
  Sampler::Options o = cpu_clock(0);
  o.frequency = 10'000;  // 100 µs
  const Run r = run(o, 20'000'000, 300'000);
  INFO("rate lowered " << r.totals.rate_lowered << " times; said: " << r.said);
  CHECK_FALSE(g_gave_up.load());
  REQUIRE(r.totals.threads.size() == 1);
  CHECK(r.totals.rate_lowered >= 2);
  CHECK(r.totals.threads[0].rate == 10'000 >> r.totals.rate_lowered);
  CHECK(count(r.said, "Hz") >= 2);  // asked and lowered, in Hz
}

TEST_CASE("a rate the machine affords is left alone") {
  // 1 ms period and a plain handler: even a VM's tens of µs per overflow are a few percent. 400 ms of work:
  // six windows of the governor's, each of which could have lowered the rate.
  const std::uint64_t period = 1'000'000;
  const Run r = run(cpu_clock(period), 400'000'000, 0);
  INFO("work " << r.work_ns / 1000 << " µs; samples " << r.totals.samples << "; said: " << r.said);
  CHECK(r.totals.samples > 0);
  REQUIRE(r.totals.threads.size() == 1);
  CHECK(r.totals.rate_lowered == 0);
  CHECK(r.totals.threads[0].rate == period);
  CHECK(count(r.said, "rate was lowered") == 0);
}

// Runs `fn` on a thread sampled by cpu-clock every `period` ns (the sampler's own handler, no spy); `fn` gets
// the sampling signal number. The thread then stays alive, as `fn` left it, while the caller drains as a
// profiler's drain thread would, every 20 ms for 1.5 s: long enough for the sampler to call a thread whose
// samples are never taken "not signalled" (it waits a second). What the sampler said goes to `said`.
template <typename Fn>
Sampler::Totals sampled_thread(std::uint64_t period, Fn fn, std::string* said = nullptr) {
  CapturedStderr captured;
  Sampler sampler(cpu_clock(period));
  sampler.start();
  const int signo = sampler.signal_number();
  struct sigaction ours {};
  REQUIRE(sigaction(signo, nullptr, &ours) == 0);
  // A condition variable, not std::atomic::wait: pthread_cond_wait is where TSan delivers the signals it
  // deferred, while a raw futex call would leave the last sample's handler pending for good.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, release = false;
  std::thread worker(sampler.attached([&] {
    fn(signo);
    std::unique_lock lock(mu);
    done = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  }));
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
  }
  const std::uint64_t until = selfperf::test::monotonic_ns() + 1'500'000'000;
  while (selfperf::test::monotonic_ns() < until) {
    sampler.drain([](const selfperf::Sample&) {});
    selfperf::test::sleep_ms(20);
  }
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  worker.join();
  sampler.drain([](const selfperf::Sample&) {});
  const Sampler::Totals totals = sampler.stop();
  sigaction(signo, &ours, nullptr);  // a test may have replaced it
  if (said) *said = captured.text();
  return totals;
}

sigset_t sampling_signals(int signo) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  sigaddset(&set, SIGIO);
  return set;
}

void burn_periods(std::uint64_t periods, std::uint64_t period) {
  const std::uint64_t begin = thread_cpu_ns();
  while (thread_cpu_ns() < begin + periods * period) {
    g_sink += governed_burn(2'000);
    selfperf_test::signal_point();
  }
}

TEST_CASE("a thread that takes the signal with sigwaitinfo finds two batches of credits, not one per overflow") {
  const std::uint64_t period = 100'000;
  std::uint64_t queued = 0;
  std::string said;
  const Sampler::Totals totals = sampled_thread(
      period,
      [&](int signo) {
        const sigset_t set = sampling_signals(signo);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        burn_periods(300, period);  // without credits, 300 signals queued for this thread
        const timespec now{0, 0};
        while (sigtimedwait(&set, nullptr, &now) > 0) ++queued;
        pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // nothing pending any more: the samples wait in the ring
      },
      &said);
  INFO("signals queued over 300 periods blocked: " << queued << "; said: " << said);
  CHECK(queued >= 1);
  CHECK(queued <= 32);  // two batches of at most 16
  CHECK(totals.threads_not_signalled == 1);
  CHECK(count(said, "never took") == 1);
}

TEST_CASE("a thread that keeps the signal blocked is reported once, by name") {
  const std::uint64_t period = 100'000;
  std::string said;
  pid_t tid = 0;
  const Sampler::Totals totals = sampled_thread(
      period,
      [&](int signo) {
        tid = gettid();
        const sigset_t set = sampling_signals(signo);
        pthread_sigmask(SIG_BLOCK, &set, nullptr);
        burn_periods(100, period);
      },
      &said);
  INFO("said: " << said);
  CHECK(totals.threads_not_signalled == 1);
  CHECK(count(said, "thread " + std::to_string(tid) + " blocks signal") == 1);
}

TEST_CASE("a program that installs its own handler on the signal gets at most two batches of ours; said once") {
  const std::uint64_t period = 100'000;
  static std::atomic<std::uint64_t> theirs{0};
  std::string said;
  const Sampler::Totals totals = sampled_thread(
      period,
      [&](int signo) {
        burn_periods(50, period);  // sampled as usual
        struct sigaction own {};
        own.sa_handler = [](int) { theirs.fetch_add(1, std::memory_order_relaxed); };
        sigemptyset(&own.sa_mask);
        REQUIRE(sigaction(signo, &own, nullptr) == 0);
        burn_periods(300, period);
      },
      &said);
  INFO("the program's handler ran " << theirs.load() << " times; said: " << said);
  CHECK(theirs.load() <= 32);
  CHECK(totals.threads_not_signalled == 1);
  CHECK(count(said, "installed its own handler") == 1);
}

TEST_CASE("a thread that blocks the signal for a while is sampled again once it unblocks") {
  const std::uint64_t period = 100'000;
  const Sampler::Totals totals = sampled_thread(period, [&](int signo) {
    const sigset_t set = sampling_signals(signo);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    burn_periods(300, period);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);  // what was queued is delivered here, re-arming the event
    burn_periods(100, period);
  });
  INFO("samples " << totals.samples << ", coalesced " << totals.lost_coalesced);
  // The blocked stretch leaves at most 32 overflows (one sample and the rest coalesced, as they are behind one
  // delivery); about 100 more after unblocking mean the event was re-armed.
  CHECK(totals.samples >= 40);
  CHECK(totals.threads_not_signalled == 0);
}
