#pragma once
// The profiler's end-of-run summary as JSON (Profiler::summary_json), and writing it where SELFPERF_SUMMARY
// says.
#include <cstdint>
#include <string>

#include "selfperf/sampler.hpp"
#include "selfperf/unwind.hpp"

namespace selfperf::detail {

// What one profiled process knows at stop().
struct ProfileSummaryFacts {
  std::int64_t pid = 0;
  std::string comm;
  std::string event;
  std::uint64_t frequency_hz = 0;
  Unwinder unwinder = Unwinder::libunwind;
  std::uint64_t samples = 0;          // written to the perf.data file
  std::uint64_t samples_dropped = 0;  // drained after a write error
  bool write_failed = false;
  std::string perf_data;  // empty: no file written
  bool rendered = true;   // .folded and .svg written beside it (ProfileOptions::render)
  const Sampler::Totals* totals = nullptr;
};

std::string profile_summary_json(const ProfileSummaryFacts& facts);

// Writes `json` to the first free name `pattern` gives (claim_profile_output: %p, OUT.<pid>, …) and returns
// that name. Throws selfperf::Error naming the file and SELFPERF_SUMMARY when it cannot be written.
std::string write_profile_summary(const std::string& pattern, std::int64_t run_start_ns, const std::string& json);

}  // namespace selfperf::detail
