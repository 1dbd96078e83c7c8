// Threads that attach, run and exit while sampling at a high rate: no crash, no leaked event fds, and every
// overflow either delivered or counted lost.
#include <doctest.h>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "sampler_workload.hpp"
#include "selfperf/sampler.hpp"

using selfperf::Sampler;
using selfperf::Unwinder;
using namespace selfperf_test;

SELFPERF_TEST_BURN(churn_burn, 0x51)

namespace {

std::atomic<std::uint64_t> g_sink{0};

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

struct ChurnResult {
  Sampler::Totals totals;
  std::uint64_t drained = 0;
  int threads = 0;
};

// Batches of four short-lived threads for `rounds` rounds; a drainer runs beside them. Every fourth thread
// detaches explicitly, one in four through ThreadAttachment, the rest leave it to thread exit.
ChurnResult churn(Sampler::Options options, int rounds) {
  Sampler sampler(options);
  sampler.start();
  ChurnResult result;
  std::atomic<bool> done{false};
  std::thread drainer([&] {
    while (!done.load()) {
      result.drained += sampler.drain([](const selfperf::Sample&) {});
      std::this_thread::yield();
    }
  });
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::thread> batch;
    for (int i = 0; i < 4; ++i) {
      batch.emplace_back([&sampler, i] {
        if (i == 0) {
          Sampler::ThreadAttachment attach(sampler);
          g_sink += churn_burn(2'000'000);
        } else {
          sampler.attach_this_thread();
          g_sink += churn_burn(2'000'000);
          if (i == 1) sampler.detach_this_thread();
        }
      });
    }
    for (auto& t : batch) t.join();
    result.threads += 4;
  }
  done = true;
  drainer.join();
  result.totals = sampler.stop();
  result.drained += sampler.drain([](const selfperf::Sample&) {});
  return result;
}

Sampler::Options churn_options(Sampler::Rearm rearm, Unwinder unwinder) {
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = 50'000;  // 20 kHz per thread
  options.rearm = rearm;
  options.unwinder = unwinder;
  options.buffer_capacity = 32;  // small: the drainer falls behind at times, which must be counted
  return options;
}

}  // namespace

TEST_CASE("thread churn without a ring buffer: no leaked fds, samples + lost == signals") {
  std::size_t fds_before = open_fds();
  auto r = churn(churn_options(Sampler::Rearm::overflow_signal, Unwinder::frame_pointer), kTsan ? 20 : 60);
  INFO("threads " << r.threads << ", samples " << r.totals.samples << ", lost " << r.totals.lost << ", signals "
                  << r.totals.signals << ", ignored " << r.totals.ignored);
  CHECK(open_fds() == fds_before);
  CHECK(r.totals.threads.size() == static_cast<std::size_t>(r.threads));
  CHECK(r.drained == r.totals.samples);
  CHECK(r.totals.samples > 0);
  // One signal per overflow, each either stored or counted lost.
  CHECK(r.totals.samples + r.totals.lost == r.totals.signals);
}

TEST_CASE("thread churn with ring buffers and libunwind: no leaked fds or mappings, nothing lost silently") {
  // libunwind opens a process-wide pipe once, on first use, to validate addresses: not ours to count.
  selfperf::prepare_libunwind_this_thread();
  std::size_t fds_before = open_fds();
  // The sampler refuses libunwind under TSan; the ring buffer path is what matters there.
  auto r = churn(churn_options(Sampler::Rearm::ring_buffer, kTsan ? Unwinder::frame_pointer : Unwinder::libunwind),
                 kTsan ? 20 : 60);
  INFO("threads " << r.threads << ", samples " << r.totals.samples << ", lost " << r.totals.lost
                  << " (full " << r.totals.lost_buffer_full << ", kernel " << r.totals.lost_kernel
                  << ", coalesced " << r.totals.lost_coalesced << "), signals " << r.totals.signals);
  CHECK(open_fds() == fds_before);
  CHECK(r.totals.threads.size() == static_cast<std::size_t>(r.threads));
  CHECK(r.drained == r.totals.samples);
  CHECK(r.totals.samples > 0);
  // A signal stores at most one sample with a user stack (the others behind it are counted lost).
  CHECK(r.totals.samples <= r.totals.signals);
}

TEST_CASE("a full per-thread buffer counts every further sample as lost and never blocks") {
  Sampler::Options options = churn_options(Sampler::Rearm::overflow_signal, Unwinder::frame_pointer);
  options.buffer_capacity = 4;
  Sampler sampler(options);
  sampler.start();
  {
    Sampler::ThreadAttachment attach(sampler);
    for (int i = 0; i < 2000; ++i) {  // far more than 4 periods of CPU, nothing drains meanwhile
      g_sink += churn_burn(50'000);
      signal_point();
    }
  }
  auto totals = sampler.stop();
  std::uint64_t drained = sampler.drain([](const selfperf::Sample&) {});
  INFO("samples " << totals.samples << ", lost " << totals.lost << ", signals " << totals.signals);
  // Room for 4 samples of 32 frames (148 words): these stacks are shallower, so more fit, but each takes at
  // least its 5 header words.
  CHECK(totals.samples >= 4);
  CHECK(totals.samples <= 4 * (5 + 32) / 5);
  CHECK(drained == totals.samples);
  CHECK(totals.lost_buffer_full > 0);
  CHECK(totals.samples + totals.lost_buffer_full == totals.signals);
}

TEST_CASE("a full real-time signal queue falls back to SIGIO; samples still arrive") {
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_SIGPENDING, &saved) == 0);
  Sampler::Options options = churn_options(Sampler::Rearm::ring_buffer, Unwinder::frame_pointer);
  options.buffer_capacity = 4096;
  Sampler sampler(options);
  sampler.start();
  // No queued signal may be pending: every real-time signal fails to queue and the kernel sends SIGIO.
  rlimit none{0, saved.rlim_max};
  REQUIRE(setrlimit(RLIMIT_SIGPENDING, &none) == 0);
  {
    Sampler::ThreadAttachment attach(sampler);
    for (int i = 0; i < 4000; ++i) {
      g_sink += churn_burn(50'000);
      signal_point();
    }
  }
  setrlimit(RLIMIT_SIGPENDING, &saved);
  auto totals = sampler.stop();
  const CodeRange ranges[] = {churn_burn_range()};
  std::uint64_t in_burn = 0;
  std::uint64_t drained = sampler.drain([&](const selfperf::Sample& s) { in_burn += attribute(s.frames, ranges) == 0; });
  INFO("samples " << totals.samples << ", sigio " << totals.sigio << ", signals " << totals.signals << ", lost "
                  << totals.lost);
  CHECK(totals.sigio > 0);
  CHECK(totals.samples > 0);
  CHECK(drained == totals.samples);
  CHECK(in_burn > drained / 2);
}
