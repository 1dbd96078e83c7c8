#pragma once
// Benchmarks reported as ratios run their repetitions interleaved in random order, so that load from other
// processes on a shared machine, or a change of clock during the run, falls on every row alike instead of
// skewing the ratios. A --benchmark_enable_random_interleaving on the command line still wins (it comes later).
#include <benchmark/benchmark.h>

#include <vector>

namespace selfperf_bench {

inline void initialize_interleaved(int& argc, char**& argv) {
  static char flag[] = "--benchmark_enable_random_interleaving=true";
  static std::vector<char*> args;
  args.assign(argv, argv + argc);
  args.insert(args.begin() + 1, flag);
  args.push_back(nullptr);  // argv[argc] is null, as in main's
  argc = static_cast<int>(args.size()) - 1;
  argv = args.data();
  benchmark::Initialize(&argc, argv);
}

}  // namespace selfperf_bench
