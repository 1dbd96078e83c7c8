#pragma once
// What this machine lets a process measure about itself, and why not where it doesn't.
#include <iosfwd>
#include <cstdint>
#include <string>
#include <vector>

namespace selfperf {

struct CapabilityReport {
  std::string machine;                 // uname -m: x86_64, aarch64, …
  int perf_event_paranoid = 2;
  bool privileged = false;             // CAP_PERFMON or CAP_SYS_ADMIN: paranoid limits do not apply
  bool kernel_counting = false;        // exclude_kernel=0 allowed
  bool perf_event_open = false;        // a software event opens at all (false under seccomp/ENOSYS)
  std::string perf_event_open_error;
  std::vector<std::string> pmus;       // /sys/bus/event_source/devices
  bool hardware_events = false;        // `cycles` opens
  std::string hardware_error;          // why not
  std::string page_event;              // the event whose mmap page was inspected
  bool cap_user_rdpmc = false;
  bool cap_user_time = false;
  bool cap_user_time_zero = false;
  bool cap_user_time_short = false;
  std::string rdpmc_sysfs;             // /sys/bus/event_source/devices/cpu/rdpmc, or "absent"
  // arm64: /proc/sys/kernel/perf_user_access ("absent" where the kernel has none, as on x86-64), and the
  // PMUs whose events can ask for user access (their `rdpmc` format term).
  std::string perf_user_access = "absent";
  std::vector<std::string> user_access_pmus;
  std::uint64_t counters_32bit = 0;    // events opened with 32-bit counters: the PMU refused `long`
  long perf_event_mlock_kb = -1;
  long perf_event_max_sample_rate = -1;
  std::string tracefs;                 // where tracefs is mounted, or "not mounted"

  // The read path a CounterGroup of hardware events would take here, in words.
  std::string fast_path_verdict() const;
};

CapabilityReport probe();
std::ostream& operator<<(std::ostream& out, const CapabilityReport& report);

}  // namespace selfperf
