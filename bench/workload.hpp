#pragma once
// The CPU-bound workload the sampler benchmarks profile (bench_sampler, bench_delivery), stacks of a chosen
// depth, and the small helpers around them: CPU clocks, medians, a child process run quietly.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace selfperf_bench {

template <typename Fn>
[[gnu::noinline]] void at_depth(int depth, Fn& fn) {
  if (depth <= 1) {
    fn();
  } else {
    at_depth(depth - 1, fn);
  }
  asm volatile("" ::: "memory");  // not a tail call: each level keeps its frame
}

[[gnu::noinline]] inline std::uint64_t burn(std::uint64_t n) {
  std::uint64_t x = n;
  for (std::uint64_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    asm volatile("" : "+r"(x));
  }
  return x;
}

// A workload with some depth, so unwinders have stacks to walk.
[[gnu::noinline]] inline std::uint64_t workload(std::uint64_t chunks) {
  std::uint64_t sum = 0;
  auto step = [&] { for (std::uint64_t c = 0; c < chunks; ++c) sum += burn(200'000); };
  at_depth(12, step);
  return sum;
}

inline double cpu_seconds(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
inline double process_cpu_seconds() { return cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }
inline double thread_cpu_seconds() { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Runs argv (searched in PATH), its stdout and stderr to /dev/null; true when it exited with status 0.
inline bool run_child(const std::vector<std::string>& argv) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(devnull, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The number a child wrote to `path`, or -1.
inline double read_seconds(const std::string& path) {
  double v = -1;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    if (std::fscanf(f, "%lf", &v) != 1) v = -1;
    std::fclose(f);
  }
  return v;
}

}  // namespace selfperf_bench
