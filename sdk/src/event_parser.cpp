// Interim parser (software and generic hardware names only); replaced by the full parser.
#include <array>
#include <string>

#include "selfperf/error.hpp"
#include "selfperf/event.hpp"

namespace selfperf {
namespace {
struct Named { const char* name; std::uint32_t type; std::uint64_t config; };
constexpr std::array<Named, 8> kNames{{
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"dummy", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY},
}};
}  // namespace

EventSpec parse_event(std::string_view text) { return parse_event(text, EventRoots{}); }

EventSpec parse_event(std::string_view text, const EventRoots&) {
  std::string_view base = text.substr(0, text.find(':'));
  std::string_view mods = base.size() < text.size() ? text.substr(base.size() + 1) : std::string_view{};
  for (const auto& n : kNames) {
    if (base == n.name) {
      EventSpec s;
      s.type = n.type;
      s.config = n.config;
      s.name = std::string(text);
      s.pmu = n.type == PERF_TYPE_SOFTWARE ? "software" : "cpu";
      for (char c : mods) {
        if (c == 'u') { s.exclude_kernel = s.exclude_hv = true; s.explicit_privilege = true; }
        else if (c == 'k') { s.exclude_user = s.exclude_hv = true; s.explicit_privilege = true; }
        else throw Error("malformed modifier in '" + std::string(text) + "'");
      }
      return s;
    }
  }
  throw Error("unknown event '" + std::string(text) + "'");
}

std::vector<std::string> known_event_names() {
  std::vector<std::string> out;
  for (const auto& n : kNames) out.emplace_back(n.name);
  return out;
}

}  // namespace selfperf
