// Cost of consuming one ring-buffer record: read (head/tail barriers, header checks), with and without the
// wrap-around copy, and decoding a kernel-callchain sample. Compare the rows of one run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "../tests/fake_ring.hpp"
#include "selfperf/record.hpp"

namespace {

using selfperf::RecordView;
using selfperf::SampleFormat;
using selfperf::SampleRecord;
using selfperf::testing::FakeRing;
using selfperf::testing::RecordBuilder;

constexpr std::uint64_t kSampleType =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;

// A sample as the kernel-callchain mode produces it: a user marker and `depth` return addresses.
std::vector<std::uint64_t> callchain_sample(std::size_t depth) {
  RecordBuilder b(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
  b.u64(0x401000).u32_pair(100, 101).u64(123456789).u64(10000).u64(depth + 1).u64(PERF_CONTEXT_USER);
  for (std::size_t i = 0; i < depth; ++i) b.u64(0x401000 + 16 * i);
  return b.finish();
}

// state.range(0): 0 = the record lies in one piece, 1 = it straddles the end of the ring (copied out).
// state.range(1): callchain depth. Decodes too when state.range(2) is 1.
void BM_ConsumeRecord(benchmark::State& state) {
  const bool wrapped = state.range(0) != 0;
  const auto record = callchain_sample(static_cast<std::size_t>(state.range(1)));
  const bool decode = state.range(2) != 0;
  FakeRing fake(4096);
  const std::uint64_t start = wrapped ? 4096 - 32 : 0;
  fake.set_positions(start, start);
  fake.write(record);
  selfperf::RingBuffer ring = fake.ring();
  const SampleFormat format{kSampleType};
  std::uint64_t sum = 0;
  for (auto _ : state) {
    fake.set_positions(start, start + record.size() * 8);  // the same record, unread again
    ring.read([&](const RecordView& r) {
      if (decode) {
        SampleRecord s;
        if (selfperf::decode_sample(r, format, s) == selfperf::DecodeStatus::ok) sum += s.callchain.size();
      } else {
        sum += r.header.size;
      }
    });
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ConsumeRecord)
    ->ArgNames({"wrapped", "depth", "decode"})
    ->Args({0, 16, 0})
    ->Args({1, 16, 0})
    ->Args({0, 16, 1})
    ->Args({1, 16, 1})
    ->Args({0, 127, 1})
    ->Args({1, 127, 1})
    ->Repetitions(5)
    ->ReportAggregatesOnly(true);

// Draining a ring full of records in one read() call: the per-record cost when batching.
void BM_DrainFullRing(benchmark::State& state) {
  const auto record = callchain_sample(16);
  FakeRing fake(64 * 1024);
  std::size_t records = 0;
  while (fake.write(record)) ++records;
  const std::uint64_t head = fake.control().data_head;
  selfperf::RingBuffer ring = fake.ring();
  const SampleFormat format{kSampleType};
  std::uint64_t sum = 0;
  for (auto _ : state) {
    fake.set_positions(0, head);
    ring.read([&](const RecordView& r) {
      SampleRecord s;
      if (selfperf::decode_sample(r, format, s) == selfperf::DecodeStatus::ok) sum += s.ip;
    });
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * records));
}
BENCHMARK(BM_DrainFullRing)->Repetitions(5)->ReportAggregatesOnly(true);

}  // namespace

BENCHMARK_MAIN();
