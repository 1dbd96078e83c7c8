// Costs of the profile output path per sample, side by side in one run: writing a sample to perf.data
// (encoding + buffered write), decoding it back, and naming its stack with a warm symbolizer cache.
// Compare each with the sampling period it serves (1 ms at 1 kHz) and with copying the frames alone.
#include <benchmark/benchmark.h>

#include <cstring>
#include <unistd.h>
#include <vector>

#include "selfperf/flame_graph.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/symbolizer.hpp"

namespace {

std::vector<std::uint64_t> fake_frames(std::size_t n) {
  std::vector<std::uint64_t> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = 0x400000 + i * 0x40;
  return f;
}

selfperf::EventDescription event() {
  selfperf::EventDescription ev;
  ev.name = "cpu-clock";
  ev.attr.type = PERF_TYPE_SOFTWARE;
  ev.attr.sample_period = 1'000'000;
  return ev;
}

void BM_CopyFrames(benchmark::State& state) {
  auto frames = fake_frames(static_cast<std::size_t>(state.range(0)));
  std::vector<std::uint64_t> out(frames.size());
  for (auto _ : state) {
    std::memcpy(out.data(), frames.data(), frames.size() * 8);
    benchmark::ClobberMemory();
  }
}

void BM_WriteSample(benchmark::State& state) {
  auto frames = fake_frames(static_cast<std::size_t>(state.range(0)));
  selfperf::PerfDataWriterOptions options;
  options.synthesize_process = false;
  selfperf::PerfDataWriter writer("/dev/null", {event()}, options);
  selfperf::Sample s;
  s.frames = frames;
  for (auto _ : state) {
    ++s.time;
    writer.write_sample(s);
  }
  writer.close();
  state.SetItemsProcessed(state.iterations());
}

void BM_DecodeSample(benchmark::State& state) {
  auto frames = fake_frames(static_cast<std::size_t>(state.range(0)));
  char path[] = "/tmp/selfperf-bench-XXXXXX";
  int fd = ::mkstemp(path);
  ::close(fd);
  {
    selfperf::PerfDataWriterOptions options;
    options.synthesize_process = false;
    selfperf::PerfDataWriter writer(path, {event()}, options);
    selfperf::Sample s;
    s.frames = frames;
    for (int i = 0; i < 1000; ++i) writer.write_sample(s);
    writer.close();
  }
  selfperf::PerfDataReader reader{std::filesystem::path(path)};
  ::unlink(path);
  selfperf::PerfRecord rec;
  for (auto _ : state) {
    if (!reader.next_record(rec)) {
      reader.rewind();
      reader.next_record(rec);
    }
    if (rec.type == selfperf::kPerfRecordFinishedRound) continue;
    benchmark::DoNotOptimize(reader.decode_sample(rec));
  }
  state.SetItemsProcessed(state.iterations());
}

[[gnu::noinline]] std::vector<std::uint64_t> real_stack() {
  std::vector<std::uint64_t> f;
  f.push_back(reinterpret_cast<std::uintptr_t>(&BM_CopyFrames) + 4);
  f.push_back(reinterpret_cast<std::uintptr_t>(&BM_WriteSample) + 9);
  f.push_back(reinterpret_cast<std::uintptr_t>(&::getpid) + 3);
  f.push_back(reinterpret_cast<std::uintptr_t>(&std::memcpy) + 5);
  return f;
}

void BM_SymbolizeStackWarm(benchmark::State& state) {
  selfperf::Symbolizer symbolizer;
  auto frames = real_stack();
  selfperf::StackCounts stacks;
  for (auto _ : state) stacks.add_leaf_first(symbolizer.stack_names(frames));
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_CopyFrames)->Arg(8)->Arg(64)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_WriteSample)->Arg(8)->Arg(64)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_DecodeSample)->Arg(8)->Arg(64)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK(BM_SymbolizeStackWarm)->Repetitions(5)->ReportAggregatesOnly(true);
BENCHMARK_MAIN();
