// Sampler attribution: known CPU shares per function, expected callers, and samples on the right thread.
#include <doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "events/perf_syscall.hpp"
#include "sampling/sampler_core.hpp"
#include "sampler_workload.hpp"
#include "spin_without_cfi.hpp"
#include "selfperf/error.hpp"
#include "selfperf/sampler.hpp"

using selfperf::Sampler;
using selfperf::Unwinder;
using namespace selfperf_test;

SELFPERF_TEST_BURN(sp_burn_a, 0x11)
SELFPERF_TEST_BURN(sp_burn_b, 0x22)
SELFPERF_TEST_BURN(sp_burn_c, 0x33)
SELFPERF_TEST_CALLER(sp_call_a, sp_burn_a)
SELFPERF_TEST_CALLER(sp_call_b, sp_burn_b)
SELFPERF_TEST_CALLER(sp_call_c, sp_burn_c)

SELFPERF_TEST_BURN(sp_thread_0, 0x40)
SELFPERF_TEST_BURN(sp_thread_1, 0x41)
SELFPERF_TEST_BURN(sp_thread_2, 0x42)
SELFPERF_TEST_BURN(sp_thread_3, 0x43)

namespace {

std::atomic<std::uint64_t> g_sink{0};

// 50/30/20 % of the iterations, interleaved in small rounds so that slow phases of a loaded machine hit all
// three alike. The burn functions are the same code, so iterations are proportional to CPU time.
[[gnu::noipa, gnu::noinline, gnu::used, gnu::section("text_sp_workload")]] std::uint64_t workload(std::uint64_t rounds, std::uint64_t chunk) {
  std::uint64_t sum = 0;
  for (std::uint64_t r = 0; r < rounds; ++r) {
    sum += sp_call_a(5 * chunk);
    signal_point();
    sum += sp_call_b(3 * chunk);
    signal_point();
    sum += sp_call_c(2 * chunk);
    signal_point();
  }
  return sum;
}
extern "C" char __start_text_sp_workload[], __stop_text_sp_workload[];
CodeRange workload_range() {
  return {"workload", reinterpret_cast<std::uintptr_t>(__start_text_sp_workload),
          reinterpret_cast<std::uintptr_t>(__stop_text_sp_workload)};
}

bool contains(std::span<const std::uint64_t> frames, const CodeRange& r) {
  return std::any_of(frames.begin(), frames.end(), [&](std::uint64_t f) { return r.contains(f); });
}

struct ShareResult {
  std::array<std::uint64_t, 3> leaf{};
  std::array<std::uint64_t, 3> with_callers{};
  std::uint64_t attributed = 0;
  std::uint64_t drained = 0;
  Sampler::Totals totals;
};

ShareResult measure_shares(Unwinder unwinder, Sampler::Rearm rearm = Sampler::Rearm::ring_buffer) {
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = 100'000;  // 10 kHz of this thread's CPU time
  options.unwinder = unwinder;
  options.rearm = rearm;
  options.buffer_capacity = 8192;
  Sampler sampler(options);
  sampler.start();
  ShareResult result;
  const std::array<CodeRange, 3> burns{sp_burn_a_range(), sp_burn_b_range(), sp_burn_c_range()};
  const std::array<CodeRange, 3> callers{sp_call_a_range(), sp_call_b_range(), sp_call_c_range()};
  // The shares below assume the three copies cost the same per iteration, which holds only if each meets the
  // front end's fetch boundaries alike (sampler_workload.hpp).
  for (const CodeRange& burn : burns)
    REQUIRE_MESSAGE(burn.begin % SELFPERF_TEST_CODE_ALIGN == 0, burn.name << " is not aligned");
  auto consume = [&](const selfperf::Sample& s) {
    ++result.drained;
    int which = attribute(s.frames, burns);
    if (which < 0) return;
    ++result.attributed;
    ++result.leaf[which];
    // The kernel's frame-pointer walk cannot see the caller of a leaf without a frame (gcc omits frames in
    // leaves that use no stack): for it, the caller's caller must be there.
    bool caller = unwinder == Unwinder::kernel || contains(s.frames, callers[which]);
    if (caller && contains(s.frames, workload_range())) ++result.with_callers[which];
  };
  {
    Sampler::ThreadAttachment attach(sampler);
    // ~1.5 s of CPU: about 15000 samples, a 0.4-point standard error on a 50 % share.
    for (int part = 0; part < 15; ++part) {
      g_sink += workload(1200, 5'000);  // bursts of 7-35 µs, shorter than the 100 µs period
      sampler.drain(consume);
    }
  }
  result.totals = sampler.stop();
  sampler.drain(consume);
  return result;
}

void check_shares(const ShareResult& r, const char* what) {
  INFO(what << ": drained " << r.drained << ", attributed " << r.attributed << " (a " << r.leaf[0] << ", b "
            << r.leaf[1] << ", c " << r.leaf[2] << "), lost " << r.totals.lost << ", signals "
            << r.totals.signals);
  CHECK(r.drained == r.totals.samples);
  REQUIRE(r.attributed > 1000);
  const std::array<double, 3> expected{50.0, 30.0, 20.0};
  // TSan runs the handler at its next safe point, not at the interrupted instruction: shares blur.
  const double tolerance = kTsan ? 15.0 : 3.0;
  for (int i = 0; i < 3; ++i) {
    double share = 100.0 * static_cast<double>(r.leaf[i]) / static_cast<double>(r.attributed);
    INFO("function " << i << " share " << share << " % (expected " << expected[i] << ")");
    CHECK(std::abs(share - expected[i]) <= tolerance);
    // The unwound stack names the direct caller and the workload above it.
    double with_callers = static_cast<double>(r.with_callers[i]) / static_cast<double>(r.leaf[i]);
    INFO("with expected callers: " << with_callers);
    // Under TSan the handler runs after the burst returned: the saved context's stack is gone.
    if (!kTsan) CHECK(with_callers > 0.95);
  }
}

}  // namespace

TEST_CASE("frame-pointer samples split 50/30/20 like the CPU time, with the callers on the stack") {
  const ShareResult r = measure_shares(Unwinder::frame_pointer);
  check_shares(r, "frame_pointer");
  CHECK(r.totals.unwound_by_libunwind == 0);
}

TEST_CASE("libunwind samples split 50/30/20 like the CPU time, with the callers on the stack") {
  if (kTsan) {
    MESSAGE("skipped under TSan: the sampler refuses Unwinder::libunwind there");
    return;
  }
  const ShareResult r = measure_shares(Unwinder::libunwind);
  check_shares(r, "libunwind");
  // The workload's frames all have plain CFI rules: the DWARF walk, not unw_backtrace, unwinds nearly all.
  INFO("handed to unw_backtrace: " << r.totals.unwound_by_libunwind << " of " << r.totals.samples);
  CHECK(r.totals.unwound_by_libunwind * 20 < r.totals.samples);
}

TEST_CASE("kernel callchain samples split 50/30/20 like the CPU time, with the callers on the stack") {
  check_shares(measure_shares(Unwinder::kernel), "kernel");
}

TEST_CASE("overflow-signal re-arming without a ring buffer attributes the same shares") {
  check_shares(measure_shares(Unwinder::frame_pointer, Sampler::Rearm::overflow_signal), "overflow_signal");
}

TEST_CASE("four threads: every sample is attributed to the thread that ran the function") {
  Sampler::Options options;
  options.event = "cpu-clock";
  options.frequency = 2000;
  options.buffer_capacity = 8192;
  Sampler sampler(options);
  sampler.start();
  using Burn = std::uint64_t (*)(std::uint64_t);
  const std::array<Burn, 4> functions{sp_thread_0, sp_thread_1, sp_thread_2, sp_thread_3};
  const std::array<CodeRange, 4> ranges{sp_thread_0_range(), sp_thread_1_range(), sp_thread_2_range(),
                                        sp_thread_3_range()};
  std::array<std::atomic<pid_t>, 4> tids{};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back(sampler.attached([&, i] {
      tids[i] = selfperf::detail::current_tid();
      for (int part = 0; part < 2000; ++part) {
        g_sink += functions[i](100'000);
        signal_point();
      }
    }));
  }
  for (auto& t : threads) t.join();
  auto totals = sampler.stop();
  std::array<std::uint64_t, 4> right{}, wrong{};
  std::uint64_t unattributed = 0;
  sampler.drain([&](const selfperf::Sample& s) {
    int which = attribute(s.frames, ranges);
    if (which < 0) {
      ++unattributed;
      return;
    }
    if (s.tid == tids[which]) ++right[which];
    else ++wrong[which];
  });
  INFO("samples " << totals.samples << ", lost " << totals.lost << ", unattributed " << unattributed);
  CHECK(totals.threads.size() == 4);
  for (int i = 0; i < 4; ++i) {
    INFO("thread " << i << ": right " << right[i] << ", wrong " << wrong[i]);
    CHECK(wrong[i] == 0);
    CHECK(right[i] > 50);
  }
}

TEST_CASE("options are validated with messages naming the option") {
  auto message = [](Sampler::Options o) {
    try {
      Sampler s(std::move(o));
    } catch (const selfperf::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Sampler::Options both;
  both.period = 1000;
  both.frequency = 1000;
  CHECK(message(both).find("exactly one of period") != std::string::npos);
  CHECK(message(Sampler::Options{}).find("exactly one of period") != std::string::npos);
  Sampler::Options deep;
  deep.frequency = 100;
  deep.max_depth = 5000;
  CHECK(message(deep).find("max_depth 5000") != std::string::npos);
  Sampler::Options pages;
  pages.frequency = 100;
  pages.ring_pages = 3;
  CHECK(message(pages).find("ring_pages 3") != std::string::npos);
  Sampler::Options kernel;
  kernel.frequency = 100;
  kernel.unwinder = Unwinder::kernel;
  kernel.rearm = Sampler::Rearm::refresh;
  CHECK(message(kernel).find("kernel unwinder") != std::string::npos);
  Sampler::Options bad_event;
  bad_event.frequency = 100;
  bad_event.event = "no-such-event";
  CHECK(message(bad_event).find("no-such-event") != std::string::npos);
}

TEST_CASE("default event: cycles where a PMU exists, else cpu-clock; a real-time signal is chosen at start") {
  Sampler::Options options;
  options.frequency = 100;
  Sampler sampler(options);
  CHECK((sampler.event_name().rfind("cycles", 0) == 0 || sampler.event_name().rfind("cpu-clock", 0) == 0));
  CHECK(sampler.signal_number() == 0);
  sampler.start();
  CHECK(sampler.running());
  CHECK(sampler.signal_number() >= SIGRTMIN);
  CHECK(sampler.signal_number() <= SIGRTMAX);
  auto totals = sampler.stop();
  CHECK_FALSE(sampler.running());
  CHECK(totals.samples == 0);
  CHECK_THROWS_AS(sampler.attach_this_thread(), selfperf::Error);
}

TEST_CASE("libunwind's budget: a tenth of the thread's time at most, all of it when fallbacks are cheap") {
  // A thread sampled every `period` ticks whose every sample would need a fallback costing `cost`.
  auto share = [](std::uint64_t period, std::uint64_t cost, std::uint64_t& allowed) {
    selfperf::detail::LibunwindBudget budget;
    std::uint64_t now = 1000, spent = 0;
    allowed = 0;
    for (int sample = 0; sample < 10000; ++sample) {
      if (budget.allows(now)) {
        budget.spent(now, now + cost);
        now += cost, spent += cost, ++allowed;
      }
      now += period;
    }
    return static_cast<double>(spent) / static_cast<double>(now - 1000);
  };
  std::uint64_t allowed = 0;
  CHECK(share(20'000, 100'000, allowed) <= 0.11);  // fallbacks 5x the period: capped near a tenth
  CHECK(allowed > 100);                            // ...but not starved
  CHECK(share(20'000, 500, allowed) < 0.03);       // cheap ones...
  CHECK(allowed == 10000);                         // ...all allowed
}


TEST_CASE("libunwind gets at most a tenth of the thread: code only it can unwind, sampled at 50 kHz, keeps running") {
  if (kTsan) {
    MESSAGE("skipped under TSan: the sampler refuses Unwinder::libunwind there");
    return;
  }
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = kAsan ? 200'000 : 20'000;  // 50 kHz: less than libunwind's slow path takes on a cache miss
  options.unwinder = Unwinder::libunwind;
  options.buffer_capacity = 4096;
  Sampler sampler(options);
  sampler.start();
  std::size_t drained = 0;
  {
    Sampler::ThreadAttachment attach(sampler);
    for (int burst = 0; burst < 50; ++burst) {
      selfperf_test_spin_without_cfi(5'000'000);  // a few ms each
      drained += sampler.drain([](const selfperf::Sample&) {});
    }
  }
  const Sampler::Totals totals = sampler.stop();
  drained += sampler.drain([](const selfperf::Sample&) {});
  INFO("samples " << totals.samples << ", by libunwind " << totals.unwound_by_libunwind << ", partially "
                  << totals.unwound_partially);
  CHECK(drained == totals.samples);
  CHECK(totals.samples > 100);
  // Nearly every sample landed in the function without an FDE: unwound by libunwind, or kept with the leaf
  // alone while libunwind's share was spent.
  CHECK(totals.unwound_by_libunwind + totals.unwound_partially > totals.samples / 2);
}

TEST_CASE("signals that the kernel did not raise for our events are ignored and counted") {
  Sampler::Options options;
  options.event = "cpu-clock";
  options.period = 1'000'000'000'000ull;  // never overflows during the test
  options.rearm = Sampler::Rearm::overflow_signal;
  Sampler sampler(options);
  sampler.start();
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  {
    Sampler::ThreadAttachment attach(sampler);
    const int signo = sampler.signal_number();
    // Sent by a process: si_code SI_TKILL / SI_QUEUE.
    REQUIRE(pthread_kill(pthread_self(), signo) == 0);
    REQUIRE(sigqueue(getpid(), signo, sigval{7}) == 0);
    // Kernel-looking (POLL_IN) but for a descriptor that is not one of our events.
    siginfo_t info{};
    info.si_signo = signo;
    info.si_code = POLL_IN;
    info.si_fd = pipe_fds[0];
    REQUIRE(syscall(SYS_rt_tgsigqueueinfo, getpid(), selfperf::detail::current_tid(), signo, &info) == 0);
  }
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  auto totals = sampler.stop();
  CHECK(totals.samples == 0);
  CHECK(totals.signals == 0);
  CHECK(totals.ignored >= 3);
}

TEST_CASE("attach_new_threads without the pthread_create hook linked in: start() says what to link") {
  Sampler::Options o;
  o.event = "cpu-clock";
  o.frequency = 100;
  o.attach_new_threads = true;
  Sampler sampler(o);
  try {
    sampler.start();
    FAIL("start() accepted attach_new_threads without selfperf::thread_hook");
  } catch (const selfperf::Error& e) {
    CHECK(std::string(e.what()).find("selfperf::thread_hook") != std::string::npos);
    CHECK(std::string(e.what()).find("attach_new_threads") != std::string::npos);
  }
  CHECK_FALSE(sampler.running());
}
