// Samples as the kernel writes them into a ring buffer (decoded by record.hpp, turned into Samples by
// to_sample) go into perf.data unchanged: callchain mode and memory mode (ADDR / DATA_SRC / WEIGHT).
#include <doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "perf_data_test_util.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/record.hpp"

using namespace selfperf;

namespace {

RecordView view_of(std::span<const std::uint8_t> bytes) {
  RecordView v;
  std::memcpy(&v.header, bytes.data(), sizeof v.header);
  v.bytes = std::as_bytes(bytes);
  return v;
}

}  // namespace

TEST_CASE("a memory-mode kernel sample keeps ADDR, DATA_SRC and WEIGHT through perf.data") {
  perf_event_attr attr{};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  attr.exclude_kernel = 1;  // page-faults:u, as named below
  attr.sample_period = 1;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_CPU |
                     PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC;
  // The record in the kernel's field order (perf_event.h, PERF_RECORD_SAMPLE).
  std::vector<std::uint64_t> words = {
      0,                                          // header, filled below
      0x401234,                                   // IP
      (std::uint64_t{4321} << 32) | 4320,         // pid, tid
      987654321,                                  // TIME
      0x7ffd0000beef,                             // ADDR
      3,                                          // cpu, res
      1,                                          // PERIOD
      4, static_cast<std::uint64_t>(PERF_CONTEXT_USER), 0x401234, 0x402000, 0x403000,  // CALLCHAIN
      250,                                        // WEIGHT
      0x68100142,                                 // DATA_SRC
  };
  perf_event_header h{PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, static_cast<std::uint16_t>(words.size() * 8)};
  std::memcpy(words.data(), &h, sizeof h);
  std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(words.data()), words.size() * 8);

  SampleRecord rec;
  REQUIRE(decode_sample(view_of(bytes), SampleFormat::from_attr(attr), rec) == DecodeStatus::ok);
  std::uint64_t storage[16];
  const Sample sample = to_sample(rec, storage);

  test::TempDir dir;
  EventDescription ev{"page-faults:u", attr, {}};
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  PerfDataWriter writer(dir / "mem.data", {ev}, options);
  writer.write_sample(sample);
  writer.close();

  PerfDataReader reader(dir / "mem.data");
  PerfRecord out;
  REQUIRE(reader.next_record(out));
  REQUIRE(out.type == PERF_RECORD_SAMPLE);
  auto d = reader.decode_sample(out);
  CHECK(d.ip == 0x401234);
  CHECK(d.pid == 4320);
  CHECK(d.tid == 4321);
  CHECK(d.time == 987654321);
  CHECK(d.addr == 0x7ffd0000beef);
  CHECK(d.cpu == 3);
  CHECK(d.period == 1);
  CHECK(d.weight == 250);
  CHECK(d.data_src == 0x68100142);
  CHECK(d.frames() == std::vector<std::uint64_t>{0x401234, 0x402000, 0x403000});
}

TEST_CASE("perf record's samples, decoded as ring-buffer records, are rewritten faithfully") {
  if (::access("/usr/bin/perf", X_OK) != 0) {
    MESSAGE("skipped: perf is not installed (apt-get install linux-perf)");
    return;
  }
  test::TempDir dir;
  const auto original = (dir / "perf.data").string();
  const std::string cmd = "perf record -q -e cpu-clock:u -g -o " + original +
                          " -- sh -c 'i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done' >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(original)) {
    MESSAGE("skipped: perf record cannot record here");
    return;
  }
  PerfDataReader in{std::filesystem::path(original)};
  const auto format = SampleFormat::from_attr(in.events()[0].attr);
  EventDescription ev = in.events()[0];
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  PerfDataWriter writer(dir / "rewritten.data", {ev}, options);
  std::vector<DecodedSample> expected;
  PerfRecord rec;
  while (in.next_record(rec)) {
    if (rec.type != PERF_RECORD_SAMPLE) continue;
    SampleRecord decoded;
    REQUIRE(decode_sample(view_of(rec.bytes), format, decoded) == DecodeStatus::ok);
    std::uint64_t storage[512];
    writer.write_sample(to_sample(decoded, storage));
    expected.push_back(in.decode_sample(rec));
  }
  writer.close();
  REQUIRE(!expected.empty());

  PerfDataReader out(dir / "rewritten.data");
  std::size_t i = 0, mismatches = 0;
  while (out.next_record(rec)) {
    if (rec.type != PERF_RECORD_SAMPLE) continue;
    REQUIRE(i < expected.size());
    auto d = out.decode_sample(rec);
    const auto& e = expected[i++];
    mismatches += d.pid != e.pid || d.tid != e.tid || d.time != e.time || d.period != e.period ||
                  d.frames() != e.frames() || d.ip != e.ip;
  }
  CHECK(i == expected.size());
  CHECK(mismatches == 0);
}
