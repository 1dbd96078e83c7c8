#pragma once
// perf's breakpoint syntax, `mem:ADDR[/LEN][:ACCESS][:MODIFIERS]` (PERF_TYPE_BREAKPOINT): a hardware
// watchpoint on data (ACCESS r, w or rw) or a breakpoint on an instruction (x).
#include <optional>
#include <string_view>

#include "selfperf/event.hpp"

namespace selfperf::detail {

// Empty when `text` does not start with "mem:"; otherwise the event, or selfperf::Error naming the part
// that is wrong and the syntax.
std::optional<EventSpec> parse_breakpoint(std::string_view text);

}  // namespace selfperf::detail
