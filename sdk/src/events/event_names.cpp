#include "events/event_names.hpp"

#include <array>
#include <string_view>
#include <vector>

#include <linux/perf_event.h>

#include "selfperf/event.hpp"

namespace selfperf::detail {
namespace {

struct Named {
  const char* name;  // the first spelling of each event is its canonical name
  std::uint32_t type;
  std::uint64_t config;
};

constexpr std::array kGeneric{
    Named{"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    Named{"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    Named{"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    Named{"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    Named{"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    Named{"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    Named{"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    Named{"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    Named{"bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES},
    Named{"stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    Named{"idle-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    Named{"stalled-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    Named{"idle-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
    Named{"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
    Named{"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    Named{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    Named{"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    Named{"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    Named{"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    Named{"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    Named{"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    Named{"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    Named{"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    Named{"migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    Named{"alignment-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS},
    Named{"emulation-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS},
    Named{"dummy", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY},
    Named{"bpf-output", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_BPF_OUTPUT},
    Named{"cgroup-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CGROUP_SWITCHES},
};

// perf's spellings for each part of a hw-cache name; the first of each row is the canonical one, empty
// entries pad the rows. constexpr, so parse_event works even from other translation units' static
// initializers.
using Spellings = std::array<std::string_view, 5>;
constexpr std::array<Spellings, PERF_COUNT_HW_CACHE_MAX> kCaches{{
    {"L1-dcache", "l1-d", "l1d", "L1-data"},
    {"L1-icache", "l1-i", "l1i", "L1-instruction"},
    {"LLC", "L2"},
    {"dTLB", "d-tlb", "Data-TLB"},
    {"iTLB", "i-tlb", "Instruction-TLB"},
    {"branch", "branches", "bpu", "btb", "bpc"},
    {"node"},
}};
constexpr std::array<Spellings, PERF_COUNT_HW_CACHE_OP_MAX> kOps{{
    {"load", "loads", "read"},
    {"store", "stores", "write"},
    {"prefetch", "prefetches", "speculative-read", "speculative-load"},
}};
constexpr std::array<Spellings, PERF_COUNT_HW_CACHE_RESULT_MAX> kResults{{
    {"refs", "Reference", "ops", "access"},
    {"misses", "miss"},
}};
// Plural forms used in canonical names ("L1-dcache-loads", "LLC-prefetches").
constexpr std::array<const char*, PERF_COUNT_HW_CACHE_OP_MAX> kOpPlural{"loads", "stores", "prefetches"};

// Which operations each cache supports in perf's listing (perf's evsel__hw_cache_stat); other
// combinations still parse, the PMU decides whether they open.
constexpr std::array<unsigned, PERF_COUNT_HW_CACHE_MAX> kListedOps{0b111, 0b101, 0b111, 0b111,
                                                                   0b001, 0b001, 0b111};

bool iequal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Matches the longest spelling that is a whole '-'-separated prefix of `text`; returns its row and
// consumes it (and the following '-').
template <std::size_t N>
std::optional<std::size_t> take_part(std::string_view& text, const std::array<Spellings, N>& table) {
  std::optional<std::size_t> row;
  std::size_t longest = 0;
  for (std::size_t r = 0; r < N; ++r) {
    for (std::string_view s : table[r]) {
      if (s.empty() || s.size() <= longest || s.size() > text.size()) continue;
      if (!iequal(text.substr(0, s.size()), s)) continue;
      if (s.size() < text.size() && text[s.size()] != '-') continue;
      row = r;
      longest = s.size();
    }
  }
  if (!row) return std::nullopt;
  text.remove_prefix(longest);
  if (!text.empty()) text.remove_prefix(1);  // the '-'
  return row;
}

std::string cache_name(std::size_t cache, std::size_t op, std::size_t result) {
  std::string name = std::string(kCaches[cache][0]) + "-";
  if (result == PERF_COUNT_HW_CACHE_RESULT_ACCESS) return name + kOpPlural[op];
  return name + std::string(kOps[op][0]) + "-" + std::string(kResults[result][0]);
}

}  // namespace

std::optional<GenericEvent> find_generic_event(std::string_view name) {
  for (const auto& n : kGeneric) {
    if (name == n.name) {
      // Canonical spelling: the first entry with the same type and config.
      for (const auto& c : kGeneric) {
        if (c.type == n.type && c.config == n.config)
          return GenericEvent{n.type, n.config, c.name, n.type == PERF_TYPE_SOFTWARE ? "software" : "cpu"};
      }
    }
  }
  return std::nullopt;
}

std::optional<GenericEvent> decode_hw_cache_event(std::string_view name) {
  if (name.empty() || name.back() == '-') return std::nullopt;
  auto cache = take_part(name, kCaches);
  if (!cache) return std::nullopt;
  std::optional<std::size_t> op, result;
  // perf takes the op and the result in either order, each at most once.
  while (!name.empty()) {
    if (!op && (op = take_part(name, kOps))) continue;
    if (!result && (result = take_part(name, kResults))) continue;
    return std::nullopt;
  }
  std::size_t o = op.value_or(PERF_COUNT_HW_CACHE_OP_READ);
  std::size_t r = result.value_or(PERF_COUNT_HW_CACHE_RESULT_ACCESS);
  return GenericEvent{PERF_TYPE_HW_CACHE, *cache | (o << 8) | (r << 16), cache_name(*cache, o, r), "cpu"};
}

}  // namespace selfperf::detail

namespace selfperf {

std::vector<std::string> known_event_names() {
  std::vector<std::string> out;
  for (const auto& n : detail::kGeneric) out.emplace_back(n.name);
  for (std::size_t c = 0; c < PERF_COUNT_HW_CACHE_MAX; ++c) {
    for (std::size_t o = 0; o < PERF_COUNT_HW_CACHE_OP_MAX; ++o) {
      if (!((detail::kListedOps[c] >> o) & 1u)) continue;
      for (std::size_t r = 0; r < PERF_COUNT_HW_CACHE_RESULT_MAX; ++r)
        out.push_back(detail::cache_name(c, o, r));
    }
  }
  return out;
}

}  // namespace selfperf
