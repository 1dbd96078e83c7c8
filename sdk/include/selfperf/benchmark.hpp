#pragma once
// Google Benchmark integration (target selfperf::benchmark): counters read once before and once after the
// timed loop and reported per iteration in state.counters.
//
//   static void BM_parse(benchmark::State& state) {
//     selfperf::BenchmarkCounters counters(state);   // reads the group here …
//     for (auto _ : state) parse(input);
//   }                                                  // … and here, then fills state.counters
//
// Counters: each event per iteration ("page-faults:u"), IPC, branch_miss% and cache_miss% where their events
// are present, and in per-iteration mode "<event>_p50", "<event>_p99", "<event>_max". Under ->Threads(N) every
// one of them is what a single thread measures (per iteration and per thread; percentiles and ratios are the
// mean of the threads'), so runs with different thread counts compare directly. An event that was never
// scheduled reports "<event>_not_counted" instead of a zero.
//
// An event set that does not open (no PMU, perf_event_paranoid, seccomp) skips the benchmark with
// state.SkipWithError(<reason>), as Google Benchmark expects; the other benchmarks still run.
//
// Per-iteration histogram mode: read the group around every iteration and report p50/p99/max per event
// (costs two group reads per iteration, so use it for iterations much longer than a read):
//
//     selfperf::BenchmarkCounters counters(state, events, {.per_iteration = true});
//     for (auto _ : state) {
//       auto iteration = counters.iteration();
//       handle(message);
//     }
//
// Events: selfperf::default_events() (SELFPERF_EVENTS, or cycles/instructions/branch-misses with a PMU, or
// task-clock/page-faults/context-switches without) unless given. IPC and miss rates are added when their
// events are present. Unlike --benchmark_perf_counters this needs no libpfm (Debian's libbenchmark is built
// without it) and accepts every perf event name selfperf parses.
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "selfperf/counter_group.hpp"

namespace selfperf {

class Histogram;

struct BenchmarkCounterOptions {
  bool per_iteration = false;  // also keep a histogram of every iteration's delta per event
};

class BenchmarkCounters {
 public:
  explicit BenchmarkCounters(benchmark::State& state);
  BenchmarkCounters(benchmark::State& state, const std::vector<std::string>& events,
                    BenchmarkCounterOptions options = {});
  ~BenchmarkCounters();
  BenchmarkCounters(const BenchmarkCounters&) = delete;
  BenchmarkCounters& operator=(const BenchmarkCounters&) = delete;

  // Reads the group and publishes the counters now (the destructor does it otherwise).
  void stop();

  // RAII: one iteration's deltas into the per-event histograms (per_iteration mode only).
  class Iteration {
   public:
    explicit Iteration(BenchmarkCounters& counters);
    ~Iteration();
    Iteration(const Iteration&) = delete;
    Iteration& operator=(const Iteration&) = delete;

   private:
    BenchmarkCounters& counters_;
    GroupReading before_;
  };
  // Throws selfperf::Error unless constructed with per_iteration = true.
  Iteration iteration();

 private:
  benchmark::State& state_;
  CounterGroup* group_ = nullptr;  // null when the events did not open (the benchmark is skipped with the reason)
  bool per_iteration_ = false;
  GroupReading before_;
  std::unique_ptr<Histogram[]> histograms_;  // per event, per_iteration mode only
  bool stopped_ = false;
};

}  // namespace selfperf
