// What the whole-program profiler (the preload library) costs a program, measured on child processes, each
// variant side by side in every iteration and reported as medians:
//  * short_process: CPU (user + system) of /bin/true bare, with the library loaded but not profiling, and
//    profiled at 999 Hz (it takes no sample). Target: profiled - bare <= 2 ms. With
//    SELFPERF_BENCH_BASELINE_PRELOAD=<another libselfperf_profile.so> (a build of the base commit, say) that
//    library's two rows run in the same iterations too: a change measured against its base in one run.
//  * threads: peak RSS of a process whose N threads each burn 5 ms of CPU (a few samples each) and then wait
//    for the others (all alive at once), bare and profiled at 999 Hz. Target: 1000 threads within 64 MiB
//    more than bare. The peak includes the symbolization at exit (libdw reading debug info), a cost per
//    process that the 100-thread row shows.
//
//   bench_profile_cost [--benchmark_filter=…]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interleaved.hpp"

extern char** environ;

namespace {

std::string g_out_dir;

struct ChildCost {
  double cpu_ms = -1;
  double max_rss_kb = -1;
};

// Runs argv with the current environment plus `extra` (NAME=value), stdout and stderr to /dev/null.
ChildCost run(const std::vector<std::string>& argv, const std::vector<std::string>& extra) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e; ++e) env_text.emplace_back(*e);
  env_text.insert(env_text.end(), extra.begin(), extra.end());
  std::vector<char*> envp, args;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ChildCost cost;
  if (rc != 0) return cost;
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return cost;
  cost.cpu_ms = (static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
                 static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3);
  cost.max_rss_kb = static_cast<double>(usage.ru_maxrss);
  return cost;
}

std::vector<std::string> profiled_env(const std::string& library = SELFPERF_PRELOAD_LIBRARY) {
  return {"LD_PRELOAD=" + library, "SELFPERF_PROFILE=" + g_out_dir + "/p.%p.data", "SELFPERF_QUIET=1",
          "SELFPERF_FREQUENCY=999"};
}

std::vector<std::string> loaded_env(const std::string& library = SELFPERF_PRELOAD_LIBRARY) {
  return {"LD_PRELOAD=" + library, "SELFPERF_QUIET=1"};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void clear_outputs() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(g_out_dir, ec))
    std::filesystem::remove(entry.path(), ec);
}

void BM_short_process(benchmark::State& state) {
  const std::vector<std::string> argv{"/bin/true"};
  const char* baseline = std::getenv("SELFPERF_BENCH_BASELINE_PRELOAD");
  struct Row {
    const char* name;
    std::vector<std::string> env;
    std::vector<double> ms;
  };
  std::vector<Row> rows{{"bare_ms", {}, {}}, {"loaded_ms", loaded_env(), {}}, {"profiled_ms", profiled_env(), {}}};
  if (baseline != nullptr && *baseline != '\0') {
    rows.push_back({"baseline_loaded_ms", loaded_env(baseline), {}});
    rows.push_back({"baseline_profiled_ms", profiled_env(baseline), {}});
  }
  for (auto _ : state) {
    for (Row& row : rows) {
      const ChildCost c = run(argv, row.env);
      if (c.cpu_ms < 0) {
        state.SkipWithError("a child failed to run (is SELFPERF_BENCH_BASELINE_PRELOAD a preload library?)");
        clear_outputs();
        return;
      }
      row.ms.push_back(c.cpu_ms);
    }
  }
  clear_outputs();
  if (rows[0].ms.empty()) return;
  for (const Row& row : rows) state.counters[row.name] = median(row.ms);
  const double bare = median(rows[0].ms);
  state.counters["profiled_minus_bare_ms"] = median(rows[2].ms) - bare;  // target <= 2
  if (rows.size() > 3) state.counters["baseline_profiled_minus_bare_ms"] = median(rows[4].ms) - bare;
}

void BM_threads(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const std::vector<std::string> argv{SELFPERF_MANY_THREADS, std::to_string(n), "5"};  // tests/many_threads.cpp
  std::vector<double> bare, profiled;
  for (auto _ : state) {
    const ChildCost a = run(argv, {}), b = run(argv, profiled_env());
    if (a.max_rss_kb < 0 || b.max_rss_kb < 0) {
      state.SkipWithError("a child failed to run (thread limit?)");
      break;
    }
    bare.push_back(a.max_rss_kb / 1024);
    profiled.push_back(b.max_rss_kb / 1024);
  }
  clear_outputs();
  if (bare.empty()) return;
  state.counters["bare_MiB"] = median(bare);
  state.counters["profiled_MiB"] = median(profiled);
  state.counters["extra_MiB"] = median(profiled) - median(bare);  // target for 1000 threads: <= 64
  state.counters["extra_KiB_per_thread"] = (median(profiled) - median(bare)) * 1024 / n;
}

}  // namespace

int main(int argc, char** argv) {
  char dir[] = "/tmp/selfperf_bench_profile_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  g_out_dir = dir;
  selfperf_bench::initialize_interleaved(argc, argv);
  benchmark::RegisterBenchmark("short_process", BM_short_process)->Iterations(100)->Repetitions(3)
      ->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("threads", BM_threads)->Arg(100)->Arg(1000)->Iterations(2)->Repetitions(3)
      ->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  clear_outputs();
  std::filesystem::remove(g_out_dir);
  return 0;
}
