#pragma once
// Merging the profiles the processes of one run wrote (one perf.data per process image) into one perf.data
// that perf reads with every process in it, and its folded stacks and flame graph.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace selfperf::tool {

struct ProcessSummary {
  std::filesystem::path file;
  std::string comm;
  std::uint32_t pid = 0;
  std::uint64_t samples = 0;
  std::uint64_t lost = 0;
  std::size_t threads = 0;
};

struct MergeSummary {
  std::vector<ProcessSummary> processes;  // one per input file: a process image (exec makes a new one)
  std::uint64_t samples = 0;
  std::uint64_t lost = 0;
  std::size_t threads = 0;
  std::uint64_t folded_samples = 0;
};

// Writes `out` from `inputs` (perf.data files written by selfperf's profiler with one same event): their
// COMM and MMAP records, each at the time of its file's first sample, their samples and losses. `cmdline`
// goes to HEADER_CMDLINE. Throws selfperf::Error naming a file that cannot be read or written.
MergeSummary merge_profiles(const std::vector<std::filesystem::path>& inputs, const std::filesystem::path& out,
                            const std::vector<std::string>& cmdline);

// Writes `folded` and `svg` from the merged perf.data, symbolized here, once for the whole run (the processes
// write no stacks of their own: SELFPERF_RENDER=0), each process's stacks under a root frame naming it (comm),
// as perf's flame graphs do. Returns the samples they hold.
std::uint64_t render_merged(const std::filesystem::path& merged, const std::filesystem::path& folded,
                            const std::filesystem::path& svg, const std::string& title);

}  // namespace selfperf::tool
