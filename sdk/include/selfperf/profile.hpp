#pragma once
// Whole-program profiling, like gperftools' CPUPROFILE: sample every attached thread from start to stop and
// write OUT (perf.data), OUT.folded and OUT.svg. Samples are drained by a background thread and streamed to
// the perf.data file as they come, so memory does not grow with the run's length.
//
//     SELFPERF_PROFILE=out.data ./program             (with LD_PRELOAD=libselfperf_profile.so, or a
//     int main() { selfperf::profile_from_env(); … }   statically linked program calling this)
//
// Environment: SELFPERF_PROFILE (output path; unset or empty: no profiling), SELFPERF_EVENT (any event
// string, default cpu-clock or cycles), SELFPERF_FREQUENCY (samples/s per thread, default 999),
// SELFPERF_UNWINDER (frame_pointer | libunwind | kernel).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "selfperf/unwind.hpp"

namespace selfperf {

struct ProfileOptions {
  std::filesystem::path output;  // perf.data; OUT.folded and OUT.svg are written beside it
  std::string event;             // empty: the sampler's default
  std::uint64_t frequency = 999;
  Unwinder unwinder = Unwinder::frame_pointer;
};

// Options from the environment; nullopt-like: output empty when SELFPERF_PROFILE is unset.
// Throws selfperf::Error naming the variable for a malformed value.
ProfileOptions profile_options_from_env();

class Profiler {
 public:
  explicit Profiler(ProfileOptions options);
  ~Profiler();  // stop() if running; errors are reported on stderr
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Starts sampling, attaches the calling thread and starts the drain thread.
  void start();
  // Attaches the calling thread (threads created after start() call this first, or use the preload library).
  void attach_this_thread();
  // Stops sampling, drains, writes the lost count, closes the perf.data file and writes .folded and .svg.
  // In a child after fork() it only stops sampling: the files belong to the parent. Idempotent.
  void stop();

  std::uint64_t samples_written() const noexcept;
  std::uint64_t lost() const noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Starts a process-wide Profiler from the environment, stopped and written at exit(); returns false when
// SELFPERF_PROFILE is unset. Later calls return whether one is running.
bool profile_from_env();
// Attaches the calling thread to the process-wide profile, if one is running (no-op otherwise).
void profile_attach_this_thread() noexcept;
// Stops and writes the process-wide profile now (also done at exit).
void profile_stop() noexcept;
// Call right before this process replaces its image with exec*(): stops and writes the profile, as exit()
// would. Without it a sample signal the kernel queued during the exec (its work counts as the thread's CPU
// time) arrives after exec has reset the handlers, and kills the new program. A no-op in a child of fork() or
// vfork() (the profile, and with vfork its memory, are the parent's). The preload library calls it from its
// exec wrappers; a program that calls profile_from_env() itself and then execs calls it first.
void profile_before_exec() noexcept;

}  // namespace selfperf
