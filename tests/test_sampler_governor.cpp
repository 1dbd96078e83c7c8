// SamplingGovernor's verdict on made-up handler runs, where test_sampler_overload can only make a machine
// slow and watch: how each run's time splits between the program and sampling, and what a window concludes.
#include <doctest.h>

#include <cstdint>

#include "sampling/sampler_governor.hpp"

using selfperf::detail::SamplingGovernor;

namespace {

constexpr std::uint64_t kUs = 1000;

// The thread's CPU time as the governor reads it: the test moves it with the wall clock, less the waits it
// says the thread had for a CPU.
std::uint64_t g_cpu_ns = 0;
std::uint64_t fake_cpu_ns() noexcept { return g_cpu_ns; }

// Feeds the governor runs at a fixed shape until a window closes; returns its verdict.
struct Thread {
  SamplingGovernor governor;
  std::uint64_t now = 1'000'000'000;

  Thread() {
    g_cpu_ns = 0;
    governor.account(now, now, 1, fake_cpu_ns);  // the first run opens the first window
  }

  // The program runs `program` ns, the overflow comes, the signal is delivered and handled in `sampling` ns;
  // `waited` of the run was spent waiting for a CPU.
  bool overflow(std::uint64_t program, std::uint64_t sampling, std::uint64_t waited = 0) {
    const std::uint64_t overflow_ns = now + program;
    now = overflow_ns + sampling;
    g_cpu_ns += program + sampling - waited;
    return governor.account(overflow_ns, now, 1, fake_cpu_ns);
  }

  // A signal whose record an earlier run took: delivered at that run's return, handled in `sampling` ns.
  bool empty_signal(std::uint64_t sampling) {
    const std::uint64_t entry_ns = now;  // the handler passes its entry time when the ring had nothing
    now += sampling;
    g_cpu_ns += sampling;
    return governor.account(entry_ns + sampling / 2, now, 0, fake_cpu_ns);
  }
};

}  // namespace

TEST_CASE("a window of runs where sampling takes more than the program lowers the rate; one where it takes less does not") {
  Thread cheap;
  for (std::uint32_t i = 1; i < SamplingGovernor::kWindow; ++i) CHECK_FALSE(cheap.overflow(100 * kUs, 30 * kUs));
  CHECK_FALSE(cheap.overflow(100 * kUs, 30 * kUs));  // the window closes: 30 of 130 µs

  Thread costly;
  for (std::uint32_t i = 1; i < SamplingGovernor::kWindow; ++i) CHECK_FALSE(costly.overflow(100 * kUs, 150 * kUs));
  CHECK(costly.overflow(100 * kUs, 150 * kUs));  // verdicts come once a window, not before
  CHECK_FALSE(costly.overflow(100 * kUs, 150 * kUs));  // and the next window starts afresh
}

TEST_CASE("an overflow stamped during the previous run gave the program nothing") {
  Thread t;
  bool lowered = false;
  // The overflow came 50 µs before the last handler returned: a period shorter than the handler.
  for (std::uint32_t i = 0; i < SamplingGovernor::kWindow; ++i) {
    const std::uint64_t overflow_ns = t.now - 50 * kUs;
    t.now += 200 * kUs;
    g_cpu_ns += 200 * kUs;
    lowered = t.governor.account(overflow_ns, t.now, 1, fake_cpu_ns);
  }
  CHECK(lowered);
}

TEST_CASE("a signal that found its record taken by an earlier run counts as sampling, not as the program") {
  // Each overflow leaves the program 100 µs against 60 µs of sampling, but every one also brings a signal
  // whose record the first run already read, 300 µs more: the thread gets 100 µs in 460. Counted as the
  // program's time (the governor before this test), those 300 µs made the window look affordable.
  Thread t;
  bool lowered = false;
  for (std::uint32_t i = 0; i < SamplingGovernor::kWindow; ++i) {
    lowered = t.overflow(100 * kUs, 60 * kUs);
    if (i + 1 < SamplingGovernor::kWindow) CHECK_FALSE(t.empty_signal(300 * kUs));
  }
  CHECK(lowered);
}

TEST_CASE("empty signals do not close a window: it takes 64 overflows") {
  Thread t;
  for (int i = 0; i < 1000; ++i) CHECK_FALSE(t.empty_signal(300 * kUs));
  for (std::uint32_t i = 1; i < SamplingGovernor::kWindow; ++i) CHECK_FALSE(t.overflow(100 * kUs, 30 * kUs));
  // The empties' time lies in this window: 300 ms of sampling against 6.4 ms of program.
  CHECK(t.overflow(100 * kUs, 30 * kUs));
}

TEST_CASE("time the thread waited for a CPU is not blamed on sampling") {
  // Sampling takes 150 µs an overflow against the program's 100 µs, but 80 µs of each sampling part was the
  // thread waiting while another ran (a loaded machine): the governor takes the window's waits off sampling's
  // part and leaves the rate alone. It errs late, never early.
  Thread t;
  bool lowered = false;
  for (std::uint32_t i = 0; i < SamplingGovernor::kWindow; ++i) lowered = t.overflow(100 * kUs, 150 * kUs, 80 * kUs);
  CHECK_FALSE(lowered);
}
