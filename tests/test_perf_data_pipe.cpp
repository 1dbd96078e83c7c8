// Pipe-mode writing (PerfDataWriterOptions::pipe, the path "-"): what goes through a real pipe, which
// cannot seek, reads back with selfperf's reader as the same records and features as the file mode.
#include <doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

#include "perf_data_test_util.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_writer.hpp"

using namespace selfperf;

namespace {

EventDescription event(const char* name, std::uint64_t config, std::vector<std::uint64_t> ids) {
  EventDescription ev;
  ev.name = name;
  ev.attr.type = PERF_TYPE_SOFTWARE;
  ev.attr.config = config;
  ev.attr.sample_period = 100000;
  ev.attr.exclude_kernel = 1;
  ev.ids = std::move(ids);
  return ev;
}

std::vector<EventDescription> two_events() {
  auto faults = event("page-faults:u", PERF_COUNT_SW_PAGE_FAULTS, {90, 91});
  faults.attr.sample_type = PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_WEIGHT;
  return {event("cpu-clock:u", PERF_COUNT_SW_CPU_CLOCK, {77}), faults};
}

const std::vector<std::string> kCmdline = {"pipe-test", "--flag", "value with spaces"};

// The same records the file-mode round trip writes, `extra` samples more.
void write_records(PerfDataWriter& w, int extra = 0) {
  w.write_comm(1234, 1235, "worker");
  Mmap2Info map;
  map.pid = map.tid = 1234;
  map.start = 0x400000;
  map.len = 0x10000;
  map.ino = 4242;
  map.prot = 5;
  map.flags = 2;
  map.filename = std::filesystem::read_symlink("/proc/self/exe").string();
  w.write_mmap2(map);
  const std::uint64_t frames[] = {0x401000, 0x402000, 0x403000};
  Sample s;
  s.pid = 1234;
  s.tid = 1235;
  s.time = 5000;
  s.period = 100000;
  s.cpu = 1;
  s.id = 77;
  s.frames = frames;
  w.write_sample(s);
  Sample m = s;
  m.id = 91;
  m.addr = 0xdead0000;
  m.data_src = 0x1234;
  m.weight = 17;
  w.write_sample(m);
  w.write_lost(5, 1);
  for (int i = 0; i < extra; ++i) {
    s.time = 6000 + static_cast<std::uint64_t>(i);
    w.write_sample(s);
    if (i % 1000 == 999) w.write_finished_round();
  }
  w.write_finished_round();
}

PerfDataWriterOptions pipe_options() {
  PerfDataWriterOptions o;
  o.cmdline = kCmdline;
  o.synthesize_process = false;
  o.pipe = true;
  return o;
}

// Everything the read end of `fd` receives until the writer closes it, read while the writer writes (a
// pipe holds 64 KiB: a writer left alone would block).
std::vector<std::uint8_t> drain(int fd) {
  std::vector<std::uint8_t> out;
  std::uint8_t buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

struct Records {
  std::vector<std::uint32_t> types;
  std::vector<std::vector<std::uint8_t>> bytes;
};

Records all_records(PerfDataReader& r) {
  Records out;
  PerfRecord rec;
  while (r.next_record(rec)) {
    out.types.push_back(rec.type);
    out.bytes.emplace_back(rec.bytes.begin(), rec.bytes.end());
  }
  return out;
}

}  // namespace

TEST_CASE("pipe mode through a pipe reads back with the file mode's records and features") {
  test::TempDir dir;
  const auto file = dir / "file.data";
  {
    PerfDataWriterOptions o = pipe_options();
    o.pipe = false;
    PerfDataWriter w(file, two_events(), o);
    write_records(w, 3000);
    w.close();
  }
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  std::vector<std::uint8_t> stream;
  std::thread reader([&] { stream = drain(fds[0]); });
  try {
    PerfDataWriter w(fds[1], "test pipe", two_events(), pipe_options());  // owns fds[1] from here
    write_records(w, 3000);  // about 300 KiB: the writer blocks on the pipe until the reader drains it
    w.close();
  } catch (const Error& e) {
    reader.join();
    FAIL("writing pipe mode into a pipe failed: " << e.what());
  }
  reader.join();
  REQUIRE(stream.size() > 65536);

  PerfDataReader f(file);
  PerfDataReader p(stream, "pipe stream");
  CHECK(p.pipe_mode());
  CHECK(p.truncated_bytes() == 0);
  REQUIRE(p.events().size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(p.events()[i].name == f.events()[i].name);  // from the HEADER_FEATURE EVENT_DESC
    CHECK(p.events()[i].ids == f.events()[i].ids);
    CHECK(std::memcmp(&p.events()[i].attr, &f.events()[i].attr, sizeof(perf_event_attr)) == 0);
  }
  CHECK(p.events()[1].name == "page-faults:u");
  CHECK(p.cmdline() == kCmdline);
  utsname uts{};
  ::uname(&uts);
  CHECK(p.feature_string(PerfFeature::hostname) == uts.nodename);
  CHECK(p.feature_string(PerfFeature::osrelease) == f.feature_string(PerfFeature::osrelease));
  REQUIRE(p.nrcpus());
  CHECK(p.nrcpus()->online == f.nrcpus()->online);
  CHECK(p.total_mem_kb() == f.total_mem_kb());
  CHECK(!p.sample_time());  // unknown when the features are written, before the samples

  // Build ids: the file's feature, the stream's HEADER_BUILD_ID record before the mapping.
  const auto fid = f.build_ids();
  const auto pid = p.build_ids();
  REQUIRE(pid.size() == fid.size());
  for (std::size_t i = 0; i < pid.size(); ++i) {
    CHECK(pid[i].filename == fid[i].filename);
    CHECK(pid[i].build_id == fid[i].build_id);
  }

  // The records, byte for byte.
  const auto fr = all_records(f);
  const auto pr = all_records(p);
  CHECK(fr.types.size() == 2 + 3 + 3000 + 5);  // COMM MMAP2 | 2 samples, LOST | extra | 3 + last + close()'s rounds
  CHECK(pr.types == fr.types);
  CHECK(pr.bytes == fr.bytes);
  std::size_t samples = 0;
  for (auto t : pr.types) samples += t == PERF_RECORD_SAMPLE;
  CHECK(samples == 3002);
}

TEST_CASE("pipe mode never seeks: the file mode cannot write into a pipe, the pipe mode can") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  std::thread reader([&] { drain(fds[0]); });
  PerfDataWriterOptions o = pipe_options();
  o.pipe = false;
  CHECK_THROWS_AS(PerfDataWriter(fds[1], "test pipe", two_events(), o), Error);  // pwrite: ESPIPE
  reader.join();
}

