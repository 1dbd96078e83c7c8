#pragma once
// Events of a named PMU: `pmu/term=value,term,alias/` with terms resolved through sysfs, and bare aliases.
#include <string_view>

#include "events/event_modifiers.hpp"
#include "selfperf/event.hpp"

namespace selfperf::detail {

// `text` is a whole event written `pmu/terms/` with optional modifiers after the closing slash
// (`cpu/event=0x3c/u` or `cpu/event=0x3c/:u`).
EventSpec parse_pmu_event(std::string_view text, const EventRoots& roots);

// The event `pmu/<alias>/` for a bare alias name found in that PMU's events/ directory; `text` is what the
// user wrote, for messages.
EventSpec pmu_alias_event(std::string_view pmu, std::string_view alias, const Modifiers& mods,
                          std::string_view text, const EventRoots& roots);

}  // namespace selfperf::detail
