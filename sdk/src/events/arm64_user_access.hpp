#pragma once
// arm64 PMUs give user space its counters only for events that ask (the `rdpmc` format term, config1:1), and
// 64-bit counters only with `long` (config1:0). This file finds those terms in sysfs and adds them to the
// events perf_event_open(2) is given; it does nothing where no PMU has an `rdpmc` format term (x86-64).
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <linux/perf_event.h>

namespace selfperf::detail {

// One PMU whose format directory has the `rdpmc` term (armv8_pmuv3, armv8_pmuv3_0, armv8_cortex_a53, … several
// on big.LITTLE: they are discovered, not named here).
struct UserAccessPmu {
  std::string name;
  std::uint32_t type = 0;
  unsigned word = 1;            // the config word both terms live in (config1 on every arm64 kernel so far)
  std::uint64_t rdpmc_bits = 0;
  std::uint64_t long_bits = 0;  // 0 where the PMU has no `long` term
};

// The PMUs under `root` (/sys/bus/event_source/devices) with an `rdpmc` format term; unreadable ones skipped.
std::vector<UserAccessPmu> user_access_pmus(const std::filesystem::path& root) noexcept;

// The PMU an event opened with attr.type lands on: its own (a dynamic type), or for the generic hardware types
// the first CPU PMU (every armv8 PMU has the same terms). Null when none.
const UserAccessPmu* user_access_pmu_for(const perf_event_attr& attr, const std::vector<UserAccessPmu>& pmus) noexcept;

// Adds the PMU's `rdpmc` bits, and its `long` bits when with_long, to attr's config word.
void request_user_access(perf_event_attr& attr, const UserAccessPmu& pmu, bool with_long) noexcept;

// How many events were opened with 32-bit counters because the PMU refused `long` (EOPNOTSUPP: a PMU without
// 64-bit event counters, e.g. Cortex-A72, for any event but cycles). Reported by probe().
std::atomic<std::uint64_t>& user_access_32bit_fallbacks() noexcept;

// /proc/sys/kernel/perf_user_access: "0", "1", or "" where the kernel has no such sysctl (x86-64).
std::string perf_user_access_sysctl();

}  // namespace selfperf::detail
