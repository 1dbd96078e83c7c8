#pragma once
// selfperf-doctor's diagnosis: what the process environment allows, why not, and the command that fixes it.
// Kept apart from the live checks so that situations this machine cannot produce (perf_event_paranoid 3, no
// perf support in the kernel) are tested with hand-made inputs.
#include <string>
#include <vector>

#include <selfperf/probe.hpp>

namespace selfperf::doctor {

// What the doctor observes about its own process, beyond selfperf::probe().
struct Environment {
  int open_errno = 0;          // errno of perf_event_open(task-clock, user only, this thread); 0 when it opened
  int seccomp_mode = -1;       // "Seccomp:" of /proc/self/status: 0 none, 1 strict, 2 filter; -1 unknown
  long nofile_limit = -1;      // RLIMIT_NOFILE soft limit; -1 unlimited or unknown
  bool perf_sysctl_present = true;   // /proc/sys/kernel/perf_event_paranoid exists (CONFIG_PERF_EVENTS)
  std::string tracefs_mount;   // where /proc/self/mounts says tracefs is mounted, "" when it is not
};

Environment observe();

// One line of the environment table. `fix` is non-empty wherever `ok` is false (and may carry advice otherwise).
struct Finding {
  std::string name;
  std::string value;
  bool ok = true;
  std::string fix;
};

std::vector<Finding> findings(const CapabilityReport& caps, const Environment& env);

// Why perf_event_open fails in this process, and what to do about it (both "" when it opens).
std::string open_diagnosis(const Environment& env, int paranoid);
std::string open_fix(const Environment& env, int paranoid);

// The fix for a live check that failed with `detail`: perf_event_open's when it does not open here, the
// descriptor limit's when it ran out of them, else `own` (the check's own advice).
std::string failure_fix(const std::string& detail, const Environment& env, const std::string& own);

// Frame-pointer stacks are short in code built without frame pointers.
std::string unwinder_advice();

}  // namespace selfperf::doctor
