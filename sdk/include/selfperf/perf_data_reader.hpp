#pragma once
// PerfDataReader: reads PERFILE2 files, ours and perf record's: header, attrs, feature sections, records.
// Pipe-mode streams (`perf record -o -`: a 16-byte header, then attrs and features as records) are read
// too, from a file or from a pipe ("-" is standard input).
//
// Every size and offset in the file is checked against the file before it is used: a corrupt or truncated
// file gives a selfperf::Error naming the file offset, never a crash or an allocation larger than the file.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "selfperf/perf_data.hpp"
#include "selfperf/perf_data_writer.hpp"

namespace selfperf {

// One record of the data section. `bytes` (header included) is valid until the next call to next_record().
struct PerfRecord {
  std::uint32_t type = 0;
  std::uint16_t misc = 0;
  std::uint16_t size = 0;
  std::uint64_t offset = 0;  // in the file
  std::span<const std::uint8_t> bytes;
};

// The fields of a PERF_RECORD_SAMPLE that its event's sample_type carries (0 / empty otherwise).
struct DecodedSample {
  std::size_t event_index = 0;
  std::uint64_t sample_type = 0;
  std::uint64_t identifier = 0;
  std::uint64_t ip = 0;
  std::uint32_t pid = 0;
  std::uint32_t tid = 0;
  std::uint64_t time = 0;
  std::uint64_t addr = 0;
  std::uint64_t id = 0;
  std::uint64_t stream_id = 0;
  std::uint32_t cpu = 0;
  std::uint64_t period = 0;
  std::vector<std::uint64_t> callchain;  // as recorded, PERF_CONTEXT_* markers included
  std::uint64_t weight = 0;
  std::uint64_t data_src = 0;
  // PERF_SAMPLE_BRANCH_STACK: newest first; the hardware index when branch_sample_type has HW_INDEX.
  std::vector<perf_branch_entry> branches;
  std::uint64_t branch_hw_index = 0;
  std::uint64_t transaction = 0;
  std::uint64_t phys_addr = 0;
  std::uint64_t cgroup = 0;
  std::uint64_t data_page_size = 0;
  std::uint64_t code_page_size = 0;

  // The callchain without its context markers: instruction addresses, leaf first.
  std::vector<std::uint64_t> frames() const;
};

// The sample_id_all trailer of a non-sample record.
struct SampleIdTrailer {
  std::uint32_t pid = 0;
  std::uint32_t tid = 0;
  std::uint64_t time = 0;
  std::uint64_t id = 0;
  std::uint64_t stream_id = 0;
  std::uint32_t cpu = 0;
  std::uint64_t identifier = 0;
};

struct PerfCommRecord {
  std::uint32_t pid = 0;
  std::uint32_t tid = 0;
  std::string comm;
};

struct PerfLostRecord {
  std::uint64_t id = 0;
  std::uint64_t lost = 0;
};

struct NrCpus {
  std::uint32_t available = 0;
  std::uint32_t online = 0;
};

struct ClockData {
  std::uint32_t version = 0;
  std::uint32_t clockid = 0;
  std::uint64_t wall_clock_ns = 0;
  std::uint64_t clockid_time_ns = 0;
};

struct FeatureSectionInfo {
  unsigned bit = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

class PerfDataReader {
 public:
  // Reads the header, attrs and feature table; records are read on demand by next_record().
  // A path that is not a regular file (a FIFO, /dev/stdin, or "-" for standard input) is read to its end
  // first: only a pipe-mode stream can be read that way.
  explicit PerfDataReader(const std::filesystem::path& path);
  // A file already in memory (tests, fuzzing); `name` appears in error messages.
  PerfDataReader(std::vector<std::uint8_t> bytes, std::string name);
  ~PerfDataReader();
  PerfDataReader(PerfDataReader&& other) noexcept;
  PerfDataReader& operator=(PerfDataReader&&) = delete;
  PerfDataReader(const PerfDataReader&) = delete;
  PerfDataReader& operator=(const PerfDataReader&) = delete;

