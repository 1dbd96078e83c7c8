#pragma once
// The generic event names perf knows without sysfs: hardware, software and hw-cache.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace selfperf::detail {

struct GenericEvent {
  std::uint32_t type;
  std::uint64_t config;
  std::string canonical;  // "cycles", "page-faults", "L1-dcache-load-misses"
  const char* pmu;        // "cpu" or "software"
};

// Hardware and software names with perf's spellings (cycles/cpu-cycles, faults, cs, …); case-sensitive
// like perf's lexer.
std::optional<GenericEvent> find_generic_event(std::string_view name);

// <cache>[-<op>][-<result>] with perf's aliases for each part (L1-dcache/l1d, load/loads/read,
// miss/misses, …), case-insensitive like perf. config = cache | op << 8 | result << 16. A missing op means
// load, a missing result means access, as in perf.
std::optional<GenericEvent> decode_hw_cache_event(std::string_view name);

}  // namespace selfperf::detail
