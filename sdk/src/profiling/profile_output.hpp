#pragma once
// Where a profiled process writes its perf.data, so that no process of a run (wrappers, exec'd programs,
// children) overwrites another's profile, while the profile of an earlier run is replaced as perf record does.
#include <cstdint>
#include <string>
#include <sys/types.h>

namespace selfperf::detail {

// The run this process belongs to: its start time (CLOCK_REALTIME_COARSE, the clock file times come from),
// from SELFPERF_RUN in the environment, or now when this process starts the run (and then exports it, so
// that processes it starts join it). Call once, at profile start.
std::int64_t join_profile_run();

// Opens a file for this process's profile from `pattern` (SELFPERF_PROFILE): %p becomes the pid. The first
// free name of: the expanded pattern, then (without %p) pattern.<pid>, then either with .1, .2, … A name is
// free when it does not exist, or when it is a file that no process of the run holds and that was last
// written before the run started (a profile from an earlier run, replaced). The returned fd is locked
// (flock) as long as it is open, truncated, O_CLOEXEC; `path` receives the name. Throws selfperf::Error
// naming the pattern and `variable` (where the pattern came from) when no name can be created (directory
// missing or not writable).
int claim_profile_output(const std::string& pattern, pid_t pid, std::int64_t run_start_ns, std::string& path,
                         const char* variable = "SELFPERF_PROFILE");

}  // namespace selfperf::detail
