#include <doctest.h>

#include <map>
#include <string>

#include <sys/mman.h>

#include <selfperf/benchmark.hpp>
#include <selfperf/error.hpp>

namespace {

// Captures the counters Google Benchmark reports, per benchmark name.
class Capture : public benchmark::BenchmarkReporter {
 public:
  std::map<std::string, benchmark::UserCounters> counters;
  std::map<std::string, benchmark::IterationCount> iterations;
  std::map<std::string, std::string> errors;  // benchmarks skipped with SkipWithError, and why
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      counters[run.benchmark_name()] = run.counters;
      iterations[run.benchmark_name()] = run.iterations;
      if (run.error_occurred) errors[run.benchmark_name()] = run.error_message;
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

namespace {
void per_iteration(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"page-faults:u"}, {.per_iteration = true});
  std::size_t n = 0;
  for (auto _ : state) {
    auto iteration = counters.iteration();
    // Every tenth iteration faults 64 fresh pages, the others none: p50 is 0, max at least 64.
    if (++n % 10 == 0) {
      auto* block = static_cast<char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE,
                                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      for (std::size_t i = 0; i < kPages; ++i) block[i * 4096] = 1;
      munmap(block, kPages * 4096);
    }
  }
}
void misuse(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"page-faults:u"});
  std::string error;
  for (auto _ : state) {
    try {
      auto iteration = counters.iteration();
    } catch (const selfperf::Error& e) {
      error = e.what();
    }
  }
  state.counters["refused"] = error.find("per_iteration = true") != std::string::npos;
}
}  // namespace

TEST_CASE("per-iteration mode reports the distribution of iteration deltas") {
  benchmark::RegisterBenchmark("per_iteration", per_iteration)->Iterations(100);
  benchmark::RegisterBenchmark("misuse", misuse)->Iterations(1);
  Capture capture;
  benchmark::RunSpecifiedBenchmarks(&capture);
  auto& c = capture.counters["per_iteration/iterations:100"];
  REQUIRE(c.count("page-faults:u_p50") == 1);
  CHECK(c["page-faults:u_p50"].value == 0);
  CHECK(c["page-faults:u_max"].value >= static_cast<double>(kPages));
  CHECK(c["page-faults:u_p99"].value >= static_cast<double>(kPages));  // 10 % of iterations fault
  CHECK(capture.counters["misuse/iterations:1"]["refused"].value == 1);
}

namespace {
void unknown_event(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"page-faults:u", "no-such-event"});
  for (auto _ : state) benchmark::DoNotOptimize(state.iterations());
}
void after_unknown_event(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"page-faults:u"}, {.per_iteration = true});
  for (auto _ : state) auto iteration = counters.iteration();
}
}  // namespace

TEST_CASE("an event set that does not open skips that benchmark with the reason; the next one still runs") {
  // Before: the Error left the benchmark function, std::terminate ended the program, the next benchmark was lost.
  benchmark::RegisterBenchmark("unknown_event", unknown_event)->Iterations(3);
  benchmark::RegisterBenchmark("after_unknown_event", after_unknown_event)->Iterations(3);
  Capture capture;
  benchmark::RunSpecifiedBenchmarks(&capture);
  REQUIRE(capture.errors.count("unknown_event/iterations:3") == 1);
  CHECK(capture.errors["unknown_event/iterations:3"].find("no-such-event") != std::string::npos);
  CHECK(capture.counters["unknown_event/iterations:3"].empty());
  CHECK(capture.errors.count("after_unknown_event/iterations:3") == 0);
  CHECK(capture.counters["after_unknown_event/iterations:3"].count("page-faults:u") == 1);
}

namespace {
// Every iteration of every thread faults kPages fresh pages: per iteration and per thread, page-faults is
// kPages (plus what the allocator and sanitizers add) however many threads run.
void fresh_pages_per_iteration(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"page-faults:u", "task-clock:u"}, {.per_iteration = true});
  for (auto _ : state) {
    auto iteration = counters.iteration();
    auto* block = static_cast<char*>(mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (std::size_t i = 0; i < kPages; ++i) block[i * 4096] = 1;
    benchmark::DoNotOptimize(block);
    munmap(block, kPages * 4096);
  }
}
}  // namespace

TEST_CASE("under Threads(N) every counter is what one thread measures, not the sum over threads") {
  benchmark::RegisterBenchmark("threads", fresh_pages_per_iteration)->Iterations(40)->Threads(1)->Threads(2);
  Capture capture;
  benchmark::RunSpecifiedBenchmarks(&capture);
  REQUIRE(capture.counters.count("threads/iterations:40/threads:1") == 1);
  REQUIRE(capture.counters.count("threads/iterations:40/threads:2") == 1);
  auto& one = capture.counters["threads/iterations:40/threads:1"];
  auto& two = capture.counters["threads/iterations:40/threads:2"];
  for (const char* name : {"page-faults:u", "page-faults:u_p50", "page-faults:u_p99", "page-faults:u_max"}) {
    INFO(name << ": one thread " << one[name].value << ", two threads " << two[name].value);
    REQUIRE(one.count(name) == 1);
    REQUIRE(two.count(name) == 1);
    CHECK(one[name].value >= static_cast<double>(kPages));
    CHECK(two[name].value >= static_cast<double>(kPages));
    // Summed over the two threads (the old flags) this would be at least twice one thread's count.
    CHECK(two[name].value < 1.5 * one[name].value);
  }
  CHECK(two.count("task-clock:u_p50") == 1);
}
