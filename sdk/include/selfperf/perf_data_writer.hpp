#pragma once
// PerfDataWriter: streams samples into a perf.data file (PERFILE2) that perf report / perf script read.
//
// Layout: header | ids | attrs | data (records, written as they arrive through a bounded buffer) |
// feature section table | features. The header is valid from the start and its data size covers every
// flushed record, so perf reads a file whose writer was killed up to the last flush (sync()); the features
// are written by close().
//
// Pipe mode (PerfDataWriterOptions::pipe, or the path "-" for standard output) writes what `perf record -o -`
// writes, every byte once and in order, so the descriptor may be a pipe, a socket or a terminal:
// a 16-byte header | one HEADER_ATTR record per event | HEADER_FEATURE records | the records, each
// executable file's HEADER_BUILD_ID just before its first MMAP2. `perf report -i -` and `perf script -i -` read it.
#include <array>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "selfperf/perf_data.hpp"
#include "selfperf/sample.hpp"

namespace selfperf {

struct PerfDataWriterOptions {
  // HEADER_CMDLINE; empty: this process's /proc/self/cmdline.
  std::vector<std::string> cmdline;
  // Write COMM and MMAP2 records for this process (from /proc/self/maps) before the first sample, so perf
  // can resolve its addresses. Turn off to write records for another process with write_comm/write_mmap2.
  bool synthesize_process = true;
  // Bytes of records held before a write(2); memory use does not grow with the number of samples.
  std::size_t buffer_bytes = 64 * 1024;
  // Pipe-mode perf.data: no seek, no rewrite of the header, features first. Has no SAMPLE_TIME feature (it
  // would have to come before the samples); a feature larger than a record (64 KiB) is left out. A reader
  // gets the records up to the last sync(); a reader that went away is an Error (EPIPE), never a SIGPIPE.
  bool pipe = false;
};

// One executable mapping as an MMAP2 record describes it.
struct Mmap2Info {
  std::int32_t pid = 0;
  std::int32_t tid = 0;
  std::uint64_t start = 0;
  std::uint64_t len = 0;
  std::uint64_t pgoff = 0;
  std::uint32_t maj = 0;
  std::uint32_t min = 0;
  std::uint64_t ino = 0;
  std::uint64_t ino_generation = 0;
  std::uint32_t prot = 0;
  std::uint32_t flags = 0;
  std::string filename;
};

// The executable mappings of this process, from /proc/self/maps.
std::vector<Mmap2Info> read_self_executable_maps();
// The executable mappings of process `pid`, from /proc/PID/maps (empty when it cannot be read: gone, or
// another user's).
std::vector<Mmap2Info> read_executable_maps(pid_t pid);

class PerfDataWriter {
 public:
  // Creates (truncates) `path` and writes the attrs; "-" is standard output, in pipe mode. Every event's attr is written with size 128
  // (PERF_ATTR_SIZE_VER7, the largest perf 6.1 accepts), sample_id_all set, and the sample_type this writer
  // encodes: IDENTIFIER|IP|TID|TIME|CPU|PERIOD|CALLCHAIN, plus ADDR/DATA_SRC/WEIGHT when the event's attr asked
  // for them (memory sampling), and BRANCH_STACK (Sample::branches; the hardware index too when
  // branch_sample_type has PERF_SAMPLE_BRANCH_HW_INDEX; the file then has the BRANCH_STACK feature, which puts
  // perf report in branch mode). Events without ids get made-up ones so every sample can name its event.
  PerfDataWriter(const std::filesystem::path& path, std::vector<EventDescription> events,
                 PerfDataWriterOptions options = {});
  // Writes into `fd` (open for writing, empty; the writer owns it from here, closed on error too); `path`
  // names it in messages.
  PerfDataWriter(int fd, const std::filesystem::path& path, std::vector<EventDescription> events,
                 PerfDataWriterOptions options = {});
  ~PerfDataWriter();  // closes if close() was not called; errors there are lost, so call close()
  PerfDataWriter(const PerfDataWriter&) = delete;
  PerfDataWriter& operator=(const PerfDataWriter&) = delete;

  // The event is the one whose ids contain sample.id; with a single event, that event.
  void write_sample(const Sample& sample);
  void write_sample(const Sample& sample, std::size_t event_index);
  // PERF_RECORD_LOST: `lost` samples of event `event_index` that never reached the writer.
  void write_lost(std::uint64_t lost, std::size_t event_index = 0);
  // `time` (perf clock) places the record among the samples: a merged file holds the COMM of every image a
  // pid ran (exec), each from the time of its first sample, so perf names each sample by the image that took it.
  // `exec`: the name changed because the task exec'd (PERF_RECORD_MISC_COMM_EXEC): perf then drops the old
  // image's mappings.
  void write_comm(std::int32_t pid, std::int32_t tid, const std::string& comm, std::uint64_t time = 0,
                  bool exec = false);
  void write_mmap2(const Mmap2Info& map, std::uint64_t time = 0);
  // PERF_RECORD_FORK (`exit` false: a new thread or process, which perf names and maps as its parent) or
  // PERF_RECORD_EXIT, for records of other processes (ProcessWatcher's).
  void write_task(bool exit, std::int32_t pid, std::int32_t ppid, std::int32_t tid, std::int32_t ptid,
                  std::uint64_t time);
  // MMAP2 records for executable mappings of this process not written yet (after dlopen, say).
  void synthesize_self_mmaps();
  // No record written after this one is older than any written before the previous round: call it after a
  // complete drain of all ring buffers (perf record's rule), so perf may sort in bounded windows.
  void write_finished_round();

  // Writes the buffered records and updates the header to cover them: what a crash from now on leaves is
  // readable up to here. Throws on I/O errors.
  void sync();

  // In a child of fork(): closes this process's copy of the descriptor without writing anything, so that the
  // parent's file, which the copy shares, is left to the parent. The writer is closed from then on.
  void abandon() noexcept;

  // Flushes the records, writes the features and the final header. Throws on I/O errors.
  void close();

  const std::vector<EventDescription>& events() const noexcept { return events_; }
  std::uint64_t samples_written() const noexcept { return samples_; }
  std::uint64_t lost_written() const noexcept { return lost_; }

 private:
  void init();
  std::size_t event_for(const Sample& sample) const;
  void append(const void* bytes, std::size_t size);
  void append_sample_id(std::int32_t pid, std::int32_t tid, std::uint64_t time, std::uint32_t cpu);
  void flush();
  void write_at(std::uint64_t offset, const void* bytes, std::size_t size);
  void write_features();
  void write_header(const std::array<std::uint64_t, 4>& feature_bits);
  void write_pipe_start();
  void append_build_id(const std::string& file);
  void write_kernel_mmap();

  std::filesystem::path path_;
  std::vector<EventDescription> events_;
  PerfDataWriterOptions options_;
  int fd_ = -1;
  std::vector<std::uint8_t> buffer_;
  std::vector<std::uint8_t> scratch_;
  std::uint64_t data_offset_ = 0;
  std::uint64_t data_size_ = 0;
  std::uint64_t samples_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t first_time_ = 0;
  std::uint64_t last_time_ = 0;
  std::set<std::string> mapped_files_;
  std::set<std::uint64_t> mapped_starts_;
  std::set<std::int32_t> named_threads_;
  bool process_synthesized_ = false;
};

}  // namespace selfperf
