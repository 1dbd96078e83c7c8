#pragma once
// Sampling must not take the thread it samples. Each overflow costs the thread time before our handler even
// runs (the timer interrupt, the ring write, the signal frame), and a period shorter than that cost leaves it
// none: on an AMD EPYC VM a cpu-clock period of 20 µs left a plain C loop 3-10 % of its speed with an empty
// handler, 50 µs left 10-20 % (tests/emulated aside, every machine we run on is such a VM). cpu-clock counts
// that time as the thread's, so the overflows keep coming however little the program gets done, and the
// kernel's own limit (perf_cpu_time_max_percent) only weighs PMU interrupt handlers, never this.
//
// So each thread's handler watches its own share. The time from the end of one handler run to the end of the
// next splits in three: the program ran until the overflow's timestamp (the ring record's, or the handler's
// entry without a ring), the kernel then delivered the signal, and the handler ran. Over a window of
// overflows, when delivery and handler took more than the program got, the thread's rate halves.
//
// Delivery is charged at the window's smallest, not each run's: the kernel switches a thread out at the
// return to user space that follows the scheduler's request, and for a busy thread that is most often the
// return that delivers our signal (the next interrupt after the tick is usually the overflow's), so one run
// in three or four carries a wait for the CPU there on a loaded machine. Summed, those waits lowered an
// honest 1 ms rate under TSan at load 6 on two cores, 2 runs in 4. Interrupt entry before the timestamp counts
// as the program's: the share is an underestimate, so a rate is lowered late rather than for nothing.
#include <cstdint>

namespace selfperf::detail {

class SamplingGovernor {
 public:
  static constexpr std::uint32_t kWindow = 64;  // overflows per verdict: one descheduling cannot decide it

  // Accounts one handler run that served `overflows` overflows, the first at `overflow_ns`, and ran from
  // `entry_ns` to `exit_ns` (CLOCK_MONOTONIC). True when the window just closed gave sampling more than half.
  bool account(std::uint64_t overflow_ns, std::uint64_t entry_ns, std::uint64_t exit_ns,
               std::uint64_t overflows) noexcept {
    if (last_exit_ns_ != 0 && entry_ns >= last_exit_ns_ && exit_ns >= entry_ns) {
      // An overflow stamped before the previous run ended happened during it: the program got nothing.
      const std::uint64_t start = overflow_ns > last_exit_ns_ ? (overflow_ns < entry_ns ? overflow_ns : entry_ns)
                                                              : last_exit_ns_;
      program_ns_ += start - last_exit_ns_;
      handler_ns_ += exit_ns - entry_ns;
      // Only an overflow stamped after the previous run measures a delivery; a run that found the ring empty
      // (its overflow taken by an earlier run) cost one too, charged the same.
      if (overflows > 0 && overflow_ns > last_exit_ns_) {
        const std::uint64_t delivery = entry_ns - start;
        if (!measured_ || delivery < least_delivery_ns_) least_delivery_ns_ = delivery;
        measured_ = true;
      }
      ++runs_;
    }
    last_exit_ns_ = exit_ns;
    seen_ += static_cast<std::uint32_t>(overflows < kWindow ? overflows : kWindow);
    if (seen_ < kWindow) return false;
    const bool too_much = handler_ns_ + runs_ * least_delivery_ns_ > program_ns_;
    seen_ = runs_ = 0;
    program_ns_ = handler_ns_ = least_delivery_ns_ = 0;
    measured_ = false;
    return too_much;
  }

 private:
  std::uint64_t last_exit_ns_ = 0;
  std::uint64_t program_ns_ = 0;
  std::uint64_t handler_ns_ = 0;
  std::uint64_t least_delivery_ns_ = 0;
  std::uint32_t runs_ = 0;
  std::uint32_t seen_ = 0;
  bool measured_ = false;
};

}  // namespace selfperf::detail
