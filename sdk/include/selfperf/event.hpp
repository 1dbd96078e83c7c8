#pragma once
// Event names as perf users write them: `cycles:u`, `L1-dcache-load-misses`, `r01c2`,
// `cpu/event=0x3c,umask=0x0/`, PMU aliases from sysfs, `sched:sched_switch`, software events, breakpoints
// `mem:0x1000/8:w`.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <linux/perf_event.h>

namespace selfperf {

struct EventSpec {
  std::uint32_t type = PERF_TYPE_SOFTWARE;
  std::uint64_t config = 0;
  std::uint64_t config1 = 0;
  std::uint64_t config2 = 0;
  bool exclude_user = false;
  bool exclude_kernel = false;
  bool exclude_hv = false;
  bool exclude_idle = false;
  bool exclude_host = false;
  bool exclude_guest = false;
  std::uint8_t precise_ip = 0;   // :p, :pp, :ppp
  // Breakpoints (`mem:ADDR/LEN:rwx`): HW_BREAKPOINT_R|W|X; the address is config1 and the length config2,
  // the places bp_addr and bp_len share with them in perf_event_attr.
  std::uint32_t bp_type = 0;
  // True when the text named the privilege level (:u :k :h); such an event is opened exactly as written,
  // never silently narrowed to user-only.
  bool explicit_privilege = false;
  std::string name;  // canonical name, e.g. "cycles:u", "cpu/event=0x3c,umask=0x0/"
  std::string pmu;   // PMU directory name under sysfs ("cpu", "software", "tracepoint", …)

  // Needs a hardware PMU (hardware, hw-cache, raw, or a dynamic PMU other than software/tracepoint/breakpoint).
  bool needs_hardware_pmu() const noexcept;
  // Counted in kernel context even when the task is in user mode (context-switches, cpu-migrations):
  // user-only counting of these always reads 0.
  bool counts_in_kernel_only() const noexcept;
};

// Where the parser looks. Tests point these at a fake tree.
struct EventRoots {
  std::filesystem::path pmus = "/sys/bus/event_source/devices";
  // Searched in order for `events/<subsys>/<name>/id`.
  std::vector<std::filesystem::path> tracefs = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
};

// Throws selfperf::Error naming the offending text and what would be accepted.
EventSpec parse_event(std::string_view text);
EventSpec parse_event(std::string_view text, const EventRoots& roots);

// A list of events as perf takes it after -e: `a,b,{c,d}`, commas inside a PMU's slashes not splitting.
// Each brace group is one group; events outside braces form one group each. Throws selfperf::Error on
// unbalanced or nested braces and empty items.
std::vector<std::vector<std::string>> split_event_groups(std::string_view text);

// The attribute to open `spec` with (counting mode, disabled, no sampling); callers add what they need.
perf_event_attr to_attr(const EventSpec& spec) noexcept;

// The generic names the parser knows (hardware, software, hw-cache), for listings and suggestions.
std::vector<std::string> known_event_names();

}  // namespace selfperf
