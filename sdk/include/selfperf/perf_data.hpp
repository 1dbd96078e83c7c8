#pragma once
// Vocabulary shared by the perf.data writer and reader (the PERFILE2 format of perf record / perf report).
#include <cstdint>
#include <string>
#include <vector>

#include <linux/perf_event.h>

namespace selfperf {

// Feature bits of the perf.data header (tools/perf/util/header.h); each set bit owns a section after the data.
enum class PerfFeature : unsigned {
  tracing_data = 1,
  build_id = 2,
  hostname = 3,
  osrelease = 4,
  version = 5,
  arch = 6,
  nrcpus = 7,
  cpudesc = 8,
  cpuid = 9,
  total_mem = 10,
  cmdline = 11,
  event_desc = 12,
  cpu_topology = 13,
  numa_topology = 14,
  branch_stack = 15,
  pmu_mappings = 16,
  group_desc = 17,
  auxtrace = 18,
  stat = 19,
  cache = 20,
  sample_time = 21,
  mem_topology = 22,
  clockid = 23,
  dir_format = 24,
  bpf_prog_info = 25,
  bpf_btf = 26,
  compressed = 27,
  cpu_pmu_caps = 28,
  clock_data = 29,
  hybrid_topology = 30,
  pmu_caps = 31,
};
inline constexpr unsigned kPerfFeatureBits = 256;

// The name perf prints for a feature ("HOSTNAME", …), "feature N" for unknown bits.
std::string perf_feature_name(unsigned bit);

// perf-tool record types (>= PERF_RECORD_USER_TYPE_START) that perf record adds to the kernel's.
enum PerfUserRecordType : std::uint32_t {
  kPerfRecordHeaderAttr = 64,
  kPerfRecordHeaderEventType = 65,    // pipe mode, obsolete
  kPerfRecordHeaderTracingData = 66,  // pipe mode: u32 size, then that many bytes (8-aligned) after the record
  kPerfRecordHeaderBuildId = 67,
  kPerfRecordFinishedRound = 68,
  kPerfRecordIdIndex = 69,
  kPerfRecordHeaderFeature = 80,  // pipe mode: u64 feature bit, then the feature section's bytes
  kPerfRecordFinishedInit = 82,
};

// The name perf report -D prints for a record type ("SAMPLE", "MMAP2", …).
std::string perf_record_type_name(std::uint32_t type);

// One event of a profile: its name as the user wrote it, the attribute it was opened with, and the kernel ids
// its file descriptors got (PERF_EVENT_IOC_ID); samples are matched to events by these ids.
struct EventDescription {
  std::string name;
  perf_event_attr attr{};
  std::vector<std::uint64_t> ids;
};

// One NT_GNU_BUILD_ID of a mapped ELF file.
struct BuildIdEntry {
  std::int32_t pid = -1;  // -1: perf's "host" machine
  std::uint16_t misc = 0;
  std::vector<std::uint8_t> build_id;  // at most 20 bytes
  std::string filename;
};

// Hex text of a build id, as perf buildid-list prints it.
std::string build_id_hex(const std::vector<std::uint8_t>& build_id);

// The NT_GNU_BUILD_ID note of an ELF file; empty when the file has none or is not ELF.
std::vector<std::uint8_t> read_elf_build_id(const std::string& path);

}  // namespace selfperf
