// Sampling threads on a hardware event: the Sampler on `cycles:u`, with four threads at once and with threads
// that come and go, delivers each overflow to the thread whose counter overflowed, one sample (or one counted
// loss) a period of that thread's own counted cycles, and leaks no event. The host's sampler tests check the
// same with cpu-clock (test_sampler, test_sampler_churn); here a PMU driver counts the period and raises the
// interrupt (the emulated arm64 machine's armv8_pmuv3, tests/emulated, or x86 hardware). Skipped ("no hardware
// PMU") where `cycles` does not open. Sampling `cycles`, opened before each thread's counting event, for the
// reason hw_sampler_attribution gives: QEMU raises the overflows of its cycle counter on time, not those of
// its event counters.
// The whole test runs on one CPU: its threads are switched out and in around their overflows, and their
// per-task events with them. Also, QEMU (TCG with -icount) runs its vCPUs in turn against one virtual clock,
// and a vCPU's cycle counter kept counting while the other vCPU was emulated: with both vCPUs busy a thread's
// overflows came in bursts its handler could not keep up with (2 threads at a period of 50021: 453 of 2244
// overflows coalesced, the rate lowered twice; on one CPU: 0 of 4758, four threads 6 of 9513; the churn
// below with its drainer on the other vCPU: 46819 of 49235 coalesced and 270 times slower). Sampling threads
// running in parallel is what test_sampler's "four threads" checks on cpu-clock.
#include <doctest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <thread>
#include <vector>

#include <sched.h>

#include "events/perf_syscall.hpp"
#include "sampler_workload.hpp"
#include "selfperf/counter_group.hpp"
#include "selfperf/sampler.hpp"

using selfperf::Sampler;
using namespace selfperf_test;

SELFPERF_TEST_BURN(hw_thread_0, 0x60)
SELFPERF_TEST_BURN(hw_thread_1, 0x61)
SELFPERF_TEST_BURN(hw_thread_2, 0x62)
SELFPERF_TEST_BURN(hw_thread_3, 0x63)

namespace {

std::atomic<std::uint64_t> g_sink{0};

// Prime, 50 µs of the emulated machine (one instruction a nanosecond): far above an overflow's cost there, so
// the governor keeps the period that the counts below divide by.
constexpr std::uint64_t kPeriod = 50'021;

// Keeps the calling thread, and the threads it starts, on the CPU it runs on until destroyed.
class OnOneCpu {
 public:
  OnOneCpu() {
    (void)sched_getaffinity(0, sizeof before_, &before_);
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    (void)sched_setaffinity(0, sizeof one, &one);
  }
  OnOneCpu(const OnOneCpu&) = delete;
  OnOneCpu& operator=(const OnOneCpu&) = delete;
  ~OnOneCpu() { (void)sched_setaffinity(0, sizeof before_, &before_); }

