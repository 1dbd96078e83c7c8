#pragma once
// Sampling must not take the thread it samples. Each overflow costs the thread time before our handler even
// runs (the timer interrupt, the ring write, the signal frame), and a period shorter than that cost leaves it
// none: on an AMD EPYC VM a cpu-clock period of 20 µs left a plain C loop 3-10 % of its speed with an empty
// handler, 50 µs left 10-20 % (tests/emulated aside, every machine we run on is such a VM). cpu-clock counts
// that time as the thread's, so the overflows keep coming however little the program gets done, and the
// kernel's own limit (perf_cpu_time_max_percent) only weighs PMU interrupt handlers, never this.
//
// So each thread's handler watches its own share. The time line from the end of one handler to the end of
// the next splits at the overflow's timestamp (the ring record's, or the handler's entry without a ring):
// before it the program ran, after it the sampling did. When a window of overflows gave the sampling more
// than half, the thread's rate halves. What happens before the timestamp (interrupt entry) counts as the
// program's, and time the thread spent descheduled counts where it fell: the share is an underestimate, so a
// rate is never lowered for a cost that is not there, only, at worst, lowered late.
#include <cstdint>

namespace selfperf::detail {

class SamplingGovernor {
 public:
  static constexpr std::uint32_t kWindow = 64;  // overflows per verdict: one descheduling cannot decide it

  // Accounts one handler run that served `overflows` overflows, the first at `overflow_ns`, and ended at
  // `exit_ns` (CLOCK_MONOTONIC). True when the window just closed gave the sampling more than half.
  bool account(std::uint64_t overflow_ns, std::uint64_t exit_ns, std::uint64_t overflows) noexcept {
    if (last_exit_ns_ != 0 && exit_ns > last_exit_ns_) {
      // An overflow stamped before the previous handler ended happened during it: the program got nothing.
      const std::uint64_t split = overflow_ns > last_exit_ns_ ? (overflow_ns < exit_ns ? overflow_ns : exit_ns)
                                                              : last_exit_ns_;
      program_ns_ += split - last_exit_ns_;
      sampling_ns_ += exit_ns - split;
    }
    last_exit_ns_ = exit_ns;
    seen_ += static_cast<std::uint32_t>(overflows < kWindow ? overflows : kWindow);
    if (seen_ < kWindow) return false;
    const bool too_much = sampling_ns_ > program_ns_;
    seen_ = 0;
    sampling_ns_ = program_ns_ = 0;
    return too_much;
  }

 private:
  std::uint64_t last_exit_ns_ = 0;
  std::uint64_t program_ns_ = 0;
  std::uint64_t sampling_ns_ = 0;
  std::uint32_t seen_ = 0;
};

}  // namespace selfperf::detail
