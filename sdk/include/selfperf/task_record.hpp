#pragma once
// Decoding of the ring-buffer records that describe tasks rather than samples: PERF_RECORD_FORK/EXIT
// (attr.task), PERF_RECORD_COMM (attr.comm) and PERF_RECORD_MMAP2 (attr.mmap + mmap2), as a watcher of other
// processes needs them to follow new threads and name what it sampled. Same rules as record.hpp: every field
// bounds-checked, no allocation, no throw; the strings point into the RecordView's bytes.
#include <cstdint>
#include <string_view>

#include "selfperf/record.hpp"

namespace selfperf {

struct TaskRecord {  // PERF_RECORD_FORK or PERF_RECORD_EXIT
  bool exit = false;
  std::uint32_t pid = 0, ppid = 0;
  std::uint32_t tid = 0, ptid = 0;
  std::uint64_t time = 0;
  SampleId sample_id;
};

struct CommRecord {  // PERF_RECORD_COMM
  std::uint32_t pid = 0, tid = 0;
  std::string_view comm;
  bool exec = false;  // PERF_RECORD_MISC_COMM_EXEC: the name changed because the task exec'd
  SampleId sample_id;
};

struct Mmap2Record {  // PERF_RECORD_MMAP2 (the maj/min/ino form, not the build-id one)
  std::uint32_t pid = 0, tid = 0;
  std::uint64_t addr = 0, len = 0, pgoff = 0;
  std::uint32_t maj = 0, min = 0;
  std::uint64_t ino = 0, ino_generation = 0;
  std::uint32_t prot = 0, flags = 0;
  std::string_view filename;
  SampleId sample_id;
};

DecodeStatus decode_task(const RecordView& record, const SampleFormat& format, TaskRecord& out) noexcept;
DecodeStatus decode_comm(const RecordView& record, const SampleFormat& format, CommRecord& out) noexcept;
DecodeStatus decode_mmap2(const RecordView& record, const SampleFormat& format, Mmap2Record& out) noexcept;

}  // namespace selfperf
