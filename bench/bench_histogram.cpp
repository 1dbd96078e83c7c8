// Histogram::record() against the two things a user would otherwise do per value: bump a plain array bucket,
// or push the raw value into a std::vector. Same run, same values, medians of CPU time, ratios printed at the end.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "interleaved.hpp"
#include "selfperf/histogram.hpp"

namespace {

constexpr std::size_t kBatch = 4096;

// Latency-like values: log-normal around a few microseconds in ns, spanning several powers of two.
const std::vector<std::uint64_t>& values() {
  static const std::vector<std::uint64_t> v = [] {
    std::mt19937_64 rng(1);
    std::lognormal_distribution<double> dist(8.0, 1.5);
    std::vector<std::uint64_t> out(kBatch);
    for (auto& x : out) x = static_cast<std::uint64_t>(dist(rng));
    return out;
  }();
  return v;
}

void BM_HistogramRecord(benchmark::State& state) {
  auto h = std::make_unique<selfperf::Histogram>();
  const auto& v = values();
  for (auto _ : state) {
    for (auto x : v) h->record(x);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(h->count());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBatch));
}

void BM_HistogramRecordCount(benchmark::State& state) {
  auto h = std::make_unique<selfperf::Histogram>();
  const auto& v = values();
  for (auto _ : state) {
    for (auto x : v) h->record(x, 3);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(h->count());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBatch));
}

// The floor: one increment of an array slot chosen by a trivial index (no bucketing, no statistics).
void BM_ArrayIncrement(benchmark::State& state) {
  auto counts = std::make_unique<std::uint64_t[]>(selfperf::Histogram::kBucketCount);
  const auto& v = values();
  for (auto _ : state) {
    for (auto x : v) counts[x % selfperf::Histogram::kBucketCount] += 1;
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(counts[0]);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBatch));
}

// Keeping raw values for sorting later; clear() keeps the capacity, so this is the amortised best case.
void BM_VectorPushBack(benchmark::State& state) {
  std::vector<std::uint64_t> out;
  out.reserve(kBatch);
  const auto& v = values();
  for (auto _ : state) {
    out.clear();
    for (auto x : v) out.push_back(x);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(out.data());
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kBatch));
}

BENCHMARK(BM_ArrayIncrement)->Repetitions(9)->ReportAggregatesOnly(true);
BENCHMARK(BM_VectorPushBack)->Repetitions(9)->ReportAggregatesOnly(true);
BENCHMARK(BM_HistogramRecord)->Repetitions(9)->ReportAggregatesOnly(true);
BENCHMARK(BM_HistogramRecordCount)->Repetitions(9)->ReportAggregatesOnly(true);

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> medians;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs)
      if (run.aggregate_name == "median") medians[run.run_name.function_name] = run.GetAdjustedCPUTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  selfperf_bench::initialize_interleaved(argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const double record = reporter.medians["BM_HistogramRecord"];
  const double record_count = reporter.medians["BM_HistogramRecordCount"];
  const double array = reporter.medians["BM_ArrayIncrement"];
  const double vec = reporter.medians["BM_VectorPushBack"];
  if (record <= 0 || array <= 0 || vec <= 0) return 0;  // filtered run
  std::printf("per value (median CPU): record %.2f ns, record(v, n) %.2f ns, array increment %.2f ns, "
              "vector push_back %.2f ns\n",
              record / kBatch, record_count / kBatch, array / kBatch, vec / kBatch);
  std::printf("ratio Histogram::record / bare array increment = %.2f\n", record / array);
  std::printf("ratio Histogram::record(v, n) / bare array increment = %.2f\n", record_count / array);
  std::printf("ratio Histogram::record / vector push_back = %.2f\n", record / vec);
  return 0;
}