TEST_CASE("pipe mode reports a reader that went away as an error, not by SIGPIPE") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  ::close(fds[0]);
  // SIGPIPE's default action ends the process: were it raised unblocked, this test would die here.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  struct sigaction old {};
  ::sigaction(SIGPIPE, &dfl, &old);
  std::string message;
  try {
    PerfDataWriter w(fds[1], "test pipe", two_events(), pipe_options());
  } catch (const Error& e) {
    message = e.what();
  }
  sigset_t pending;
  sigpending(&pending);
  CHECK(sigismember(&pending, SIGPIPE) == 0);  // taken back, not left to kill the program later
  ::sigaction(SIGPIPE, &old, nullptr);
  CHECK(message.find("test pipe") != std::string::npos);
  CHECK(message.find("EPIPE") != std::string::npos);
}

TEST_CASE("the path \"-\" writes pipe mode to standard output and leaves it open") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    int rc = 0;
    try {
      PerfDataWriter w("-", two_events(), pipe_options());
      write_records(w);
      w.close();
      // Still open: the writer closed its copy only.
      rc = ::fcntl(STDOUT_FILENO, F_GETFD) == -1 ? 3 : 0;
    } catch (const Error&) {
      rc = 2;
    }
    ::_exit(rc);
  }
  ::close(fds[1]);
  auto stream = drain(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  PerfDataReader p(stream, "standard output");
  CHECK(p.pipe_mode());
  CHECK(p.cmdline() == kCmdline);
  const auto records = all_records(p);
  std::size_t samples = 0;
  for (auto t : records.types) samples += t == PERF_RECORD_SAMPLE;
  CHECK(samples == 2);
}
