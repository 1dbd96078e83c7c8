// Profiles itself for a few seconds: two threads of real work (sorting, hashing, parsing numbers), sampled
// by selfperf's own sampler, written as perf.data, folded stacks and an SVG flame graph; then the top
// functions, read back from the folded stacks.
//
//   profile_me [OUT.data] [seconds]      (default: profile_me.data, 2 s)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <selfperf/flame_graph.hpp>
#include <selfperf/profile.hpp>

namespace {

std::atomic<std::uint64_t> sink{0};

[[gnu::noinline]] void sort_batches(std::mt19937_64& rng) {
  std::vector<std::uint64_t> v(1 << 14);
  for (auto& x : v) x = rng();
  std::sort(v.begin(), v.end());
  sink += v[v.size() / 2];
}

[[gnu::noinline]] void count_words(std::mt19937_64& rng) {
  std::unordered_map<std::uint64_t, std::uint32_t> counts;
  for (int i = 0; i < 20000; ++i) ++counts[rng() % 4096];
  sink += counts.size();
}

[[gnu::noinline]] void parse_numbers(std::mt19937_64& rng) {
  std::string text;
  for (int i = 0; i < 4000; ++i) text += std::to_string(rng() % 1000000) + ' ';
  std::uint64_t sum = 0;
  for (const char* p = text.c_str(); *p;) {
    char* end = nullptr;
    sum += std::strtoull(p, &end, 10);
    p = (end && *end) ? end + 1 : end;
    if (!end || !*end) break;
  }
  sink += sum;
}

[[gnu::noinline]] void worker(std::chrono::steady_clock::time_point until, int seed) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  while (std::chrono::steady_clock::now() < until) {
    sort_batches(rng);
    count_words(rng);
    parse_numbers(rng);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path out = argc > 1 ? argv[1] : "profile_me.data";
  const double seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  selfperf::ProfileOptions options;
  options.output = out;
  options.frequency = 999;
  selfperf::Profiler profiler(options);
  profiler.start();
  profiler.attach_this_thread();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                            std::chrono::duration<double>(seconds));
  std::thread helper([&] {
    profiler.attach_this_thread();
    worker(until, 2);
  });
  worker(until, 1);
  helper.join();
  profiler.stop();

  std::printf("profile_me: %llu samples written, %llu lost\n",
              static_cast<unsigned long long>(profiler.samples_written()),
              static_cast<unsigned long long>(profiler.lost()));
  std::ifstream folded(out.string() + ".folded");
  auto stacks = selfperf::StackCounts::read_folded(folded);
  std::printf("\ntop functions:\n%s\n", selfperf::format_top_table(stacks, 8).c_str());
  const auto where = std::filesystem::absolute(out).string();
  std::printf("files written:\n  %s          perf report -i %s --stdio   |   perf script -i %s\n", where.c_str(),
              where.c_str(), where.c_str());
  std::printf("  %s.folded   FlameGraph / inferno / speedscope input\n", where.c_str());
  std::printf("  %s.svg      flame graph: open it in a browser (file://%s.svg)\n", where.c_str(), where.c_str());
  return 0;
}
