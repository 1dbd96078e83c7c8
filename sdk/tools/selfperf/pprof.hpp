#pragma once
// pprof's profile.proto (gzipped), the format `go tool pprof`, Pyroscope, Parca and Cloud Profiler read:
// from any stack profile, so from any perf.data through perf_data_stacks().
#include <cstdint>
#include <iosfwd>
#include <string>

#include "selfperf/flame_graph.hpp"

namespace selfperf::tool {

struct PprofOptions {
  std::string sample_type = "samples";  // the value each stack's count is ("samples", "count")
  std::string sample_unit = "count";
  // Nanoseconds one sample stands for (e.g. 1e9 / frequency); adds a second value "cpu"/"nanoseconds" when
  // non-zero, so pprof shows time as well as samples.
  std::uint64_t period_ns = 0;
};

// Writes the gzipped protobuf. Throws selfperf::Error if the stream fails.
void write_pprof(const StackCounts& stacks, std::ostream& out, const PprofOptions& options = {});

}  // namespace selfperf::tool
