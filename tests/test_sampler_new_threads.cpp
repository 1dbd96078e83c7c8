// Options::attach_new_threads with selfperf::thread_hook linked in (this binary links it; test_sampler does
// not, and checks the error): threads created after start() are attached before their function runs,
// whether they come from std::thread or pthread_create; threads from before start() or after stop() are not.
#include <doctest.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "sampling/new_threads.hpp"
#include "selfperf/sampler.hpp"
#include "test_support.hpp"

using selfperf::Sampler;

namespace {

// This process's perf event descriptors; an attached thread owns one.
int perf_fds() {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec).string().find("perf_event") != std::string::npos) ++n;
  }
  return n;
}

struct Seen {
  pid_t tid = 0;
  int perf_fds = 0;  // counted by the thread itself, first thing in its function
};

Seen run_and_burn() {
  Seen seen{gettid(), perf_fds()};
  selfperf::test::burn_cpu(60'000'000);  // 60 ms of this thread's CPU time at 1 kHz: ~60 samples
  return seen;
}

void* pthread_body(void* out) {
  *static_cast<Seen*>(out) = run_and_burn();
  return nullptr;
}

Sampler::Options options() {
  Sampler::Options o;
  o.event = "cpu-clock";
  o.frequency = 1000;
  o.attach_new_threads = true;
  return o;
}

}  // namespace

TEST_CASE("attach_new_threads attaches std::thread and pthread_create threads started after start(), and only those") {
  const int baseline = perf_fds();
  Sampler sampler(options());

  // Running before start(): not attached, though it keeps running while the sampler samples.
  std::atomic<bool> early_running{false}, sampler_started{false}, early_counted{false};
  Seen early;
  std::thread before([&] {
    early_running = true;
    while (!sampler_started) std::this_thread::yield();
    early = Seen{gettid(), perf_fds()};
    early_counted = true;  // counted before any attached thread exists: perf fds are process-wide
    run_and_burn();
  });
  while (!early_running) std::this_thread::yield();

  sampler.start();
  sampler_started = true;
  while (!early_counted) std::this_thread::yield();
  Seen from_std;
  std::thread([&] { from_std = run_and_burn(); }).join();
  Seen from_pthread;
  pthread_t raw;
  REQUIRE(pthread_create(&raw, nullptr, pthread_body, &from_pthread) == 0);
  pthread_join(raw, nullptr);
  before.join();

  // Each new thread saw its own event open before its function ran; the early thread saw none of its own.
  CHECK(from_std.perf_fds == baseline + 1);
  CHECK(from_pthread.perf_fds == baseline + 1);
  CHECK(early.perf_fds == baseline);
  CHECK(perf_fds() == baseline);  // exited threads closed their events

  std::map<pid_t, int> samples;
  sampler.drain([&](const selfperf::Sample& s) { ++samples[s.tid]; });
  Sampler::Totals totals = sampler.stop();
  CHECK(totals.attach_failed == 0);
  CHECK(samples[from_std.tid] > 0);
  CHECK(samples[from_pthread.tid] > 0);
  CHECK(samples.count(early.tid) == 0);
  INFO("std::thread " << samples[from_std.tid] << " samples, pthread " << samples[from_pthread.tid]);

  // After stop(): new threads are left alone.
  Seen after;
  std::thread([&] { after = Seen{gettid(), perf_fds()}; }).join();
  CHECK(after.perf_fds == baseline);
}

TEST_CASE("threads created inside an UnattachedThreadCreation (the profiler's drain thread) are not attached; "
          "the creator's later threads, and other threads' meanwhile, are") {
  const int baseline = perf_fds();
  Sampler sampler(options());
  sampler.start();
  Seen unattached, attached, other;
  {
    selfperf::detail::UnattachedThreadCreation scope;
    std::thread([&] { unattached = run_and_burn(); }).join();
    // Another thread creating one meanwhile is not affected: the scope is its creator's alone.
    std::thread([&] { std::thread([&] { other = run_and_burn(); }).join(); }).join();
  }
  std::thread([&] { attached = run_and_burn(); }).join();
  const Sampler::Totals totals = sampler.stop();
  std::map<pid_t, std::uint64_t> samples;
  for (const auto& t : totals.threads) samples[t.tid] += t.samples;
  CHECK(unattached.perf_fds == baseline);
  CHECK(samples.count(unattached.tid) == 0);
  CHECK(attached.perf_fds == baseline + 1);
  CHECK(samples[attached.tid] > 0);
  CHECK(other.perf_fds == baseline + 1);
  CHECK(samples[other.tid] > 0);
}

TEST_CASE("two samplers that both ask for new threads each get them; one without the option does not") {
  const int baseline = perf_fds();
  Sampler a(options());
  Sampler b(options());
  Sampler::Options plain = options();
  plain.attach_new_threads = false;
  Sampler c(plain);
  a.start();
  b.start();
  c.start();
  Seen seen;
  std::thread([&] { seen = Seen{gettid(), perf_fds()}; }).join();
  CHECK(seen.perf_fds == baseline + 2);
  b.stop();
  std::thread([&] { seen = Seen{gettid(), perf_fds()}; }).join();
  CHECK(seen.perf_fds == baseline + 1);
  a.stop();
  c.stop();
}

TEST_CASE("README: every new thread, with the hook and the option") {
  selfperf::Sampler::Options options;
  options.frequency = 1000;
  options.attach_new_threads = true;
  selfperf::Sampler sampler(options);
  sampler.start();  // from here on, std::thread / pthread_create threads are attached before they run
  Seen seen;
  std::thread([&] { seen = run_and_burn(); }).join();
  std::size_t from_thread = 0;
  sampler.drain([&](const selfperf::Sample& s) { from_thread += s.tid == seen.tid; });
  CHECK(sampler.stop().threads.size() == 1);
  CHECK(from_thread > 0);
}

TEST_CASE("near the descriptor limit, threads past the reserve run unsampled and the program keeps its own; said once") {
  selfperf::test::CapturedStderr captured;  // its descriptors are taken before the limit is lowered
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  constexpr int kThreads = 80;
  std::uint64_t failed = 0, program_open_failures = 0, samples = 0;
  for (int round = 0; round < 3; ++round) {
    Sampler sampler(options());
    sampler.start();
    const rlimit low{64, saved.rlim_max};
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
    std::barrier all(kThreads + 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&] {
        all.arrive_and_wait();  // every thread alive, each holding its event if it got one
        selfperf::test::burn_cpu(10'000'000);
        all.arrive_and_wait();
      });
    all.arrive_and_wait();
    // The program's own descriptors: the sampler left it a reserve.
    int fds[8];
    for (int& fd : fds) {
      fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) ++program_open_failures;
    }
    for (int fd : fds)
      if (fd >= 0) close(fd);
    all.arrive_and_wait();
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
  CHECK(selfperf::test::count(text, "not sampled") == 1);
  CHECK(selfperf::test::count(text, "RLIMIT_NOFILE") == 1);
}
