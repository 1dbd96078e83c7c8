// Which file a profiled process writes (profile_output.hpp): never one another process of the run wrote or
// holds, a profile of an earlier run replaced; a perf.data whose writer never closed it is read up to its last
// sync(); a Profiler that took no sample leaves no file; SELFPERF_MAX_DEPTH and SELFPERF_QUIET.
#include <doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <ctime>
#include <string>

#include "perf_data_test_util.hpp"
#include "profiling/profile_output.hpp"
#include "selfperf/error.hpp"
#include "selfperf/event.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/perf_data_writer.hpp"
#include "selfperf/profile.hpp"

using namespace selfperf;

namespace {

std::int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string read_text(const std::filesystem::path& path) {
  auto bytes = test::read_file(path);
  return {bytes.begin(), bytes.end()};
}

// Sets the file's modification time `seconds_ago` seconds back: a profile left by an earlier run.
void age(const std::filesystem::path& path, int seconds_ago) {
  timespec times[2]{};
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds_ago;
  times[1] = times[0];
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

std::string claim(const std::filesystem::path& pattern, pid_t pid, std::int64_t run_start, int* fd_out = nullptr) {
  std::string path;
  int fd = detail::claim_profile_output(pattern.string(), pid, run_start, path);
  if (fd_out) *fd_out = fd;
  else ::close(fd);
  return path;
}

}  // namespace

TEST_CASE("a process takes OUT, then OUT.<pid>, then OUT.<pid>.1: never a file of its own run") {
  test::TempDir dir;
  const auto out = dir / "out.data";
  const std::int64_t run = now_ns() - 1'000'000'000;  // the run started a second ago
  CHECK(claim(out, 100, run) == out.string());
  write_text(out, "first process's profile");
  CHECK(claim(out, 200, run) == out.string() + ".200");
  CHECK(claim(out, 200, run) == out.string() + ".200.1");  // exec keeps the pid
  CHECK(claim(out, 200, run) == out.string() + ".200.2");
  CHECK(read_text(out) == "first process's profile");
}

TEST_CASE("%p in the pattern is the pid; a second image of the same pid gets .1") {
  test::TempDir dir;
  const std::int64_t run = now_ns() - 1'000'000'000;
  CHECK(claim(dir / "p.%p.data", 42, run) == (dir / "p.42.data").string());
  CHECK(claim(dir / "p.%p.data", 43, run) == (dir / "p.43.data").string());
  CHECK(claim(dir / "p.%p.data", 42, run) == (dir / "p.42.data.1").string());
}

TEST_CASE("a profile older than the run is replaced, unless a process holds it") {
  test::TempDir dir;
  const auto out = dir / "out.data";
  write_text(out, "yesterday's profile");
  age(out, 3600);
  int fd = -1;
  CHECK(claim(out, 100, now_ns() - 1'000'000'000, &fd) == out.string());
  CHECK(std::filesystem::file_size(out) == 0);  // truncated for this run
  // Still held (the writer has not written yet, so its time is old): a second process must not take it.
  age(out, 3600);
  CHECK(claim(out, 200, now_ns() - 1'000'000'000) == out.string() + ".200");
  ::close(fd);
}

TEST_CASE("an unwritable directory is named with the remedy") {
  CHECK_THROWS_WITH_AS(claim("/nonexistent-selfperf-dir/out.data", 1, now_ns()),
                       doctest::Contains("/nonexistent-selfperf-dir/out.data"), Error);
}

TEST_CASE("a perf.data whose writer was never closed is read up to its last sync()") {
  test::TempDir dir;
  const auto path = dir / "cut.data";
  EventDescription ev;
  ev.name = "cpu-clock";
  ev.attr = to_attr(parse_event("cpu-clock"));
  auto* writer = new PerfDataWriter(path, {ev});  // leaked on purpose: as after SIGKILL, close() never runs
  std::array<std::uint64_t, 3> frames{0x401000, 0x401100, 0x401200};
  Sample s;
  s.pid = ::getpid();
  s.tid = ::getpid();
  s.frames = frames;
  for (int i = 0; i < 10; ++i) {
    s.time = 1000 + static_cast<std::uint64_t>(i);
    writer->write_sample(s, 0);
  }
  writer->sync();
  writer->write_sample(s, 0);  // buffered, never synced: not in the file's data section
  PerfDataReader reader(path);
  std::size_t samples = 0;
  PerfRecord rec;
  while (reader.next_record(rec)) samples += rec.type == PERF_RECORD_SAMPLE;
  CHECK(samples == 10);
  writer->close();
  delete writer;
}

TEST_CASE("a Profiler that took no sample writes no file") {
  test::TempDir dir;
  ProfileOptions options;
  options.output = dir / "none.data";
  options.event = "cpu-clock";
  options.frequency = 1;  // one sample per CPU-second: none in this short scope
  Profiler profiler(options);
  profiler.start();
  profiler.stop();
  CHECK(profiler.samples_written() == 0);
  CHECK(profiler.output_path().empty());
  CHECK_FALSE(std::filesystem::exists(options.output));
  CHECK_FALSE(std::filesystem::exists(dir / "none.data.folded"));
  CHECK(profiler.summary().find("no profile written") != std::string::npos);
}

TEST_CASE("SELFPERF_MAX_DEPTH and SELFPERF_QUIET") {
  ::unsetenv("SELFPERF_MAX_DEPTH");
  ::unsetenv("SELFPERF_QUIET");
  CHECK(profile_options_from_env().max_depth >= 127);  // perf's default depth
  CHECK_FALSE(profile_options_from_env().quiet);
  ::setenv("SELFPERF_MAX_DEPTH", "300", 1);
  ::setenv("SELFPERF_QUIET", "1", 1);
  CHECK(profile_options_from_env().max_depth == 300);
  CHECK(profile_options_from_env().quiet);
  ::setenv("SELFPERF_MAX_DEPTH", "5000", 1);
  CHECK_THROWS_WITH_AS(profile_options_from_env(), doctest::Contains("SELFPERF_MAX_DEPTH=5000"), Error);
  ::setenv("SELFPERF_MAX_DEPTH", "-1", 1);
  CHECK_THROWS_AS(profile_options_from_env(), Error);
  ::unsetenv("SELFPERF_MAX_DEPTH");
  ::unsetenv("SELFPERF_QUIET");
}
