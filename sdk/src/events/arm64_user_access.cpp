// The `rdpmc` and `long` format terms of arm64 PMUs (see arm64_user_access.hpp).
#include "events/arm64_user_access.hpp"

#include "events/perf_syscall.hpp"
#include "events/pmu_sysfs.hpp"

namespace selfperf::detail {

std::vector<UserAccessPmu> user_access_pmus(const std::filesystem::path& root) noexcept {
  std::vector<UserAccessPmu> out;
  try {
    for (const std::string& name : list_pmus(root)) {
      try {
        PmuDirectory dir(root, name);
        const auto rdpmc = dir.format("rdpmc", name);
        if (!rdpmc) continue;
        UserAccessPmu pmu{name, dir.type(name), rdpmc->word, rdpmc->mask, 0};
        if (const auto wide = dir.format("long", name); wide && wide->word == rdpmc->word) pmu.long_bits = wide->mask;
        out.push_back(std::move(pmu));
      } catch (...) {
        // A PMU whose files cannot be read is one we cannot ask for user access on: its events take read(2).
      }
    }
  } catch (...) {
  }
  return out;
}

const UserAccessPmu* user_access_pmu_for(const perf_event_attr& attr, const std::vector<UserAccessPmu>& pmus) noexcept {
  for (const UserAccessPmu& pmu : pmus)
    if (pmu.type == attr.type) return &pmu;
  const bool generic = attr.type == PERF_TYPE_HARDWARE || attr.type == PERF_TYPE_HW_CACHE || attr.type == PERF_TYPE_RAW;
  return generic && !pmus.empty() ? &pmus.front() : nullptr;
}

void request_user_access(perf_event_attr& attr, const UserAccessPmu& pmu, bool with_long) noexcept {
  const std::uint64_t bits = pmu.rdpmc_bits | (with_long ? pmu.long_bits : 0);
  switch (pmu.word) {
    case 0: attr.config |= bits; break;
    case 1: attr.config1 |= bits; break;
    case 2: attr.config2 |= bits; break;
    default: break;
  }
}

std::atomic<std::uint64_t>& user_access_32bit_fallbacks() noexcept {
  static std::atomic<std::uint64_t> count{0};
  return count;
}

std::string perf_user_access_sysctl() { return read_text_file("/proc/sys/kernel/perf_user_access"); }

}  // namespace selfperf::detail
