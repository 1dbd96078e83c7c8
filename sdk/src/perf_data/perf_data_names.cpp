// Names perf prints for features and record types, so dumps read like perf report -D / --header.
#include <array>
#include <cstdio>

#include "selfperf/perf_data.hpp"

namespace selfperf {

std::string perf_feature_name(unsigned bit) {
  static constexpr std::array<const char*, 32> names = {
      "RESERVED",      "TRACING_DATA",  "BUILD_ID",     "HOSTNAME",  "OSRELEASE",     "VERSION",
      "ARCH",          "NRCPUS",        "CPUDESC",      "CPUID",     "TOTAL_MEM",     "CMDLINE",
      "EVENT_DESC",    "CPU_TOPOLOGY",  "NUMA_TOPOLOGY", "BRANCH_STACK", "PMU_MAPPINGS", "GROUP_DESC",
      "AUXTRACE",      "STAT",          "CACHE",        "SAMPLE_TIME", "MEM_TOPOLOGY", "CLOCKID",
      "DIR_FORMAT",    "BPF_PROG_INFO", "BPF_BTF",      "COMPRESSED", "CPU_PMU_CAPS", "CLOCK_DATA",
      "HYBRID_TOPOLOGY", "PMU_CAPS"};
  if (bit < names.size()) return names[bit];
  return "feature " + std::to_string(bit);
}

std::string perf_record_type_name(std::uint32_t type) {
  switch (type) {
    case PERF_RECORD_MMAP: return "MMAP";
    case PERF_RECORD_LOST: return "LOST";
    case PERF_RECORD_COMM: return "COMM";
    case PERF_RECORD_EXIT: return "EXIT";
    case PERF_RECORD_THROTTLE: return "THROTTLE";
    case PERF_RECORD_UNTHROTTLE: return "UNTHROTTLE";
    case PERF_RECORD_FORK: return "FORK";
    case PERF_RECORD_READ: return "READ";
    case PERF_RECORD_SAMPLE: return "SAMPLE";
    case PERF_RECORD_MMAP2: return "MMAP2";
    case PERF_RECORD_AUX: return "AUX";
    case PERF_RECORD_ITRACE_START: return "ITRACE_START";
    case PERF_RECORD_LOST_SAMPLES: return "LOST_SAMPLES";
    case PERF_RECORD_SWITCH: return "SWITCH";
    case PERF_RECORD_SWITCH_CPU_WIDE: return "SWITCH_CPU_WIDE";
    case PERF_RECORD_NAMESPACES: return "NAMESPACES";
    case PERF_RECORD_KSYMBOL: return "KSYMBOL";
    case PERF_RECORD_BPF_EVENT: return "BPF_EVENT";
    case PERF_RECORD_CGROUP: return "CGROUP";
    case PERF_RECORD_TEXT_POKE: return "TEXT_POKE";
    case 64: return "ATTR";
    case 65: return "EVENT_TYPE";
    case 66: return "TRACING_DATA";
    case 67: return "BUILD_ID";
    case 68: return "FINISHED_ROUND";
    case 69: return "ID_INDEX";
    case 70: return "AUXTRACE_INFO";
    case 71: return "AUXTRACE";
    case 72: return "AUXTRACE_ERROR";
    case 73: return "THREAD_MAP";
    case 74: return "CPU_MAP";
    case 75: return "STAT_CONFIG";
    case 76: return "STAT";
    case 77: return "STAT_ROUND";
    case 78: return "EVENT_UPDATE";
    case 79: return "TIME_CONV";
    case 80: return "FEATURE";
    case 81: return "COMPRESSED";
    case 82: return "FINISHED_INIT";
    default: return "type " + std::to_string(type);
  }
}

std::string build_id_hex(const std::vector<std::uint8_t>& build_id) {
  std::string out;
  char buf[3];
  for (auto b : build_id) {
    std::snprintf(buf, sizeof buf, "%02x", b);
    out += buf;
  }
  return out;
}

}  // namespace selfperf