 private:
  cpu_set_t before_{};
};

std::size_t open_fds() {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

Sampler::Options cycles_options() {
  Sampler::Options options;
  options.event = "cycles:u";
  options.period = kPeriod;
  options.buffer_capacity = 4096;
  return options;
}

// Runs `burn(iterations)` on the calling, attached thread and returns the cycles:u it counted meanwhile (0
// where the counter never ran: the callers check). No assertion here: a failed REQUIRE would throw out of a
// thread.
std::uint64_t counted_burn(std::uint64_t (*burn)(std::uint64_t), std::uint64_t iterations) {
  selfperf::CounterGroup counted{"cycles:u"};
  counted.enable();
  const auto before = counted.read();
  g_sink += burn(iterations);
  const auto d = selfperf::delta(before[0], counted.read()[0]);
  return d.counted() ? d.count : 0;
}

// Every overflow of a thread's counter is a sample of that thread or a counted loss: within 2 % of its
// counted cycles over the period, give or take `slack` samples. The sampling event runs a little longer than
// the counting one (from the attach to the CounterGroup's open, which parses its event: tens of thousands of
// cycles) and a thread's last period is partial: up to about two samples a thread. Late interrupts (QEMU's
// event counters: 2 % of the samples) or overflows sent to another thread leave far fewer.
void check_one_per_period(std::uint64_t samples_and_lost, std::uint64_t cycles, std::uint64_t slack) {
  const double expected = static_cast<double>(cycles) / static_cast<double>(kPeriod);
  INFO("samples + lost " << samples_and_lost << ", expected " << expected << " +- 2 % +- " << slack);
  CHECK(static_cast<double>(samples_and_lost) >= 0.98 * expected - static_cast<double>(slack));
  CHECK(static_cast<double>(samples_and_lost) <= 1.02 * expected + static_cast<double>(slack));
}

}  // namespace

TEST_CASE("four threads on cycles:u: every sample on the thread that ran, one a period of its own cycles") {
  if (kTsan) {
    MESSAGE("skipped under TSan: the handler does not run at the overflow");
    return;
  }
  OnOneCpu one_cpu;
  Sampler sampler(cycles_options());
  sampler.start();
  using Burn = std::uint64_t (*)(std::uint64_t);
  const std::array<Burn, 4> functions{hw_thread_0, hw_thread_1, hw_thread_2, hw_thread_3};
  const std::array<CodeRange, 4> ranges{hw_thread_0_range(), hw_thread_1_range(), hw_thread_2_range(),
                                        hw_thread_3_range()};
  std::array<std::atomic<pid_t>, 4> tids{};
  std::array<std::atomic<std::uint64_t>, 4> cycles{};
  std::vector<std::thread> threads;
  // Unequal work (1:2:3:4), so a sample credited to the wrong thread or a thread's count swapped shows.
  for (int i = 0; i < 4; ++i)
    threads.emplace_back(sampler.attached([&, i] {
      tids[i] = selfperf::detail::current_tid();
      cycles[i] = counted_burn(functions[i], 2'000'000u * static_cast<std::uint64_t>(i + 1));
    }));
  for (auto& t : threads) t.join();
  const Sampler::Totals totals = sampler.stop();

  std::array<std::uint64_t, 4> right{}, wrong{};
  std::uint64_t unattributed = 0;
  sampler.drain([&](const selfperf::Sample& s) {
    const int which = attribute(s.frames, ranges);
    if (which < 0) ++unattributed;
    else if (s.tid == tids[which]) ++right[which];
    else ++wrong[which];
  });
  INFO("samples " << totals.samples << ", lost " << totals.lost << " (full " << totals.lost_buffer_full
                  << ", kernel " << totals.lost_kernel << ", coalesced " << totals.lost_coalesced << "), signals "
                  << totals.signals << ", sigio " << totals.sigio << ", unattributed " << unattributed
                  << ", rate lowered " << totals.rate_lowered);
  REQUIRE(totals.threads.size() == 4);
  REQUIRE(totals.rate_lowered == 0);  // the period held, as the counts below need
  for (int i = 0; i < 4; ++i) {
    const Sampler::ThreadTotals* mine = nullptr;
    for (const auto& t : totals.threads)
      if (t.tid == tids[i]) mine = &t;
    REQUIRE(mine != nullptr);
    INFO("thread " << i << ": right " << right[i] << ", wrong " << wrong[i] << ", cycles " << cycles[i]);
    REQUIRE(cycles[i] > 0);
    CHECK(wrong[i] == 0);
    CHECK(right[i] * 10 >= mine->samples * 9);  // its samples are in its own function
    check_one_per_period(mine->samples + mine->lost, cycles[i], 2);
  }
  MESSAGE("four threads on cycles:u: " << right[0] << " / " << right[1] << " / " << right[2] << " / " << right[3]
                                       << " samples in their own functions, none on another thread's");
}

TEST_CASE("thread churn on cycles:u: no leaked event, one sample or loss a period, every thread counted") {
  if (kTsan) {
    MESSAGE("skipped under TSan: the handler does not run at the overflow");
    return;
  }
  OnOneCpu one_cpu;
  const std::size_t fds_before = open_fds();
  constexpr int kRounds = 10;
  std::atomic<std::uint64_t> cycles{0};
  Sampler::Totals totals;
  std::uint64_t drained = 0;
  {
    Sampler sampler(cycles_options());
    sampler.start();
    std::atomic<bool> done{false};
    std::thread drainer([&] {
      while (!done.load()) {
        drained += sampler.drain([](const selfperf::Sample&) {});
        std::this_thread::yield();
      }
    });
    // Batches of four short threads (~20 samples each), each way of attaching and detaching.
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::thread> batch;
      for (int i = 0; i < 4; ++i)
        batch.emplace_back([&, i] {
          if (i == 0) {
            Sampler::ThreadAttachment attach(sampler);
            cycles += counted_burn(hw_thread_0, 250'000);
          } else {
            sampler.attach_this_thread();
            cycles += counted_burn(hw_thread_1, 250'000);
            if (i == 1) sampler.detach_this_thread();  // the others are detached by their exit
          }
        });
      for (auto& t : batch) t.join();
    }
    done = true;
    drainer.join();
    totals = sampler.stop();
    drained += sampler.drain([](const selfperf::Sample&) {});
  }
  INFO("samples " << totals.samples << ", lost " << totals.lost << " (full " << totals.lost_buffer_full
                  << ", kernel " << totals.lost_kernel << ", coalesced " << totals.lost_coalesced << "), signals "
                  << totals.signals << ", sigio " << totals.sigio << ", drained " << drained << ", rate lowered "
                  << totals.rate_lowered);
  CHECK(open_fds() == fds_before);
  CHECK(totals.threads.size() == 4u * kRounds);
  CHECK(drained == totals.samples);
  REQUIRE(totals.rate_lowered == 0);
  REQUIRE(cycles > 0);
  check_one_per_period(totals.samples + totals.lost, cycles, 2u * 4u * kRounds);
  MESSAGE("thread churn on cycles:u: " << 4 * kRounds << " threads, " << totals.samples << " samples, "
                                       << totals.lost << " lost");
}
