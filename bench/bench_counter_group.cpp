// CounterGroup::read() against a raw read(2) of the same leader fd, in the same run.
// Target: the group read costs no more than 1.10x the raw syscall (median CPU time; wall time on a shared
// VM is dominated by preemption).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "selfperf/counter_group.hpp"

namespace {

selfperf::CounterGroup& group_of(int members) {
  static selfperf::CounterGroup one{"task-clock"};
  static selfperf::CounterGroup three{"task-clock", "page-faults", "cpu-clock"};
  static bool enabled = (one.enable(), three.enable(), true);
  (void)enabled;
  return members == 1 ? one : three;
}

void BM_GroupRead(benchmark::State& state) {
  auto& group = group_of(static_cast<int>(state.range(0)));
  selfperf::GroupReading r;
  for (auto _ : state) {
    group.read(r);
    benchmark::DoNotOptimize(r);
  }
}

void BM_RawRead(benchmark::State& state) {
  auto& group = group_of(static_cast<int>(state.range(0)));
  std::uint64_t buf[3 + 2 * selfperf::kMaxGroupMembers];
  for (auto _ : state) {
    benchmark::DoNotOptimize(::read(group.leader_fd(), buf, sizeof buf));
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_RawRead)->Arg(1)->Arg(3)->Repetitions(9)->ReportAggregatesOnly(true);
BENCHMARK(BM_GroupRead)->Arg(1)->Arg(3)->Repetitions(9)->ReportAggregatesOnly(true);

// Collects the medians so the ratios can be printed side by side after the run.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> medians;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs)
      if (run.aggregate_name == "median") medians[run.run_name.function_name + "/" + run.run_name.args] = run.GetAdjustedCPUTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  int failures = 0;
  for (const char* members : {"1", "3"}) {
    double group = reporter.medians[std::string("BM_GroupRead/") + members];
    double raw = reporter.medians[std::string("BM_RawRead/") + members];
    if (raw <= 0) continue;
    double ratio = group / raw;
    bool ok = ratio <= 1.10;
    failures += !ok;
    std::printf("ratio CounterGroup::read(%s members) / raw read(2) = %.3f (target <= 1.10) %s\n", members, ratio,
                ok ? "PASS" : "FAIL");
  }
  return failures ? 1 : 0;
}