  std::uint64_t file_size() const noexcept { return file_size_; }
  // A pipe-mode stream. Its "data section" is the whole stream after the 16-byte header; next_record()
  // skips the records that stand in for the header (ATTR, EVENT_TYPE, TRACING_DATA, HEADER_FEATURE,
  // HEADER_BUILD_ID), and a stream cut short (the writer killed) ends at its last whole record:
  // truncated_bytes() says how much was left over.
  bool pipe_mode() const noexcept { return pipe_mode_; }
  std::uint64_t truncated_bytes() const noexcept { return truncated_bytes_; }
  std::uint64_t attr_size() const noexcept { return attr_size_; }  // one attrs entry, ids section included
  std::uint64_t data_offset() const noexcept { return data_offset_; }
  std::uint64_t data_size() const noexcept { return data_size_; }
  // Attrs with their ids; names from HEADER_EVENT_DESC when present.
  const std::vector<EventDescription>& events() const noexcept { return events_; }
  // The attr sizes the file declares per event (attr.size; 0 means PERF_ATTR_SIZE_VER0).
  const std::vector<std::uint32_t>& attr_sizes() const noexcept { return attr_sizes_; }

  const std::vector<FeatureSectionInfo>& features() const noexcept { return features_; }
  bool has_feature(PerfFeature f) const noexcept;
  // The raw bytes of a feature section; empty when absent.
  std::vector<std::uint8_t> feature_bytes(PerfFeature f) const;
  // HOSTNAME, OSRELEASE, VERSION, ARCH, CPUDESC, CPUID; empty when absent.
  std::string feature_string(PerfFeature f) const;
  std::vector<std::string> cmdline() const;
  std::optional<NrCpus> nrcpus() const;
  std::optional<std::uint64_t> total_mem_kb() const;
  std::optional<std::pair<std::uint64_t, std::uint64_t>> sample_time() const;
  std::optional<std::uint64_t> clockid_resolution_ns() const;
  std::optional<ClockData> clock_data() const;
  // The BUILD_ID feature's entries, then (pipe mode) those of the HEADER_BUILD_ID records.
  std::vector<BuildIdEntry> build_ids() const;

  // Records in file order; false at the end of the data section.
  bool next_record(PerfRecord& record);
  void rewind() noexcept { cursor_ = data_offset_; }

  DecodedSample decode_sample(const PerfRecord& record) const;
  SampleIdTrailer decode_sample_id(const PerfRecord& record) const;
  PerfCommRecord decode_comm(const PerfRecord& record) const;
  Mmap2Info decode_mmap(const PerfRecord& record) const;  // MMAP or MMAP2
  std::vector<std::uint8_t> decode_mmap2_build_id(const PerfRecord& record) const;  // MISC_MMAP_BUILD_ID only
  PerfLostRecord decode_lost(const PerfRecord& record) const;

 private:
  void load();
  void load_pipe();
  // The size of the record at `offset` in a pipe-mode stream, extra payload included (TRACING_DATA).
  std::uint64_t pipe_record_span(std::uint64_t offset, const perf_event_header& h) const;
  void read_at(std::uint64_t offset, std::uint64_t size, std::uint8_t* out, const char* what) const;
  std::vector<std::uint8_t> read_bytes(std::uint64_t offset, std::uint64_t size, const char* what) const;
  const FeatureSectionInfo* find_feature(PerfFeature f) const noexcept;
  // parse(cursor over feature f's section), or nullopt when the file lacks f; `what` names it in errors.
  template <class Parse>
  auto parse_feature(PerfFeature f, const char* what, Parse parse) const;
  void read_event_desc();
  std::size_t event_index_for_sample(const PerfRecord& record) const;
  std::size_t event_index_for_trailer(const PerfRecord& record) const;

  std::string name_;
  int fd_ = -1;
  std::vector<std::uint8_t> memory_;
  bool in_memory_ = false;
  std::uint64_t file_size_ = 0;
  std::uint64_t attr_size_ = 0;
  std::uint64_t data_offset_ = 0;
  std::uint64_t data_size_ = 0;
  std::vector<EventDescription> events_;
  std::vector<std::uint32_t> attr_sizes_;
  std::vector<FeatureSectionInfo> features_;
  std::vector<FeatureSectionInfo> build_id_records_;  // pipe mode: HEADER_BUILD_ID records, whole
  std::uint64_t cursor_ = 0;
  bool pipe_mode_ = false;
  std::uint64_t truncated_bytes_ = 0;
  std::vector<std::uint8_t> record_;
};

}  // namespace selfperf
