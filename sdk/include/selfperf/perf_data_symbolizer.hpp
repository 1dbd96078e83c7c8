#pragma once
// PerfDataSymbolizer: names for the addresses of a perf.data file, ours or perf record's, from its MMAP/MMAP2,
// COMM and FORK records: each process image's executable mappings are reported to libdwfl at their load bias, so the
// file can be read after the process is gone, on the machine that recorded it (the files must still be there;
// build ids are not checked). Not for signal handlers.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "selfperf/flame_graph.hpp"
#include "selfperf/perf_data_reader.hpp"

namespace selfperf {

class PerfDataSymbolizer {
 public:
  PerfDataSymbolizer();
  ~PerfDataSymbolizer();
  PerfDataSymbolizer(const PerfDataSymbolizer&) = delete;
  PerfDataSymbolizer& operator=(const PerfDataSymbolizer&) = delete;

  // Feed every record in file order: COMM (an exec starts a new image: its mappings replace the old ones),
  // MMAP/MMAP2 and FORK (a child starts with its parent's image) change what name() answers for a pid.
  void observe(const PerfDataReader& reader, const PerfRecord& record);

  // The function at `address` in process `pid`'s current image (a return address is looked up one byte
  // earlier, so that a call ending a function is not given to the next one); "[module]" where the module has
  // no symbol or FDE there (as stackcollapse-perf groups them), "module+0x<FDE start>" where an FDE covers it
  // (one name per function, as SymbolInfo::display_name), "[kernel]" for kernel addresses, "[unknown]" outside
  // every mapping.
  std::string name(std::uint32_t pid, std::uint64_t address, bool return_address);
  // The process's current command name, "pid N" when the file never named it.
  std::string comm(std::uint32_t pid) const;

 private:
  struct Image;
  std::map<std::uint32_t, std::shared_ptr<Image>> images_;  // by pid; a fork shares its parent's until it changes
  Image& writable(std::uint32_t pid);
};

// Calls fn for every record of the file in time order (sample times, and the sample_id_all time of the others;
// records without one keep their place). perf writes each CPU's buffer a round at a time, so a sample can come
// before the MMAP of the image it ran in: symbolizing in file order would miss it. Reads the file from its start.
void for_each_record_in_time_order(PerfDataReader& reader, const std::function<void(const PerfRecord&)>& fn);

struct PerfDataStackOptions {
  bool comm_root = false;     // each stack under its process's command name ("comm;main;…")
  std::size_t max_depth = 0;  // 0: every frame
};

// Every sample's stack, root first, weighted by one sample each (reads the file from its start).
StackCounts perf_data_stacks(PerfDataReader& reader, const PerfDataStackOptions& options = {});

}  // namespace selfperf
