#pragma once
// The feature sections a selfperf perf.data file carries, built at close() from the host and the writer's state.
#include <cstdint>
#include <string>
#include <vector>

#include "selfperf/perf_data.hpp"

namespace selfperf::detail {

struct FeatureSection {
  unsigned bit = 0;
  std::vector<std::uint8_t> bytes;
};

struct FeatureInputs {
  const std::vector<EventDescription>* events = nullptr;
  std::vector<std::string> cmdline;
  std::vector<std::string> mapped_files;  // candidates for HEADER_BUILD_ID
  std::uint64_t first_time = 0;
  std::uint64_t last_time = 0;
};

// In bit order, as perf expects the section table.
std::vector<FeatureSection> build_features(const FeatureInputs& in);

std::string self_comm();
// The name of thread `tid` of this process; the process's name when the thread is gone.
std::string thread_comm(int tid);
std::vector<std::string> self_cmdline();

// One build id entry of `file` as the BUILD_ID feature holds it (record type 0) or as a pipe-mode
// PERF_RECORD_HEADER_BUILD_ID (type 67); false, nothing appended, when the file has no build id.
bool put_build_id_entry(std::vector<std::uint8_t>& out, const std::string& file, std::uint32_t type = 0);

// perf_header_string: u32 length (padded to 64, NUL included), then the zero-padded text.
void put_header_string(std::vector<std::uint8_t>& out, const std::string& text);

}  // namespace selfperf::detail
