#pragma once
// Whole-program profiling, like gperftools' CPUPROFILE: sample every attached thread from start to stop and
// write OUT (perf.data), OUT.folded and OUT.svg. Samples are drained by a background thread and streamed to
// the perf.data file as they come, so memory does not grow with the run's length; the file is valid after
// every drain pass (50 ms), so a process killed or crashed leaves a profile perf reads up to there.
//
//     SELFPERF_PROFILE=out.data ./program             (with LD_PRELOAD=libselfperf_profile.so, or a
//     int main() { selfperf::profile_from_env(); … }   statically linked program calling this)
//
// Environment: SELFPERF_PROFILE (output path, %p: the pid; unset or empty: no profiling), SELFPERF_EVENT (any
// event string, default cpu-clock or cycles), SELFPERF_FREQUENCY (samples/s per thread, default 999),
// SELFPERF_UNWINDER (libunwind = dwarf, the default | frame_pointer | kernel), SELFPERF_MAX_DEPTH (frames per sample, default 127,
// at most 1024), SELFPERF_QUIET=1 (no summary line on stderr), SELFPERF_SUMMARY (a path, %p: the pid: the summary as
// JSON, summary_json(), written at stop(), named and skipped when no sample was taken as OUT is, below).
//
// Process trees: SELFPERF_PROFILE stays in the environment, so the programs a profiled process starts (and,
// under the preload library, the program it execs and the children it forks) are profiled too. No process overwrites a profile another
// process of the same run wrote: one that finds OUT taken writes OUT.<pid> (or OUT.<pid>.1, …; with %p,
// OUT.1, …). A profile from an earlier run is replaced. A process that took no sample writes no file.
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
  // The DWARF walk (libunwind's slow path behind it): distro binaries have no frame pointers. On python3 its
  // top inclusive functions agree with perf record --call-graph dwarf within ~5 points (README); the frame
  // pointer walk gave one row of leaves there, at the same CPU cost.
  Unwinder unwinder = Unwinder::libunwind;
  // perf's default depth (kernel.perf_event_max_stack); deeper frames are cut at the root.
  std::size_t max_depth = 127;
  bool quiet = false;  // profile_from_env: no summary line on stderr
  // OUT.folded and OUT.svg at stop(), symbolized in this process (libdw: ~0.1 s at a python3's exit). false
  // (SELFPERF_RENDER=0): the perf.data only, for a tool that symbolizes once for many processes (selfperf
  // record, or selfperf report -i OUT --folded F --svg S later).
  bool render = true;
  // Where stop() writes summary_json() (%p: the pid; a name another process of the run holds is not taken,
  // and a process that took and lost no sample writes none, as with `output`); empty: not written.
  std::filesystem::path summary{};
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
  // The perf.data file written (OUT, or OUT.<pid> when OUT was taken); empty while no sample was written.
  const std::string& output_path() const noexcept;
  // After stop(): one line naming the process, its samples, threads, losses and the files written.
  std::string summary() const;
  // After stop(): the same facts as JSON, every count an exact integer: {"format":"selfperf-profile-summary",
  // "version":1,"units":{…},"pid","comm","event","frequency_hz","unwinder","written","write_failed","samples",
  // "samples_dropped","threads","lost":{"total","buffer_full","kernel","coalesced"},"throttled","rate_lowered",
  // "threads_not_signalled","attach_failed","per_thread":[{"tid","samples","lost","rate_hz"}…],
  // "files":{"perf_data","folded","svg"}} (files null when none was written). docs/formats.md.
  std::string summary_json() const;
  // The file stop() wrote summary_json() to; empty when ProfileOptions::summary is, or when it could not be
  // written (said on stderr, naming the file and SELFPERF_SUMMARY; stop() does not throw for it).
  const std::string& summary_path() const noexcept;
  bool quiet() const noexcept;
  // In a child of fork(), right after it: makes the profile this process's own (a new file, a drain thread,
  // the calling thread attached); what was copied from the parent is dropped unwritten. No-op elsewhere.
  void restart_in_fork_child();
  // Before start(): `fn` runs once on the drain thread after its first pass (50 ms in), when main has begun.
  void after_first_drain(void (*fn)()) noexcept;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Starts a process-wide Profiler from the environment, stopped and written at exit(); returns false when
// SELFPERF_PROFILE is unset. Later calls return whether one is running.
bool profile_from_env();
// Attaches the calling thread to the process-wide profile, if one is running (no-op otherwise).
void profile_attach_this_thread() noexcept;
// Stops and writes the process-wide profile now (also done at exit), then prints its summary() on stderr
// unless SELFPERF_QUIET is set.
void profile_stop() noexcept;
// Call in the child right after fork() (the preload library's fork wrapper does): the child is profiled into a
// file of its own from here on. Without it a forked child is not profiled and writes nothing.
void profile_after_fork_child() noexcept;
// Call right before this process replaces its image with exec*(): stops and writes the profile, as exit()
// would. Without it a sample signal the kernel queued during the exec (its work counts as the thread's CPU
// time) arrives after exec has reset the handlers, and kills the new program. A no-op in a child of fork() or
// vfork() (the profile, and with vfork its memory, are the parent's). The preload library calls it from its
// exec wrappers; a program that calls profile_from_env() itself and then execs calls it first.
void profile_before_exec() noexcept;

}  // namespace selfperf
