#pragma once
// The other profilers the sampler benchmarks run beside ours on the same workload: gperftools' CPU profiler
// (preloaded into a child) and what its profile holds. `perf record` needs nothing but its command line.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace selfperf_bench {

inline constexpr const char* kGperftools = "/usr/lib/x86_64-linux-gnu/libprofiler.so.0";

// Samples in a gperftools CPU profile: machine words, a 5-word header (0, 3, 0, period in µs, 0), then records
// (count, depth, depth pcs) up to the trailer (0, 1, 0). -1 when the file is not one.
inline double gperftools_samples(const std::string& path) {
  std::vector<std::uintptr_t> words;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::uintptr_t w = 0;
    while (std::fread(&w, sizeof w, 1, f) == 1) words.push_back(w);
    std::fclose(f);
  }
  if (words.size() < 8 || words[0] != 0 || words[1] != 3) return -1;
  double samples = 0;
  for (std::size_t i = 5; i + 1 < words.size();) {
    const std::uintptr_t count = words[i], depth = words[i + 1];
    if (count == 0 && depth == 1) return samples;  // the trailer
    samples += static_cast<double>(count);
    i += 2 + depth;
  }
  return -1;
}

}  // namespace selfperf_bench
