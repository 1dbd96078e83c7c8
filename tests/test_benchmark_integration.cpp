#include <doctest.h>

#include <map>
#include <string>

#include <sys/mman.h>

#include <selfperf/benchmark.hpp>

namespace {

// Captures the counters Google Benchmark reports, per benchmark name.
class Capture : public benchmark::BenchmarkReporter {
 public:
  std::map<std::string, benchmark::UserCounters> counters;
  std::map<std::string, benchmark::IterationCount> iterations;
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      counters[run.benchmark_name()] = run.counters;
      iterations[run.benchmark_name()] = run.iterations;
    }
  }
};

constexpr std::size_t kPages = 64;

void touch_fresh_pages(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"page-faults:u", "task-clock:u"});
  for (auto _ : state) {
    auto* block = static_cast<char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (std::size_t i = 0; i < kPages; ++i) block[i * 4096] = 1;
    benchmark::DoNotOptimize(block);
    munmap(block, kPages * 4096);
  }
}

}  // namespace

TEST_CASE("BenchmarkCounters reports per-iteration event counts in state.counters") {
  int argc = 1;
  char arg0[] = "test";
  char* argv[] = {arg0, nullptr};
  benchmark::Initialize(&argc, argv);
  benchmark::RegisterBenchmark("fresh_pages", touch_fresh_pages)->Iterations(50);
  Capture capture;
  benchmark::RunSpecifiedBenchmarks(&capture);
  const std::string name = "fresh_pages/iterations:50";
  REQUIRE(capture.counters.count(name) == 1);
  auto& c = capture.counters[name];
  REQUIRE(c.count("page-faults:u") == 1);
  REQUIRE(c.count("task-clock:u") == 1);
  CHECK(capture.iterations[name] == 50);
  // kAvgIterations: Google Benchmark has already divided by the iteration count when it reports.
  CHECK((c["page-faults:u"].flags & benchmark::Counter::kAvgIterations) != 0);
  const double per_iteration = c["page-faults:u"].value;
  CHECK(per_iteration >= static_cast<double>(kPages));
  // Per iteration, not per run (50 iterations): sanitizer shadow memory faults extra pages, so the bound is loose.
  CHECK(per_iteration < static_cast<double>(kPages) * 20);
  CHECK(c.count("IPC") == 0);  // no cycles/instructions in this set
}
