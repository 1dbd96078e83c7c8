#pragma once
// Tracepoints `subsys:name`: their perf config is the id tracefs publishes in events/<subsys>/<name>/id.
#include <string_view>

#include "events/event_modifiers.hpp"
#include "selfperf/event.hpp"

namespace selfperf::detail {

// Throws selfperf::Error when tracefs is not mounted (and how root mounts it), not readable by this user,
// or has no such subsystem or tracepoint (with the nearest names).
EventSpec tracepoint_event(std::string_view subsys, std::string_view name, const Modifiers& mods,
                           std::string_view text, const EventRoots& roots);

// Whether some readable tracefs root has events/<subsys>: tells `sched:u`-style text (a tracepoint whose
// name looks like modifiers) from an unknown event with modifiers.
bool tracepoint_subsystem_exists(std::string_view subsys, const EventRoots& roots);

}  // namespace selfperf::detail
