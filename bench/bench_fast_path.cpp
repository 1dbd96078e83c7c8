// Cost of the self-read fast path, side by side with what it competes against, in one run.
// Medians of repetitions; ratios printed at the end.
//   read_mmap_page on a synthetic page (fake PMC read inlined, real rdtsc) vs a bare rdtsc: target <= 2x.
//   read_mmap_pages with 1 and 4 pages; clock_gettime(CLOCK_MONOTONIC) for scale.
//   Where cycles allows rdpmc: bare rdpmc vs read_self (target <= 1.5x), in TSC ticks per read too.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <linux/perf_event.h>
#include <sys/mman.h>

#include "events/perf_syscall.hpp"
#include "selfperf/hw_read.hpp"
#include "interleaved.hpp"
#include "selfperf/mmap_read.hpp"

namespace {

constexpr int kRepetitions = 31;
constexpr double kMinTime = 0.01;

// A readable page with the TSC time fields a 3 GHz x86 machine publishes.
perf_event_mmap_page synthetic_page(std::uint32_t index) {
  perf_event_mmap_page page{};
  page.cap_bit0_is_deprecated = 1;
  page.cap_user_rdpmc = 1;
  page.cap_user_time = 1;
  page.cap_user_time_zero = 1;
  page.index = index;
  page.offset = -123456;
  page.pmc_width = 48;
  page.time_enabled = 1'000'000;
  page.time_running = 900'000;
  page.time_mult = 1431655765;
  page.time_shift = 32;
  page.time_offset = static_cast<std::uint64_t>(-5'000'000'000LL);
  return page;
}

perf_event_mmap_page g_pages[4] = {synthetic_page(1), synthetic_page(2), synthetic_page(3), synthetic_page(4)};

// Stands in for rdpmc: inlined, no memory access, depends on its argument.
inline std::uint64_t fake_pmc(std::uint32_t counter) noexcept { return std::uint64_t{counter} * 1000 + 7; }
inline std::uint64_t rdtsc() noexcept { return selfperf::detail::rdtsc(); }

// Every benchmark also reports TSC ticks per iteration (about reference cycles).
template <class Body>
void run_with_ticks(benchmark::State& state, Body body) {
  const std::uint64_t start = rdtsc();
  for (auto _ : state) body();
  const std::uint64_t ticks = rdtsc() - start;
  state.counters["tsc_ticks"] =
      benchmark::Counter(static_cast<double>(ticks) / static_cast<double>(state.iterations()));
}

// Medians of short repetitions (the reported figure), plus the minimum: on a loaded machine whose other
// hyper-thread is busy the medians of uop-heavy code inflate more than those of a bare rdtsc, and the
// minimum shows the uncontended cost.
void repeated(benchmark::internal::Benchmark* b) {
  b->Repetitions(kRepetitions)->ReportAggregatesOnly(true)->MinTime(kMinTime);
  b->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

void BM_rdtsc(benchmark::State& state) {
  run_with_ticks(state, [] { benchmark::DoNotOptimize(rdtsc()); });
}

void BM_clock_gettime(benchmark::State& state) {
  run_with_ticks(state, [] {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    benchmark::DoNotOptimize(ts);
  });
}

void BM_read_mmap_page(benchmark::State& state) {
  const volatile perf_event_mmap_page& page = g_pages[0];
  run_with_ticks(state, [&] { benchmark::DoNotOptimize(selfperf::read_mmap_page(page, fake_pmc, rdtsc)); });
}

void BM_read_mmap_pages(benchmark::State& state) {
  const volatile perf_event_mmap_page* pages[4] = {&g_pages[0], &g_pages[1], &g_pages[2], &g_pages[3]};
  const std::span<const volatile perf_event_mmap_page* const> group(pages, static_cast<std::size_t>(state.range(0)));
  selfperf::PageReading out[4];
  run_with_ticks(state, [&] {
    benchmark::DoNotOptimize(selfperf::read_mmap_pages(group, out, fake_pmc, rdtsc));
    benchmark::DoNotOptimize(out);
  });
}

// What the fast path costs before a fallback: read_self on a real software event's page, which
// refuses (cap_user_rdpmc clear) on every machine.
void BM_read_self_refusing_page(benchmark::State& state) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const selfperf::detail::Fd fd(selfperf::detail::perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  void* map = fd ? mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd.get(), 0) : MAP_FAILED;
  if (map == MAP_FAILED) {
    state.SkipWithError("task-clock or its mmap failed");
    return;
  }
  const auto& page = *static_cast<const volatile perf_event_mmap_page*>(map);
  run_with_ticks(state, [&] { benchmark::DoNotOptimize(selfperf::read_self(page)); });
  munmap(map, 4096);
}

BENCHMARK(BM_rdtsc)->Apply(repeated);
BENCHMARK(BM_clock_gettime)->Apply(repeated);
BENCHMARK(BM_read_mmap_page)->Apply(repeated);
BENCHMARK(BM_read_mmap_pages)->Arg(1)->Arg(4)->Apply(repeated);
BENCHMARK(BM_read_self_refusing_page)->Apply(repeated);

// ---- Real hardware, where the PMU allows it ------------------------------------------------------------

struct HardwareCycles {
  selfperf::detail::Fd fd;
  void* map = nullptr;
  const volatile perf_event_mmap_page* page = nullptr;
};

// cycles:u of this thread with a page allowing rdpmc, or no page.
HardwareCycles open_hardware_cycles() {
  HardwareCycles hw;
  if (!selfperf::kUserPmcReadSupported) return hw;
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  hw.fd = selfperf::detail::Fd(selfperf::detail::perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (!hw.fd) return hw;
  hw.map = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, hw.fd.get(), 0);
  if (hw.map == MAP_FAILED) {
    hw.map = nullptr;
    return hw;
  }
  const auto* page = static_cast<const volatile perf_event_mmap_page*>(hw.map);
  for (int i = 0; i < 100 && !selfperf::read_self(*page); ++i) {
    volatile int spin = 0;
    for (int j = 0; j < 100000; ++j) spin = spin + 1;
  }
  if (selfperf::read_self(*page)) hw.page = page;
  return hw;
}

#if defined(__x86_64__)
void register_hardware_benchmarks(const volatile perf_event_mmap_page& page) {
  const std::uint32_t counter = page.index - 1;
  benchmark::RegisterBenchmark("BM_rdpmc", [counter](benchmark::State& state) {
    run_with_ticks(state, [counter] { benchmark::DoNotOptimize(selfperf::detail::rdpmc(counter)); });
  })->Apply(repeated);
  benchmark::RegisterBenchmark("BM_read_self", [&page](benchmark::State& state) {
    run_with_ticks(state, [&page] { benchmark::DoNotOptimize(selfperf::read_self(page)); });
  })->Apply(repeated);
}
#endif

// Keeps the console output and remembers each benchmark's median and minimum CPU time per operation
// (ns) and median TSC ticks. Ratios use CPU time: on a shared, loaded machine real time also counts
// the time this thread sat preempted.
class AggregateRecorder : public benchmark::ConsoleReporter {
 public:
  struct Figures {
    double median_ns = 0, min_ns = 0, median_ticks = 0;
  };
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Aggregate) continue;
      std::string name = run.run_name.function_name;
      if (!run.run_name.args.empty()) name += "/" + run.run_name.args;
      Figures& f = figures[name];
      if (run.aggregate_name == "median") {
        f.median_ns = run.GetAdjustedCPUTime();
        if (auto it = run.counters.find("tsc_ticks"); it != run.counters.end()) f.median_ticks = it->second.value;
      } else if (run.aggregate_name == "min") {
        f.min_ns = run.GetAdjustedCPUTime();
      }
    }
  }
  std::map<std::string, Figures> figures;
};

