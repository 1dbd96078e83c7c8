#pragma once
// Sampling must not take the thread it samples. Each overflow costs the thread time before our handler even
// runs (the timer interrupt, the ring write, the signal frame), and a period shorter than that cost leaves it
// none: on an AMD EPYC VM a cpu-clock period of 20 µs left a plain C loop 3-10 % of its speed with an empty
// handler, 50 µs left 10-20 % (tests/emulated aside, every machine we run on is such a VM). cpu-clock counts
// that time as the thread's, so the overflows keep coming however little the program gets done, and the
// kernel's own limit (perf_cpu_time_max_percent) only weighs PMU interrupt handlers, never this.
//
// So each thread's handler watches its own share. The time from the end of one handler run to the end of the
// next splits at the overflow's timestamp (the ring record's, or the handler's entry without a ring): before
// it the program ran, after it the kernel delivered the signal and the handler ran. An overflow stamped
// during the previous run gave the program nothing. A run that found no overflow in the ring (an earlier run
// took the record its signal was queued for) gave the program nothing either: that signal was pending while
// the earlier run read the ring and came at its return, so the whole span is sampling's. Counting it as the
// program's, as this class first did, hid an overload behind its own backlog: at a period of 200 µs and
// 300 µs a signal, one run in four was such a signal, and CI saw the rate halve once where it needed twice.
// Over a window of overflows, when sampling took more than the program got, the thread's rate halves.
//
// Time the thread waited for a CPU falls in either part, and mostly in sampling's: the kernel switches a busy
// thread out at the return to user space after the scheduler's request, which is most often the return that
// delivers our signal (the overflow's interrupt usually comes before the next tick). Summed, those waits
// lowered an honest 1 ms rate under TSan at load 6 on two cores, 2 runs in 4. So the window's waits (its
// wall time less the thread's CPU time: one clock_gettime per window) are taken from sampling's part, as if
// all fell there. Interrupt entry before the timestamp counts as the program's. Both err the same way: a rate
// is lowered late, never for a cost that is not there.
#include <cstdint>

namespace selfperf::detail {

class SamplingGovernor {
 public:
  static constexpr std::uint32_t kWindow = 64;  // overflows per verdict

  // Accounts one handler run that served `overflows` overflows (0: its signal's record was taken already),
  // the first at `overflow_ns`, and ended at `exit_ns` (CLOCK_MONOTONIC). `thread_cpu_ns` reads the thread's
  // CPU time; it is called once per window. True when the window just closed gave sampling more than the
  // program.
  bool account(std::uint64_t overflow_ns, std::uint64_t exit_ns, std::uint64_t overflows,
               std::uint64_t (*thread_cpu_ns)() noexcept) noexcept {
    if (last_exit_ns_ == 0 || exit_ns < last_exit_ns_) {  // the first run opens the first window
      open(exit_ns, thread_cpu_ns());
      return false;
    }
    std::uint64_t split = last_exit_ns_;
    if (overflows != 0 && overflow_ns > last_exit_ns_) split = overflow_ns < exit_ns ? overflow_ns : exit_ns;
    program_ns_ += split - last_exit_ns_;
    sampling_ns_ += exit_ns - split;
    last_exit_ns_ = exit_ns;
    seen_ += static_cast<std::uint32_t>(overflows < kWindow ? overflows : kWindow);
    if (seen_ < kWindow) return false;
    const std::uint64_t cpu = thread_cpu_ns();
    const std::uint64_t wall = exit_ns - window_wall_ns_;
    const std::uint64_t ran = cpu > window_cpu_ns_ ? cpu - window_cpu_ns_ : 0;
    const std::uint64_t waited = wall > ran ? wall - ran : 0;
    const bool too_much = sampling_ns_ > program_ns_ + waited;
    open(exit_ns, cpu);
    return too_much;
  }

 private:
  void open(std::uint64_t wall_ns, std::uint64_t cpu_ns) noexcept {
    last_exit_ns_ = window_wall_ns_ = wall_ns;
    window_cpu_ns_ = cpu_ns;
    program_ns_ = sampling_ns_ = 0;
    seen_ = 0;
  }

  std::uint64_t last_exit_ns_ = 0;
  std::uint64_t window_wall_ns_ = 0;
  std::uint64_t window_cpu_ns_ = 0;
  std::uint64_t program_ns_ = 0;
  std::uint64_t sampling_ns_ = 0;
  std::uint32_t seen_ = 0;
};

}  // namespace selfperf::detail
