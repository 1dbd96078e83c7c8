#include "selfperf/event.hpp"

#include <cstring>

namespace selfperf {

bool EventSpec::needs_hardware_pmu() const noexcept {
  switch (type) {
    case PERF_TYPE_HARDWARE:
    case PERF_TYPE_HW_CACHE:
    case PERF_TYPE_RAW:
      return true;
    case PERF_TYPE_SOFTWARE:
    case PERF_TYPE_TRACEPOINT:
    case PERF_TYPE_BREAKPOINT:
      return false;
    default:  // dynamic PMUs: only the core/uncore ones count hardware
      return pmu != "software" && pmu != "tracepoint" && pmu != "breakpoint" && pmu != "kprobe" &&
             pmu != "uprobe";
  }
}

bool EventSpec::counts_in_kernel_only() const noexcept {
  if (type == PERF_TYPE_TRACEPOINT) return true;
  return type == PERF_TYPE_SOFTWARE &&
         (config == PERF_COUNT_SW_CONTEXT_SWITCHES || config == PERF_COUNT_SW_CPU_MIGRATIONS);
}

perf_event_attr to_attr(const EventSpec& spec) noexcept {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = spec.type;
  attr.config = spec.config;
  attr.config1 = spec.config1;
  attr.config2 = spec.config2;
  attr.exclude_user = spec.exclude_user;
  attr.exclude_kernel = spec.exclude_kernel;
  attr.exclude_hv = spec.exclude_hv;
  attr.exclude_idle = spec.exclude_idle;
  attr.exclude_host = spec.exclude_host;
  attr.exclude_guest = spec.exclude_guest;
  attr.precise_ip = spec.precise_ip & 3u;
  attr.bp_type = spec.bp_type;
  attr.disabled = 1;
  return attr;
}

}  // namespace selfperf
