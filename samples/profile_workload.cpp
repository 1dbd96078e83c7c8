// A multi-threaded workload for whole-program profiling: two threads started after the profile and the
// main thread burn CPU in distinct functions; a forked child burns and exits; an exec'd shell reports
// whether it inherited SELFPERF_PROFILE.
//
//   LD_PRELOAD=lib/libselfperf_profile.so SELFPERF_PROFILE=out.data profile_workload [--manual] [ms]
// --manual: start the profile with selfperf::profile_from_env() and attach threads explicitly, as a
// statically linked program would.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "selfperf/profile.hpp"

namespace {

bool manual = false;
std::atomic<std::uint64_t> sink{0};  // shared by the threads: keeps the loops from being optimized away

void spin_for(std::chrono::milliseconds cpu) {
  // CPU time, not wall time: the sampler's cpu-clock event counts only while the thread runs.
  timespec start{}, now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  std::uint64_t x = sink.load(std::memory_order_relaxed);
  do {
    for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < cpu.count());
  sink.store(x, std::memory_order_relaxed);
}

[[gnu::noinline, gnu::noipa]] void thread_burn_one(int ms) {
  spin_for(std::chrono::milliseconds(ms));
  sink.fetch_add(1, std::memory_order_relaxed);  // not a tail call: the function stays on the stack
}
[[gnu::noinline, gnu::noipa]] void thread_burn_two(int ms) {
  spin_for(std::chrono::milliseconds(ms + 1));
  sink.fetch_add(1, std::memory_order_relaxed);  // not a tail call: the function stays on the stack
}
[[gnu::noinline, gnu::noipa]] void main_burn(int ms) {
  spin_for(std::chrono::milliseconds(ms + 2));
  sink.fetch_add(1, std::memory_order_relaxed);  // not a tail call: the function stays on the stack
}
[[gnu::noinline, gnu::noipa]] void child_burn(int ms) {
  spin_for(std::chrono::milliseconds(ms + 3));
  sink.fetch_add(1, std::memory_order_relaxed);  // not a tail call: the function stays on the stack
}

template <class Fn>
std::thread start_thread(Fn fn) {
  return std::thread([fn] {
    if (manual) selfperf::profile_attach_this_thread();
    fn();
  });
}

}  // namespace

int main(int argc, char** argv) {
  int ms = 300;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--manual") == 0) manual = true;
    else ms = std::atoi(argv[i]);
  }
  if (manual && !selfperf::profile_from_env()) {
    std::fprintf(stderr, "profile_workload: set SELFPERF_PROFILE=out.data\n");
    return 2;
  }
  auto one = start_thread([ms] { thread_burn_one(ms); });
  auto two = start_thread([ms] { thread_burn_two(ms); });
  main_burn(ms);
  one.join();
  two.join();

  pid_t child = ::fork();
  if (child == 0) {
    child_burn(ms / 3);
    std::exit(0);  // runs atexit handlers: the profile must not be written from here
  }
  int status = 0;
  ::waitpid(child, &status, 0);

  std::fflush(stdout);
  pid_t exec_child = ::fork();
  if (exec_child == 0) {
    ::execl("/bin/sh", "sh", "-c", "echo \"exec child sees SELFPERF_PROFILE='$SELFPERF_PROFILE'\"", nullptr);
    ::_exit(127);
  }
  ::waitpid(exec_child, &status, 0);
  main_burn(ms / 3);  // the parent is still sampled after its children are gone
  return 0;
}
