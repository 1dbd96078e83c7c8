// Google Benchmark with selfperf counters: per-iteration events next to the timings.
// Run with --benchmark_counters_tabular=true for a table.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <sys/mman.h>

#include <benchmark/benchmark.h>
#include <selfperf/benchmark.hpp>

namespace {

std::vector<int> shuffled(std::size_t n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  std::shuffle(v.begin(), v.end(), std::mt19937(42));
  return v;
}

void BM_Sort(benchmark::State& state) {
  const auto input = shuffled(static_cast<std::size_t>(state.range(0)));
  selfperf::BenchmarkCounters counters(state);
  for (auto _ : state) {
    auto v = input;
    std::sort(v.begin(), v.end());
    benchmark::DoNotOptimize(v.data());
  }
}
BENCHMARK(BM_Sort)->Arg(1 << 10)->Arg(1 << 16);

void BM_FreshPages(benchmark::State& state) {
  selfperf::BenchmarkCounters counters(state, {"page-faults:u", "task-clock:u"});
  for (auto _ : state) {
    // mmap, not a vector: malloc would recycle the same pages and fault only once.
    const auto bytes = static_cast<std::size_t>(state.range(0));
    auto* block = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (std::size_t i = 0; i < bytes; i += 4096) block[i] = 1;
    benchmark::DoNotOptimize(block);
    munmap(block, bytes);
  }
}
BENCHMARK(BM_FreshPages)->Arg(1 << 20);

}  // namespace

BENCHMARK_MAIN();
