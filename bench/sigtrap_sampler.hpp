#pragma once
// A prototype of the second signal-delivery design (issue 16), measured beside selfperf::Sampler by
// bench_delivery: ONE perf event for the whole process, opened on the calling thread with
//   sigtrap          the kernel sends SIGTRAP (si_code TRAP_PERF, si_perf_data = our tag) to the thread whose
//                    counter overflowed, in its own context: no fcntl routing, no ring buffer;
//   inherit + inherit_thread   every thread created after the open gets its own copy of the event in the
//                    kernel (no descriptor, no pthread_create hook), fork() children do not;
//   remove_on_exec   required with sigtrap (the kernel refuses sigtrap without it: EINVAL).
// Threads that existed before the open are not covered: pid 0 is the calling thread only.
//
// The handler is the library's in-handler path with only delivery changed: the same unwinders
// (unwind_frame_pointer, or the DWARF walk unwind_dwarf without libunwind's fallback) into the same per-thread
// detail::SampleBuffer. A thread's buffer, stack bounds and counters are one Slot, taken from a pool made up
// front; attach_this_thread() takes one where allocation is allowed, and a thread that never called it (one
// the program started without us) takes one in its first handler run, with system calls only (gettid, and
// /proc/self/maps read with read(2) for the stack mapping holding sp): async-signal-safe, ~20 µs once here
// (a 40-line map; it grows with the map).
// One sampler at a time per process. What it lacks beside Sampler: no rate governor, no kernel timestamps,
// periods, loss or throttle records (no ring), no count of overflows merged while a SIGTRAP was pending, and
// slots of exited threads are not reused.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>
#include <unistd.h>

#include "sampling/sampler_buffer.hpp"
#include "selfperf/sample.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf_bench {

class SigtrapSampler {
 public:
  struct Options {
    std::string event = "cpu-clock";
    std::uint64_t period = 1'000'000;  // events between samples (ns for cpu-clock / task-clock)
    selfperf::Unwinder unwinder = selfperf::Unwinder::frame_pointer;  // or libunwind: the DWARF walk alone
    std::size_t max_depth = 64;
    std::size_t buffer_capacity = 1024;  // per thread, in samples of 32 frames, as Sampler::Options
    std::size_t max_threads = 64;        // slots made up front
    bool inherit_thread = true;          // false: children of fork() inherit the event too
  };

  struct ThreadTotals {
    pid_t tid = 0;
    std::uint64_t samples = 0;
    std::uint64_t lost = 0;   // buffer full
    std::uint64_t async = 0;  // TRAP_PERF_FLAG_ASYNC: delivered late (SIGTRAP was blocked), not sampled
  };
  struct Totals {
    std::uint64_t samples = 0;
    std::uint64_t lost = 0;
    std::uint64_t async = 0;
    std::uint64_t incomplete = 0;  // DWARF walks that stopped at a frame they could not describe
    std::uint64_t chained = 0;     // SIGTRAPs not ours, handed to the handler installed before ours
    std::uint64_t stale = 0;       // TRAP_PERF with an earlier sampler's tag (pending across stop())
    std::uint64_t no_slot = 0;     // signals on threads beyond max_threads
    std::uint64_t set_up_in_handler = 0;  // threads whose first signal took their slot
    std::vector<ThreadTotals> threads;
  };

  // Opens the event (disabled) on this thread and makes the slots; throws selfperf::Error with the kernel's
  // reason when the open fails.
  explicit SigtrapSampler(Options options);
  ~SigtrapSampler();
  SigtrapSampler(const SigtrapSampler&) = delete;
  SigtrapSampler& operator=(const SigtrapSampler&) = delete;

  // Installs the SIGTRAP handler (once per process; a handler found there is chained) and enables the event
  // on every thread that has it.
  void start();
  // Takes this thread's slot where allocation is allowed (before its first sample).
  void attach_this_thread();
  // Disables the event on every thread, waits for handlers in flight, closes it. Idempotent.
  Totals stop();

  // Calls fn(const selfperf::Sample&) for each buffered sample; one caller at a time.
  template <typename Fn>
  std::size_t drain(Fn&& fn);

  int fd() const noexcept { return fd_; }

  struct Slot {
    Slot(std::size_t capacity, std::size_t max_depth) : buffer(capacity, max_depth) {}
    std::atomic<pid_t> tid{0};
    selfperf::StackBounds stack;
    selfperf::detail::SampleBuffer buffer;
    std::atomic<bool> busy{false};  // a handler is using the slot (stop() waits for it)
    std::atomic<std::uint64_t> samples{0}, lost{0}, async{0}, incomplete{0};
  };

 private:
  Options options_;
  int fd_ = -1;
  bool stopped_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<Slot*> slot_table_;  // what the handler indexes
};

template <typename Fn>
std::size_t SigtrapSampler::drain(Fn&& fn) {
  std::size_t n = 0;
  const pid_t pid = ::getpid();
  for (auto& slot : slots_) n += slot->buffer.consume(pid, fn);
  return n;
}

}  // namespace selfperf_bench
