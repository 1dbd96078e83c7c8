// Profiler::summary_json and ProfileOptions::summary (SELFPERF_SUMMARY): the JSON parses, and its counts are
// the profiler's own (samples_written, lost, output_path) and the perf.data file's; a run without samples
// writes none; an unwritable path is named on stderr with the variable. (The preload library and selfperf record
// --summary-json: check_profile_summary.sh.)
#include <doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "perf_data_test_util.hpp"
#include "selfperf/error.hpp"
#include "selfperf/perf_data_reader.hpp"
#include "selfperf/profile.hpp"

using namespace selfperf;

namespace {

volatile std::uint64_t sink;

[[gnu::noinline]] void summary_spin() {
  timespec start{}, now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  std::uint64_t x = sink;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ULL + 1;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 150);
  sink = x;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return nlohmann::json::parse(text);
}

}  // namespace

TEST_CASE("the summary file holds the profiler's own totals, and the perf.data's sample count") {
  test::TempDir dir;
  ProfileOptions options;
  options.output = dir / "p.data";
  options.summary = dir / "s.%p.json";
  options.event = "cpu-clock";
  options.frequency = 500;
  Profiler profiler(options);
  profiler.start();
  summary_spin();
  profiler.stop();
  REQUIRE(profiler.samples_written() > 0);
  CHECK(profiler.summary_path() == (dir / ("s." + std::to_string(::getpid()) + ".json")).string());
  const auto j = read_json(profiler.summary_path());
  CHECK(j == nlohmann::json::parse(profiler.summary_json()));
  CHECK(j["format"] == "selfperf-profile-summary");
  CHECK(j["version"] == 1);
  CHECK(j["units"]["default"] == "count");
  CHECK(j["pid"] == ::getpid());
  CHECK(j["event"].get<std::string>().find("cpu-clock") != std::string::npos);
  CHECK(j["frequency_hz"] == 500);
  CHECK(j["written"] == true);
  CHECK(j["write_failed"] == false);
  CHECK(j["samples"].get<std::uint64_t>() == profiler.samples_written());
  CHECK(j["lost"]["total"].get<std::uint64_t>() == profiler.lost());
  CHECK(j["lost"]["total"].get<std::uint64_t>() == j["lost"]["buffer_full"].get<std::uint64_t>() +
                                                       j["lost"]["kernel"].get<std::uint64_t>() +
                                                       j["lost"]["coalesced"].get<std::uint64_t>());
  CHECK(j["files"]["perf_data"] == profiler.output_path());
  CHECK(j["files"]["folded"] == profiler.output_path() + ".folded");
  CHECK(j["files"]["svg"] == profiler.output_path() + ".svg");
  // Threads: only this one was attached (no thread hook in this test), and it ran.
  CHECK(j["threads"] == 1);
  REQUIRE(j["per_thread"].size() == 1);
  CHECK(j["per_thread"][0]["tid"] == ::gettid());
  CHECK(j["per_thread"][0]["samples"].get<std::uint64_t>() ==
        j["samples"].get<std::uint64_t>() + j["samples_dropped"].get<std::uint64_t>());
  CHECK(j["per_thread"][0]["rate_hz"].get<std::uint64_t>() > 0);
  // The file the summary names holds exactly that many samples.
  PerfDataReader reader(profiler.output_path());
  std::uint64_t samples = 0;
  PerfRecord rec;
  while (reader.next_record(rec)) samples += rec.type == PERF_RECORD_SAMPLE;
  CHECK(samples == j["samples"].get<std::uint64_t>());
  CHECK(profiler.summary().find("summary " + profiler.summary_path()) != std::string::npos);
}

TEST_CASE("a profiler that took no sample writes no summary file, as no perf.data; the accessor says so") {
  test::TempDir dir;
  ProfileOptions options;
  options.output = dir / "none.data";
  options.summary = dir / "none.json";
  options.event = "cpu-clock";
  options.frequency = 1;  // one sample per CPU-second: none in this short scope
  Profiler profiler(options);
  profiler.start();
  profiler.stop();
  REQUIRE(profiler.samples_written() == 0);
  CHECK_FALSE(std::filesystem::exists(dir / "none.json"));
  CHECK(profiler.summary_path().empty());
  const auto j = nlohmann::json::parse(profiler.summary_json());
  CHECK(j["written"] == false);
  CHECK(j["samples"] == 0);
  CHECK(j["files"]["perf_data"].is_null());
  CHECK_FALSE(std::filesystem::exists(options.output));
}

TEST_CASE("SELFPERF_SUMMARY sets the summary path; an unwritable one is said on stderr with the variable") {
  ::setenv("SELFPERF_SUMMARY", "/tmp/s.%p.json", 1);
  CHECK(profile_options_from_env().summary == "/tmp/s.%p.json");
  ::unsetenv("SELFPERF_SUMMARY");
  CHECK(profile_options_from_env().summary.empty());

  test::TempDir dir;
  ProfileOptions options;
  options.output = dir / "x.data";
  options.summary = "/nonexistent-selfperf-dir/s.json";
  options.event = "cpu-clock";
  options.frequency = 500;
  Profiler profiler(options);
  profiler.start();
  summary_spin();
  // stderr into a file for the call: the failure is said there, with the file and the variable.
  const auto err_path = dir / "stderr.txt";
  const int saved = ::dup(2);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(err_fd >= 0);
  ::dup2(err_fd, 2);
  CHECK_NOTHROW(profiler.stop());
  ::dup2(saved, 2);
  ::close(saved);
  ::close(err_fd);
  CHECK(profiler.samples_written() > 0);
  CHECK(profiler.summary_path().empty());
  CHECK(std::filesystem::exists(profiler.output_path()));  // the profile itself was written
  std::ifstream in(err_path);
  const std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(said.find("summary not written") != std::string::npos);
  CHECK(said.find("/nonexistent-selfperf-dir/s.json") != std::string::npos);
  CHECK(said.find("SELFPERF_SUMMARY") != std::string::npos);
}

TEST_CASE("Profiler::summary_json without a summary path: no file, the accessor still works") {
  test::TempDir dir;
  ProfileOptions options;
  options.output = dir / "q.data";
  options.event = "cpu-clock";
  options.frequency = 500;
  Profiler profiler(options);
  profiler.start();
  summary_spin();
  profiler.stop();
  CHECK(profiler.summary_path().empty());
  const auto j = nlohmann::json::parse(profiler.summary_json());
  CHECK(j["samples"].get<std::uint64_t>() == profiler.samples_written());
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), std::filesystem::directory_iterator()) == 3);
}
