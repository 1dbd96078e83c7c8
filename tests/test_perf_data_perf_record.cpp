// The reader on files written by the real perf record (Debian's perf 6.1 in CI): attrs of its size,
// its feature sections, and its records, cross-checked against what perf report -D counts.
#include <doctest.h>

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "perf_data_test_util.hpp"
#include "selfperf/perf_data_reader.hpp"

using namespace selfperf;
using test::perf_available;
using test::run;

namespace {

std::size_t count_lines_with(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("reads a file written by perf record -e cpu-clock") {
  if (!perf_available()) {
    MESSAGE("skipped: perf is not installed (apt-get install linux-perf)");
    return;
  }
  test::TempDir dir;
  const auto path = (dir / "perf.data").string();
  // A shell loop is a workload perf can record as any user: cpu-clock:u needs no privilege at paranoid 2.
  const std::string record = "perf record -q -e cpu-clock:u -F 2000 -g -o " + path +
                             " -- sh -c 'i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done' 2>&1";
  const std::string log = run(record);
  if (!std::filesystem::exists(path) || log.find("<exit status non-zero>") != std::string::npos) {
    MESSAGE("skipped: perf record cannot record here: " << log);
    return;
  }

  PerfDataReader r{std::filesystem::path(path)};
  REQUIRE(!r.events().empty());
  CHECK(r.events()[0].name.find("cpu-clock") != std::string::npos);
  CHECK(r.events()[0].attr.type == PERF_TYPE_SOFTWARE);
  CHECK(r.events()[0].attr.config == PERF_COUNT_SW_CPU_CLOCK);
  CHECK(r.attr_size() >= 64 + 16);
  CHECK(r.attr_size() - 16 == (r.attr_sizes()[0] ? r.attr_sizes()[0] : 64));
  utsname uts{};
  ::uname(&uts);
  CHECK(r.feature_string(PerfFeature::hostname) == uts.nodename);
  CHECK(r.feature_string(PerfFeature::osrelease) == uts.release);
  const auto cmdline = r.cmdline();
  REQUIRE(cmdline.size() > 2);
  CHECK(cmdline[1] == "record");
  REQUIRE(r.sample_time());
  CHECK(r.sample_time()->first <= r.sample_time()->second);

  std::size_t records = 0, samples = 0, comms = 0;
  bool sh_seen = false, chains_start_user = true, times_in_range = true;
  PerfRecord rec;
  while (r.next_record(rec)) {
    ++records;
    if (rec.type == PERF_RECORD_COMM) {
      ++comms;
      sh_seen = sh_seen || r.decode_comm(rec).comm == "sh";
    }
    if (rec.type == PERF_RECORD_SAMPLE) {
      ++samples;
      auto s = r.decode_sample(rec);
      // user-only sampling: every chain is user space and starts with the context marker.
      chains_start_user = chains_start_user && !s.callchain.empty() &&
                          s.callchain[0] == static_cast<std::uint64_t>(PERF_CONTEXT_USER);
      times_in_range = times_in_range && s.time >= r.sample_time()->first && s.time <= r.sample_time()->second;
    }
  }
  CHECK(comms > 0);
  CHECK(sh_seen);
  CHECK(chains_start_user);
  CHECK(times_in_range);
  // perf report -D prints one "PERF_RECORD_SAMPLE(" line per sample record.
  const auto dump = run("perf report -D -i " + path + " 2>/dev/null");
  CHECK(samples == count_lines_with(dump, "PERF_RECORD_SAMPLE("));
  CHECK(samples > 0);
  CHECK(records > samples);
}

TEST_CASE("reads perf record's pipe mode (-o -), from a file, a FIFO and cut short") {
  if (!perf_available()) {
    MESSAGE("skipped: perf is not installed (apt-get install linux-perf)");
    return;
  }
  test::TempDir dir;
  const auto path = (dir / "pipe.data").string();
  const std::string log = run("perf record -q -e cpu-clock:u -F 2000 -g -o - -- sh -c 'i=0; while [ $i -lt 100000 ]; "
                              "do i=$((i+1)); done' 2>/dev/null > " + path + "; echo done");
  if (!std::filesystem::exists(path) || std::filesystem::file_size(path) < 16) {
    MESSAGE("skipped: perf record -o - cannot record here: " << log);
    return;
  }
  auto count_samples = [](PerfDataReader& r) {
    std::size_t samples = 0, comms = 0;
    PerfRecord rec;
    while (r.next_record(rec)) {
      CHECK(rec.type != kPerfRecordHeaderAttr);  // the stand-ins for the file header are not records
      CHECK(rec.type != kPerfRecordHeaderFeature);
      if (rec.type == PERF_RECORD_SAMPLE) {
        ++samples;
        CHECK(r.decode_sample(rec).callchain.size() > 1);
      }
      comms += rec.type == PERF_RECORD_COMM;
    }
    CHECK(comms > 0);
    return samples;
  };

  PerfDataReader r{std::filesystem::path(path)};
  CHECK(r.pipe_mode());
  CHECK(r.truncated_bytes() == 0);
  REQUIRE(!r.events().empty());
  CHECK(r.events()[0].name.find("cpu-clock") != std::string::npos);  // from the HEADER_FEATURE EVENT_DESC
  CHECK(r.events()[0].attr.config == PERF_COUNT_SW_CPU_CLOCK);
  CHECK(!r.events()[0].ids.empty());
  utsname uts{};
  ::uname(&uts);
  CHECK(r.feature_string(PerfFeature::hostname) == uts.nodename);
  const std::size_t samples = count_samples(r);
  const auto dump = run("perf report -D -i " + path + " 2>/dev/null");
  CHECK(samples == count_lines_with(dump, "PERF_RECORD_SAMPLE("));
  CHECK(samples > 0);

  // Through a FIFO: the reader cannot seek, so it reads the stream to its end first.
  const auto fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string feed = "cat " + path + " > " + fifo + " &";
  REQUIRE(std::system(feed.c_str()) == 0);
  PerfDataReader from_fifo{std::filesystem::path(fifo)};
  CHECK(from_fifo.pipe_mode());
  CHECK(count_samples(from_fifo) == samples);

  // Cut in the middle of a record, as when the writer is killed: everything before the cut is read.
  std::ifstream in(path, std::ios::binary);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.resize(bytes.size() - 5);
  PerfDataReader cut(std::move(bytes), "cut.data");
  CHECK(cut.truncated_bytes() > 0);
  const std::size_t cut_samples = count_samples(cut);
  CHECK(cut_samples + 1 >= samples);
  CHECK(cut_samples <= samples);
}