void print_ratio(const AggregateRecorder& r, const char* what, const std::string& a, const std::string& b,
                 double target = 0) {
  const auto ia = r.figures.find(a), ib = r.figures.find(b);
  if (ia == r.figures.end() || ib == r.figures.end() || ib->second.median_ns <= 0 || ib->second.min_ns <= 0) return;
  const double ratio = ia->second.median_ns / ib->second.median_ns;
  std::printf("  %-40s %6.2fx  (min %5.2fx)", what, ratio, ia->second.min_ns / ib->second.min_ns);
  if (target > 0) std::printf("   target <= %.2fx: %s", target, ratio <= target ? "met" : "MISSED");
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  selfperf_bench::initialize_interleaved(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const HardwareCycles hw = open_hardware_cycles();
#if defined(__x86_64__)
  if (hw.page) register_hardware_benchmarks(*hw.page);
#endif
  AggregateRecorder recorder;
  benchmark::RunSpecifiedBenchmarks(&recorder);

  std::printf("\nRatios of CPU time per operation, medians of %d interleaved repetitions (and minima):\n",
              kRepetitions);
  print_ratio(recorder, "read_mmap_page (synthetic) / rdtsc", "BM_read_mmap_page", "BM_rdtsc", 2.0);
  print_ratio(recorder, "read_mmap_pages, 1 page / rdtsc", "BM_read_mmap_pages/1", "BM_rdtsc");
  print_ratio(recorder, "read_mmap_pages, 4 pages / rdtsc", "BM_read_mmap_pages/4", "BM_rdtsc");
  print_ratio(recorder, "read_mmap_pages, 4 pages / 1 page", "BM_read_mmap_pages/4", "BM_read_mmap_pages/1");
  print_ratio(recorder, "read_mmap_page / clock_gettime", "BM_read_mmap_page", "BM_clock_gettime");
  print_ratio(recorder, "clock_gettime / rdtsc", "BM_clock_gettime", "BM_rdtsc");
  print_ratio(recorder, "read_self on a refusing page / rdtsc", "BM_read_self_refusing_page", "BM_rdtsc");
  if (hw.page) {
    print_ratio(recorder, "read_self (rdpmc) / bare rdpmc", "BM_read_self", "BM_rdpmc", 1.5);
  } else {
    std::printf("  (no rdpmc-capable cycles event here: %s; bare rdpmc vs read_self not measured)\n",
                hw.map ? "its page refuses" : "cycles does not open");
  }
  std::printf("TSC ticks per operation (median, wall clock):\n");
  for (const auto& [name, f] : recorder.figures) std::printf("  %-28s %7.1f\n", name.c_str(), f.median_ticks);
  benchmark::Shutdown();
  return 0;
}
