// Writer → reader round trip for every record type and feature the writer produces.
#include <doctest.h>

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <pthread.h>

#include <algorithm>
#include <bit>
#include <thread>
#include <cstring>

#include "perf_data_test_util.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_writer.hpp"

using namespace selfperf;

namespace {

EventDescription cpu_clock_event(std::uint64_t id) {
  EventDescription ev;
  ev.name = "cpu-clock:u";
  ev.attr.type = PERF_TYPE_SOFTWARE;
  ev.attr.config = PERF_COUNT_SW_CPU_CLOCK;
  ev.attr.sample_period = 100000;
  ev.attr.exclude_kernel = 1;
  ev.attr.use_clockid = 1;
  ev.attr.clockid = CLOCK_MONOTONIC;
  ev.ids = {id};
  return ev;
}

EventDescription memory_event(std::uint64_t id) {
  EventDescription ev;
  ev.name = "page-faults:u";
  ev.attr.type = PERF_TYPE_SOFTWARE;
  ev.attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  ev.attr.sample_period = 1;
  ev.attr.sample_type = PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT;
  ev.attr.exclude_kernel = 1;
  ev.ids = {id, id + 1};
  return ev;
}


}  // namespace

TEST_CASE("writer and reader round trip every record type and feature") {
  test::TempDir dir;
  const auto path = dir / "round.data";
  const std::uint64_t frames_a[] = {0x401000, 0x402000, 0x403000};
  const std::uint64_t frames_b[] = {0x501234};
  const std::vector<std::string> cmdline = {"round-trip", "--flag", "value with spaces"};

  PerfDataWriterOptions options;
  options.cmdline = cmdline;
  options.synthesize_process = false;
  std::uint64_t samples = 0;
  {
    PerfDataWriter w(path, {cpu_clock_event(77), memory_event(90)}, options);
    w.write_comm(1234, 1235, "worker-thread-with-a-long-name");
    Mmap2Info map;
    map.pid = 1234;
    map.tid = 1234;
    map.start = 0x400000;
    map.len = 0x10000;
    map.pgoff = 0x1000;
    map.maj = 8;
    map.min = 1;
    map.ino = 4242;
    map.prot = 5;
    map.flags = 2;
    map.filename = std::filesystem::read_symlink("/proc/self/exe").string();
    w.write_mmap2(map);

    Sample s;
    s.pid = 1234;
    s.tid = 1235;
    s.time = 5000;
    s.period = 100000;
    s.cpu = 1;
    s.id = 77;
    s.frames = frames_a;
    w.write_sample(s);
    Sample m;
    m.pid = 1234;
    m.tid = 1234;
    m.time = 4000;  // older than the first: SAMPLE_TIME must take the minimum
    m.period = 1;
    m.cpu = 0;
    m.id = 91;
    m.frames = frames_b;
    m.addr = 0xdead0000;
    m.data_src = 0x1234;
    m.weight = 17;
    w.write_sample(m);
    w.write_lost(5, 1);
    w.write_finished_round();
    samples = w.samples_written();
    CHECK(w.lost_written() == 5);
    w.close();
  }
  CHECK(samples == 2);

  PerfDataReader r(path);
  REQUIRE(r.events().size() == 2);
  CHECK(r.events()[0].name == "cpu-clock:u");
  CHECK(r.events()[1].name == "page-faults:u");
  CHECK(r.events()[0].ids == std::vector<std::uint64_t>{77});
  CHECK(r.events()[1].ids == std::vector<std::uint64_t>{90, 91});
  CHECK(r.attr_size() == 128 + 16);
  CHECK(r.attr_sizes()[0] == 128);
  for (const auto& ev : r.events()) {
    CHECK((ev.attr.sample_type & PERF_SAMPLE_IDENTIFIER) != 0);
    CHECK((ev.attr.sample_type & PERF_SAMPLE_CALLCHAIN) != 0);
    CHECK(ev.attr.sample_id_all == 1);
  }
  CHECK((r.events()[1].attr.sample_type & PERF_SAMPLE_DATA_SRC) != 0);
  CHECK((r.events()[0].attr.sample_type & PERF_SAMPLE_ADDR) == 0);
  CHECK(r.events()[0].attr.config == PERF_COUNT_SW_CPU_CLOCK);
  CHECK(r.events()[1].attr.config == PERF_COUNT_SW_PAGE_FAULTS);

  utsname uts{};
  ::uname(&uts);
  CHECK(r.feature_string(PerfFeature::hostname) == uts.nodename);
  CHECK(r.feature_string(PerfFeature::osrelease) == uts.release);
  CHECK(r.feature_string(PerfFeature::arch) == uts.machine);
  CHECK(r.feature_string(PerfFeature::version).find("selfperf") != std::string::npos);
  CHECK(r.has_feature(PerfFeature::cpudesc));
  CHECK(!r.feature_string(PerfFeature::cpuid).empty());
  REQUIRE(r.nrcpus());
  CHECK(r.nrcpus()->online == static_cast<std::uint32_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  CHECK(r.nrcpus()->available >= r.nrcpus()->online);
  REQUIRE(r.total_mem_kb());
  CHECK(*r.total_mem_kb() > 0);
  CHECK(r.cmdline() == cmdline);
  REQUIRE(r.sample_time());
  CHECK(r.sample_time()->first == 4000);
  CHECK(r.sample_time()->second == 5000);
  REQUIRE(r.clock_data());
  CHECK(r.clock_data()->version == 1);
  CHECK(r.clock_data()->clockid == CLOCK_MONOTONIC);
  CHECK(r.clock_data()->wall_clock_ns > r.clock_data()->clockid_time_ns);
  REQUIRE(r.clockid_resolution_ns());
  CHECK(*r.clockid_resolution_ns() >= 1);

  // The test binary is linked with a build id (Debian's gcc default); the feature must carry exactly it.
  auto exe = std::filesystem::read_symlink("/proc/self/exe").string();
  auto own_id = read_elf_build_id(exe);
  auto ids = r.build_ids();
  if (own_id.empty()) {
    CHECK(ids.empty());
  } else {
    REQUIRE(ids.size() == 1);
    CHECK(ids[0].filename == exe);
    CHECK(ids[0].build_id == own_id);
    CHECK(build_id_hex(ids[0].build_id).size() == own_id.size() * 2);
  }

  std::vector<std::uint32_t> types;
  PerfRecord rec;
  while (r.next_record(rec)) {
    types.push_back(rec.type);
    switch (rec.type) {
      case PERF_RECORD_COMM: {
        auto c = r.decode_comm(rec);
        CHECK(c.pid == 1234);
        CHECK(c.tid == 1235);
        CHECK(c.comm == "worker-thread-w");  // TASK_COMM_LEN - 1, as the kernel truncates
        CHECK(r.decode_sample_id(rec).tid == 1235);
        break;
      }
      case PERF_RECORD_MMAP2: {
        auto m = r.decode_mmap(rec);
        CHECK(m.start == 0x400000);
        CHECK(m.len == 0x10000);
        CHECK(m.pgoff == 0x1000);
        CHECK(m.maj == 8);
        CHECK(m.min == 1);
        CHECK(m.ino == 4242);
        CHECK(m.prot == 5);
        CHECK(m.flags == 2);
        CHECK(m.filename == exe);
        CHECK((rec.misc & PERF_RECORD_MISC_USER) != 0);
        break;
      }
      case PERF_RECORD_SAMPLE: {
        auto s = r.decode_sample(rec);
        CHECK((rec.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER);
        REQUIRE(!s.callchain.empty());
        CHECK(s.callchain[0] == static_cast<std::uint64_t>(PERF_CONTEXT_USER));
        if (s.event_index == 0) {
          CHECK(s.identifier == 77);
          CHECK(s.ip == 0x401000);
          CHECK(s.pid == 1234);
          CHECK(s.tid == 1235);
          CHECK(s.time == 5000);
          CHECK(s.cpu == 1);
          CHECK(s.period == 100000);
          CHECK(s.frames() == std::vector<std::uint64_t>(std::begin(frames_a), std::end(frames_a)));
        } else {
          CHECK(s.event_index == 1);
          CHECK(s.identifier == 91);
          CHECK(s.ip == 0x501234);
          CHECK(s.addr == 0xdead0000);
          CHECK(s.data_src == 0x1234);
          CHECK(s.weight == 17);
          CHECK(s.frames() == std::vector<std::uint64_t>{0x501234});
        }
        break;
      }
      case PERF_RECORD_LOST: {
        auto l = r.decode_lost(rec);
        CHECK(l.id == 90);
        CHECK(l.lost == 5);
        break;
      }
      default: break;
    }
  }
  const std::vector<std::uint32_t> expected = {PERF_RECORD_COMM, PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE,
                                               PERF_RECORD_SAMPLE, PERF_RECORD_LOST, kPerfRecordFinishedRound,
                                               kPerfRecordFinishedRound};
  CHECK(types == expected);
  r.rewind();
  CHECK(r.next_record(rec));
  CHECK(rec.type == PERF_RECORD_COMM);
}

TEST_CASE("writer synthesizes COMM and MMAP2 for this process before the first sample") {
  test::TempDir dir;
  const auto path = dir / "self.data";
  const std::uint64_t frame = reinterpret_cast<std::uintptr_t>(&cpu_clock_event);
  {
    PerfDataWriter w(path, {cpu_clock_event(1)});
    Sample s;
    s.pid = ::getpid();
    s.tid = ::getpid();
    s.frames = {&frame, 1};
    w.write_sample(s);
    std::thread([&] {
      ::pthread_setname_np(::pthread_self(), "sp-worker");
      Sample t = s;
      t.tid = ::gettid();
      w.write_sample(t);
      w.write_sample(t);  // named once
    }).join();
    w.close();
  }
  {
    PerfDataReader r(path);
    PerfRecord rec;
    std::vector<std::string> names;
    while (r.next_record(rec))
      if (rec.type == PERF_RECORD_COMM) names.push_back(r.decode_comm(rec).comm);
    CHECK(names.size() == 2);
    CHECK(names.back() == "sp-worker");
  }
  PerfDataReader r(path);
  PerfRecord rec;
  REQUIRE(r.next_record(rec));
  CHECK(rec.type == PERF_RECORD_COMM);
  CHECK(r.decode_comm(rec).pid == static_cast<std::uint32_t>(::getpid()));
  bool covered = false;
  std::size_t mmaps = 0;
  while (r.next_record(rec) && rec.type == PERF_RECORD_MMAP2) {
    ++mmaps;
    auto m = r.decode_mmap(rec);
    if (frame >= m.start && frame < m.start + m.len) {
      covered = true;
      CHECK(m.filename == std::filesystem::read_symlink("/proc/self/exe").string());
      struct stat st {};
      REQUIRE(::stat(m.filename.c_str(), &st) == 0);
      CHECK(m.ino == st.st_ino);
    }
  }
  CHECK(mmaps >= 2);  // the executable and libc at least
  CHECK(covered);
  CHECK(rec.type == PERF_RECORD_SAMPLE);
  REQUIRE(r.next_record(rec));
  CHECK(rec.type == PERF_RECORD_COMM);  // the worker thread, named before its first sample
  REQUIRE(r.next_record(rec));
  CHECK(rec.type == PERF_RECORD_SAMPLE);
  auto cmdline = r.cmdline();  // this process's argv
  REQUIRE(!cmdline.empty());
  CHECK(std::filesystem::path(cmdline[0]).filename() == std::filesystem::read_symlink("/proc/self/exe").filename());
}

TEST_CASE("writer streams records to the file before close, in bounded memory") {
  test::TempDir dir;
  const auto path = dir / "stream.data";
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  options.buffer_bytes = 65536;
  PerfDataWriter w(path, {cpu_clock_event(3)}, options);
  std::vector<std::uint64_t> frames(64, 0x400000);
  Sample s;
  s.frames = frames;
  for (int i = 0; i < 2000; ++i) {  // ~1.1 MB of records
    s.time = static_cast<std::uint64_t>(i);
    w.write_sample(s);
  }
  const auto on_disk = std::filesystem::file_size(path);
  CHECK(on_disk > 1'000'000);  // all but at most one buffer already written
  w.close();
  PerfDataReader r(path);
  PerfRecord rec;
  std::uint64_t n = 0, last_time = 0;
  bool ordered = true;
  while (r.next_record(rec))
    if (rec.type == PERF_RECORD_SAMPLE) {
      auto d = r.decode_sample(rec);
      ordered = ordered && (n == 0 || d.time == last_time + 1);
      last_time = d.time;
      CHECK(d.callchain.size() == 65);
      ++n;
    }
  CHECK(n == 2000);
  CHECK(ordered);
}

TEST_CASE("writer rejects what it cannot write") {
  test::TempDir dir;
  CHECK_THROWS_AS(PerfDataWriter(dir / "none.data", {}), Error);
  CHECK_THROWS_AS(PerfDataWriter(dir / "no-such-dir" / "x.data", {cpu_clock_event(1)}), Error);
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  PerfDataWriter w(dir / "two.data", {cpu_clock_event(1), memory_event(5)}, options);
  Sample s;
  s.id = 999;  // no event owns it: with two events the writer cannot guess
  CHECK_THROWS_AS(w.write_sample(s), Error);
  CHECK_THROWS_AS(w.write_sample(s, 2), Error);
  w.write_sample(s, 1);  // explicit event: written with that event's id
  w.close();
  CHECK_THROWS_AS(w.write_sample(s, 0), Error);
  PerfDataReader r(dir / "two.data");
  PerfRecord rec;
  REQUIRE(r.next_record(rec));
  REQUIRE(rec.type == PERF_RECORD_SAMPLE);
  CHECK(r.decode_sample(rec).event_index == 1);
  CHECK(r.decode_sample(rec).identifier == 5);
}

TEST_CASE("an event that counts kernel time gets perf's kernel map first; a user-only one none") {
  test::TempDir dir;
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  auto with_kernel = cpu_clock_event(7);
  with_kernel.name = "cpu-clock";
  with_kernel.attr.exclude_kernel = 0;
  for (const auto& ev : {with_kernel, cpu_clock_event(7)}) {
    INFO(ev.name);
    for (bool pipe : {false, true}) {
      options.pipe = pipe;
      const auto path = dir / (pipe ? "pipe.data" : "file.data");
      {
        PerfDataWriter w(path, {ev}, options);
        Sample s;
        w.write_sample(s);
        w.close();
      }
      PerfDataReader r(path);
      PerfRecord rec;
      REQUIRE(r.next_record(rec));
      if (ev.attr.exclude_kernel) {
        CHECK(rec.type == PERF_RECORD_SAMPLE);
        continue;
      }
      // perf record's synthesized kernel map: without it perf report warns "kernel samples can't be resolved".
      REQUIRE(rec.type == PERF_RECORD_MMAP);
      CHECK(rec.misc == PERF_RECORD_MISC_KERNEL);
      const Mmap2Info m = r.decode_mmap(rec);
      CHECK(m.pid == -1);
      CHECK(m.filename == "[kernel.kallsyms]_text");
      CHECK(m.start + m.len == ~std::uint64_t{0});
      CHECK(m.pgoff == m.start);
      REQUIRE(r.next_record(rec));
      CHECK(rec.type == PERF_RECORD_SAMPLE);
    }
  }
}

TEST_CASE("events without ids get distinct ids so samples still name their event") {
  test::TempDir dir;
  PerfDataWriterOptions options;
  options.synthesize_process = false;
  auto a = cpu_clock_event(0);
  auto b = memory_event(0);
  a.ids.clear();
  b.ids.clear();
  PerfDataWriter w(dir / "noid.data", {a, b}, options);
  REQUIRE(w.events()[0].ids.size() == 1);
  REQUIRE(w.events()[1].ids.size() == 1);
  CHECK(w.events()[0].ids[0] != w.events()[1].ids[0]);
  Sample s;
  w.write_sample(s, 1);
  w.close();
  PerfDataReader r(dir / "noid.data");
  PerfRecord rec;
  REQUIRE(r.next_record(rec));
  CHECK(r.decode_sample(rec).event_index == 1);
}

TEST_CASE("reader names the problem and the offset") {
  test::TempDir dir;
  auto write = [&](const std::string& name, const std::vector<std::uint8_t>& bytes) {
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                      static_cast<std::streamsize>(bytes.size()));
    return dir / name;
  };
  CHECK_THROWS_WITH_AS(PerfDataReader(dir / "missing.data"), doctest::Contains("cannot open"), Error);
  CHECK_THROWS_WITH_AS(PerfDataReader(write("text", std::vector<std::uint8_t>(200, 'x'))),
                       doctest::Contains("not a perf.data file"), Error);
  CHECK_THROWS_WITH_AS(PerfDataReader(write("short", {'P', 'E', 'R', 'F'})), doctest::Contains("offset 0"), Error);

  PerfDataWriterOptions options;
  options.synthesize_process = false;
  {
    PerfDataWriter w(dir / "good.data", {cpu_clock_event(1)}, options);
    Sample s;
    w.write_sample(s);
    w.close();
  }
  auto good = test::read_file(dir / "good.data");
  auto cut = good;
  cut.resize(good.size() - 100);  // features cut off
  CHECK_THROWS_WITH_AS(PerfDataReader(write("cut", cut)), doctest::Contains("offset"), Error);
  // A record whose size runs past the data section.
  auto bad = good;
  PerfDataReader ok(std::vector<std::uint8_t>(good), "good");
  const auto first = ok.data_offset();
  bad[first + 6] = 0xff;
  bad[first + 7] = 0xff;
  PerfDataReader r(std::move(bad), "bad-record");
  PerfRecord rec;
  const std::string where = "offset " + std::to_string(first);
  CHECK_THROWS_WITH_AS(r.next_record(rec), doctest::Contains(where.c_str()), Error);

  // A sample whose callchain length runs past its record: decode_sample names the record's offset.
  auto chain = good;
  const auto type = ok.events()[0].attr.sample_type;
  REQUIRE((type & PERF_SAMPLE_CALLCHAIN) != 0);
  REQUIRE((type & PERF_SAMPLE_READ) == 0);
  // The fields the kernel writes before the callchain (perf_event.h's PERF_RECORD_SAMPLE), one word each.
  const std::uint64_t words_before = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                     PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
                                     PERF_SAMPLE_PERIOD;
  const auto before_chain = static_cast<std::size_t>(std::popcount(type & words_before));
  const std::uint64_t huge = std::uint64_t{1} << 40;
  std::memcpy(chain.data() + first + sizeof(perf_event_header) + 8 * before_chain, &huge, sizeof huge);
  PerfDataReader corrupt(std::move(chain), "bad-chain");
  REQUIRE(corrupt.next_record(rec));
  REQUIRE(rec.type == PERF_RECORD_SAMPLE);
  const std::string at_record = "sample record at file offset " + std::to_string(first);
  CHECK_THROWS_WITH_AS(corrupt.decode_sample(rec), doctest::Contains(at_record.c_str()), Error);
  CHECK_THROWS_WITH_AS(corrupt.decode_sample(rec), doctest::Contains("bad-chain"), Error);
}
