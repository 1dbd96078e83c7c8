#pragma once
// Google Benchmark integration (target selfperf::benchmark): counters read once before and once after the
// timed loop and reported per iteration in state.counters.
//
//   static void BM_parse(benchmark::State& state) {
//     selfperf::BenchmarkCounters counters(state);   // reads the group here …
//     for (auto _ : state) parse(input);
//   }                                                  // … and here, then fills state.counters
//
// Events: selfperf::default_events() (SELFPERF_EVENTS, or cycles/instructions/branch-misses with a PMU, or
// task-clock/page-faults/context-switches without) unless given. IPC and miss rates are added when their
// events are present. Unlike --benchmark_perf_counters this needs no libpfm (Debian's libbenchmark is built
// without it) and accepts every perf event name selfperf parses.
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "selfperf/counter_group.hpp"

namespace selfperf {

class BenchmarkCounters {
 public:
  explicit BenchmarkCounters(benchmark::State& state);
  BenchmarkCounters(benchmark::State& state, const std::vector<std::string>& events);
  ~BenchmarkCounters();
  BenchmarkCounters(const BenchmarkCounters&) = delete;
  BenchmarkCounters& operator=(const BenchmarkCounters&) = delete;

  // Reads the group and publishes the counters now (the destructor does it otherwise).
  void stop();

 private:
  benchmark::State& state_;
  CounterGroup* group_;
  GroupReading before_;
  bool stopped_ = false;
};

}  // namespace selfperf
