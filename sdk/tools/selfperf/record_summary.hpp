#pragma once
// selfperf record --summary-json: the run's summary as JSON, from the merge and from the summary each profiled
// process wrote (SELFPERF_SUMMARY, Profiler::summary_json), which alone knows why samples were lost.
#include <filesystem>
#include <string>
#include <vector>

#include "merge.hpp"

namespace selfperf::tool {

struct RecordOutcome {
  std::vector<std::string> command;
  int exit_status = 0;
  const MergeSummary* merged = nullptr;  // null: no process took a sample, nothing merged
  std::uint64_t folded_samples = 0;
  std::filesystem::path perf_data, folded, svg;
};

// The JSON of the run (docs/formats.md), from `outcome` and the process summaries, the files in `dir`; a summary
// that does not parse (its process killed while writing it) is named on stderr and left out.
std::string record_summary_json(const RecordOutcome& outcome, const std::filesystem::path& dir);

// Writes `json` to `path`; throws selfperf::Error naming it with the remedy.
void write_text_file(const std::filesystem::path& path, const std::string& json);

}  // namespace selfperf::tool
